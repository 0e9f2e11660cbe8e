/* SPDX-License-Identifier: MIT */
/*
 * dra_check_share: the checks of `kdpctl dra apiserver` on what sharing
 * adds to a ResourceSlice (Kubernetes 1.35-1.37): spec.sharedCounters (at
 * most 8 sets, not beside devices), a device's consumesCounters and the
 * request policies of its capacities (only with allowMultipleAllocations).
 * The rules are the library's own (src/k8s/sharecheck, which the describe
 * calls use): the JSON is read into its C types and the field it names is
 * put under the slice's path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_check.h"
#include "k8s/sharecheck.h"

/* The reason of the last failed check (a kdp__share_err's). */
static char last_why[sizeof(((kdp__share_err *)0)->why)];

/* A quantity's text: a string as it is, a JSON number written out. */
static const char *qty_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v)) {
        return json_string_value(v);
    }
    if (json_is_integer(v)) {
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    return NULL;
}

/* counters {name: {value}} as kdp_dra_quantity (names and values borrowed;
 * numbers written into bufs). Returns how many (at most cap). */
static size_t counters_of(const json_t *m, kdp_dra_quantity *out, char (*bufs)[32], size_t cap)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v)
    {
        if (n == cap) {
            break;
        }
        out[n] = (kdp_dra_quantity){k, qty_text(json_object_get(v, "value"), bufs[n], 32)};
        n++;
    }
    return n;
}

static const char *fail(const kdp__share_err *e, const char *prefix, char *field, size_t cap,
                        const char **detail)
{
    snprintf(field, cap, "%s%s%s", prefix, e->field[0] ? "." : "", e->field);
    snprintf(last_why, sizeof(last_why), "%s", e->why);
    *detail = last_why;
    return field;
}

/* More counters than a set holds: the API's error before any other. */
static const char *too_many(const json_t *m, const char *prefix, char *field, size_t cap,
                            const char **detail)
{
    if (json_object_size(m) <= KDP_DRA_MAX_COUNTERS) {
        return NULL;
    }
    snprintf(field, cap, "%s.counters", prefix);
    *detail = "Too many: must have at most 32 items";
    return field;
}

const char *kd_check_shared_counters(const json_t *spec, char *field, size_t cap,
                                     const char **detail)
{
    const json_t *sets = json_object_get(spec, "sharedCounters");
    if (!sets) {
        return NULL;
    }
    if (json_object_get(spec, "devices")) {
        *detail = "Invalid value: only one of `sharedCounters` or `devices` is allowed";
        return "spec";
    }
    if (!json_is_array(sets) || json_array_size(sets) > KDP_DRA_MAX_SETS_PER_SLICE) {
        *detail = json_is_array(sets) ? "Too many: must have at most 8 items"
                                      : "Invalid value: must be a list";
        return "spec.sharedCounters";
    }
    kdp_dra_counter_set cs[KDP_DRA_MAX_SETS_PER_SLICE];
    kdp_dra_quantity q[KDP_DRA_MAX_SETS_PER_SLICE][KDP_DRA_MAX_COUNTERS];
    char bufs[KDP_DRA_MAX_SETS_PER_SLICE][KDP_DRA_MAX_COUNTERS][32];
    for (size_t i = 0; i < json_array_size(sets); i++) {
        const json_t *s = json_array_get(sets, i);
        const json_t *m = json_object_get(s, "counters");
        char prefix[48];
        snprintf(prefix, sizeof(prefix), "spec.sharedCounters[%zu]", i);
        if (too_many(m, prefix, field, cap, detail)) {
            return field;
        }
        cs[i] = (kdp_dra_counter_set){json_string_value(json_object_get(s, "name")), q[i],
                                      counters_of(m, q[i], bufs[i], KDP_DRA_MAX_COUNTERS)};
    }
    kdp__share_err e;
    if (kdp__share_check_sets(cs, json_array_size(sets), &e) < 0) {
        return fail(&e, "spec", field, cap, detail);
    }
    return NULL;
}

