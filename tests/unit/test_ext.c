/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

/* The plugin's extension seam (plugin.h, ext.c): the hooks, and the
 * registration strategy "none" (no device-plugin socket, no lock file). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/plugin_int.h"

static char dir[64];

typedef struct seen {
    kdp_plugin *p;
    int serving_on;
    int serving_off;
    int changed;
    size_t devices;
} seen;

static void on_serving(void *ud, bool on)
{
    seen *s = ud;
    if (on) {
        s->serving_on++;
        s->devices = kdp__plugin_devices(s->p)->n;
        kdp__plugin_report_registration(s->p, KDP__REG_REGISTERED, "test");
        kdp_device d = {.id = "dev-1", .health = KDP_HEALTHY};
        assert_int_equal(kdp_plugin_set_device(s->p, &d), 0);
    } else {
        s->serving_off++;
    }
}

static void on_changed(void *ud)
{
    seen *s = ud;
    s->changed++;
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(s->p, &st), 0);
    if (s->serving_on) { /* the start's list changes the table before serving */
        assert_int_equal(st.state, KDP_PLUGIN_REGISTERED); /* what the extension reported */
    }
    if (kdp__plugin_devices(s->p)->n == 2) {
        assert_int_equal(kdp_plugin_stop(s->p), 0);
    }
}

static int list_one(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    (void)ud;
    kdp_device d = {.id = "dev-0", .health = KDP_HEALTHY};
    return kdp_device_list_add(out, &d);
}

static size_t files_in(const char *path)
{
    DIR *d = opendir(path);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        n += e->d_name[0] != '.';
    }
    if (d) {
        closedir(d);
    }
    return n;
}

static void test_none(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/kdp-ext-XXXXXX");
    assert_non_null(mkdtemp(dir));
    kdp_config cfg = {
        .resource_name = "example.com/ext", .socket_name = "ext.sock", .device_plugin_dir = dir};
    kdp_ops ops = {.list = list_one};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_plugin_new(NULL, &cfg, &ops, NULL, &p), 0);
    seen s = {.p = p};
    kdp__plugin_ext ext = {.serving = on_serving, .devices_changed = on_changed, .ud = &s};
    assert_null(kdp__plugin_ext_ud(p));
    assert_int_equal(kdp__plugin_set_ext(p, NULL, false), -EINVAL);
    assert_int_equal(kdp__plugin_set_ext(p, &ext, false), 0);
    assert_int_equal(kdp__plugin_set_ext(p, &ext, false), -EALREADY);
    assert_ptr_equal(kdp__plugin_ext_ud(p), &s);
    assert_non_null(kdp__plugin_jobs(p));
    assert_non_null(kdp__plugin_kubelet_root(p));
    assert_null(kdp__plugin_instance(p));
    assert_int_equal(kdp_plugin_run(p), 0);
    assert_int_equal(s.serving_on, 1);
    assert_int_equal(s.serving_off, 1);
    assert_int_equal(s.devices, 1); /* the start's list came first */
    assert_true(s.changed >= 1);
    assert_int_equal(files_in(dir), 0); /* no socket, no lock file */
    assert_int_equal(kdp__plugin_set_ext(p, &ext, true), -EALREADY);
    kdp_plugin_free(p);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
