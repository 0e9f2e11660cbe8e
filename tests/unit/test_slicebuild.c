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

#include "base/k8snames.h"
#include "k8s/slicebuild.h"
#include "k8s/slicerec.h"

static void test_count(void **state)
{
    (void)state;
    assert_int_equal(kdp__sr_count(0), 1); /* at least one slice, even empty */
    assert_int_equal(kdp__sr_count(1), 1);
    assert_int_equal(kdp__sr_count(128), 1);
    assert_int_equal(kdp__sr_count(129), 2);
    assert_int_equal(kdp__sr_count(300), 3);
    assert_int_equal(kdp__sr_count(384), 3);
    assert_int_equal(kdp__sr_count(385), 4);
}

static void test_generate_name(void **state)
{
    (void)state;
    char out[64];
    kdp__slicebuild_generate_name("node-a", "gpu.example.com", out, sizeof(out));
    assert_string_equal(out, "node-a-gpu-example-com-");
    /* long ones are cut to 58, still a valid prefix */
    char node[254];
    memset(node, 'n', 200);
    node[200] = '\0';
    kdp__slicebuild_generate_name(node, "gpu.example.com", out, sizeof(out));
    assert_int_equal(strlen(out), 58);
    assert_int_equal(out[57], '-');
    char full[80];
    snprintf(full, sizeof(full), "%sabcde", out);
    assert_int_equal(kdp__k8snames_dns_subdomain(full, NULL), 0);
    kdp__slicebuild_generate_name("a.b.c", "d", out, sizeof(out));
    assert_string_equal(out, "a-b-c-d-");
}

static void test_device_fields(void **state)
{
    (void)state;
    kdp_dra_attr attrs[] = {
        {.name = "model", .type = KDP_DRA_ATTR_STRING, .string_value = "X100"},
        {.name = "cores", .type = KDP_DRA_ATTR_INT, .int_value = 4096},
        {.name = "ecc", .type = KDP_DRA_ATTR_BOOL, .bool_value = true},
        {.name = "driverVersion", .type = KDP_DRA_ATTR_VERSION, .string_value = "1.2.3-rc.1"},
        {.name = "resource.kubernetes.io/pcieRoot",
         .type = KDP_DRA_ATTR_STRING,
         .string_value = "pci0000:00"},
        /* left out, each with a log line: */
        {.name = "bad-name", .type = KDP_DRA_ATTR_INT, .int_value = 1},
        {.name = "model", .type = KDP_DRA_ATTR_STRING, .string_value = "twice"},
        {.name = "v", .type = KDP_DRA_ATTR_VERSION, .string_value = "1.2"},
        {.name = "s",
         .type = KDP_DRA_ATTR_STRING,
         .string_value = "0123456789012345678901234567890123456789012345678901234567890123456789"},
    };
    const kdp__slice_cap caps[] = {
        {"memory", "80Gi", NULL}, {"bad name", "1", NULL}, {"power", "lots", NULL}};
    kdp__slice_dev d = {.name = "gpu-0",
                        .attrs = attrs,
                        .n_attrs = sizeof(attrs) / sizeof(attrs[0]),
                        .caps = caps,
                        .n_caps = 3};
    char why[256];
    json_t *j = kdp__slicebuild_device(&d, why, sizeof(why));
    assert_non_null(j);
    char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(
        text, "{\"attributes\":{\"cores\":{\"int\":4096},\"driverVersion\":{\"version\":\"1.2.3-rc."
              "1\"},\"ecc\":{\"bool\":true},\"model\":{\"string\":\"X100\"},\"resource."
              "kubernetes.io/pcieRoot\":{\"string\":\"pci0000:00\"}},\"capacity\":{\"memory\":{"
              "\"value\":\"80Gi\"}},\"name\":\"gpu-0\"}");
    free(text);

    /* v1beta1: under "basic" */
    json_t *b = kdp__slicebuild_shape("v1beta1", j);
    text = json_dumps(b, JSON_SORT_KEYS | JSON_COMPACT);
    assert_non_null(strstr(text, "\"basic\":{\"attributes\":{\"cores\""));
    assert_non_null(strstr(text, "\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}}"));
    assert_null(json_object_get(b, "attributes"));
    free(text);
    json_decref(b);
    json_t *v = kdp__slicebuild_shape("v1beta2", j);
    assert_ptr_equal(v, j);
    json_decref(v);
    json_decref(j);

    /* a bad name leaves the device out */
    kdp__slice_dev bad = {.name = "GPU_0"};
    assert_null(kdp__slicebuild_device(&bad, why, sizeof(why)));
    assert_non_null(strstr(why, "GPU_0"));

    /* at most 32 fields */
    kdp_dra_attr many[40];
    char names[40][8];
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "a%d", i);
        many[i] = (kdp_dra_attr){.name = names[i], .type = KDP_DRA_ATTR_INT, .int_value = i};
    }
    kdp__slice_dev m = {.name = "m", .attrs = many, .n_attrs = 40};
    j = kdp__slicebuild_device(&m, why, sizeof(why));
    assert_int_equal(json_object_size(json_object_get(j, "attributes")), 32);
    json_decref(j);
}