static const char *check_consumes(const json_t *cc, size_t i, char *field, size_t cap,
                                  const char **detail)
{
    if (!cc) {
        return NULL;
    }
    snprintf(field, cap, "spec.devices[%zu].consumesCounters", i);
    if (!json_is_array(cc) || json_array_size(cc) > KDP_DRA_MAX_CONSUMPTIONS) {
        *detail = json_is_array(cc) ? "Too many: must have at most 2 items"
                                    : "Invalid value: must be a list";
        return field;
    }
    for (size_t k = 0; k < json_array_size(cc); k++) {
        const json_t *c = json_array_get(cc, k);
        const json_t *m = json_object_get(c, "counters");
        const json_t *g = json_object_get(c, "compatibilityGroups");
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "spec.devices[%zu].consumesCounters[%zu]", i, k);
        if (too_many(m, prefix, field, cap, detail)) {
            return field;
        }
        kdp_dra_quantity q[KDP_DRA_MAX_COUNTERS];
        char bufs[KDP_DRA_MAX_COUNTERS][32];
        const char *groups[KDP_DRA_MAX_COMPAT_GROUPS + 1] = {NULL};
        size_t n_groups = json_array_size(g);
        for (size_t j = 0; j < n_groups && j <= KDP_DRA_MAX_COMPAT_GROUPS; j++) {
            groups[j] = json_string_value(json_array_get(g, j));
        }
        kdp_dra_consumption kc = {
            .counter_set = json_string_value(json_object_get(c, "counterSet")),
            .counters = q,
            .n_counters = counters_of(m, q, bufs, KDP_DRA_MAX_COUNTERS),
            .compatibility_groups = groups,
            .n_compatibility_groups = n_groups,
        };
        kdp__share_err e;
        int r = kdp__share_check_consumption(&kc, &e);
        const char *prev =
            k ? json_string_value(json_object_get(json_array_get(cc, 0), "counterSet")) : NULL;
        if (r == 0 && prev && kc.counter_set && strcmp(prev, kc.counter_set) == 0) {
            snprintf(e.field, sizeof(e.field), "counterSet");
            snprintf(e.why, sizeof(e.why), "Duplicate value: \"%s\"", prev);
            r = -1;
        }
        if (r < 0) {
            return fail(&e, prefix, field, cap, detail);
        }
    }
    return NULL;
}

/* A string array of a policy (validValues) as C strings, numbers written
 * into bufs. */
static size_t values_of(const json_t *a, const char **out, char (*bufs)[32], size_t cap)
{
    size_t n = json_array_size(a);
    for (size_t k = 0; k < n && k < cap; k++) {
        out[k] = qty_text(json_array_get(a, k), bufs[k], 32);
    }
    return n; /* past cap: the check says too many */
}

static const char *check_policies(const json_t *d, size_t i, char *field, size_t cap,
                                  const char **detail)
{
    bool multi = json_is_true(json_object_get(d, "allowMultipleAllocations"));
    const char *name;
    json_t *c;
    json_object_foreach(json_object_get(d, "capacity"), name, c)
    {
        const json_t *p = json_object_get(c, "requestPolicy");
        if (!p) {
            continue;
        }
        char prefix[160];
        snprintf(prefix, sizeof(prefix), "spec.devices[%zu].capacity[%.64s]", i, name);
        if (!multi) {
            snprintf(field, cap, "%s.requestPolicy", prefix);
            *detail = "Forbidden: allowMultipleAllocations must be true";
            return field;
        }
        const json_t *r = json_object_get(p, "validRange");
        char b[5][32];
        const char *vals[KDP_DRA_MAX_VALID_VALUES + 1];
        char vbufs[KDP_DRA_MAX_VALID_VALUES + 1][32];
        kdp_dra_request_policy pol = {
            .default_value = qty_text(json_object_get(p, "default"), b[0], 32),
            .valid_values = vals,
            .n_valid_values = values_of(json_object_get(p, "validValues"), vals, vbufs,
                                        KDP_DRA_MAX_VALID_VALUES + 1),
            .min = qty_text(json_object_get(r, "min"), b[1], 32),
            .max = qty_text(json_object_get(r, "max"), b[2], 32),
            .step = qty_text(json_object_get(r, "step"), b[3], 32),
        };
        if (pol.n_valid_values > KDP_DRA_MAX_VALID_VALUES) {
            pol.n_valid_values = KDP_DRA_MAX_VALID_VALUES + 1; /* reported as too many */
        }
        kdp__share_err e;
        if (r && !pol.min) {
            snprintf(e.field, sizeof(e.field), "requestPolicy.validRange.min");
            snprintf(e.why, sizeof(e.why), "Required value: required when validRange is defined");
            return fail(&e, prefix, field, cap, detail);
        }
        const char *value = qty_text(json_object_get(c, "value"), b[4], 32);
        if (value && kdp__share_check_policy(value, &pol, &e) < 0) {
            return fail(&e, prefix, field, cap, detail);
        }
    }
    return NULL;
}

const char *kd_check_device_sharing(const json_t *d, size_t i, char *field, size_t cap,
                                    const char **detail)
{
    const char *f = check_consumes(json_object_get(d, "consumesCounters"), i, field, cap, detail);
    return f ? f : check_policies(d, i, field, cap, detail);
}
