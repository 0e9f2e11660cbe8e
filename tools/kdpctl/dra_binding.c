/* SPDX-License-Identifier: MIT */
/*
 * dra_binding: binding conditions (KEP-5007) on a claim, as the scheduler
 * handles them. Allocating copies a device's bindingConditions and
 * bindingFailureConditions into its result; PreBind then waits until, for
 * each result with bindingConditions, the first status.devices entry of the
 * same driver, pool and device (shareID not compared) has each of those
 * types with status True. One of the failure types True fails the binding,
 * no entry is not ready yet, and a claim not ready 600 s after its
 * allocationTimestamp fails (the dynamicresources plugin's
 * isClaimReadyForBinding and isClaimTimeout). `kdpctl dra apiserver` prints
 * the state of each claim that has binding conditions as it changes.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dra_api.h"

#define BINDING_TIMEOUT_S 600

static bool same(const json_t *a, const json_t *b, const char *key)
{
    const char *x = json_string_value(json_object_get(a, key));
    const char *y = json_string_value(json_object_get(b, key));
    return x && y && strcmp(x, y) == 0;
}

/* The first status.devices entry of r's driver, pool and device. */
static const json_t *status_entry(const json_t *devices, const json_t *r)
{
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d)
    {
        if (same(d, r, "driver") && same(d, r, "pool") && same(d, r, "device")) {
            return d;
        }
    }
    return NULL;
}

/* The entry's first condition of that type (NULL: none). */
static const json_t *condition(const json_t *entry, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(entry, "conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0) {
            return c;
        }
    }
    return NULL;
}

static bool is_true(const json_t *c)
{
    const char *s = json_string_value(json_object_get(c, "status"));
    return s && strcmp(s, "True") == 0;
}

/* Appends ",type" (or "type" first) to the waiting list in w. */
static void wait_for(char *w, size_t cap, const char *type)
{
    size_t n = strlen(w);
    if (n + 1 < cap) {
        snprintf(w + n, cap - n, "%s%s", n ? "," : "", type);
    }
}

/* One result: FAILED (text said) or PENDING with its types added to w, or
 * READY. */
static kd_bind_state result_state(const json_t *r, const json_t *devices, char *w, size_t wcap,
                                  char *text, size_t cap)
{
    const json_t *conds = json_object_get(r, "bindingConditions");
    const json_t *entry = status_entry(devices, r);
    size_t i;
    json_t *t;
    if (entry) {
        json_array_foreach(json_object_get(r, "bindingFailureConditions"), i, t)
        {
            const char *type = json_string_value(t);
            const json_t *c = type ? condition(entry, type) : NULL;
            if (c && is_true(c)) {
                const char *reason = json_string_value(json_object_get(c, "reason"));
                snprintf(text, cap, "failed: %s %s", type, reason ? reason : "");
                return KD_BIND_FAILED;
            }
        }
    }
    kd_bind_state s = KD_BIND_READY;
    json_array_foreach(conds, i, t)
    {
        const char *type = json_string_value(t);
        if (type && !(entry && is_true(condition(entry, type)))) {
            wait_for(w, wcap, type);
            s = KD_BIND_PENDING;
        }
    }
    return s;
}

static bool timed_out(const json_t *alloc, time_t now)
{
    const char *ts = json_string_value(json_object_get(alloc, "allocationTimestamp"));
    struct tm tm = {0};
    if (!ts || !strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
        return false;
    }
    return timegm(&tm) + BINDING_TIMEOUT_S < now;
}

kd_bind_state kd_binding_state(const json_t *claim, time_t now, char *text, size_t cap)
{
    const json_t *st = json_object_get(claim, "status");
    const json_t *alloc = json_object_get(st, "allocation");
    if (!alloc) {
        snprintf(text, cap, "pending: not allocated");
        return KD_BIND_PENDING;
    }
    char w[512] = "";
    kd_bind_state s = KD_BIND_READY;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(alloc, "devices"), "results"), i, r)
    {
        if (json_array_size(json_object_get(r, "bindingConditions")) == 0) {
            continue;
        }
        kd_bind_state rs = result_state(r, json_object_get(st, "devices"), w, sizeof(w), text, cap);
        if (rs == KD_BIND_FAILED) {
            return rs;
        }
        s = rs == KD_BIND_PENDING ? rs : s;
    }
    if (s == KD_BIND_READY) {
        snprintf(text, cap, "ready");
    } else if (timed_out(alloc, now)) {
        snprintf(text, cap, "failed: timeout");
        s = KD_BIND_FAILED;
    } else {
        snprintf(text, cap, "pending: waiting for %s", w);
    }
    return s;
}

bool kd_binding_copy(json_t *result, const json_t *device)
{
    static const char *const keys[] = {"bindingConditions", "bindingFailureConditions"};
    for (size_t i = 0; i < 2; i++) {
        json_t *l = json_object_get(device, keys[i]);
        if (json_array_size(l)) {
            json_object_set_new(result, keys[i], json_deep_copy(l));
        }
    }
    return json_array_size(json_object_get(result, "bindingConditions")) > 0;
}

bool kd_binding_any(const json_t *claim)
{
    const json_t *alloc = json_object_get(json_object_get(claim, "status"), "allocation");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(alloc, "devices"), "results"), i, r)
    {
        if (json_array_size(json_object_get(r, "bindingConditions"))) {
            return true;
        }
    }
    return false;
}

void kd_print_claim_binding(const kd_api *a, const char *type, const json_t *o)
{
    if (strcmp(type, "DELETED") == 0 || !kd_binding_any(o)) {
        return;
    }
    const json_t *md = json_object_get(o, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    char text[600];
    kd_bind_state s = kd_binding_state(o, time(NULL), text, sizeof(text));
    if (a->o->json) {
        kc_json j;
        kd_json(&j, "claim");
        kc_json_str(&j, "type", type);
        kc_json_str(&j, "namespace", ns);
        kc_json_str(&j, "name", name);
        kc_json_str(&j, "binding_state", kd_binding_state_name(s));
        kc_json_str(&j, "binding", text);
        kc_json_emit(&j);
        return;
    }
    char line[1200];
    snprintf(line, sizeof(line), "claim %s %s/%s: binding %s", type, ns ? ns : "?",
             name ? name : "?", text);
    kd_say_as("dra-apiserver", line, NULL);
}

const char *kd_binding_state_name(kd_bind_state s)
{
    return s == KD_BIND_READY ? "ready" : s == KD_BIND_FAILED ? "failed" : "pending";
}
