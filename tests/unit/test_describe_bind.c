/* SPDX-License-Identifier: MIT */
/* A device's binding conditions: every rule of the API server refused at
 * the call with a log line naming the field and the rule, nothing changed;
 * good sets copied; a second call replaces; zeros clear. */
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
#include <stdlib.h>
#include <string.h>

#include "dra/describe.h"

static char last[512];

static void capture(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    snprintf(last, sizeof(last), "%s", msg);
}

/* The call fails with -EINVAL, logs want, and leaves d as it was. */
static void refused(kdp_dra_device *d, const char *const *c, size_t nc, const char *const *f,
                    size_t nf, const char *want)
{
    last[0] = '\0';
    size_t before = d->n_bind_conds;
    assert_int_equal(kdp_dra_device_set_binding_conditions(d, c, nc, f, nf, true), -EINVAL);
    if (!strstr(last, want)) {
        fail_msg("log \"%s\" lacks \"%s\"", last, want);
    }
    assert_int_equal(d->n_bind_conds, before);
}

static void test_rules(void **state)
{
    (void)state;
    kdp_dra_device d;
    kdp__dra_device_init(&d, "nic0");
    const char *ok[] = {"example.com/attached"};
    const char *okf[] = {"example.com/failed"};
    assert_int_equal(kdp_dra_device_set_binding_conditions(&d, ok, 1, okf, 1, false), 0);
    /* 1. at most 4 in each */
    const char *five[] = {"a", "b", "c", "d", "e"};
    refused(&d, five, 5, okf, 1,
            "device nic0: bindingConditions: Too many: 5: must have at most 4");
    refused(&d, ok, 1, five, 5, "bindingFailureConditions: Too many: 5: must have at most 4");
    /* 2. each a condition type (a label name) */
    const char *bad[] = {"ok", "-leading"};
    refused(&d, bad, 2, okf, 1, "bindingConditions[1]: Invalid value: \"-leading\": a condition");
    const char *badp[] = {"Under_Score.example.com/x"};
    refused(&d, ok, 1, badp, 1, "bindingFailureConditions[0]: Invalid value:");
    const char *empty[] = {""};
    refused(&d, empty, 1, okf, 1, "bindingConditions[0]: Invalid value: \"\"");
    const char *null[] = {NULL};
    refused(&d, null, 1, okf, 1, "bindingConditions[0]: Invalid value");
    char long_name[80];
    memset(long_name, 'a', 64);
    long_name[64] = '\0';
    const char *toolong[] = {long_name};
    refused(&d, toolong, 1, okf, 1, "bindingConditions[0]: Invalid value");
    /* 3. none twice in a list */
    const char *dup[] = {"a", "b", "a"};
    refused(&d, dup, 3, okf, 1, "bindingConditions[2]: Duplicate value: \"a\"");
    refused(&d, ok, 1, dup, 3, "bindingFailureConditions[2]: Duplicate value: \"a\"");
    /* 4. none in both */
    const char *both[] = {"x", "example.com/attached"};
    refused(&d, ok, 1, both, 2,
            "bindingFailureConditions[1]: Invalid value: \"example.com/attached\": "
            "bindingFailureConditions must not overlap with bindingConditions");
    /* 5. the two together */
    refused(&d, NULL, 0, okf, 1,
            "bindingConditions: Invalid value: []: bindingConditions are required to use "
            "bindingFailureConditions");
    refused(&d, ok, 1, NULL, 0,
            "bindingFailureConditions: Invalid value: []: bindingFailureConditions are required "
            "to use bindingConditions");
    /* a count with a NULL list */
    refused(&d, NULL, 1, okf, 1, "conditions is NULL with a count of 1");
    refused(&d, ok, 1, NULL, 2, "failure_conditions is NULL with a count of 2");
    assert_int_equal(kdp_dra_device_set_binding_conditions(NULL, ok, 1, okf, 1, false), -EINVAL);
    /* nothing changed */
    assert_int_equal(d.n_bind_conds, 1);
    assert_string_equal(d.bind_conds[0], "example.com/attached");
    assert_string_equal(d.bind_fails[0], "example.com/failed");
    assert_false(d.binds_to_node);
    kdp__dra_device_done(&d);
}

static void test_accepted_replace_clear(void **state)
{
    (void)state;
    kdp_dra_device d;
    kdp__dra_device_init(&d, "nic0");
    /* 6. bindsToNode alone: no coupling */
    assert_int_equal(kdp_dra_device_set_binding_conditions(&d, NULL, 0, NULL, 0, true), 0);
    assert_true(d.binds_to_node);
    assert_int_equal(d.n_bind_conds + d.n_bind_fails, 0);
    char a[] = "example.com/attached";
    const char *four[] = {a, "Ready", "b.example.com/x_y.z", "p/q-1"};
    const char *four_f[] = {"example.com/failed", "Failed", "c", "d"};
    assert_int_equal(kdp_dra_device_set_binding_conditions(&d, four, 4, four_f, 4, false), 0);
    a[0] = 'X'; /* copied */
    assert_int_equal(d.n_bind_conds, 4);
    assert_int_equal(d.n_bind_fails, 4);
    assert_string_equal(d.bind_conds[0], "example.com/attached");
    assert_string_equal(d.bind_conds[3], "p/q-1");
    assert_string_equal(d.bind_fails[1], "Failed");
    assert_false(d.binds_to_node);
    /* replaces */
    const char *one[] = {"Attached"};
    const char *one_f[] = {"AttachFailed"};
    assert_int_equal(kdp_dra_device_set_binding_conditions(&d, one, 1, one_f, 1, true), 0);
    assert_int_equal(d.n_bind_conds, 1);
    assert_int_equal(d.n_bind_fails, 1);
    assert_string_equal(d.bind_conds[0], "Attached");
    assert_string_equal(d.bind_fails[0], "AttachFailed");
    assert_true(d.binds_to_node);
    /* clears */
    assert_int_equal(kdp_dra_device_set_binding_conditions(&d, NULL, 0, NULL, 0, false), 0);
    assert_null(d.bind_conds);
    assert_null(d.bind_fails);
    assert_int_equal(d.n_bind_conds + d.n_bind_fails, 0);
    assert_false(d.binds_to_node);
    /* freed by done */
    assert_int_equal(kdp_dra_device_set_binding_conditions(&d, one, 1, one_f, 1, true), 0);
    kdp__dra_device_done(&d);
    assert_null(d.bind_conds);
}

int main(void)
{
    kdp_log_set(KDP_LOG_DEBUG, capture, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_accepted_replace_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
