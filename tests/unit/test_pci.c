/* SPDX-License-Identifier: MIT */
/* PCI discovery (src/discovery/pci.c) against a fake host root laid out as
 * the kernel lays out a real one: an NVIDIA GPU (its node known only from
 * /proc/driver/nvidia), an AMD GPU behind a bridge with DRM card and
 * render nodes, an accelerator with an accel node, a GPU bound to
 * vfio-pci in an IOMMU group, and hostile files. Public API only. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <kdp.h>
#include <string.h>

#include "failmalloc.h"
#include "fakeroot.h"

#define NV     "devices/pci0000:00/0000:00:06.0"
#define VFIO   "devices/pci0000:00/0000:00:07.0"
#define BRIDGE "devices/pci0000:40/0000:40:01.1"
#define AMD    BRIDGE "/0000:41:00.0"
#define ACCEL  "devices/pci0000:80/0000:80:02.0"

/* A PCI device at dir (relative to T/sys) with its attributes, its driver
 * link (driver NULL: unbound) and its bus/pci/devices link. */
static void pci_dev(const char *dir, const char *ids, const char *cls, const char *driver,
                    const char *numa)
{
    char p[PATH_MAX];
    char v[32];
    unsigned vendor, device, sv, sd;
    assert_int_equal(sscanf(ids, "%x:%x:%x:%x", &vendor, &device, &sv, &sd), 4);
    const struct {
        const char *name;
        unsigned value;
        int width;
    } attrs[] = {{"vendor", vendor, 4},
                 {"device", device, 4},
                 {"subsystem_vendor", sv, 4},
                 {"subsystem_device", sd, 4}};
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        pathf(p, "%s/%s", dir, attrs[i].name);
        snprintf(v, sizeof(v), "0x%0*x\n", attrs[i].width, attrs[i].value);
        put_sys(p, v);
    }
    pathf(p, "%s/class", dir);
    put_sys(p, cls);
    pathf(p, "%s/numa_node", dir);
    put_sys(p, numa);
    if (driver) {
        char target[PATH_MAX];
        pathf(target, "bus/pci/drivers/%s", driver);
        mkdirs(strcat(strcpy(p, "sys/"), target));
        pathf(p, "%s/driver", dir);
        sys_link(target, p);
    }
    pathf(p, "bus/pci/devices/%s", strrchr(dir, '/') + 1);
    sys_link(dir, p);
}

static void fake_host(void)
{
    /* NVIDIA H200 as seen on a real node: 3D controller, no IOMMU group,
     * /dev/nvidia0 (195:0) with no PCI parent in sysfs */
    pci_dev(NV, "10de:2335:10de:18bf", "0x030200\n", "nvidia", "-1\n");
    put("proc/driver/nvidia/gpus/0000:00:06.0/information",
        "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nBus Location: \t 0000:00:06.0\n"
        "Device Minor: \t 0\nGPU Excluded:\t No\n");
    /* an AMD GPU behind a bridge: DRM card and render nodes */
    pci_dev(BRIDGE, "1022:1483:0000:0000", "0x060400\n", "pcieport", "1\n");
    pci_dev(AMD, "1002:744c:1da2:e471", "0x030000\n", "amdgpu", "1\n");
    put_sys(AMD "/drm/card1/uevent", "MAJOR=226\nMINOR=1\nDEVNAME=dri/card1\nDEVTYPE=drm_minor\n");
    put_sys(AMD "/drm/renderD128/uevent", "MAJOR=226\nMINOR=128\nDEVNAME=dri/renderD128\n");
    put_sys(AMD "/drm/card1/card1-DP-1/uevent", "DEVTYPE=drm_connector\n"); /* no node */
    sys_link(AMD "/drm/renderD128", "class/drm/renderD128");
    /* an accelerator (processing accelerator class 0x12) */
    pci_dev(ACCEL, "1da3:1020:1da3:0001", "0x120000\n", "habanalabs", "1\n");
    put_sys(ACCEL "/accel/accel0/uevent", "MAJOR=261\nMINOR=0\nDEVNAME=accel/accel0\n");
    /* a GPU handed to VMs: vfio-pci, IOMMU group 42, the iommufd cdev */
    pci_dev(VFIO, "10de:2330:10de:16c1", "0x030200\n", "vfio-pci", "0\n");
    mkdirs("sys/kernel/iommu_groups/42/devices");
    sys_link("kernel/iommu_groups/42", VFIO "/iommu_group");
    sys_link(VFIO, "kernel/iommu_groups/42/devices/0000:00:07.0");
    put_sys(VFIO "/vfio-dev/vfio0/uevent", "MAJOR=511\nMINOR=0\nDEVNAME=vfio/devices/vfio0\n");
    const char *nodes[] = {"dev/nvidia0",   "dev/nvidiactl",      "dev/nvidia-uvm",
                           "dev/dri/card1", "dev/dri/renderD128", "dev/accel/accel0",
                           "dev/vfio/42",   "dev/vfio/vfio",      "dev/vfio/devices/vfio0",
                           "dev/kvm"};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        put(nodes[i], "");
    }
    put_sys("devices/virtual/misc/kvm/uevent", "DEVNAME=kvm\n");
    sys_link("devices/virtual/misc/kvm", "class/misc/kvm");
    put_sys("bus/pci/devices/not-an-address/vendor", "0x1234\n"); /* skipped */
}

