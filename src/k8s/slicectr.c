/* SPDX-License-Identifier: MIT */
/* slicectr: counters as ResourceSlices hold them (see slicectr.h). */
#include "k8s/slicectr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "k8s/sharecheck.h"

json_t *kdp__slicectr_counters(const kdp_dra_quantity *c, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++) {
        if (json_object_set_new(o, c[i].name, json_pack("{s:s}", "value", c[i].value)) < 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static json_t *consumption(const kdp_dra_consumption *c)
{
    json_t *o = json_pack("{s:s,s:o}", "counterSet", c->counter_set, "counters",
                          kdp__slicectr_counters(c->counters, c->n_counters));
    if (!o || c->n_compatibility_groups == 0) {
        return o;
    }
    json_t *g = json_array();
    for (size_t i = 0; g && i < c->n_compatibility_groups; i++) {
        if (json_array_append_new(g, json_string(c->compatibility_groups[i])) < 0) {
            json_decref(g);
            g = NULL;
        }
    }
    if (!g || json_object_set_new(o, "compatibilityGroups", g) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *kdp__slicectr_consumes(const kdp_dra_consumption *c, size_t n, char *why, size_t why_len)
{
    why[0] = '\0';
    if (n > KDP_DRA_MAX_CONSUMPTIONS) {
        snprintf(why, why_len, "consumesCounters: Too many: must have at most %u items",
                 KDP_DRA_MAX_CONSUMPTIONS);
        return NULL;
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        kdp__share_err e;
        int r = kdp__share_check_consumption(&c[i], &e);
        for (size_t j = 0; r == 0 && j < i; j++) {
            if (strcmp(c[i].counter_set, c[j].counter_set) == 0) {
                snprintf(e.field, sizeof(e.field), "counterSet");
                snprintf(e.why, sizeof(e.why), "Duplicate value: \"%s\"", c[i].counter_set);
                r = -EINVAL;
            }
        }
        if (r < 0) {
            snprintf(why, why_len, "consumesCounters[%zu].%s: %s", i, e.field, e.why);
            json_decref(a);
            return NULL;
        }
        if (json_array_append_new(a, consumption(&c[i])) < 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

static int cmp_name(const void *x, const void *y)
{
    json_t *const *a = x;
    json_t *const *b = y;
    return strcmp(json_string_value(json_object_get(*a, "name")),
                  json_string_value(json_object_get(*b, "name")));
}

int kdp__slicectr_sets(const kdp_dra_counter_set *s, size_t n, json_t ***ret)
{
    if (n > KDP__SLICECTR_MAX_SETS) {
        log_error("k8s: %zu counter sets: more than the %u a pool of kdp holds", n,
                  KDP__SLICECTR_MAX_SETS);
        return -E2BIG;
    }
    json_t **out = calloc(n ? n : 1, sizeof(json_t *));
    if (!out) {
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        kdp__share_err e;
        if (kdp__share_check_set(&s[i], &e) < 0) {
            log_warn("k8s: counter set %s: %s: %s: left out of the ResourceSlices",
                     s[i].name ? s[i].name : "(null)", e.field, e.why);
            continue;
        }
        out[k] = json_pack("{s:s,s:o}", "name", s[i].name, "counters",
                           kdp__slicectr_counters(s[i].counters, s[i].n_counters));
        if (!out[k]) {
            for (size_t j = 0; j < k; j++) {
                json_decref(out[j]);
            }
            free(out);
            return -ENOMEM;
        }
        k++;
    }
    if (k > 1) {
        qsort(out, k, sizeof(json_t *), cmp_name);
    }
    size_t w = 0;
    for (size_t i = 0; i < k; i++) {
        if (w > 0 && cmp_name(&out[w - 1], &out[i]) == 0) {
            log_warn("k8s: counter set %s is there twice: the second one is left out",
                     json_string_value(json_object_get(out[i], "name")));
            json_decref(out[i]);
            continue;
        }
        out[w++] = out[i];
    }
    *ret = out;
    return (int)w;
}

static json_t *find_set(json_t *const *sets, size_t n, const char *name)
{
    size_t lo = 0;
    size_t hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(json_string_value(json_object_get(sets[mid], "name")), name);
        if (c == 0) {
            return sets[mid];
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

const char *kdp__slicectr_unresolved(json_t *dev, json_t *const *sets, size_t n, char *why,
                                     size_t why_len)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(dev, "consumesCounters"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "counterSet"));
        json_t *set = name ? find_set(sets, n, name) : NULL;
        if (!set) {
            snprintf(why, why_len,
                     "it consumes counter set %s, which the pool does not have "
                     "(kdp_plugin_set_dra_counter_sets)",
                     name ? name : "(none)");
            return why;
        }
        json_t *have = json_object_get(set, "counters");
        const char *counter;
        json_t *v;
        json_object_foreach(json_object_get(c, "counters"), counter, v)
        {
            if (!json_object_get(have, counter)) {
                snprintf(why, why_len,
                         "it consumes counter %s of set %s, which has no such counter", counter,
                         name);
                return why;
            }
        }
    }
    return NULL;
}
