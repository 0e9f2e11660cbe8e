/* SPDX-License-Identifier: MIT */
/* Discovery helpers (src/discovery/discover.c, src/plugin/hotplug.c) against a fake /dev and
 * sysfs tree in a per-test temp dir: globs, USB attributes, NUMA nodes, and
 * hot-plug watches triggering rescans. Public API only. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <kdp.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "discovery/discover.h"
#include "failmalloc.h"
#include "fakeroot.h"

/* sysfs paths, relative to T/sys */
#define PCI   "devices/pci0000:00/0000:00:14.0"
#define USB1  PCI "/usb1"
#define DEV11 USB1 "/1-1"
#define HUB   USB1 "/1-2"
#define KEY   HUB "/1-2.1"

static void usb_device(const char *dir, const char *vid, const char *pid, const char *serial,
                       int dev)
{
    char p[PATH_MAX];
    char v[128];
    pathf(p, "%s/idVendor", dir);
    put_sys(p, vid);
    pathf(p, "%s/idProduct", dir);
    snprintf(v, sizeof(v), "%s\n", pid);
    put_sys(p, v);
    if (serial) {
        pathf(p, "%s/serial", dir);
        put_sys(p, serial);
    }
    pathf(p, "%s/busnum", dir);
    put_sys(p, "1\n");
    pathf(p, "%s/devnum", dir);
    snprintf(v, sizeof(v), "%d\n", dev);
    put_sys(p, v);
    pathf(p, "%s/uevent", dir);
    snprintf(v, sizeof(v), "MAJOR=189\nMINOR=%d\nDEVNAME=bus/usb/001/%03d\nDEVTYPE=usb_device\n",
             dev - 1, dev);
    put_sys(p, v);
    pathf(p, "dev/bus/usb/001/%03d", dev);
    put(p, "");
}

/* A PCI USB controller on NUMA node 1 with a root hub, an FTDI serial
 * adapter (ttyUSB0), a hub with a YubiKey (hidraw0) behind it; /dev/kvm
 * (virtual), /dev/nvme0 on a PCI device with numa_node -1, /dev/ttyUSB1
 * without any sysfs entry, and the by-id link of ttyUSB0. */
static void fake_tree(void)
{
    put_sys(PCI "/numa_node", "1\n");
    usb_device(USB1, "1d6b", "0002", NULL, 1);
    usb_device(DEV11, "0403", "6001", "A1B2\n", 2);
    put_sys(DEV11 "/1-1:1.0/bInterfaceNumber", "00\n");
    put_sys(DEV11 "/1-1:1.0/ttyUSB0/tty/ttyUSB0/uevent", "MAJOR=188\nMINOR=0\nDEVNAME=ttyUSB0\n");
    usb_device(HUB, "05e3", "0610", NULL, 3);
    usb_device(KEY, "1050", "0407", "Y1", 4);
    put_sys(KEY "/1-2.1:1.0/0003:1050:0407.0001/hidraw/hidraw0/uevent", "DEVNAME=hidraw0\n");
    put_sys("devices/virtual/misc/kvm/uevent", "DEVNAME=kvm\n");
    put_sys("devices/pci0000:00/0000:00:1c.0/numa_node", "-1\n");
    put_sys("devices/pci0000:00/0000:00:1c.0/nvme/nvme0/uevent", "DEVNAME=nvme0\n");
    sys_link(USB1, "bus/usb/devices/usb1");
    sys_link(DEV11, "bus/usb/devices/1-1");
    sys_link(HUB, "bus/usb/devices/1-2");
    sys_link(KEY, "bus/usb/devices/1-2.1");
    sys_link(DEV11 "/1-1:1.0", "bus/usb/devices/1-1:1.0"); /* an interface: skipped */
    put_sys("bus/usb/devices/not-a-device/uevent", "");    /* no idVendor: skipped */
    sys_link(DEV11 "/1-1:1.0/ttyUSB0/tty/ttyUSB0", "class/tty/ttyUSB0");
    sys_link("devices/virtual/misc/kvm", "class/misc/kvm");
    sys_link(KEY "/1-2.1:1.0/0003:1050:0407.0001/hidraw/hidraw0", "class/hidraw/hidraw0");
    sys_link("devices/pci0000:00/0000:00:1c.0/nvme/nvme0", "class/nvme/nvme0");
    const char *nodes[] = {"dev/ttyUSB0", "dev/ttyUSB1", "dev/kvm", "dev/hidraw0", "dev/nvme0"};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        put(nodes[i], "");
    }
    link_at("../../ttyUSB0", "dev/serial/by-id/usb-FTDI_FT232R_A1B2-if00-port0");
}

