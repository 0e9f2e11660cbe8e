/* SPDX-License-Identifier: MIT */
/* A driver's entries in a claim's status.devices: replaced in place of the
 * old ones, other drivers' and pools' kept, a condition unchanged keeps its
 * time, nothing to change said so, removal, bad fields refused. */
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
#include <string.h>

#include "k8s/claimstatus.h"

#define DRV "gpu.example.com"

static json_t *claim(const char *devices)
{
    char text[2048];
    snprintf(text, sizeof(text), "{\"metadata\": {\"uid\": \"u\"}, \"status\": {\"devices\": %s}}",
             devices);
    json_t *c = json_loads(text, 0, NULL);
    assert_non_null(c);
    return c;
}

static void test_replace_keep_others(void **state)
{
    (void)state;
    json_t *c = claim("[{\"driver\": \"net.example.com\", \"pool\": \"n\", \"device\": \"eth0\"},"
                      " {\"driver\": \"" DRV "\", \"pool\": \"node-a\", \"device\": \"gpu0\","
                      "  \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\","
                      "   \"reason\": \"Old\", \"lastTransitionTime\": \"2020-01-01T00:00:00Z\"}]},"
                      " {\"driver\": \"" DRV "\", \"pool\": \"node-b\", \"device\": \"gpu0\"}]");
    kdp__cstat_entry e[2] = {
        {.device = "gpu0",
         .fields = "{\"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"reason\": "
                   "\"New\", \"lastTransitionTime\": \"2026-11-27T21:00:00Z\"}]}"},
        {.device = "gpu1", .share_id = "0f0e0d0c-0b0a-0908-0706-050403020100", .fields = NULL},
    };
    bool changed = false;
    int err = 1;
    json_t *out = kdp__cstat_merge(c, DRV, "node-a", e, 2, &changed, &err);
    assert_non_null(out);
    assert_int_equal(err, 0);
    assert_true(changed);
    assert_int_equal(json_array_size(out), 4);
    /* the others first, in their order; node-b's is not ours to touch */
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 0), "driver")),
                        "net.example.com");
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 1), "pool")),
                        "node-b");
    json_t *g0 = json_array_get(out, 2);
    json_t *cond = json_array_get(json_object_get(g0, "conditions"), 0);
    assert_string_equal(json_string_value(json_object_get(cond, "reason")), "New");
    /* type and status unchanged: the time it turned stays */
    assert_string_equal(json_string_value(json_object_get(cond, "lastTransitionTime")),
                        "2020-01-01T00:00:00Z");
    assert_string_equal(json_string_value(json_object_get(json_array_get(out, 3), "shareID")),
                        "0f0e0d0c-0b0a-0908-0706-050403020100");
    /* merging the result again changes nothing */
    json_object_set(json_object_get(c, "status"), "devices", out);
    json_t *again = kdp__cstat_merge(c, DRV, "node-a", e, 2, &changed, &err);
    assert_false(changed);
    json_decref(again);
    /* removal: ours go, the rest stays */
    json_t *gone = kdp__cstat_merge(c, DRV, "node-a", NULL, 0, &changed, &err);
    assert_true(changed);
    assert_int_equal(json_array_size(gone), 2);
    json_decref(gone);
    json_decref(out);
    json_decref(c);
}

/* keep: the claim's own entry for the device stays as it is (a binding
 * condition another write set), ours for the other devices go. */
static void test_keep(void **state)
{
    (void)state;
    json_t *c =
        claim("[{\"driver\": \"" DRV "\", \"pool\": \"node-a\", \"device\": \"gpu0\","
              "  \"conditions\": [{\"type\": \"a/attached\", \"status\": \"True\","
              "   \"reason\": \"Attached\", \"lastTransitionTime\": \"2020-01-01T00:00:00Z\"}]},"
              " {\"driver\": \"" DRV "\", \"pool\": \"node-a\", \"device\": \"gpu1\"}]");
    kdp__cstat_entry e[2] = {{.device = "gpu0", .keep = true}, {.device = "gpu2", .keep = true}};
    bool changed = false;
    int err = 1;
    json_t *out = kdp__cstat_merge(c, DRV, "node-a", e, 2, &changed, &err);
    assert_non_null(out);
    assert_true(changed);
    assert_int_equal(json_array_size(out), 1); /* gpu1 gone; gpu2 had none */
    json_t *before = json_array_get(json_object_get(json_object_get(c, "status"), "devices"), 0);
    assert_true(json_equal(json_array_get(out, 0), before));
    json_decref(out);
    json_decref(c);
}

static void test_empty_and_bad(void **state)
{
    (void)state;
    json_t *c = json_loads("{\"metadata\": {}}", 0, NULL);
    bool changed = true;
    int err = 1;
    json_t *out = kdp__cstat_merge(c, DRV, "p", NULL, 0, &changed, &err);
    assert_false(changed); /* nothing there, nothing asked */
    assert_int_equal(json_array_size(out), 0);
    json_decref(out);
    kdp__cstat_entry e = {.device = "gpu0", .fields = "[1]"};
    assert_null(kdp__cstat_merge(c, DRV, "p", &e, 1, &changed, &err));
    assert_int_equal(err, -EINVAL);
    e.fields = "{not json";
    assert_null(kdp__cstat_merge(c, DRV, "p", &e, 1, &changed, &err));
    assert_int_equal(err, -EINVAL);
    json_decref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace_keep_others),
        cmocka_unit_test(test_keep),
        cmocka_unit_test(test_empty_and_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
