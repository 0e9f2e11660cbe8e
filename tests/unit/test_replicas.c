/* SPDX-License-Identifier: MIT */
/* Replica IDs: format, parse, resolution to the physical device, the room
 * an ID must leave for its suffix. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <string.h>

#include "plugin/replicas.h"

static void test_format(void **state)
{
    (void)state;
    char buf[16];
    assert_int_equal(kdp__replica_format(buf, sizeof(buf), "gpu0", 4, 7, 8), 6);
    assert_string_equal(buf, "gpu0-7");
    assert_int_equal(kdp__replica_format(buf, sizeof(buf), "gpu0", 4, 0, 1), 4); /* no sharing */
    assert_string_equal(buf, "gpu0");
    assert_int_equal(kdp__replica_format(buf, sizeof(buf), "gpu0", 3, 2, 3), 5); /* a prefix */
    assert_string_equal(buf, "gpu-2");
    assert_int_equal(kdp__replica_format(buf, 6, "gpu0", 4, 10, 11), -ENAMETOOLONG);
    assert_string_equal(buf, "");
    assert_int_equal(kdp__replica_suffix_max(0), 0);
    assert_int_equal(kdp__replica_suffix_max(1), 0);
    assert_int_equal(kdp__replica_suffix_max(2), 2);    /* "-1" */
    assert_int_equal(kdp__replica_suffix_max(10), 2);   /* "-9" */
    assert_int_equal(kdp__replica_suffix_max(11), 3);   /* "-10" */
    assert_int_equal(kdp__replica_suffix_max(1024), 5); /* "-1023" */
}

static void test_parse(void **state)
{
    (void)state;
    size_t len = 0;
    unsigned k = 0;
    assert_int_equal(kdp__replica_parse("gpu0-3", 4, &len, &k), 0);
    assert_int_equal(len, 4);
    assert_int_equal(k, 3);
    /* the last '-' starts the suffix */
    assert_int_equal(kdp__replica_parse("a-b-10", 11, &len, &k), 0);
    assert_int_equal(len, 3);
    assert_int_equal(k, 10);
    assert_int_equal(kdp__replica_parse("gpu0--1", 4, &len, &k), 0); /* device "gpu0-" */
    assert_int_equal(len, 5);
    assert_int_equal(kdp__replica_parse("x-1023", 1024, &len, &k), 0);
    assert_int_equal(k, 1023);
    /* refused: out of range, not canonical, malformed */
    const char *bad[] = {"gpu0-4",  "gpu0-03", "gpu0-",   "gpu0",       "-1",
                         "gpu0-+1", "gpu0-1x", "gpu0-00", "gpu0-10000", "gpu0- 1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        len = 99;
        k = 99;
        assert_int_equal(kdp__replica_parse(bad[i], 4, &len, &k), -EINVAL);
        assert_int_equal(len, 99); /* untouched */
    }
    assert_int_equal(kdp__replica_parse(NULL, 4, &len, &k), -EINVAL);
    /* no sharing: the ID itself */
    assert_int_equal(kdp__replica_parse("gpu0-3", 1, &len, &k), 0);
    assert_int_equal(len, 6);
    assert_int_equal(k, 0);
    /* every formatted ID parses back */
    for (unsigned r = 2; r <= KDP_MAX_REPLICAS; r = r * 3 + 1) {
        for (unsigned i = 0; i < r; i += 1 + r / 7) {
            char buf[64];
            assert_true(kdp__replica_format(buf, sizeof(buf), "d-1", 3, i, r) > 0);
            assert_int_equal(kdp__replica_parse(buf, r, &len, &k), 0);
            assert_int_equal(len, 3);
            assert_int_equal(k, i);
        }
    }
}

static void make_tab(kdp__devtab *t)
{
    kdp_device devs[] = {{.id = "gpu"}, {.id = "gpu-1"}, {.id = "fpga", .health = KDP_UNHEALTHY}};
    kdp__devtab_init(t);
    assert_int_equal(kdp__devtab_from_array(t, devs, 3, NULL), 0);
}

static void test_find(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    /* what the kubelet sends: replica IDs only */
    assert_string_equal(kdp__replica_find(&t, 2, "gpu-0")->id, "gpu");
    assert_string_equal(kdp__replica_find(&t, 2, "gpu-1")->id, "gpu"); /* not the device gpu-1 */
    assert_string_equal(kdp__replica_find(&t, 2, "gpu-1-1")->id, "gpu-1");
    assert_int_equal(kdp__replica_find(&t, 2, "fpga-1")->health, KDP_UNHEALTHY);
    assert_null(kdp__replica_find(&t, 2, "gpu-2"));  /* out of range */
    assert_null(kdp__replica_find(&t, 2, "gpu"));    /* a device ID is not a replica ID */
    assert_null(kdp__replica_find(&t, 2, "nope-0")); /* unknown device */
    assert_null(kdp__replica_find(&t, 2, NULL));
    /* without sharing: the table's IDs */
    assert_string_equal(kdp__replica_find(&t, 0, "gpu-1")->id, "gpu-1");
    assert_null(kdp__replica_find(&t, 1, "gpu-0"));
    /* the public lookups: a device's own ID first, then a replica ID */
    assert_string_equal(kdp__replica_find_any(&t, 2, "gpu-1")->id, "gpu-1");
    assert_string_equal(kdp__replica_find_any(&t, 2, "gpu-0")->id, "gpu");
    assert_string_equal(kdp__replica_find_any(&t, 2, "fpga")->id, "fpga");
    assert_null(kdp__replica_find_any(&t, 2, "fpga-2"));
    assert_null(kdp__replica_find_any(&t, 1, "fpga-0"));
    kdp__devtab_clear(&t);
}

static void test_check_ids(void **state)
{
    (void)state;
    char id[256];
    memset(id, 'a', 250);
    id[250] = '\0'; /* 250 + "-1023" = 255: fits */
    kdp_device devs[] = {{.id = "short"}, {.id = id}};
    kdp__devtab t;
    kdp__devtab_init(&t);
    assert_int_equal(kdp__devtab_from_array(&t, devs, 2, NULL), 0);
    const char *bad = NULL;
    assert_int_equal(kdp__replica_check_ids(&t, 1024, &bad), 0);
    assert_int_equal(kdp__replica_check_ids(&t, 0, &bad), 0);
    assert_null(bad);
    id[250] = 'a';
    id[251] = '\0'; /* 251 + "-1023": 256 */
    assert_int_equal(kdp__devtab_from_array(&t, devs, 2, NULL), 0);
    assert_int_equal(kdp__replica_check_ids(&t, 1024, &bad), -EINVAL);
    assert_non_null(bad);
    assert_int_equal(strlen(bad), 251);
    assert_int_equal(kdp__replica_check_ids(&t, 1000, &bad), 0); /* "-999" fits */
    assert_int_equal(kdp__replica_check_ids(&t, 1, &bad), 0);
    kdp__devtab_clear(&t);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_check_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
