/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

/* The DRA checkpoint: round trip, atomic writes, a corrupt file kept
 * aside (a name of its own), a newer or unreadable one refused, two
 * instances sharing the file. */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dra/checkpoint.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/kdp-ckpt-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t count(const char *pattern)
{
    char p[160];
    snprintf(p, sizeof(p), "%s/%s", dir, pattern);
    glob_t g;
    size_t n = glob(p, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
    globfree(&g);
    return n;
}

static void test_round_trip(void **state)
{
    (void)state;
    char sub[100];
    snprintf(sub, sizeof(sub), "%s/a/b", dir); /* made */
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(sub, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 0);
    json_t *rec = json_pack("{s:s, s:[{s:s}]}", "uid", "u1", "devices", "device", "gpu-0");
    assert_int_equal(kdp__ckpt_put(c, "u1", rec), 0);
    json_decref(rec);
    rec = json_pack("{s:s}", "uid", "u2");
    assert_int_equal(kdp__ckpt_put(c, "u2", rec), 0);
    json_decref(rec);
    assert_int_equal(kdp__ckpt_del(c, "u2"), 1);
    assert_int_equal(kdp__ckpt_del(c, "u2"), 0);
    kdp__ckpt_unref(c);

    c = NULL;
    assert_int_equal(kdp__ckpt_open(sub, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 1);
    json_t *got = kdp__ckpt_get(c, "u1");
    assert_non_null(got);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(got, "devices"), 0), "device")),
                        "gpu-0");
    json_decref(got);
    assert_null(kdp__ckpt_get(c, "u2"));
    kdp__ckpt_unref(kdp__ckpt_ref(c)); /* a reference more, then less */
    kdp__ckpt_unref(c);
    kdp__ckpt_unref(NULL);

    /* the file: version, checksum; no temporary left behind */
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", sub, KDP__CKPT_FILE);
    json_t *root = json_load_file(path, 0, NULL);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "version")), KDP__CKPT_VERSION);
    assert_true(strncmp(json_string_value(json_object_get(root, "checksum")), "fnv1a64:", 8) == 0);
    json_decref(root);
    assert_int_equal(count("a/b/*.tmp-*") + count("a/b/.*.tmp-*"), 0);
}

static void corrupt(const char *text)
{
    write_file(KDP__CKPT_FILE, text);
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 0);
    kdp__ckpt_unref(c);
}

static void test_corrupt_kept_aside(void **state)
{
    (void)state;
    corrupt("{not json");
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 1);
    /* within the same second: a name of its own each */
    corrupt("{\"version\": 1, \"checksum\": \"fnv1a64:0000000000000000\", \"claims\": {}}");
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 2);
    corrupt("{\"version\": 0, \"checksum\": \"x\", \"claims\": {}}");
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 3);
    assert_int_equal(count(KDP__CKPT_FILE), 0);
}

/* A newer version (a downgrade) and a file that cannot be read are no
 * corruption: refused, the file left where it is. */
static void test_refused_not_set_aside(void **state)
{
    (void)state;
    write_file(KDP__CKPT_FILE, "{\"version\": 99, \"checksum\": \"x\", \"claims\": {}}");
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, &c), -EPROTO);
    assert_int_equal(count(KDP__CKPT_FILE), 1);
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, KDP__CKPT_FILE);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0); /* read() fails: EISDIR */
    assert_int_equal(kdp__ckpt_open(dir, &c), -EISDIR);
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 0);
    assert_int_equal(rmdir(path), 0);
}

static void put(kdp__ckpt *c, const char *uid)
{
    json_t *rec = json_pack("{s:s}", "uid", uid);
    assert_int_equal(kdp__ckpt_put(c, uid, rec), 0);
    json_decref(rec);
}

static bool has(kdp__ckpt *c, const char *uid)
{
    json_t *rec = kdp__ckpt_get(c, uid);
    json_decref(rec);
    return rec != NULL;
}

/* Two instances on one state directory (a rolling update): neither loses
 * the other's records. */
static void test_two_instances(void **state)
{
    (void)state;
    kdp__ckpt *a = NULL;
    kdp__ckpt *b = NULL;
    assert_int_equal(kdp__ckpt_open(dir, &a), 0);
    assert_int_equal(kdp__ckpt_open(dir, &b), 0);
    put(a, "u1");
    put(b, "u2"); /* b read u1 from the file first */
    put(a, "u3");
    assert_true(has(a, "u2"));
    assert_int_equal(kdp__ckpt_count(a), 3);
    assert_int_equal(kdp__ckpt_del(b, "u1"), 1); /* b had not seen it yet */
    assert_false(has(a, "u1"));
    assert_int_equal(kdp__ckpt_del(a, "u1"), 0);
    kdp__ckpt_unref(a);
    kdp__ckpt_unref(b);
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 2);
    assert_true(has(c, "u2") && has(c, "u3"));
    kdp__ckpt_unref(c);
}

static void test_checksum(void **state)
{
    (void)state;
    char a[32], b[32];
    kdp__ckpt_checksum("{}", a);
    kdp__ckpt_checksum("{ }", b);
    assert_string_not_equal(a, b);
    kdp__ckpt_checksum("", a);
    assert_string_equal(a, "fnv1a64:cbf29ce484222325");
}

static void test_unwritable(void **state)
{
    (void)state;
    if (geteuid() == 0) {
        skip(); /* root writes anywhere */
    }
    kdp__ckpt *c = NULL;
    assert_true(kdp__ckpt_open("/proc/kdp-no/such", &c) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_kept_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_not_set_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_instances, setup, teardown),
        cmocka_unit_test(test_checksum),
        cmocka_unit_test(test_unwritable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