static void test_object(void **state)
{
    (void)state;
    kdp__slice_dev d = {.name = "d0"};
    char why[100];
    json_t *dev = kdp__slicebuild_device(&d, why, sizeof(why));
    json_t *devs[] = {dev};
    for (int k = 0; k < 3; k++) {
        const char *version = k == 0 ? "v1" : k == 1 ? "v1beta2" : "v1beta1";
        json_t *o = kdp__slicebuild_object(version, "gpu.example.com", "node-a", "uid-n", 7, 3,
                                           false, devs, 1, NULL, NULL);
        assert_non_null(o);
        char api[64];
        snprintf(api, sizeof(api), "resource.k8s.io/%s", version);
        assert_string_equal(json_string_value(json_object_get(o, "apiVersion")), api);
        assert_string_equal(json_string_value(json_object_get(o, "kind")), "ResourceSlice");
        json_t *meta = json_object_get(o, "metadata");
        assert_string_equal(json_string_value(json_object_get(meta, "generateName")),
                            "node-a-gpu-example-com-");
        assert_null(json_object_get(meta, "name"));
        json_t *owner = json_array_get(json_object_get(meta, "ownerReferences"), 0);
        assert_string_equal(json_string_value(json_object_get(owner, "kind")), "Node");
        assert_string_equal(json_string_value(json_object_get(owner, "apiVersion")), "v1");
        assert_string_equal(json_string_value(json_object_get(owner, "name")), "node-a");
        assert_string_equal(json_string_value(json_object_get(owner, "uid")), "uid-n");
        assert_true(json_is_true(json_object_get(owner, "controller")));
        json_t *spec = json_object_get(o, "spec");
        assert_string_equal(json_string_value(json_object_get(spec, "driver")), "gpu.example.com");
        assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "node-a");
        json_t *pool = json_object_get(spec, "pool");
        assert_string_equal(json_string_value(json_object_get(pool, "name")), "node-a");
        assert_int_equal(json_integer_value(json_object_get(pool, "generation")), 7);
        assert_int_equal(json_integer_value(json_object_get(pool, "resourceSliceCount")), 3);
        json_t *d0 = json_array_get(json_object_get(spec, "devices"), 0);
        assert_string_equal(json_string_value(json_object_get(d0, "name")), "d0");
        if (k == 2) {
            assert_non_null(json_object_get(d0, "basic"));
        } else {
            assert_null(json_object_get(d0, "basic"));
        }
        json_decref(o);
    }
    /* an update names the slice and its resourceVersion */
    json_t *o = kdp__slicebuild_object("v1", "gpu.example.com", "node-a", "uid-n", 8, 1, false,
                                       devs, 1, "node-a-gpu-example-com-x1y2z", "42");
    json_t *meta = json_object_get(o, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "name")),
                        "node-a-gpu-example-com-x1y2z");
    assert_string_equal(json_string_value(json_object_get(meta, "resourceVersion")), "42");
    assert_null(json_object_get(meta, "generateName"));
    json_decref(o);
    /* an empty pool is one slice with no device */
    o = kdp__slicebuild_object("v1", "gpu.example.com", "node-a", "uid-n", 1, 1, false, NULL, 0,
                               NULL, NULL);
    assert_int_equal(json_array_size(json_object_get(json_object_get(o, "spec"), "devices")), 0);
    json_decref(o);
    json_decref(dev);
}

