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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/claims.h"

#define DRV  "gpu.example.com"
#define POOL "node-a"

/* A v1 claim allocated on node-a: two of our devices, one of another
 * driver, one of ours from another pool; configs from class and claim. */
#define SHARE "0b6e5f0c-7c1f-4a86-9d3a-1f2b3c4d5e6f"

static const char *const CLAIM =
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
    "\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns1\",\"uid\":\"uid-1\"},"
    "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{}}]}},"
    "\"status\":{\"allocation\":{\"devices\":{"
    "\"results\":["
    "{\"request\":\"gpu\",\"driver\":\"" DRV "\",\"pool\":\"" POOL "\",\"device\":\"gpu-0\"},"
    "{\"request\":\"nic\",\"driver\":\"nic.example.com\",\"pool\":\"" POOL "\",\"device\":\"n0\"},"
    "{\"request\":\"big/small\",\"driver\":\"" DRV "\",\"pool\":\"" POOL "\",\"device\":\"gpu-1\","
    "\"adminAccess\":true,\"shareID\":\"" SHARE "\","
    "\"consumedCapacity\":{\"memory\":\"8Gi\",\"example.com/bw\":\"10\"}},"
    "{\"request\":\"gpu\",\"driver\":\"" DRV "\",\"pool\":\"node-b\",\"device\":\"gpu-9\"}],"
    "\"config\":["
    "{\"source\":\"FromClaim\",\"requests\":[\"gpu\"],"
    "\"opaque\":{\"driver\":\"" DRV "\",\"parameters\":{\"claim\":1}}},"
    "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"" DRV "\",\"parameters\":{\"class\":1}}},"
    "{\"source\":\"FromClaim\",\"requests\":[\"big\"],"
    "\"opaque\":{\"driver\":\"" DRV "\",\"parameters\":{\"big\":true}}},"
    "{\"source\":\"FromClaim\",\"requests\":[\"big/other\"],"
    "\"opaque\":{\"driver\":\"" DRV "\",\"parameters\":{\"other\":true}}},"
    "{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"nic.example.com\","
    "\"parameters\":{\"nic\":1}}},"
    "{\"source\":\"FromClass\",\"requests\":[\"gpu\"],"
    "\"opaque\":{\"driver\":\"" DRV "\",\"parameters\":{\"class\":2}}}"
    "]},\"nodeSelector\":{}}}}";

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *o = json_loads(text, 0, &e);
    if (!o) {
        print_error("bad test JSON: %s at %d\n", e.text, e.column);
    }
    assert_non_null(o);
    return o;
}

static kdp__claim *parse(const char *text, const char *pool, const char *uid, int want,
                         const char *why_has)
{
    json_t *o = load(text);
    kdp__claim *c = NULL;
    char why[512] = "";
    int r = kdp__claim_parse(o, DRV, pool, uid, &c, why, sizeof(why));
    if (r != want || (why_has && !strstr(why, why_has))) {
        print_error("parse: %d (want %d), why \"%s\" (want \"%s\")\n", r, want, why,
                    why_has ? why_has : "");
    }
    assert_int_equal(r, want);
    if (why_has) {
        assert_non_null(strstr(why, why_has));
    }
    json_decref(o);
    return c;
}

static void test_filters_and_configs(void **state)
{
    (void)state;
    kdp__claim *c = parse(CLAIM, POOL, "uid-1", 0, NULL);
    assert_string_equal(c->ns, "ns1");
    assert_string_equal(c->name, "c1");
    assert_string_equal(c->uid, "uid-1");
    assert_int_equal(c->n_devs, 2);
    kdp__claim_dev *d = &c->devs[0];
    assert_string_equal(d->request, "gpu");
    assert_string_equal(d->pool, POOL);
    assert_string_equal(d->device, "gpu-0");
    assert_null(d->share_id);
    assert_false(d->admin_access);
    /* class ones first (in order), then the claim's */
    assert_int_equal(d->n_configs, 3);
    assert_string_equal(d->configs[0], "{\"class\":1}");
    assert_string_equal(d->configs[1], "{\"class\":2}");
    assert_string_equal(d->configs[2], "{\"claim\":1}");
    d = &c->devs[1];
    assert_string_equal(d->request, "big/small");
    assert_string_equal(d->device, "gpu-1");
    assert_string_equal(d->share_id, SHARE);
    assert_int_equal(d->n_consumed, 2);
    assert_string_equal(d->consumed[0].name, "memory");
    assert_string_equal(d->consumed[0].value, "8Gi");
    assert_string_equal(d->consumed[1].name, "example.com/bw");
    assert_true(d->admin_access);
    /* "big" matches the subrequest big/small; "big/other" does not */
    assert_int_equal(d->n_configs, 2);
    assert_string_equal(d->configs[0], "{\"class\":1}");
    assert_string_equal(d->configs[1], "{\"big\":true}");

    kdp__claim *dup = kdp__claim_dup(c);
    assert_non_null(dup);
    assert_int_equal(dup->n_devs, 2);
    assert_string_equal(dup->devs[1].configs[1], "{\"big\":true}");
    assert_string_equal(dup->devs[1].share_id, SHARE);
    assert_string_equal(dup->devs[1].consumed[1].value, "10");
    kdp__claim_free(dup);
    kdp__claim_free(c);

    /* no pool filter: node-b's device too; no UID check */
    c = parse(CLAIM, NULL, NULL, 0, NULL);
    assert_int_equal(c->n_devs, 3);
    assert_string_equal(c->devs[2].device, "gpu-9");
    kdp__claim_free(c);
}

