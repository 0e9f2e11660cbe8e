/* SPDX-License-Identifier: MIT */
/* The API server's rules for sharing, as k8s/sharecheck applies them: each
 * rule of counters, counter sets, consumptions and request policies, with
 * the field and the reason it names. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "k8s/sharecheck.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The check's verdict: "" for valid, else "field: why". */
static const char *verdict(int r, const kdp__share_err *e)
{
    static char out[400];
    if (r == 0) {
        return "";
    }
    assert_int_equal(r, -EINVAL);
    snprintf(out, sizeof(out), "%s: %s", e->field, e->why);
    return out;
}

static void expect(const char *got, const char *want)
{
    if (!*want) {
        assert_string_equal(got, "");
        return;
    }
    if (!strstr(got, want)) {
        fail_msg("\"%s\" does not contain \"%s\"", got, want);
    }
}

static void test_counters(void **state)
{
    (void)state;
    kdp__share_err e;
    const kdp_dra_quantity ok[] = {{"memory", "80Gi"}, {"slices", "7"}};
    expect(verdict(kdp__share_check_counters(ok, 2, &e), &e), "");
    expect(verdict(kdp__share_check_counters(ok, 0, &e), &e), "counters: Required value");
    const kdp_dra_quantity upper[] = {{"Memory", "1"}};
    expect(verdict(kdp__share_check_counters(upper, 1, &e), &e), "RFC 1123 label");
    const kdp_dra_quantity twice[] = {{"a", "1"}, {"a", "2"}};
    expect(verdict(kdp__share_check_counters(twice, 2, &e), &e), "Duplicate value: \"a\"");
    const kdp_dra_quantity neg[] = {{"a", "-1"}};
    expect(verdict(kdp__share_check_counters(neg, 1, &e), &e),
           "counters[a].value: Invalid value: \"-1\": must be greater than or equal to 0");
    const kdp_dra_quantity junk[] = {{"a", "lots"}};
    expect(verdict(kdp__share_check_counters(junk, 1, &e), &e), "counters[a].value: Invalid");
    kdp_dra_quantity many[KDP_DRA_MAX_COUNTERS + 1];
    char names[KDP_DRA_MAX_COUNTERS + 1][8];
    for (size_t i = 0; i < N(many); i++) {
        snprintf(names[i], sizeof(names[i]), "c%zu", i);
        many[i] = (kdp_dra_quantity){names[i], "1"};
    }
    expect(verdict(kdp__share_check_counters(many, KDP_DRA_MAX_COUNTERS, &e), &e), "");
    expect(verdict(kdp__share_check_counters(many, N(many), &e), &e),
           "counters: Too many: 33: must have at most 32 items");
}

static void test_sets(void **state)
{
    (void)state;
    kdp__share_err e;
    const kdp_dra_quantity c[] = {{"memory", "80Gi"}};
    const kdp_dra_counter_set sets[] = {{"card-0", c, 1}, {"card-1", c, 1}, {"card-0", c, 1}};
    expect(verdict(kdp__share_check_sets(sets, 2, &e), &e), "");
    expect(verdict(kdp__share_check_sets(sets, 3, &e), &e),
           "sharedCounters[2].name: Duplicate value: \"card-0\"");
    const kdp_dra_counter_set bad[] = {{"card_0", c, 1}};
    expect(verdict(kdp__share_check_sets(bad, 1, &e), &e), "sharedCounters[0].name: Invalid");
    const kdp_dra_counter_set empty[] = {{"card-0", NULL, 0}};
    expect(verdict(kdp__share_check_sets(empty, 1, &e), &e),
           "sharedCounters[0].counters: Required value");
}

static void test_consumption(void **state)
{
    (void)state;
    kdp__share_err e;
    const kdp_dra_quantity c[] = {{"memory", "40Gi"}};
    kdp_dra_consumption k = {.counter_set = "card-0", .counters = c, .n_counters = 1};
    expect(verdict(kdp__share_check_consumption(&k, &e), &e), "");
    const char *groups[] = {"mig", "vgpu", "vfio"};
    k.compatibility_groups = groups;
    k.n_compatibility_groups = 2;
    expect(verdict(kdp__share_check_consumption(&k, &e), &e), "");
    k.n_compatibility_groups = 3;
    expect(verdict(kdp__share_check_consumption(&k, &e), &e),
           "compatibilityGroups: Too many: 3: must have at most 2 items");
    const char *twice[] = {"mig", "mig"};
    k.compatibility_groups = twice;
    k.n_compatibility_groups = 2;
    expect(verdict(kdp__share_check_consumption(&k, &e), &e),
           "compatibilityGroups[1]: Duplicate value");
    k.n_compatibility_groups = 0;
    k.counter_set = NULL;
    expect(verdict(kdp__share_check_consumption(&k, &e), &e), "counterSet: Required value");
}