/* Taints: the API's shape (timeAdded in RFC 3339, UTC), bad ones left
 * out, at most 16, under "basic" for v1beta1; the chunks of a pool with a
 * tainted device hold 64 devices, not 128. */
static void test_taints(void **state)
{
    (void)state;
    kdp__slice_taint t[] = {
        {.key = "gpu.example.com/unhealthy",
         .value = "health-check-failed",
         .effect = "NoSchedule",
         .time_added = 1795900000},
        {.key = "maintenance", .effect = "NoExecute"},
        {.key = "bad key", .effect = "NoSchedule"},
        {.key = "x", .effect = "Sometimes"},
        {.key = "y", .value = "not ok!", .effect = "NoSchedule"},
    };
    kdp__slice_dev d = {.name = "gpu-0", .taints = t, .n_taints = 5};
    char why[100];
    json_t *j = kdp__slicebuild_device(&d, why, sizeof(why));
    json_t *ts = json_object_get(j, "taints");
    assert_int_equal(json_array_size(ts), 2);
    json_t *t0 = json_array_get(ts, 0);
    assert_string_equal(json_string_value(json_object_get(t0, "key")), "gpu.example.com/unhealthy");
    assert_string_equal(json_string_value(json_object_get(t0, "value")), "health-check-failed");
    assert_string_equal(json_string_value(json_object_get(t0, "effect")), "NoSchedule");
    assert_string_equal(json_string_value(json_object_get(t0, "timeAdded")),
                        "2026-11-28T21:06:40Z");
    json_t *t1 = json_array_get(ts, 1);
    assert_null(json_object_get(t1, "value"));
    assert_null(json_object_get(t1, "timeAdded")); /* the API server's now */
    json_t *b = kdp__slicebuild_shape("v1beta1", j);
    assert_int_equal(json_array_size(json_object_get(json_object_get(b, "basic"), "taints")), 2);
    assert_null(json_object_get(b, "taints"));
    json_decref(b);
    /* at most 16 */
    kdp__slice_taint many[20];
    char keys[20][8];
    for (int i = 0; i < 20; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        many[i] = (kdp__slice_taint){.key = keys[i], .effect = "NoSchedule"};
    }
    kdp__slice_dev m = {.name = "m", .taints = many, .n_taints = 20};
    json_t *jm = kdp__slicebuild_device(&m, why, sizeof(why));
    assert_int_equal(json_array_size(json_object_get(jm, "taints")), 16);
    json_decref(jm);

    /* chunks: 200 devices without taints take 2 slices of 128 and 72; with
     * a tainted device as the 101st, its slice begins with it and holds 64 */
    json_t *devs[200];
    for (int i = 0; i < 200; i++) {
        char name[16];
        snprintf(name, sizeof(name), "d%03d", i);
        kdp__slice_dev x = {.name = name};
        devs[i] = i == 100 ? json_incref(j) : kdp__slicebuild_device(&x, why, sizeof(why));
    }
    size_t starts[200 / KDP__SR_MAX_DEVICES_TAINTED + 2];
    json_t *plain[200];
    memcpy(plain, devs, sizeof(plain));
    plain[100] = devs[99];
    assert_int_equal(kdp__sr_chunks(plain, 200, starts), 2);
    assert_int_equal(starts[1], 128);
    assert_int_equal(starts[2], 200);
    size_t k = kdp__sr_chunks(devs, 200, starts);
    assert_int_equal(starts[0], 0);
    assert_int_equal(starts[1], 100); /* untainted: up to 128, so far 100 */
    assert_int_equal(starts[2], 164); /* the tainted one and 63 more: 64 */
    assert_int_equal(starts[3], 200);
    assert_int_equal(k, 3);
    assert_int_equal(kdp__sr_chunks(devs, 0, starts), 1); /* one empty slice */
    for (int i = 0; i < 200; i++) {
        json_decref(devs[i]);
    }
    json_decref(j);
}

