/* SPDX-License-Identifier: MIT */
/*
 * dra_slice_out: `kdpctl dra apiserver` prints every ResourceSlice as it
 * changes: its pool, generation and slice count, a table of its devices
 * (attributes, capacities, taints, binding conditions, and what sharing
 * adds: the counters a partition consumes, a shared device's request
 * policies) or of its counter sets; --json the same as one event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_api.h"

static void say(const char *text, const char *extra)
{
    kd_say_as("dra-apiserver", text, extra);
}

/* counters {name: {value}} as "name=value ..." */
static void counters_text(kc_buf *b, const json_t *m)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v)
    {
        const char *q = json_string_value(json_object_get(v, "value"));
        kc_buf_printf(b, "%s%s=%s", b->len && b->s[b->len - 1] != ' ' ? " " : "", k, q ? q : "?");
    }
}

/* A request policy: "memory 8Gi (1Gi.. step 1Gi)", "compute 10 (10|25|50)". */
static void policy_text(kc_buf *b, const char *cap, const json_t *p)
{
    const char *def = json_string_value(json_object_get(p, "default"));
    const json_t *r = json_object_get(p, "validRange");
    kc_buf_printf(b, " %s %s", cap, def ? def : "-");
    if (r) {
        const char *mn = json_string_value(json_object_get(r, "min"));
        const char *mx = json_string_value(json_object_get(r, "max"));
        const char *st = json_string_value(json_object_get(r, "step"));
        kc_buf_printf(b, " (%s..%s%s%s)", mn ? mn : "?", mx ? mx : "", st ? " step " : "",
                      st ? st : "");
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(p, "validValues"), i, v)
    {
        const char *q = json_string_value(v);
        kc_buf_printf(b, "%s%s", i ? "|" : " (", q ? q : "?");
    }
    if (json_array_size(json_object_get(p, "validValues"))) {
        kc_buf_puts(b, ")");
    }
}

/* What sharing adds to a device: "card-0: memory=40Gi slices=3" for what
 * it consumes; "shared" and each request policy for a device that allows
 * multiple allocations. */
static void sharing_text(const json_t *d, kc_buf *b)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(d, "consumesCounters"), i, c)
    {
        const char *set = json_string_value(json_object_get(c, "counterSet"));
        kc_buf_printf(b, "%s%s: ", b->len ? "; " : "", set ? set : "?");
        counters_text(b, json_object_get(c, "counters"));
    }
    if (!json_is_true(json_object_get(d, "allowMultipleAllocations"))) {
        return;
    }
    kc_buf_printf(b, "%sshared", b->len ? "; " : "");
    const char *k;
    json_object_foreach(json_object_get(d, "capacity"), k, c)
    {
        const json_t *p = json_object_get(c, "requestPolicy");
        if (p) {
            policy_text(b, k, p);
        }
    }
}

/* A device's binding conditions: "binding: a,b / fail: c, bindsToNode". */
static void binding_text(const json_t *d, kc_buf *b)
{
    static const char *const lists[2][2] = {{"bindingConditions", "binding"},
                                            {"bindingFailureConditions", "fail"}};
    for (size_t l = 0; l < 2; l++) {
        const json_t *a = json_object_get(d, lists[l][0]);
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v)
        {
            const char *c = json_string_value(v);
            if (i == 0) {
                kc_buf_printf(b, "%s%s: ", b->len ? " / " : "", lists[l][1]);
            }
            kc_buf_printf(b, "%s%s", i ? "," : "", c ? c : "?");
        }
    }
    if (json_is_true(json_object_get(d, "bindsToNode"))) {
        kc_buf_printf(b, "%sbindsToNode", b->len ? ", " : "");
    }
}

static void attr_text(kc_buf *b, const char *key, const json_t *v)
{
    json_t *x;
    kc_buf_printf(b, "%s%s=", b->len ? " " : "", key);
    if ((x = json_object_get(v, "string")) || (x = json_object_get(v, "version"))) {
        kc_buf_puts(b, json_string_value(x) ? json_string_value(x) : "?");
    } else if ((x = json_object_get(v, "int"))) {
        kc_buf_printf(b, "%lld", (long long)json_integer_value(x));
    } else if ((x = json_object_get(v, "bool"))) {
        kc_buf_puts(b, json_is_true(x) ? "true" : "false");
    } else if ((x = json_object_get(v, "value"))) { /* a capacity */
        kc_buf_puts(b, json_is_string(x) ? json_string_value(x) : "?");
    } else {
        kc_buf_puts(b, "?");
    }
}

