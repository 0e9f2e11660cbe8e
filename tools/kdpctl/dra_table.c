/* SPDX-License-Identifier: MIT */
/*
 * dra_table: the Table (meta.k8s.io/v1) answers of `kdpctl dra apiserver`,
 * for `kubectl get` (which asks for one in its Accept header): the columns
 * kubectl shows for the resource (slices: NAME NODE DRIVER POOL AGE; claims:
 * NAME STATE AGE, and BINDING with -o wide: the binding conditions' state,
 * dra_binding.c; nodes: NAME AGE), each row with the object's metadata
 * (PartialObjectMetadata).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dra_api.h"

bool kd_wants_table(kd_hreq *r)
{
    const char *accept = kd_http_header(r, "Accept");
    return accept && strstr(accept, "as=Table") && strstr(accept, "g=meta.k8s.io");
}

/* "5s", "3m", "2h", "4d" since an RFC 3339 time; "<unknown>" if none. */
static void age(const char *ts, char *buf, size_t cap)
{
    struct tm tm = {0};
    const char *end = ts ? strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
    if (!end) {
        snprintf(buf, cap, "<unknown>");
        return;
    }
    long long s = (long long)difftime(time(NULL), timegm(&tm));
    s = s < 0 ? 0 : s;
    if (s < 120) {
        snprintf(buf, cap, "%llds", s);
    } else if (s < 3600) {
        snprintf(buf, cap, "%lldm", s / 60);
    } else if (s < 86400) {
        snprintf(buf, cap, "%lldh", s / 3600);
    } else {
        snprintf(buf, cap, "%lldd", s / 86400);
    }
}

static const char *str(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(json_object_get(o, a), b);
    return json_is_string(v) ? json_string_value(v) : "";
}

static json_t *column(const char *name, const char *type, const char *format, const char *what,
                      int priority)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", name, "type", type, "format", format,
                     "description", what, "priority", priority);
}

static json_t *columns(kd_kind k)
{
    json_t *c = json_array();
    json_array_append_new(c, column("Name", "string", "name", "Name of the object", 0));
    if (k == KD_SLICE) {
        json_array_append_new(c, column("Node", "string", "", "spec.nodeName", 0));
        json_array_append_new(c, column("Driver", "string", "", "spec.driver", 0));
        json_array_append_new(c, column("Pool", "string", "", "spec.pool.name", 0));
    } else if (k == KD_CLAIM) {
        json_array_append_new(c, column("State", "string", "", "allocated or pending", 0));
    }
    json_array_append_new(c, column("Age", "string", "", "Time since creation", 0));
    if (k == KD_CLAIM) { /* -o wide */
        json_array_append_new(
            c, column("Binding", "string", "", "binding conditions: ready, pending or failed", 1));
    }
    return c;
}

static json_t *row(kd_kind k, const json_t *o)
{
    const json_t *md = json_object_get(o, "metadata");
    char a[32];
    age(json_string_value(json_object_get(md, "creationTimestamp")), a, sizeof(a));
    json_t *cells = json_pack("[s]", str(o, "metadata", "name"));
    if (k == KD_SLICE) {
        const json_t *pool = json_object_get(json_object_get(o, "spec"), "pool");
        const char *pname = json_string_value(json_object_get(pool, "name"));
        json_array_append_new(cells, json_string(str(o, "spec", "nodeName")));
        json_array_append_new(cells, json_string(str(o, "spec", "driver")));
        json_array_append_new(cells, json_string(pname ? pname : ""));
    } else if (k == KD_CLAIM) {
        const json_t *alloc = json_object_get(json_object_get(o, "status"), "allocation");
        json_array_append_new(cells, json_string(alloc ? "allocated" : "pending"));
    }
    json_array_append_new(cells, json_string(a));
    if (k == KD_CLAIM) {
        char text[600];
        (void)kd_binding_state(o, time(NULL), text, sizeof(text));
        json_array_append_new(cells, json_string(text));
    }
    return json_pack("{s:o, s:{s:s, s:s, s:O}}", "cells", cells, "object", "kind",
                     "PartialObjectMetadata", "apiVersion", "meta.k8s.io/v1", "metadata", md);
}

json_t *kd_table_of(kd_kind k, const json_t *items, uint64_t rv, bool with_columns)
{
    char rvs[32];
    snprintf(rvs, sizeof(rvs), "%llu", (unsigned long long)rv);
    json_t *rows = json_array();
    for (size_t i = 0; rows && i < json_array_size(items); i++) {
        json_array_append_new(rows, row(k, json_array_get(items, i)));
    }
    json_t *t = json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", "Table", "apiVersion",
                          "meta.k8s.io/v1", "metadata", "resourceVersion", rvs, "rows", rows);
    if (t && with_columns) {
        json_object_set_new(t, "columnDefinitions", columns(k));
    }
    return t;
}

void kd_reply_table(kd_hreq *r, kd_kind k, const json_t *items, uint64_t rv)
{
    json_t *t = kd_table_of(k, items, rv, true);
    if (!t) {
        kd_status(r, 500, "InternalError", "out of memory");
        return;
    }
    kd_reply_json(r, 200, t);
    json_decref(t);
}
