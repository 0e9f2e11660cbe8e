/* SPDX-License-Identifier: MIT */
/* What sharing adds to a description: consumptions, multiple allocations
 * and request policies, each refused at the call with its rule, copied,
 * and published as the API takes them (k8s/slicebuild). */
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

#include "dra/describe.h"
#include "k8s/slicebuild.h"

static void test_consumptions(void **state)
{
    (void)state;
    kdp_dra_device d;
    kdp__dra_device_init(&d, "card0-half1");
    char set[] = "card-0";
    char mem[] = "40Gi";
    kdp_dra_quantity c[] = {{"memory", mem}, {"slices", "3"}};
    const char *groups[] = {"mig"};
    kdp_dra_consumption k = {.counter_set = set,
                             .counters = c,
                             .n_counters = 2,
                             .compatibility_groups = groups,
                             .n_compatibility_groups = 1};
    assert_int_equal(kdp_dra_device_add_consumption(&d, &k), 0);
    /* copied: the caller's strings may change */
    set[0] = 'X';
    mem[0] = '9';
    assert_string_equal(d.consumes[0].counter_set, "card-0");
    assert_string_equal(d.consumes[0].counters[0].value, "40Gi");
    assert_string_equal(d.consumes[0].compatibility_groups[0], "mig");
    strcpy(set, "card-0");
    assert_int_equal(kdp_dra_device_add_consumption(&d, &k), -EEXIST);
    k.counter_set = "pool";
    k.n_compatibility_groups = 0;
    assert_int_equal(kdp_dra_device_add_consumption(&d, &k), 0);
    k.counter_set = "third";
    assert_int_equal(kdp_dra_device_add_consumption(&d, &k), -E2BIG);
    kdp_dra_quantity bad[] = {{"memory", "-1"}};
    kdp_dra_consumption kb = {.counter_set = "x", .counters = bad, .n_counters = 1};
    assert_int_equal(kdp_dra_device_add_consumption(&d, &kb), -EINVAL);
    assert_int_equal(kdp_dra_device_add_consumption(&d, NULL), -EINVAL);
    assert_int_equal(kdp_dra_device_add_consumption(NULL, &k), -EINVAL);
    assert_int_equal(d.n_consumes, 2);
    kdp__dra_device_done(&d);
}

static void test_policies(void **state)
{
    (void)state;
    kdp_dra_device d;
    kdp__dra_device_init(&d, "card0-shared");
    kdp_dra_request_policy p = {.default_value = "1Gi", .min = "1Gi", .step = "1Gi"};
    assert_int_equal(kdp_dra_device_set_request_policy(&d, "memory", &p), -ENOENT);
    assert_int_equal(kdp_dra_device_add_capacity(&d, "memory", "80Gi"), 0);
    /* the API's rule: a policy only on a device that allows multiple allocations */
    assert_int_equal(kdp_dra_device_set_request_policy(&d, "memory", &p), -EINVAL);
    assert_int_equal(kdp_dra_device_allow_multiple_allocations(&d), 0);
    assert_int_equal(kdp_dra_device_set_request_policy(&d, "memory", &p), 0);
    kdp_dra_request_policy bad = {.default_value = "90Gi", .min = "1Gi"};
    assert_int_equal(kdp_dra_device_set_request_policy(&d, "memory", &bad), -EINVAL);
    /* replaced by a later one */
    const char *vals[] = {"10Gi", "20Gi"};
    kdp_dra_request_policy v = {.default_value = "10Gi", .valid_values = vals, .n_valid_values = 2};
    assert_int_equal(kdp_dra_device_set_request_policy(&d, "memory", &v), 0);
    assert_int_equal(d.caps[0].policy->n_valid_values, 2);
    assert_null(d.caps[0].policy->min);
    assert_int_equal(kdp_dra_device_allow_multiple_allocations(NULL), -EINVAL);
    assert_int_equal(kdp_dra_device_set_request_policy(&d, "memory", NULL), -EINVAL);

    /* published as the API takes it */
    kdp__slice_cap cap = {d.caps[0].name, d.caps[0].quantity, d.caps[0].policy};
    kdp__slice_dev sd = {.name = "card0-shared", .caps = &cap, .n_caps = 1, .allow_multiple = true};
    char why[256];
    json_t *j = kdp__slicebuild_device(&sd, why, sizeof(why));
    char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"allowMultipleAllocations\":true,\"capacity\":{\"memory\":{"
                              "\"requestPolicy\":{\"default\":\"10Gi\",\"validValues\":["
                              "\"10Gi\",\"20Gi\"]},\"value\":\"80Gi\"}},\"name\":\"card0-"
                              "shared\"}");
    free(text);
    json_decref(j);
    /* not shared: the policy left out, the capacity kept */
    sd.allow_multiple = false;
    j = kdp__slicebuild_device(&sd, why, sizeof(why));
    text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"capacity\":{\"memory\":{\"value\":\"80Gi\"}},\"name\":\"card0-"
                              "shared\"}");
    free(text);
    json_decref(j);
    kdp__dra_device_done(&d);
}

static void test_consumes_json(void **state)
{
    (void)state;
    kdp_dra_quantity c[] = {{"memory", "10Gi"}, {"slices", "1"}};
    const char *groups[] = {"mig"};
    kdp_dra_consumption k = {.counter_set = "card-0",
                             .counters = c,
                             .n_counters = 2,
                             .compatibility_groups = groups,
                             .n_compatibility_groups = 1};
    kdp__slice_dev sd = {.name = "card0-7th-0", .consumes = &k, .n_consumes = 1};
    char why[256];
    json_t *j = kdp__slicebuild_device(&sd, why, sizeof(why));
    char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"consumesCounters\":[{\"compatibilityGroups\":[\"mig\"],"
                              "\"counterSet\":\"card-0\",\"counters\":{\"memory\":{\"value\":"
                              "\"10Gi\"},\"slices\":{\"value\":\"1\"}}}],\"name\":\"card0-7th-"
                              "0\"}");
    free(text);
    /* v1beta1: under basic, as the other fields */
    json_t *b = kdp__slicebuild_shape("v1beta1", j);
    assert_non_null(json_object_get(json_object_get(b, "basic"), "consumesCounters"));
    json_decref(b);
    json_decref(j);
    /* a bad consumption leaves the whole device out */
    c[0].value = "ten";
    assert_null(kdp__slicebuild_device(&sd, why, sizeof(why)));
    assert_non_null(strstr(why, "consumesCounters[0].counters[memory].value"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_consumptions),
        cmocka_unit_test(test_policies),
        cmocka_unit_test(test_consumes_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