/* A device's attributes and capacities as "k=v k=v", its taints as
 * kubectl shows a node's ("key=value:Effect key:Effect"). */
static void device_texts(const json_t *d, kc_buf *at, kc_buf *cap, kc_buf *tn)
{
    const char *key;
    json_t *v;
    size_t i;
    json_array_foreach(json_object_get(d, "taints"), i, v)
    {
        const char *val = json_string_value(json_object_get(v, "value"));
        const char *k = json_string_value(json_object_get(v, "key"));
        const char *e = json_string_value(json_object_get(v, "effect"));
        kc_buf_printf(tn, "%s%s%s%s:%s", tn->len ? " " : "", k ? k : "?", val && *val ? "=" : "",
                      val && *val ? val : "", e ? e : "?");
    }
    json_object_foreach(json_object_get(d, "attributes"), key, v)
    {
        attr_text(at, key, v);
    }
    json_object_foreach(json_object_get(d, "capacity"), key, v)
    {
        attr_text(cap, key, v);
    }
}

enum { ROW_TEXTS = 5 };

/* A device's row: its name, attributes, capacities, taints, sharing and
 * binding conditions, the texts in b (row_free them). */
static void device_row(const json_t *d, const char *row[ROW_TEXTS + 1], kc_buf b[ROW_TEXTS])
{
    memset(b, 0, ROW_TEXTS * sizeof(*b));
    device_texts(d, &b[0], &b[1], &b[2]);
    sharing_text(d, &b[3]);
    binding_text(d, &b[4]);
    const char *dn = json_string_value(json_object_get(d, "name"));
    row[0] = dn ? dn : "?";
    for (size_t k = 0; k < ROW_TEXTS; k++) {
        row[k + 1] = b[k].len ? b[k].s : "";
    }
}

static void row_free(kc_buf b[ROW_TEXTS])
{
    for (size_t k = 0; k < ROW_TEXTS; k++) {
        kc_buf_free(&b[k]);
    }
}

/* What a slice line says. */
typedef struct slice_view {
    const char *type, *name, *driver, *node, *pool, *rv;
    long long gen, count;
    const json_t *devs;
    const json_t *sets; /* sharedCounters */
} slice_view;

static void slice_json(const slice_view *v)
{
    kc_json j;
    kd_json(&j, "slice");
    kc_json_str(&j, "type", v->type);
    kc_json_str(&j, "name", v->name);
    kc_json_str(&j, "driver", v->driver);
    kc_json_str(&j, "node", v->node);
    kc_json_str(&j, "pool", v->pool);
    kc_json_int(&j, "generation", v->gen);
    kc_json_int(&j, "slice_count", v->count);
    kc_json_str(&j, "resource_version", v->rv);
    kc_json_arr(&j, "devices");
    for (size_t i = 0; i < json_array_size(v->devs); i++) {
        const json_t *d = json_array_get(v->devs, i);
        const char *row[ROW_TEXTS + 1];
        kc_buf b[ROW_TEXTS];
        device_row(d, row, b);
        kc_json_obj(&j, NULL);
        kc_json_str(&j, "name", json_string_value(json_object_get(d, "name")));
        kc_json_str(&j, "attributes", row[1]);
        kc_json_str(&j, "capacity", row[2]);
        kc_json_str(&j, "taints", row[3]);
        kc_json_str(&j, "sharing", row[4]);
        kc_json_str(&j, "binding", row[5]);
        kc_json_end(&j);
        row_free(b);
    }
    kc_json_end(&j);
    kc_json_arr(&j, "counter_sets");
    for (size_t i = 0; i < json_array_size(v->sets); i++) {
        const json_t *s = json_array_get(v->sets, i);
        kc_buf ct = {0};
        counters_text(&ct, json_object_get(s, "counters"));
        kc_json_obj(&j, NULL);
        kc_json_str(&j, "name", json_string_value(json_object_get(s, "name")));
        kc_json_str(&j, "counters", ct.len ? ct.s : "");
        kc_json_end(&j);
        kc_buf_free(&ct);
    }
    kc_json_emit(&j);
}