/* ---- globs ---- */

static void test_glob_matches(void **state)
{
    (void)state;
    put("dev/ttyUSB1", "");
    put("dev/ttyUSB0", "");
    put("dev/ttyACM0", "");
    put("dev/.ttyUSB9", "");
    char **v = NULL;
    assert_int_equal(kdp_glob_devices(T, "/dev/ttyUSB*", &v), 2);
    assert_strv(v, (const char *[]){"/dev/ttyUSB0", "/dev/ttyUSB1"}, 2);
    kdp_strv_free(v);
    assert_int_equal(kdp_glob_devices(T, "/dev/tty[A-Z][A-Z]?[0-9]", &v), 3);
    kdp_strv_free(v);
    /* no match: 0 and an empty array; a plain path matches itself */
    assert_int_equal(kdp_glob_devices(T, "/dev/ttyS*", &v), 0);
    assert_strv(v, NULL, 0);
    kdp_strv_free(v);
    assert_int_equal(kdp_glob_devices(T, "/dev/ttyACM0", &v), 1);
    assert_strv(v, (const char *[]){"/dev/ttyACM0"}, 1);
    kdp_strv_free(v);
    assert_int_equal(kdp_glob_devices(T, "/dev/ttyACM1", &v), 0);
    kdp_strv_free(v);
    /* a root with a trailing slash is the same root */
    char root[96];
    snprintf(root, sizeof(root), "%s/", T);
    assert_int_equal(kdp_glob_devices(root, "/dev/ttyUSB0", &v), 1);
    assert_strv(v, (const char *[]){"/dev/ttyUSB0"}, 1);
    kdp_strv_free(v);
}

static void test_glob_dirs_and_links(void **state)
{
    (void)state;
    fake_tree();
    char **v = NULL;
    assert_int_equal(kdp_glob_devices(T, "/dev/bus/usb/*/*", &v), 4);
    assert_string_equal(v[0], "/dev/bus/usb/001/001");
    assert_string_equal(v[3], "/dev/bus/usb/001/004");
    kdp_strv_free(v);
    /* a symlink is handed out as the link */
    assert_int_equal(kdp_glob_devices(T, "/dev/serial/by-id/usb-FTDI*", &v), 1);
    assert_string_equal(v[0], "/dev/serial/by-id/usb-FTDI_FT232R_A1B2-if00-port0");
    kdp_strv_free(v);
}

static void test_glob_root_with_glob_chars(void **state)
{
    (void)state;
    mkdirs("a[1]*/dev");
    put("a[1]*/dev/fuse", "");
    char root[128];
    snprintf(root, sizeof(root), "%s/a[1]*", T);
    char **v = NULL;
    assert_int_equal(kdp_glob_devices(root, "/dev/f*", &v), 1);
    assert_string_equal(v[0], "/dev/fuse");
    kdp_strv_free(v);
}

static void test_glob_real_root(void **state)
{
    (void)state;
    char **v = NULL;
    assert_int_equal(kdp_glob_devices(NULL, "/dev/null", &v), 1);
    assert_string_equal(v[0], "/dev/null");
    kdp_strv_free(v);
    assert_int_equal(kdp_glob_devices("/", "/dev/nul?", &v), 1);
    kdp_strv_free(v);
}

static void test_glob_invalid(void **state)
{
    (void)state;
    char **v = (char **)0x1;
    assert_int_equal(kdp_glob_devices(T, "dev/tty*", &v), -EINVAL);
    assert_int_equal(kdp_glob_devices(T, "/dev/../etc/passwd", &v), -EINVAL);
    assert_int_equal(kdp_glob_devices(T, "/dev/..", &v), -EINVAL);
    assert_int_equal(kdp_glob_devices("relative", "/dev/null", &v), -EINVAL);
    assert_int_equal(kdp_glob_devices(T, NULL, &v), -EINVAL);
    assert_int_equal(kdp_glob_devices(T, "/dev/null", NULL), -EINVAL);
    assert_ptr_equal(v, (char **)0x1); /* untouched on failure */
    /* "..x" is a name, not a parent */
    put("dev/..x", "");
    assert_int_equal(kdp_glob_devices(T, "/dev/..x", &v), 1);
    kdp_strv_free(v);
}