/* Binding conditions (KEP-5007): bindsToNode only when true, the lists
 * only when set, in the v1 shape and under "basic" for v1beta1; a bad pair
 * left out (bindsToNode kept); they do not lower the 128 devices a slice
 * holds (only taints and consumesCounters do). */
static void test_binding(void **state)
{
    (void)state;
    const char *c[] = {"example.com/attached", "Ready"};
    const char *f[] = {"example.com/failed"};
    kdp__slice_dev d = {.name = "nic-0",
                        .bind_conds = c,
                        .n_bind_conds = 2,
                        .bind_fails = f,
                        .n_bind_fails = 1,
                        .binds_to_node = true};
    char why[100];
    json_t *j = kdp__slicebuild_device(&d, why, sizeof(why));
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text, "{\"bindingConditions\":[\"example.com/attached\",\"Ready\"],"
                              "\"bindingFailureConditions\":[\"example.com/failed\"],"
                              "\"bindsToNode\":true,\"name\":\"nic-0\"}");
    free(text);
    /* v1beta2 as v1; v1beta1: BasicDevice fields */
    json_t *b2 = kdp__slicebuild_shape("v1beta2", j);
    assert_true(json_equal(b2, j));
    json_decref(b2);
    json_t *b1 = kdp__slicebuild_shape("v1beta1", j);
    text = json_dumps(b1, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text, "{\"basic\":{\"bindingConditions\":[\"example.com/attached\","
                              "\"Ready\"],\"bindingFailureConditions\":[\"example.com/"
                              "failed\"],\"bindsToNode\":true},\"name\":\"nic-0\"}");
    free(text);
    json_decref(b1);
    /* none: no key at all */
    kdp__slice_dev plain = {.name = "nic-1"};
    json_t *p = kdp__slicebuild_device(&plain, why, sizeof(why));
    assert_int_equal(json_object_size(p), 1);
    json_decref(p);
    /* a bad pair (one list without the other, an overlap) left out;
     * bindsToNode alone is fine */
    kdp__slice_dev half = {
        .name = "nic-2", .bind_conds = c, .n_bind_conds = 2, .binds_to_node = true};
    json_t *h = kdp__slicebuild_device(&half, why, sizeof(why));
    assert_non_null(h);
    assert_null(json_object_get(h, "bindingConditions"));
    assert_true(json_is_true(json_object_get(h, "bindsToNode")));
    json_decref(h);
    const char *overlap[] = {"Ready"};
    kdp__slice_dev ov = {.name = "nic-3",
                         .bind_conds = c,
                         .n_bind_conds = 2,
                         .bind_fails = overlap,
                         .n_bind_fails = 1};
    json_t *o = kdp__slicebuild_device(&ov, why, sizeof(why));
    assert_int_equal(json_object_size(o), 1);
    json_decref(o);
    /* 200 devices with binding conditions: 128 and 72 */
    json_t *devs[200];
    for (int i = 0; i < 200; i++) {
        devs[i] = j;
    }
    size_t starts[4];
    assert_int_equal(kdp__sr_chunks(devs, 200, starts), 2);
    assert_int_equal(starts[1], 128);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count),         cmocka_unit_test(test_generate_name),
        cmocka_unit_test(test_device_fields), cmocka_unit_test(test_object),
        cmocka_unit_test(test_taints),        cmocka_unit_test(test_binding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