/* The counter sets of a slice as a table. */
static void sets_table(const json_t *sets, kc_table *t)
{
    kc_table_init(t, 2);
    const char *hdr[2] = {"COUNTER SET", "COUNTERS"};
    kc_table_row(t, hdr);
    for (size_t i = 0; i < json_array_size(sets); i++) {
        const json_t *s = json_array_get(sets, i);
        kc_buf ct = {0};
        counters_text(&ct, json_object_get(s, "counters"));
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *row[2] = {name ? name : "?", ct.len ? ct.s : ""};
        kc_table_row(t, row);
        kc_buf_free(&ct);
    }
}

/* The devices of a slice as a table (SHARING and BINDING only when one
 * has it). */
static void devices_table(const json_t *devs, kc_table *t)
{
    size_t n = json_array_size(devs);
    bool sharing = false;
    bool binding = false;
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(devs, i);
        sharing |= json_object_get(d, "consumesCounters") ||
                   json_is_true(json_object_get(d, "allowMultipleAllocations"));
        binding |= json_object_get(d, "bindingConditions") ||
                   json_object_get(d, "bindingFailureConditions") ||
                   json_is_true(json_object_get(d, "bindsToNode"));
    }
    size_t cols = 4 + sharing + binding;
    kc_table_init(t, cols);
    const char *hdr[ROW_TEXTS + 1] = {"DEVICE", "ATTRIBUTES", "CAPACITY", "TAINTS"};
    hdr[4] = sharing ? "SHARING" : "BINDING";
    hdr[5] = "BINDING";
    kc_table_row(t, hdr);
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(devs, i);
        const char *row[ROW_TEXTS + 1];
        kc_buf b[ROW_TEXTS];
        device_row(d, row, b);
        if (!sharing) {
            row[4] = row[5]; /* BINDING in SHARING's place */
        }
        kc_table_row(t, row);
        row_free(b);
    }
}

static void slice_text(const slice_view *v)
{
    size_t n = json_array_size(v->devs);
    size_t ns = json_array_size(v->sets);
    bool gone = strcmp(v->type, "DELETED") == 0;
    kc_buf head = {0};
    kc_buf_printf(
        &head, "slice %s %s: driver %s, node %s, pool %s generation %lld (%lld slice%s), ", v->type,
        v->name ? v->name : "?", v->driver ? v->driver : "?", v->node ? v->node : "-",
        v->pool ? v->pool : "?", v->gen, v->count, v->count == 1 ? "" : "s");
    if (ns) {
        kc_buf_printf(&head, "%zu counter set%s", ns, ns == 1 ? "" : "s");
    } else {
        kc_buf_printf(&head, "%zu device%s", n, n == 1 ? "" : "s");
    }
    kc_buf out = {0};
    if ((n || ns) && !gone) { /* a deleted slice's rows are not printed */
        kc_table t;
        if (ns) {
            sets_table(v->sets, &t);
        } else {
            devices_table(v->devs, &t);
        }
        kc_table_render(&t, &out, "    ");
        kc_table_free(&t);
    }
    say(head.failed ? "slice" : head.s, out.len ? out.s : NULL);
    kc_buf_free(&out);
    kc_buf_free(&head);
}

void kd_print_slice(kd_api *a, const char *type, const json_t *o)
{
    const json_t *md = json_object_get(o, "metadata");
    const json_t *spec = json_object_get(o, "spec");
    const json_t *pool = json_object_get(spec, "pool");
    slice_view v = {
        .type = type,
        .name = json_string_value(json_object_get(md, "name")),
        .driver = json_string_value(json_object_get(spec, "driver")),
        .node = json_string_value(json_object_get(spec, "nodeName")),
        .pool = json_string_value(json_object_get(pool, "name")),
        .rv = json_string_value(json_object_get(md, "resourceVersion")),
        .gen = json_integer_value(json_object_get(pool, "generation")),
        .count = json_integer_value(json_object_get(pool, "resourceSliceCount")),
        .devs = json_object_get(spec, "devices"),
        .sets = json_object_get(spec, "sharedCounters"),
    };
    if (a->o->json) {
        slice_json(&v);
    } else {
        slice_text(&v);
    }
}