static void test_glob_cap(void **state)
{
    (void)state;
    mkdirs("dev/many");
    for (int i = 0; i < 4097; i++) {
        char p[PATH_MAX];
        pathf(p, "%s/dev/many/d%d", T, i);
        int fd = open(p, O_CREAT | O_WRONLY, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    char **v = (char **)0x1;
    assert_int_equal(kdp_glob_devices(T, "/dev/many/*", &v), -E2BIG);
    assert_ptr_equal(v, (char **)0x1);
    assert_int_equal(kdp_glob_devices(T, "/dev/many/d[0-9]", &v), 10);
    kdp_strv_free(v);
}

/* ---- USB ---- */

static void test_usb_of_node(void **state)
{
    (void)state;
    fake_tree();
    kdp_usb_device d;
    assert_int_equal(kdp_usb_device_of(T, SYS, "/dev/ttyUSB0", &d), 0);
    assert_string_equal(d.name, "1-1");
    assert_int_equal(d.vendor, 0x0403);
    assert_int_equal(d.product, 0x6001);
    assert_string_equal(d.serial, "A1B2");
    assert_int_equal(d.busnum, 1);
    assert_int_equal(d.devnum, 2);
    assert_strv(d.nodes, (const char *[]){"/dev/bus/usb/001/002", "/dev/ttyUSB0"}, 2);
    kdp_usb_device_clear(&d);
    assert_null(d.name);
    /* through the by-id link */
    assert_int_equal(
        kdp_usb_device_of(T, SYS, "/dev/serial/by-id/usb-FTDI_FT232R_A1B2-if00-port0", &d), 0);
    assert_string_equal(d.name, "1-1");
    kdp_usb_device_clear(&d);
    /* behind a hub; a device without a serial */
    assert_int_equal(kdp_usb_device_of(T, SYS, "/dev/hidraw0", &d), 0);
    assert_string_equal(d.name, "1-2.1");
    assert_int_equal(d.vendor, 0x1050);
    assert_strv(d.nodes, (const char *[]){"/dev/bus/usb/001/004", "/dev/hidraw0"}, 2);
    kdp_usb_device_clear(&d);
    /* the usbfs node itself, by busnum/devnum */
    assert_int_equal(kdp_usb_device_of(T, SYS, "/dev/bus/usb/001/003", &d), 0);
    assert_string_equal(d.name, "1-2");
    assert_null(d.serial);
    assert_strv(d.nodes, (const char *[]){"/dev/bus/usb/001/003"}, 1); /* not its child's */
    kdp_usb_device_clear(&d);
}

static void test_usb_of_not_usb(void **state)
{
    (void)state;
    fake_tree();
    kdp_usb_device d;
    memset(&d, 0x5a, sizeof(d));
    assert_int_equal(kdp_usb_device_of(T, SYS, "/dev/kvm", &d), -ENOENT);     /* virtual */
    assert_int_equal(kdp_usb_device_of(T, SYS, "/dev/ttyUSB1", &d), -ENOENT); /* no sysfs */
    assert_int_equal(kdp_usb_device_of(T, SYS, "/dev/ttyUSB7", &d), -ENOENT); /* no node */
    assert_int_equal(kdp_usb_device_of(T, SYS, "dev/ttyUSB0", &d), -EINVAL);
    assert_int_equal(kdp_usb_device_of(T, SYS, "/dev/ttyUSB0", NULL), -EINVAL);
    assert_int_equal(d.vendor, 0x5a5a); /* untouched */
}

static void test_usb_list(void **state)
{
    (void)state;
    fake_tree();
    kdp_usb_device *devs = NULL;
    size_t n = 0;
    assert_int_equal(kdp_usb_list(SYS, &devs, &n), 4);
    assert_int_equal(n, 4);
    const char *names[] = {"1-1", "1-2", "1-2.1", "usb1"};
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(devs[i].name, names[i]);
    }
    assert_int_equal(devs[3].vendor, 0x1d6b);
    assert_strv(devs[3].nodes, (const char *[]){"/dev/bus/usb/001/001"}, 1);
    assert_string_equal(devs[2].serial, "Y1");
    assert_strv(devs[2].nodes, (const char *[]){"/dev/bus/usb/001/004", "/dev/hidraw0"}, 2);
    kdp_usb_list_free(devs, n);
    /* no USB bus at all */
    char nosys[128];
    snprintf(nosys, sizeof(nosys), "%s/nosys", T);
    assert_int_equal(kdp_usb_list(nosys, &devs, &n), -ENOENT);
    assert_int_equal(kdp_usb_list("rel", &devs, &n), -EINVAL);
}

/* ---- NUMA ---- */

static void test_numa(void **state)
{
    (void)state;
    fake_tree();
    int node = 99;
    assert_int_equal(kdp_numa_node_of(T, SYS, "/dev/ttyUSB0", &node), 0);
    assert_int_equal(node, 1); /* from the USB controller */
    node = 99;
    assert_int_equal(kdp_numa_node_of(T, SYS, "/dev/bus/usb/001/004", &node), 0);
    assert_int_equal(node, 1);
    node = 99;
    assert_int_equal(kdp_numa_node_of(T, SYS, "/dev/nvme0", &node), 0);
    assert_int_equal(node, -1); /* sysfs says -1 */
    node = 99;
    assert_int_equal(kdp_numa_node_of(T, SYS, "/dev/kvm", &node), 0);
    assert_int_equal(node, -1); /* no ancestor has numa_node */
    node = 99;
    assert_int_equal(kdp_numa_node_of(T, SYS, "/dev/ttyUSB1", &node), 0);
    assert_int_equal(node, -1); /* no sysfs entry */
    assert_int_equal(kdp_numa_node_of(T, SYS, "/dev/nope", &node), -ENOENT);
    assert_int_equal(kdp_numa_node_of(T, SYS, "/dev/kvm", NULL), -EINVAL);
    /* a real character device with the real sysfs: virtual, no node */
    node = 99;
    assert_int_equal(kdp_numa_node_of(NULL, NULL, "/dev/null", &node), 0);
    assert_int_equal(node, -1);
}

/* ---- hot-plug ---- */

static atomic_int lists;

static int count_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    (void)out;
    (void)ud;
    atomic_fetch_add(&lists, 1);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Dispatches until the list op ran more than `after` times (bounded). */
static bool wait_lists(kdp_ctx *ctx, int after, int timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    while (atomic_load(&lists) <= after && now_ms() < end) {
        struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
        (void)poll(&pfd, 1, 50);
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
    }
    return atomic_load(&lists) > after;
}

/* Dispatches for ms, returns the number of list calls meanwhile. */
static int settle(kdp_ctx *ctx, int ms)
{
    int before = atomic_load(&lists);
    int64_t end = now_ms() + ms;
    while (now_ms() < end) {
        struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
        (void)poll(&pfd, 1, 20);
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
    }
    return atomic_load(&lists) - before;
}

static void touch(const char *rel)
{
    put(rel, "");
}

static void rm_rel(const char *rel)
{
    char p[PATH_MAX];
    pathf(p, "%s/%s", T, rel);
    assert_int_equal(remove(p), 0);
}

static kdp_plugin *start_plugin(kdp_ctx **ctx)
{
    mkdirs("dp");
    char dp[128];
    snprintf(dp, sizeof(dp), "%s/dp", T);
    kdp_config cfg = {
        .resource_name = "example.com/hp", .socket_name = "hp.sock", .device_plugin_dir = dp};
    kdp_ops ops = {.list = count_list};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_ctx_new(ctx), 0);
    assert_int_equal(kdp_plugin_new(*ctx, &cfg, &ops, NULL, &p), 0);
    atomic_store(&lists, 0);
    assert_true(wait_lists(*ctx, 0, 5000)); /* the start's list: serving (waiting) */
    settle(*ctx, 50);
    return p;
}

