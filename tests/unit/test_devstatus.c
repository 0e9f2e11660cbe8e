/* SPDX-License-Identifier: MIT */
/* A prepared device's status: the JSON the claim's status.devices entry
 * gets (jansson reads it back), and each rule the API server has refused
 * at the call, naming the field. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dra/devstatus.h"

#define NOW 1795813200 /* 2026-11-27T21:00:00Z */

static void test_full(void **state)
{
    (void)state;
    kdp_dra_condition c[2] = {
        {.type = "Ready", .status = "True", .reason = "Configured", .message = "MIG 1g.10gb"},
        {.type = "gpu.example.com/Mig", .status = "Unknown", .reason = "Pending_Reset,Later"},
    };
    const char *ips[2] = {"10.9.8.7/24", "2001:db8::1/64"};
    kdp_dra_device_status st = {.conditions = c,
                                .n_conditions = 2,
                                .data = "{\"uuid\": \"GPU-1\", \"n\": [1, 2]}",
                                .interface_name = "eth1",
                                .ips = ips,
                                .n_ips = 2,
                                .hardware_address = "02:00:00:00:00:01"};
    char *out = NULL;
    char why[300];
    assert_int_equal(kdp__dra_devstatus_json(&st, NOW, &out, why, sizeof(why)), 0);
    json_t *o = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(o);
    json_t *conds = json_object_get(o, "conditions");
    assert_int_equal(json_array_size(conds), 2);
    json_t *c0 = json_array_get(conds, 0);
    assert_string_equal(json_string_value(json_object_get(c0, "lastTransitionTime")),
                        "2026-11-27T21:00:00Z");
    assert_string_equal(json_string_value(json_object_get(c0, "message")), "MIG 1g.10gb");
    assert_null(json_object_get(json_array_get(conds, 1), "message"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "data"), "uuid")),
                        "GPU-1");
    json_t *nd = json_object_get(o, "networkData");
    assert_string_equal(json_string_value(json_object_get(nd, "interfaceName")), "eth1");
    assert_string_equal(json_string_value(json_array_get(json_object_get(nd, "ips"), 1)),
                        "2001:db8::1/64");
    json_decref(o);
    /* nothing at all: an empty object */
    kdp_dra_device_status none = {0};
    assert_int_equal(kdp__dra_devstatus_json(&none, NOW, &out, why, sizeof(why)), 0);
    assert_string_equal(out, "{}");
    free(out);
}

static void expect_bad(const kdp_dra_device_status *st, const char *words)
{
    char *out = (char *)"untouched";
    char why[300] = "";
    assert_int_equal(kdp__dra_devstatus_json(st, NOW, &out, why, sizeof(why)), -EINVAL);
    assert_null(out);
    if (!strstr(why, words)) {
        fail_msg("why \"%s\" lacks \"%s\"", why, words);
    }
}

static void test_refused(void **state)
{
    (void)state;
    kdp_dra_condition ok = {.type = "Ready", .status = "True", .reason = "Configured"};
    kdp_dra_condition c[9];
    for (int i = 0; i < 9; i++) {
        c[i] = ok;
    }
    kdp_dra_device_status st = {.conditions = c, .n_conditions = 9};
    expect_bad(&st, "9 conditions: at most 8");
    st.n_conditions = 2;
    expect_bad(&st, "conditions[1].type Ready is conditions[0]'s too");
    st.n_conditions = 1;
    c[0].type = "not a name";
    expect_bad(&st, "conditions[0].type is not a qualified name");
    c[0] = ok;
    c[0].status = "Yes";
    expect_bad(&st, "conditions[0].status must be");
    c[0] = ok;
    c[0].reason = "not ok";
    expect_bad(&st, "conditions[0].reason must be CamelCase");
    c[0].reason = "Trailing,";
    expect_bad(&st, "conditions[0].reason");
    c[0].reason = NULL;
    expect_bad(&st, "conditions[0].reason");
    c[0] = ok;
    c[0].message = "bad \xff byte";
    expect_bad(&st, "conditions[0].message is not valid UTF-8");

    kdp_dra_device_status d = {.data = "[1, 2]"};
    expect_bad(&d, "data must be a JSON object");
    d.data = "{\"a\": ";
    expect_bad(&d, "data");
    d.data = "{\"a\": 1, \"a\": 2}";
    expect_bad(&d, "data");
    char *big = malloc(12000);
    assert_non_null(big);
    memset(big, 'x', 11990);
    memcpy(big, "{\"k\": \"", 7);
    memcpy(big + 11990, "\"}", 3);
    d.data = big;
    expect_bad(&d, "at most 10240");
    free(big);

    const char *ips[17];
    for (int i = 0; i < 17; i++) {
        ips[i] = "10.0.0.1/8";
    }
    kdp_dra_device_status n = {.ips = ips, .n_ips = 17};
    expect_bad(&n, "17 ips: at most 16");
    n.n_ips = 2;
    expect_bad(&n, "ips[1] 10.0.0.1/8 is ips[0] too");
    n.n_ips = 1;
    static const char *const bad_ips[] = {
        "10.0.0.1", "10.0.0.1/33", "2001:0db8::1/64", "2001:db8::1/129", "x/8", "/8", "10.0.0.1/"};
    for (size_t i = 0; i < sizeof(bad_ips) / sizeof(bad_ips[0]); i++) {
        ips[0] = bad_ips[i];
        expect_bad(&n, "is not an address in canonical CIDR form");
    }
    char longname[300];
    memset(longname, 'i', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    kdp_dra_device_status nm = {.interface_name = longname};
    expect_bad(&nm, "interface_name is longer than 256 bytes");
    longname[200] = '\0';
    nm = (kdp_dra_device_status){.hardware_address = longname};
    expect_bad(&nm, "hardware_address is longer than 128 bytes");
    expect_bad(NULL, "NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
