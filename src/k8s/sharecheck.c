/* SPDX-License-Identifier: MIT */
/* sharecheck: the API server's rules for sharing (see sharecheck.h). */
#include "k8s/sharecheck.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "base/quantity.h"

#define MILLI ((kdp__qty)1000000) /* nano units in a milli */

__attribute__((format(printf, 3, 4))) static int fail(kdp__share_err *e, const char *field,
                                                      const char *fmt, ...)
{
    snprintf(e->field, sizeof(e->field), "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof(e->why), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int dns_label(kdp__share_err *e, const char *field, const char *s)
{
    const char *why = NULL;
    if (!s || !*s) {
        return fail(e, field, "Required value");
    }
    if (kdp__k8snames_dns_label(s, &why) < 0) {
        return fail(e, field,
                    "Invalid value: \"%.63s\": a lowercase RFC 1123 label must consist of lower "
                    "case alphanumeric characters or '-', and must start and end with an "
                    "alphanumeric character (%s)",
                    s, why);
    }
    return 0;
}

/* A quantity at field: parsed into *v. */
static int qty(kdp__share_err *e, const char *field, const char *s, kdp__qty *v)
{
    const char *why = NULL;
    if (!s || !*s) {
        return fail(e, field, "Required value");
    }
    if (kdp__qty_parse(s, v, &why) < 0) {
        return fail(e, field, "Invalid value: \"%.64s\": quantity %s", s, why);
    }
    return 0;
}

void kdp__share_quantities_free(kdp_dra_quantity *q, size_t n)
{
    for (size_t i = 0; q && i < n; i++) {
        free((char *)q[i].name);
        free((char *)q[i].value);
    }
    free(q);
}

kdp_dra_quantity *kdp__share_quantities_dup(const kdp_dra_quantity *q, size_t n)
{
    kdp_dra_quantity *c = calloc(n ? n : 1, sizeof(*c));
    bool oom = !c;
    for (size_t i = 0; !oom && i < n; i++) {
        c[i].name = q[i].name ? strdup(q[i].name) : NULL;
        c[i].value = q[i].value ? strdup(q[i].value) : NULL;
        oom = (q[i].name && !c[i].name) || (q[i].value && !c[i].value);
    }
    if (oom) {
        kdp__share_quantities_free(c, n);
        return NULL;
    }
    return c;
}

int kdp__share_check_counters(const kdp_dra_quantity *c, size_t n, kdp__share_err *e)
{
    if (n == 0 || !c) {
        return fail(e, "counters", "Required value");
    }
    if (n > KDP_DRA_MAX_COUNTERS) {
        return fail(e, "counters", "Too many: %zu: must have at most %u items", n,
                    KDP_DRA_MAX_COUNTERS);
    }
    char f[160];
    for (size_t i = 0; i < n; i++) {
        snprintf(f, sizeof(f), "counters");
        int r = dns_label(e, f, c[i].name);
        for (size_t j = 0; r == 0 && j < i; j++) {
            if (strcmp(c[i].name, c[j].name) == 0) {
                r = fail(e, f, "Duplicate value: \"%s\"", c[i].name);
            }
        }
        kdp__qty v = 0;
        snprintf(f, sizeof(f), "counters[%.63s].value", c[i].name ? c[i].name : "");
        r = r < 0 ? r : qty(e, f, c[i].value, &v);
        if (r == 0 && v < 0) {
            r = fail(e, f, "Invalid value: \"%s\": must be greater than or equal to 0", c[i].value);
        }
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int kdp__share_check_set(const kdp_dra_counter_set *s, kdp__share_err *e)
{
    if (!s) {
        return fail(e, "", "Required value");
    }
    int r = dns_label(e, "name", s->name);
    return r < 0 ? r : kdp__share_check_counters(s->counters, s->n_counters, e);
}

int kdp__share_check_sets(const kdp_dra_counter_set *s, size_t n, kdp__share_err *e)
{
    for (size_t i = 0; i < n; i++) {
        kdp__share_err sub;
        int r = kdp__share_check_set(&s[i], &sub);
        for (size_t j = 0; r == 0 && j < i; j++) {
            if (strcmp(s[i].name, s[j].name) == 0) {
                snprintf(sub.field, sizeof(sub.field), "name");
                snprintf(sub.why, sizeof(sub.why),
                         "Duplicate value: \"%s\": counter set names must be unique in the pool",
                         s[i].name);
                r = -EINVAL;
            }
        }
        if (r < 0) {
            snprintf(e->field, sizeof(e->field), "sharedCounters[%zu]%s%.100s", i,
                     sub.field[0] ? "." : "", sub.field);
            snprintf(e->why, sizeof(e->why), "%s", sub.why);
            return r;
        }
    }
    return 0;
}

int kdp__share_check_consumption(const kdp_dra_consumption *c, kdp__share_err *e)
{
    if (!c) {
        return fail(e, "", "Required value");
    }
    int r = dns_label(e, "counterSet", c->counter_set);
    r = r < 0 ? r : kdp__share_check_counters(c->counters, c->n_counters, e);
    if (r < 0) {
        return r;
    }
    size_t n = c->n_compatibility_groups;
    if (n > KDP_DRA_MAX_COMPAT_GROUPS) {
        return fail(e, "compatibilityGroups", "Too many: %zu: must have at most %u items", n,
                    KDP_DRA_MAX_COMPAT_GROUPS);
    }
    if (n && !c->compatibility_groups) {
        return fail(e, "compatibilityGroups", "Required value");
    }
    char f[64];
    for (size_t i = 0; i < n; i++) {
        const char *g = c->compatibility_groups[i];
        snprintf(f, sizeof(f), "compatibilityGroups[%zu]", i);
        r = dns_label(e, f, g);
        for (size_t j = 0; r == 0 && j < i; j++) {
            if (strcmp(g, c->compatibility_groups[j]) == 0) {
                r = fail(e, f, "Duplicate value: \"%s\"", g);
            }
        }
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* ---- request policies ---- */

/* A policy amount at field: >= 0, a whole number of milli-units (the
 * DRAFractionalCapacityRange rule), at most the API's int64. */
static int amount(kdp__share_err *e, const char *field, const char *s, kdp__qty *v)
{
    int r = qty(e, field, s, v);
    if (r == 0 && *v < 0) {
        r = fail(e, field, "Invalid value: \"%s\": must be greater than or equal to 0", s);
    }
    if (r == 0 && *v % MILLI != 0) {
        r = fail(e, field, "Invalid value: \"%s\": value cannot be represented as a milli value",
                 s);
    }
    if (r == 0 && *v > (kdp__qty)INT64_MAX * KDP__QTY_ONE) {
        r = fail(e, field, "Invalid value: \"%s\": must not be larger than %lld", s,
                 (long long)INT64_MAX);
    }
    return r;
}

static int check_values(const kdp_dra_request_policy *p, kdp__qty cap, const char *cap_text,
                        kdp__share_err *e)
{
    size_t n = p->n_valid_values;
    if (n > KDP_DRA_MAX_VALID_VALUES) {
        return fail(e, "requestPolicy.validValues", "Too many: %zu: must have at most %u items", n,
                    KDP_DRA_MAX_VALID_VALUES);
    }
    kdp__qty def = 0;
    if (!p->default_value) {
        return fail(e, "requestPolicy.default",
                    "Required value: required when validValues is "
                    "defined");
    }
    int r = amount(e, "requestPolicy.default", p->default_value, &def);
    bool def_found = false;
    kdp__qty prev = 0;
    char f[64];
    for (size_t i = 0; r == 0 && i < n; i++) {
        kdp__qty v = 0;
        snprintf(f, sizeof(f), "requestPolicy.validValues[%zu]", i);
        const char *text = p->valid_values ? p->valid_values[i] : NULL;
        r = amount(e, f, text, &v);
        if (r == 0 && i > 0 && v < prev) {
            r = fail(e, f, "Invalid value: \"%s\": values must be sorted in ascending order", text);
        } else if (r == 0 && i > 0 && v == prev) {
            r = fail(e, f, "Duplicate value: \"%s\"", text);
        } else if (r == 0 && v > cap) {
            r = fail(e, f, "Invalid value: \"%s\": option is larger than capacity value: %s", text,
                     cap_text);
        }
        def_found |= r == 0 && v == def;
        prev = v;
    }
    if (r == 0 && !def_found) {
        r = fail(e, "requestPolicy.validValues",
                 "Invalid value: \"%s\": default value is not valid according to the "
                 "requestPolicy",
                 p->default_value);
    }
    return r;
}

/* Whether (v - from) is a whole number of steps. */
static bool whole_steps(kdp__qty v, kdp__qty from, kdp__qty step)
{
    return (v - from) % step == 0;
}

static int check_range(const kdp_dra_request_policy *p, kdp__qty cap, const char *cap_text,
                       kdp__share_err *e)
{
    kdp__qty def = 0;
    kdp__qty min = 0;
    kdp__qty max = cap;
    kdp__qty step = 0;
    if (!p->default_value) {
        return fail(e, "requestPolicy.default",
                    "Required value: required when validRange is "
                    "defined");
    }
    int r = amount(e, "requestPolicy.default", p->default_value, &def);
    r = r < 0 ? r : amount(e, "requestPolicy.validRange.min", p->min, &min);
    r = r < 0 || !p->max ? r : amount(e, "requestPolicy.validRange.max", p->max, &max);
    r = r < 0 || !p->step ? r : amount(e, "requestPolicy.validRange.step", p->step, &step);
    if (r < 0) {
        return r;
    }
    if (min > cap) {
        return fail(e, "requestPolicy.validRange.min",
                    "Invalid value: \"%s\": must be less than or equal to capacity value: %s",
                    p->min, cap_text);
    }
    if (def < min) {
        return fail(e, "requestPolicy.validRange.default",
                    "Invalid value: \"%s\": must be greater than or equal to min: %s",
                    p->default_value, p->min);
    }
    if (p->max && min > max) {
        return fail(e, "requestPolicy.validRange.max",
                    "Invalid value: \"%s\": min is larger than max", p->max);
    }
    if (p->max && max > cap) {
        return fail(e, "requestPolicy.validRange.max",
                    "Invalid value: \"%s\": must be less than or equal to capacity value: %s",
                    p->max, cap_text);
    }
    if (def > max) {
        return fail(e, "requestPolicy.validRange.default",
                    "Invalid value: \"%s\": must be less than or equal to max: %s",
                    p->default_value, p->max ? p->max : cap_text);
    }
    if (!p->step) {
        return 0;
    }
    if (step <= 0) {
        return fail(e, "requestPolicy.validRange.step", "Invalid value: \"%s\": must be positive",
                    p->step);
    }
    if (min + step > cap) {
        return fail(e, "requestPolicy.validRange.step",
                    "Invalid value: \"%s\": min + step must be less than or equal to capacity "
                    "value: %s",
                    p->step, cap_text);
    }
    if (!whole_steps(def, min, step)) {
        return fail(e, "requestPolicy.default",
                    "Invalid value: \"%s\": value is not a multiple of a given step (%s) from (%s)",
                    p->default_value, p->step, p->min);
    }
    if (p->max && !whole_steps(max, min, step)) {
        return fail(e, "requestPolicy.validRange.max",
                    "Invalid value: \"%s\": value is not a multiple of a given step (%s) from (%s)",
                    p->max, p->step, p->min);
    }
    return 0;
}

int kdp__share_check_policy(const char *value, const kdp_dra_request_policy *p, kdp__share_err *e)
{
    kdp__qty cap = 0;
    int r = qty(e, "value", value, &cap);
    if (r < 0 || !p) {
        return r;
    }
    bool values = p->n_valid_values > 0;
    bool range = p->min || p->max || p->step;
    if (values && range) {
        return fail(e, "requestPolicy",
                    "Forbidden: exactly one policy can be specified, cannot specify "
                    "\"validValues\" and \"validRange\" at the same time");
    }
    if (range && !p->min) {
        return fail(e, "requestPolicy.validRange.min",
                    "Required value: required when validRange is defined");
    }
    if (values) {
        return check_values(p, cap, value, e);
    }
    if (range) {
        return check_range(p, cap, value, e);
    }
    kdp__qty def = 0;
    return p->default_value ? qty(e, "requestPolicy.default", p->default_value, &def) : 0;
}
