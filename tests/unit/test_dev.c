/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "kdp.h"
#include "plugin/dev.h"

/* Each bad field is refused with a why that names it. */
static void test_check(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(kdp__dev_check(NULL, &why), -EINVAL);
    assert_non_null(strstr(why, "NULL"));
    kdp_device d = {.id = "gpu0", .health = KDP_HEALTHY};
    assert_int_equal(kdp__dev_check(&d, NULL), 0);
    d.health = (kdp_health)7;
    assert_int_equal(kdp__dev_check(&d, &why), -EINVAL);
    assert_non_null(strstr(why, "health"));
    d.health = KDP_UNHEALTHY;
    d.n_numa_nodes = 1;
    assert_int_equal(kdp__dev_check(&d, &why), -EINVAL);
    assert_non_null(strstr(why, "numa_nodes"));
    d.n_numa_nodes = 0;
    d.host_path = "dev/x";
    assert_int_equal(kdp__dev_check(&d, &why), -EINVAL);
    assert_non_null(strstr(why, "host_path"));
    d.host_path = "/dev/x";
    d.container_path = "x";
    assert_int_equal(kdp__dev_check(&d, &why), -EINVAL);
    assert_non_null(strstr(why, "container_path"));
    d.container_path = NULL;
    d.permissions = "rwz";
    assert_int_equal(kdp__dev_check(&d, &why), -EINVAL);
    d.permissions = "r";
    d.id = "";
    assert_int_equal(kdp__dev_check(&d, &why), -EINVAL);
    kdp__dev out = {0};
    assert_int_equal(kdp__dev_from_public(&out, &d, &why), -EINVAL);
    assert_null(out.id);
}

/* A copy owns its strings, keeps the author's data and health, and holds
 * the non-negative NUMA nodes once each, in order; a dup keeps the probe's
 * state; free zeroes. */
static void test_copy_dup_free(void **state)
{
    (void)state;
    int64_t nodes[] = {2, -1, 0, 2};
    char id[] = "nic1";
    int tag = 0;
    kdp_device d = {.id = id,
                    .health = KDP_UNHEALTHY,
                    .numa_nodes = nodes,
                    .n_numa_nodes = 4,
                    .host_path = "/dev/nic1",
                    .data = &tag};
    kdp__dev a;
    assert_int_equal(kdp__dev_from_public(&a, &d, NULL), 0);
    id[0] = 'X';
    assert_string_equal(a.id, "nic1");
    assert_int_equal(a.health, KDP_UNHEALTHY);
    assert_int_equal(a.author_health, KDP_UNHEALTHY);
    assert_ptr_equal(a.data, &tag);
    assert_int_equal(a.n_numa, 2);
    assert_true(a.numa[0] == 0 && a.numa[1] == 2);
    assert_null(a.container_path);
    assert_null(a.permissions);

    a.author_health = KDP_HEALTHY;
    a.probe.bad = true;
    a.probe.fails = 3;
    kdp__dev_apply_overlay(&a);
    assert_int_equal(a.health, KDP_UNHEALTHY);
    kdp__dev b;
    assert_int_equal(kdp__dev_dup(&b, &a), 0);
    assert_ptr_not_equal(b.id, a.id);
    assert_int_equal(b.author_health, KDP_HEALTHY);
    assert_true(b.probe.bad);
    assert_int_equal(b.probe.fails, 3);
    assert_true(kdp__dev_same_for_kubelet(&a, &b));
    b.probe.bad = false;
    kdp__dev_apply_overlay(&b);
    assert_int_equal(b.health, KDP_HEALTHY);
    assert_false(kdp__dev_same_for_kubelet(&a, &b));
    b.health = KDP_UNHEALTHY;
    b.numa[1] = 3;
    assert_false(kdp__dev_same_for_kubelet(&a, &b));

    kdp__dev_free(&a);
    assert_null(a.id);
    assert_null(a.numa);
    assert_int_equal(a.n_numa, 0);
    kdp__dev_free(&b);
    kdp__dev_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_copy_dup_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