static void test_list(void **state)
{
    (void)state;
    fake_host();
    kdp_pci_device *d = NULL;
    size_t n = 0;
    assert_int_equal(kdp_pci_list(T, SYS, &d, &n), 5);
    assert_int_equal(n, 5);
    const char *addr[] = {"0000:00:06.0", "0000:00:07.0", "0000:40:01.1", "0000:41:00.0",
                          "0000:80:02.0"};
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(d[i].address, addr[i]);
    }
    /* the NVIDIA GPU: IDs, class, driver, its node from the minor mapping */
    assert_int_equal(d[0].vendor, 0x10de);
    assert_int_equal(d[0].device, 0x2335);
    assert_int_equal(d[0].class_code, 0x030200);
    assert_int_equal(d[0].subsystem_vendor, 0x10de);
    assert_int_equal(d[0].subsystem_device, 0x18bf);
    assert_string_equal(d[0].driver, "nvidia");
    assert_int_equal(d[0].numa_node, -1);
    assert_string_equal(d[0].pcie_root, "pci0000:00");
    assert_int_equal(d[0].iommu_group, -1);
    assert_strv(d[0].nodes, (const char *[]){"/dev/nvidia0"}, 1);
    /* vfio-pci: its group's node, the container node, the cdev */
    assert_string_equal(d[1].driver, "vfio-pci");
    assert_int_equal(d[1].iommu_group, 42);
    assert_int_equal(d[1].numa_node, 0);
    assert_strv(d[1].nodes,
                (const char *[]){"/dev/vfio/42", "/dev/vfio/devices/vfio0", "/dev/vfio/vfio"}, 3);
    /* the bridge has none of its child's nodes */
    assert_int_equal(d[2].class_code, 0x060400);
    assert_strv(d[2].nodes, (const char *[]){NULL}, 0);
    /* DRM: card and render node, under its own root complex */
    assert_string_equal(d[3].driver, "amdgpu");
    assert_string_equal(d[3].pcie_root, "pci0000:40");
    assert_int_equal(d[3].numa_node, 1);
    assert_strv(d[3].nodes, (const char *[]){"/dev/dri/card1", "/dev/dri/renderD128"}, 2);
    assert_strv(d[4].nodes, (const char *[]){"/dev/accel/accel0"}, 1);
    assert_int_equal(d[4].class_code >> 16, 0x12);
    kdp_pci_list_free(d, n);
}