static void test_policy_values(void **state)
{
    (void)state;
    kdp__share_err e;
    const char *vals[] = {"10Gi", "20Gi", "40Gi"};
    kdp_dra_request_policy p = {.default_value = "10Gi", .valid_values = vals, .n_valid_values = 3};
    expect(verdict(kdp__share_check_policy("80Gi", &p, &e), &e), "");
    p.default_value = "15Gi";
    expect(verdict(kdp__share_check_policy("80Gi", &p, &e), &e),
           "requestPolicy.validValues: Invalid value: \"15Gi\": default value is not valid "
           "according to the requestPolicy");
    p.default_value = NULL;
    expect(verdict(kdp__share_check_policy("80Gi", &p, &e), &e),
           "requestPolicy.default: Required value: required when validValues is defined");
    p.default_value = "10Gi";
    expect(verdict(kdp__share_check_policy("30Gi", &p, &e), &e),
           "requestPolicy.validValues[2]: Invalid value: \"40Gi\": option is larger than "
           "capacity value: 30Gi");
    const char *unsorted[] = {"20Gi", "10Gi"};
    p.valid_values = unsorted;
    p.n_valid_values = 2;
    expect(verdict(kdp__share_check_policy("80Gi", &p, &e), &e),
           "requestPolicy.validValues[1]: Invalid value: \"10Gi\": values must be sorted in "
           "ascending order");
    const char *same[] = {"1Gi", "1024Mi"};
    p.valid_values = same;
    p.default_value = "1Gi";
    expect(verdict(kdp__share_check_policy("80Gi", &p, &e), &e),
           "requestPolicy.validValues[1]: Duplicate value: \"1024Mi\"");
    const char *eleven[11] = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"};
    p.valid_values = eleven;
    p.n_valid_values = 11;
    p.default_value = "1";
    expect(verdict(kdp__share_check_policy("80", &p, &e), &e),
           "requestPolicy.validValues: Too many: 11: must have at most 10 items");
    p.n_valid_values = 10;
    expect(verdict(kdp__share_check_policy("80", &p, &e), &e), "");
    p.min = "1";
    expect(verdict(kdp__share_check_policy("80", &p, &e), &e),
           "requestPolicy: Forbidden: exactly one policy can be specified");
}

static void test_policy_range(void **state)
{
    (void)state;
    kdp__share_err e;
    kdp_dra_request_policy p = {.default_value = "1Gi", .min = "1Gi", .max = "64Gi", .step = "1Gi"};
    expect(verdict(kdp__share_check_policy("80Gi", &p, &e), &e), "");
    static const struct {
        const char *def, *min, *max, *step, *cap, *want;
    } cases[] = {
        {"1Gi", "1Gi", NULL, NULL, "80Gi", ""},
        {"1Gi", NULL, "8Gi", NULL, "80Gi", "requestPolicy.validRange.min: Required value"},
        {NULL, "1Gi", NULL, NULL, "80Gi",
         "requestPolicy.default: Required value: required when validRange is defined"},
        {"1Gi", "90Gi", NULL, NULL, "80Gi",
         "requestPolicy.validRange.min: Invalid value: \"90Gi\": must be less than or equal to "
         "capacity value: 80Gi"},
        {"512Mi", "1Gi", NULL, NULL, "80Gi",
         "requestPolicy.validRange.default: Invalid value: \"512Mi\": must be greater than or "
         "equal to min"},
        {"2Gi", "4Gi", "2Gi", NULL, "80Gi", "must be greater than or equal to min"},
        {"4Gi", "2Gi", "1Gi", NULL, "80Gi",
         "requestPolicy.validRange.max: Invalid value: \"1Gi\": "
         "min is larger than max"},
        {"4Gi", "2Gi", "90Gi", NULL, "80Gi",
         "requestPolicy.validRange.max: Invalid value: "
         "\"90Gi\": must be less than or equal to capacity"},
        {"9Gi", "2Gi", "8Gi", NULL, "80Gi",
         "requestPolicy.validRange.default: Invalid value: "
         "\"9Gi\": must be less than or equal to max: 8Gi"},
        {"2Gi", "2Gi", NULL, "0", "80Gi",
         "requestPolicy.validRange.step: Invalid value: \"0\": "
         "must be positive"},
        {"2Gi", "2Gi", NULL, "79Gi", "80Gi", "min + step must be less than or equal to capacity"},
        {"3Gi", "2Gi", NULL, "2Gi", "80Gi",
         "requestPolicy.default: Invalid value: \"3Gi\": value is not a multiple of a given step "
         "(2Gi) from (2Gi)"},
        {"2Gi", "2Gi", "9Gi", "2Gi", "80Gi",
         "requestPolicy.validRange.max: Invalid value: "
         "\"9Gi\": value is not a multiple"},
        {"1", "-1", NULL, NULL, "80",
         "requestPolicy.validRange.min: Invalid value: \"-1\": must "
         "be greater than or equal to 0"},
        {"0.5", "0.5", NULL, "0.25", "8", ""},
        {"1n", "1n", NULL, NULL, "8", "cannot be represented as a milli value"},
    };
    for (size_t i = 0; i < N(cases); i++) {
        kdp_dra_request_policy q = {.default_value = cases[i].def,
                                    .min = cases[i].min,
                                    .max = cases[i].max,
                                    .step = cases[i].step};
        expect(verdict(kdp__share_check_policy(cases[i].cap, &q, &e), &e), cases[i].want);
    }
    /* a default alone: any amount, not checked against the capacity */
    kdp_dra_request_policy alone = {.default_value = "100Gi"};
    expect(verdict(kdp__share_check_policy("80Gi", &alone, &e), &e), "");
    kdp_dra_request_policy none = {0};
    expect(verdict(kdp__share_check_policy("80Gi", &none, &e), &e), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters),     cmocka_unit_test(test_sets),
        cmocka_unit_test(test_consumption),  cmocka_unit_test(test_policy_values),
        cmocka_unit_test(test_policy_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