static void test_errors(void **state)
{
    (void)state;
    assert_null(parse(CLAIM, POOL, "uid-2", -ESTALE, "has UID uid-1, not uid-2"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
                      "\"status\":{}}",
                      POOL, "u", -ENODATA, "not allocated"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"}}", POOL,
                      "u", -ENODATA, "not allocated"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"uid\":\"u\"}}", POOL, NULL, -EINVAL,
                      "metadata.namespace"));
    assert_null(parse("[]", POOL, NULL, -EINVAL, "metadata"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
                      "\"status\":{\"allocation\":{\"devices\":{\"results\":{}}}}}",
                      POOL, NULL, -EINVAL, "results is not a list"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
                      "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"driver\":\"" DRV
                      "\",\"pool\":\"" POOL "\",\"device\":7,\"request\":\"r\"}]}}}}",
                      POOL, NULL, -EINVAL, "results[0]"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
                      "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"pool\":\"p\"}]}}}}",
                      POOL, NULL, -EINVAL, "results[0] has no driver"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
                      "\"status\":{\"allocation\":{\"devices\":{\"results\":[],"
                      "\"config\":[{\"opaque\":{\"driver\":\"" DRV "\"}}]}}}}",
                      POOL, NULL, -EINVAL, "config[0].opaque needs driver and parameters"));
    assert_null(parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
                      "\"status\":{\"allocation\":{\"devices\":{\"results\":[],"
                      "\"config\":[{\"requests\":\"x\",\"opaque\":{}}]}}}}",
                      POOL, NULL, -EINVAL, "config[0] is malformed"));
    /* a share ID names CDI devices: a lower-case UUID only */
#define RESULT(extra)                                                                              \
    "{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"                            \
    "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"driver\":\"" DRV                     \
    "\",\"pool\":\"" POOL "\",\"device\":\"d\",\"request\":\"r\"," extra "}]}}}}"
    assert_null(parse(RESULT("\"shareID\":\"../../etc\""), POOL, NULL, -EINVAL,
                      "shareID \"../../etc\" is not a lower-case UUID"));
    assert_null(parse(RESULT("\"shareID\":\"0B6E5F0C-7C1F-4A86-9D3A-1F2B3C4D5E6F\""), POOL, NULL,
                      -EINVAL, "not a lower-case UUID"));
    assert_null(parse(RESULT("\"consumedCapacity\":{\"memory\":\"lots\"}"), POOL, NULL, -EINVAL,
                      "consumedCapacity[memory] is not a capacity name and a quantity"));
    assert_null(parse(RESULT("\"consumedCapacity\":[]"), POOL, NULL, -EINVAL,
                      "consumedCapacity must be an object"));
#undef RESULT
}

static void test_other_driver_only(void **state)
{
    (void)state;
    /* allocated, but nothing of ours: not an error, no device */
    kdp__claim *c =
        parse("{\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
              "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\",\"driver\":"
              "\"x.example.com\",\"pool\":\"p\",\"device\":\"d\"}]}}}}",
              POOL, "u", 0, NULL);
    assert_int_equal(c->n_devs, 0);
    kdp__claim_free(c);
}

static void test_v1beta1_shape(void **state)
{
    (void)state;
    /* v1beta1: the same status.allocation (spec differs: basic requests) */
    kdp__claim *c =
        parse("{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceClaim\","
              "\"metadata\":{\"name\":\"c\",\"namespace\":\"n\",\"uid\":\"u\"},"
              "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\",\"deviceClassName\":\"x\"}]}},"
              "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\",\"driver\":"
              "\"" DRV "\",\"pool\":\"" POOL "\",\"device\":\"d\",\"adminAccess\":null}],"
              "\"config\":[{\"source\":\"FromClaim\",\"requests\":[],\"opaque\":{\"driver\":"
              "\"" DRV "\",\"parameters\":[1,2]}}]}}}}",
              POOL, "u", 0, NULL);
    assert_int_equal(c->n_devs, 1);
    assert_int_equal(c->devs[0].n_configs, 1);
    assert_string_equal(c->devs[0].configs[0], "[1,2]");
    kdp__claim_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filters_and_configs),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_other_driver_only),
        cmocka_unit_test(test_v1beta1_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