static void test_hotplug_dir(void **state)
{
    (void)state;
    mkdirs("dev");
    kdp_ctx *ctx;
    kdp_plugin *p = start_plugin(&ctx);
    char dir[128];
    pathf(dir, "%s/dev", T);
    kdp_path_watch *w = NULL;
    assert_int_equal(kdp_plugin_watch_path(p, dir, 0, &w), 0);
    assert_int_equal(settle(ctx, 100), 0); /* nothing happens by itself */
    int n = atomic_load(&lists);
    touch("dev/ttyUSB0");
    assert_true(wait_lists(ctx, n, 5000)); /* appears: rescan */
    settle(ctx, 100);
    n = atomic_load(&lists);
    rm_rel("dev/ttyUSB0");
    assert_true(wait_lists(ctx, n, 5000)); /* disappears: rescan */
    settle(ctx, 100);
    /* depth 0: a file in a subdirectory is not seen */
    mkdirs("dev/sub");
    settle(ctx, 100);
    touch("dev/sub/x");
    assert_int_equal(settle(ctx, 200), 0);
    kdp_path_watch_free(w);
    n = atomic_load(&lists);
    touch("dev/ttyUSB1");
    assert_int_equal(settle(ctx, 200), 0); /* freed: no more rescans */
    kdp_plugin_free(p);
    kdp_ctx_free(ctx);
}

