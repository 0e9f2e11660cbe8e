/* SPDX-License-Identifier: MIT */
/* describe_share: what sharing adds to a device's description (see
 * describe.h): the counters it consumes, multiple allocations, the request
 * policies of its capacities. Each is checked at the call with the API
 * server's rules (k8s/sharecheck), so a bad one is refused here, naming the
 * field and the rule, never by the API server later. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "dra/describe.h"
#include "k8s/sharecheck.h"

static char *dup_or_null(const char *s, bool *oom)
{
    char *c = s ? strdup(s) : NULL;
    *oom |= s && !c;
    return c;
}

void kdp__dra_strv_free(const char *const *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free((char *)v[i]);
    }
    free((void *)v);
}

const char **kdp__dra_strv_dup(const char *const *v, size_t n, bool *oom)
{
    if (n == 0) {
        return NULL;
    }
    const char **c = calloc(n, sizeof(*c));
    *oom |= !c;
    for (size_t i = 0; c && !*oom && i < n; i++) {
        c[i] = dup_or_null(v[i], oom);
    }
    return c;
}

static void consumption_free(kdp_dra_consumption *c)
{
    kdp__share_quantities_free((kdp_dra_quantity *)c->counters, c->n_counters);
    kdp__dra_strv_free(c->compatibility_groups, c->n_compatibility_groups);
    free((char *)c->counter_set);
}

static void policy_free(kdp_dra_request_policy *p)
{
    if (!p) {
        return;
    }
    free((char *)p->default_value);
    kdp__dra_strv_free(p->valid_values, p->n_valid_values);
    free((char *)p->min);
    free((char *)p->max);
    free((char *)p->step);
    free(p);
}

void kdp__dra_device_share_done(kdp_dra_device *d)
{
    for (size_t i = 0; i < d->n_consumes; i++) {
        consumption_free(&d->consumes[i]);
    }
    free(d->consumes);
    d->consumes = NULL;
    d->n_consumes = 0;
    for (size_t i = 0; i < d->n_caps; i++) {
        policy_free(d->caps[i].policy);
        d->caps[i].policy = NULL;
    }
}

KDP_EXPORT int kdp_dra_device_add_consumption(kdp_dra_device *d, const kdp_dra_consumption *c)
{
    if (!d || !c) {
        return -EINVAL;
    }
    const char *id = d->id ? d->id : "?";
    kdp__share_err e;
    if (kdp__share_check_consumption(c, &e) < 0) {
        log_error("device %s: consumesCounters[%zu].%s: %s", id, d->n_consumes, e.field, e.why);
        return -EINVAL;
    }
    for (size_t i = 0; i < d->n_consumes; i++) {
        if (strcmp(d->consumes[i].counter_set, c->counter_set) == 0) {
            log_error("device %s: consumesCounters[%zu].counterSet: Duplicate value: \"%s\": "
                      "one consumption per counter set",
                      id, d->n_consumes, c->counter_set);
            return -EEXIST;
        }
    }
    if (d->n_consumes >= KDP_DRA_MAX_CONSUMPTIONS) {
        log_error("device %s: consumesCounters: Too many: must have at most %u items", id,
                  KDP_DRA_MAX_CONSUMPTIONS);
        return -E2BIG;
    }
    kdp_dra_consumption *nc = realloc(d->consumes, (d->n_consumes + 1) * sizeof(*nc));
    if (!nc) {
        return -ENOMEM;
    }
    d->consumes = nc;
    bool oom = false;
    kdp_dra_consumption copy = {
        .counter_set = dup_or_null(c->counter_set, &oom),
        .counters = kdp__share_quantities_dup(c->counters, c->n_counters),
        .n_counters = c->n_counters,
        .compatibility_groups =
            kdp__dra_strv_dup(c->compatibility_groups, c->n_compatibility_groups, &oom),
        .n_compatibility_groups = c->n_compatibility_groups,
    };
    if (oom || !copy.counters) {
        consumption_free(&copy);
        return -ENOMEM;
    }
    d->consumes[d->n_consumes++] = copy;
    return 0;
}

KDP_EXPORT int kdp_dra_device_allow_multiple_allocations(kdp_dra_device *d)
{
    if (!d) {
        return -EINVAL;
    }
    d->allow_multiple = true;
    return 0;
}

KDP_EXPORT int kdp_dra_device_set_request_policy(kdp_dra_device *d, const char *capacity,
                                                 const kdp_dra_request_policy *policy)
{
    if (!d || !capacity || !policy) {
        return -EINVAL;
    }
    const char *id = d->id ? d->id : "?";
    kdp__dra_cap *cap = NULL;
    for (size_t i = 0; i < d->n_caps; i++) {
        cap = strcmp(d->caps[i].name, capacity) == 0 ? &d->caps[i] : cap;
    }
    if (!cap) {
        log_error("device %s: capacity %.80s: no such capacity (kdp_dra_device_add_capacity "
                  "first)",
                  id, capacity);
        return -ENOENT;
    }
    if (!d->allow_multiple) {
        log_error("device %s: capacity[%s].requestPolicy: Forbidden: allowMultipleAllocations "
                  "must be true (kdp_dra_device_allow_multiple_allocations first)",
                  id, capacity);
        return -EINVAL;
    }
    kdp__share_err e;
    if (kdp__share_check_policy(cap->quantity, policy, &e) < 0) {
        log_error("device %s: capacity[%s].%s: %s", id, capacity, e.field, e.why);
        return -EINVAL;
    }
    kdp_dra_request_policy *p = calloc(1, sizeof(*p));
    bool oom = !p;
    if (p) {
        p->default_value = dup_or_null(policy->default_value, &oom);
        p->valid_values = kdp__dra_strv_dup(policy->valid_values, policy->n_valid_values, &oom);
        p->n_valid_values = policy->n_valid_values;
        p->min = dup_or_null(policy->min, &oom);
        p->max = dup_or_null(policy->max, &oom);
        p->step = dup_or_null(policy->step, &oom);
    }
    if (oom) {
        policy_free(p);
        return -ENOMEM;
    }
    policy_free(cap->policy);
    cap->policy = p;
    return 0;
}