static void test_device_of(void **state)
{
    (void)state;
    fake_host();
    kdp_pci_device d;
    /* no sysfs parent: the NVIDIA driver's minor */
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/nvidia0", &d), 0);
    assert_string_equal(d.address, "0000:00:06.0");
    kdp_pci_device_clear(&d);
    /* a DRM node, through its class entry, up to the GPU (not the bridge) */
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/dri/renderD128", &d), 0);
    assert_string_equal(d.address, "0000:41:00.0");
    assert_int_equal(d.vendor, 0x1002);
    kdp_pci_device_clear(&d);
    /* a VFIO group node */
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/vfio/42", &d), 0);
    assert_string_equal(d.address, "0000:00:07.0");
    kdp_pci_device_clear(&d);
    /* not on PCI, no such GPU, no node, no such group */
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/kvm", &d), -ENOENT);
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/nvidiactl", &d), -ENOENT);
    put("dev/nvidia3", "");
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/nvidia3", &d), -ENOENT);
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/nvidia9", &d), -ENOENT);
    put("dev/vfio/7", "");
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/vfio/7", &d), -ENOENT);
    assert_int_equal(kdp_pci_device_of(T, SYS, "dev/nvidia0", &d), -EINVAL);
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/nvidia0", NULL), -EINVAL);
}

/* Unbinding a driver takes its nodes away; rebinding brings them back. */
static void test_unbind_rebind(void **state)
{
    (void)state;
    fake_host();
    char p[PATH_MAX];
    pathf(p, "%s/sys/%s/driver", T, NV);
    assert_int_equal(unlink(p), 0);
    kdp_pci_device d;
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/nvidia0", &d), 0); /* proc still says so */
    assert_null(d.driver);
    assert_strv(d.nodes, (const char *[]){NULL}, 0);
    kdp_pci_device_clear(&d);
    sys_link("bus/pci/drivers/vfio-pci", NV "/driver");
    assert_int_equal(kdp_pci_device_of(T, SYS, "/dev/nvidia0", &d), 0);
    assert_string_equal(d.driver, "vfio-pci");
    assert_strv(d.nodes, (const char *[]){NULL}, 0); /* no IOMMU group: no VFIO node */
    kdp_pci_device_clear(&d);
}

/* Hostile or odd files: bad numbers, a minor of 255 (nvidiactl's), a
 * 10-digit domain, a huge information file. */
static void test_hostile(void **state)
{
    (void)state;
    fake_host();
    put_sys(NV "/numa_node", "banana\n");
    put("proc/driver/nvidia/gpus/0000:00:06.0/information", "Device Minor: 255\n");
    put_sys(AMD "/class", "0x1000000\n"); /* over 24 bits: not a device */
    pci_dev("devices/pci0000000000:00/0000000000:00:01.0", "1234:5678:0:0", "0x0\n", NULL, "0\n");
    char big[8192];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    put("proc/driver/nvidia/gpus/0000:00:07.0/information", big);
    kdp_pci_device *d = NULL;
    size_t n = 0;
    assert_int_equal(kdp_pci_list(T, SYS, &d, &n), 4);
    assert_string_equal(d[0].address, "0000:00:06.0");
    assert_int_equal(d[0].numa_node, -1);
    assert_strv(d[0].nodes, (const char *[]){NULL}, 0);
    kdp_pci_list_free(d, n);
    assert_int_equal(kdp_pci_list(T, "rel", &d, &n), -EINVAL);
    assert_int_equal(kdp_pci_list("rel", SYS, &d, &n), -EINVAL);
    char nosys[PATH_MAX];
    pathf(nosys, "%s/nosys", T);
    assert_int_equal(kdp_pci_list(T, nosys, &d, &n), -ENOENT);
    assert_int_equal(kdp_pci_list(T, SYS, NULL, &n), -EINVAL);
}

static int list_ok(void)
{
    kdp_pci_device *d = NULL;
    size_t n = 0;
    int r = kdp_pci_list(T, SYS, &d, &n);
    kdp_pci_list_free(d, n);
    return r < 0 ? r : 0;
}

static void test_list_oom(void **state)
{
    (void)state;
    if (!oom_works()) {
        skip();
    }
    fake_host();
    OOM_LOOP(list_ok(), (void)0);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_of, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unbind_rebind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_oom, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
