/* SPDX-License-Identifier: MIT */
/* Counter sets as slices hold them: sorted, a bad one or the second of a
 * name left out; a device's consumptions resolved against them. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/slicectr.h"

static void free_sets(json_t **s, int n)
{
    for (int i = 0; i < n; i++) {
        json_decref(s[i]);
    }
    free(s);
}

static void test_sets(void **state)
{
    (void)state;
    const kdp_dra_quantity c[] = {{"memory", "80Gi"}, {"slices", "7"}};
    const kdp_dra_quantity bad[] = {{"memory", "-1"}};
    const kdp_dra_counter_set sets[] = {
        {"card-1", c, 2}, {"card-0", c, 2}, {"card-2", bad, 1}, {"card-0", c, 1}};
    json_t **out = NULL;
    int n = kdp__slicectr_sets(sets, 4, &out);
    assert_int_equal(n, 2);
    char *text = json_dumps(out[0], JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"counters\":{\"memory\":{\"value\":\"80Gi\"},\"slices\":{"
                              "\"value\":\"7\"}},\"name\":\"card-0\"}");
    free(text);
    assert_string_equal(json_string_value(json_object_get(out[1], "name")), "card-1");

    /* consumptions resolved */
    const kdp_dra_quantity mem[] = {{"memory", "40Gi"}};
    const kdp_dra_quantity power[] = {{"power", "1"}};
    kdp_dra_consumption ok = {.counter_set = "card-1", .counters = mem, .n_counters = 1};
    kdp_dra_consumption no_set = {.counter_set = "card-9", .counters = mem, .n_counters = 1};
    kdp_dra_consumption no_ctr = {.counter_set = "card-0", .counters = power, .n_counters = 1};
    char why[200];
    json_t *dev = json_object();
    json_object_set_new(dev, "consumesCounters", kdp__slicectr_consumes(&ok, 1, why, sizeof(why)));
    assert_null(kdp__slicectr_unresolved(dev, out, (size_t)n, why, sizeof(why)));
    json_object_set_new(dev, "consumesCounters",
                        kdp__slicectr_consumes(&no_set, 1, why, sizeof(why)));
    assert_non_null(kdp__slicectr_unresolved(dev, out, (size_t)n, why, sizeof(why)));
    assert_non_null(strstr(why, "counter set card-9"));
    json_object_set_new(dev, "consumesCounters",
                        kdp__slicectr_consumes(&no_ctr, 1, why, sizeof(why)));
    assert_non_null(kdp__slicectr_unresolved(dev, out, (size_t)n, why, sizeof(why)));
    assert_non_null(strstr(why, "counter power of set card-0"));
    /* with no sets at all */
    assert_non_null(kdp__slicectr_unresolved(dev, NULL, 0, why, sizeof(why)));
    json_decref(dev);
    free_sets(out, n);

    /* the pool's bound */
    assert_int_equal(kdp__slicectr_sets(sets, KDP__SLICECTR_MAX_SETS + 1, &out), -E2BIG);
}

static void test_consumes(void **state)
{
    (void)state;
    const kdp_dra_quantity mem[] = {{"memory", "40Gi"}};
    kdp_dra_consumption two[] = {{.counter_set = "a", .counters = mem, .n_counters = 1},
                                 {.counter_set = "a", .counters = mem, .n_counters = 1},
                                 {.counter_set = "b", .counters = mem, .n_counters = 1}};
    char why[200];
    assert_null(kdp__slicectr_consumes(two, 2, why, sizeof(why)));
    assert_non_null(strstr(why, "consumesCounters[1].counterSet: Duplicate value"));
    assert_null(kdp__slicectr_consumes(two, 3, why, sizeof(why)));
    assert_non_null(strstr(why, "Too many"));
    json_t *j = kdp__slicectr_consumes(two + 1, 2, why, sizeof(why));
    assert_int_equal(json_array_size(j), 2);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sets),
        cmocka_unit_test(test_consumes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