static void test_hotplug_missing_dir_and_depth(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    kdp_plugin *p = start_plugin(&ctx);
    char dir[128];
    pathf(dir, "%s/dev/bus/usb", T);
    kdp_path_watch *w = NULL;
    assert_int_equal(kdp_plugin_watch_path(p, dir, 1, &w), 0); /* does not exist yet */
    mkdirs("dev/bus/usb");
    settle(ctx, 300);
    int n = atomic_load(&lists);
    mkdirs("dev/bus/usb/001"); /* a subdirectory within the depth */
    assert_true(wait_lists(ctx, n, 5000));
    settle(ctx, 200);
    n = atomic_load(&lists);
    touch("dev/bus/usb/001/002"); /* depth 1: seen */
    assert_true(wait_lists(ctx, n, 5000));
    settle(ctx, 100);
    /* the whole directory goes: rescan, and the watch waits for it again */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s/dev/bus", T);
    n = atomic_load(&lists);
    assert_int_equal(system(cmd), 0);
    assert_true(wait_lists(ctx, n, 5000));
    settle(ctx, 200);
    mkdirs("dev/bus/usb/002");
    settle(ctx, 300);
    n = atomic_load(&lists);
    touch("dev/bus/usb/002/001");
    assert_true(wait_lists(ctx, n, 5000));
    kdp_path_watch_free(w);
    kdp_plugin_free(p);
    kdp_ctx_free(ctx);
}

static void test_hotplug_invalid(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    kdp_plugin *p = start_plugin(&ctx);
    kdp_path_watch *w = NULL;
    assert_int_equal(kdp_plugin_watch_path(NULL, "/dev", 0, &w), -EINVAL);
    assert_int_equal(kdp_plugin_watch_path(p, "dev", 0, &w), -EINVAL);
    assert_int_equal(kdp_plugin_watch_path(p, "/dev", 5, &w), -EINVAL);
    assert_null(w);
    /* No handle wanted: the plugin owns the watch and frees it (ASan/valgrind
     * would report the leak otherwise). */
    assert_int_equal(kdp_plugin_watch_path(p, "/dev", 0, NULL), 0);
    kdp_path_watch_free(NULL);
    kdp_plugin_free(p);
    kdp_ctx_free(ctx);
}

/* A string array stays NULL-terminated when the copy of a string fails
 * after the array grew (kdp_strv_free walks it to its NULL). */
static void test_strv_add_oom(void **state)
{
    (void)state;
    if (!oom_works()) {
        skip();
    }
    /* A freed block of the array's size for the growth to reuse: glibc's
     * tcache leaves a (mangled, non-NULL) pointer in its first word. */
    void *prev = malloc(8 * sizeof(char *));
    assert_non_null(prev);
    memset(prev, 0xA5, 8 * sizeof(char *));
    free(prev);
    kdp__strv s = {0};
    oom_countdown = 1; /* the array grows, then strdup fails */
    int r = kdp__strv_add(&s, "x", 10);
    oom_countdown = -1;
    assert_int_equal(r, -ENOMEM);
    assert_non_null(s.v);
    assert_int_equal(s.n, 0);
    assert_null(s.v[0]);
    assert_int_equal(kdp__strv_add(&s, "y", 10), 0);
    char **v = kdp__strv_take(&s);
    assert_string_equal(v[0], "y");
    assert_null(v[1]);
    kdp_strv_free(v);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_glob_matches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_dirs_and_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_root_with_glob_chars, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_real_root, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usb_of_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usb_of_not_usb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usb_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_numa, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hotplug_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hotplug_missing_dir_and_depth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hotplug_invalid, setup, teardown),
        cmocka_unit_test(test_strv_add_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
