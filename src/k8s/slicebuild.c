/* SPDX-License-Identifier: MIT */
/* slicebuild: ResourceSlice objects as the API server takes them (see
 * slicebuild.h). */
#include "k8s/slicebuild.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/k8snames.h"
#include "base/log.h"
#include "k8s/bindcheck.h"
#include "k8s/sharecheck.h"
#include "k8s/slicectr.h"

#define GROUP "resource.k8s.io"

void kdp__slicebuild_generate_name(const char *node, const char *driver, char *out, size_t len)
{
    /* 63 (a name) - 5 (the random suffix the API server appends) */
    size_t max = len - 1 < 58 ? len - 1 : 58;
    size_t n = 0;
    for (const char *p = node; *p && n < max - 1; p++) {
        out[n++] = (char)(*p == '.' ? '-' : *p);
    }
    if (n < max - 1) {
        out[n++] = '-';
    }
    for (const char *p = driver; *p && n < max - 1; p++) {
        out[n++] = (char)(*p == '.' ? '-' : *p);
    }
    out[n++] = '-';
    out[n] = '\0';
}

static json_t *attr_value(const kdp_dra_attr *a, const char **why)
{
    switch (a->type) {
    case KDP_DRA_ATTR_INT:
        return json_pack("{s:I}", "int", (json_int_t)a->int_value);
    case KDP_DRA_ATTR_BOOL:
        return json_pack("{s:b}", "bool", a->bool_value);
    case KDP_DRA_ATTR_STRING:
        if (!a->string_value || strlen(a->string_value) > KDP__K8S_ATTR_STRING_MAX) {
            *why = "a string attribute needs a value of at most 64 characters";
            return NULL;
        }
        return json_pack("{s:s}", "string", a->string_value);
    case KDP_DRA_ATTR_VERSION:
        if (kdp__k8snames_semver(a->string_value, why) < 0) {
            return NULL;
        }
        return json_pack("{s:s}", "version", a->string_value);
    default:
        *why = "has an unknown type";
        return NULL;
    }
}

/* The device's attributes into attrs, bad ones left out (logged); *fields
 * counts them. Returns 0 or -ENOMEM. */
static int add_attrs(const kdp__slice_dev *d, json_t *attrs, size_t *fields)
{
    for (size_t i = 0; i < d->n_attrs; i++) {
        const kdp_dra_attr *a = &d->attrs[i];
        const char *w = NULL;
        json_t *v = NULL;
        if (kdp__k8snames_qualified_name(a->name, &w) == 0 && json_object_get(attrs, a->name)) {
            w = "is there twice";
        }
        if (!w && *fields >= KDP__SLICEBUILD_MAX_FIELDS) {
            w = "is past the 32 attributes and capacities a device may have";
        }
        if (!w) {
            v = attr_value(a, &w);
        }
        if (w) {
            log_warn("k8s: device %s: attribute \"%s\" %s: left out", d->name,
                     a->name ? a->name : "", w);
            continue;
        }
        if (!v || json_object_set_new(attrs, a->name, v) < 0) {
            return -ENOMEM;
        }
        (*fields)++;
    }
    return 0;
}

/* A request policy as the API writes it (checked: sharecheck). NULL:
 * -ENOMEM. */
static json_t *policy_json(const kdp_dra_request_policy *p)
{
    json_t *o = json_object();
    json_t *vals = p->n_valid_values ? json_array() : NULL;
    json_t *range = p->min ? json_object() : NULL;
    bool bad = !o || (p->n_valid_values && !vals) || (p->min && !range);
    for (size_t i = 0; !bad && i < p->n_valid_values; i++) {
        bad = json_array_append_new(vals, json_string(p->valid_values[i])) < 0;
    }
    bad = bad || (p->default_value &&
                  json_object_set_new(o, "default", json_string(p->default_value)) < 0);
    bad = bad || (vals && json_object_set(o, "validValues", vals) < 0);
    bad = bad || (range && json_object_set_new(range, "min", json_string(p->min)) < 0);
    bad = bad || (range && p->max && json_object_set_new(range, "max", json_string(p->max)) < 0);
    bad = bad || (range && p->step && json_object_set_new(range, "step", json_string(p->step)) < 0);
    bad = bad || (range && json_object_set(o, "validRange", range) < 0);
    json_decref(vals);
    json_decref(range);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* One capacity {value[, requestPolicy]}; a bad policy left out (logged). */
static json_t *cap_json(const kdp__slice_dev *d, const kdp__slice_cap *c)
{
    json_t *o = json_pack("{s:s}", "value", c->value);
    if (!o || !c->policy) {
        return o;
    }
    kdp__share_err e;
    if (!d->allow_multiple) {
        log_warn("k8s: device %s: capacity \"%s\": a request policy needs "
                 "allowMultipleAllocations: the policy is left out",
                 d->name, c->name);
        return o;
    }
    if (kdp__share_check_policy(c->value, c->policy, &e) < 0) {
        log_warn("k8s: device %s: capacity[%s].%s: %s: the policy is left out", d->name, c->name,
                 e.field, e.why);
        return o;
    }
    json_t *p = policy_json(c->policy);
    if (!p || json_object_set_new(o, "requestPolicy", p) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The same for its capacities. */
static int add_caps(const kdp__slice_dev *d, json_t *caps, size_t *fields)
{
    for (size_t i = 0; i < d->n_caps; i++) {
        const char *name = d->caps[i].name;
        const char *value = d->caps[i].value;
        const char *w = NULL;
        if (kdp__k8snames_qualified_name(name, &w) == 0 && json_object_get(caps, name)) {
            w = "is there twice";
        }
        if (!w && kdp__k8snames_quantity(value, &w) < 0) {
            log_warn("k8s: device %s: capacity \"%s\" value \"%s\" %s: left out", d->name, name,
                     value ? value : "", w);
            continue;
        }
        if (!w && *fields >= KDP__SLICEBUILD_MAX_FIELDS) {
            w = "is past the 32 attributes and capacities a device may have";
        }
        if (w) {
            log_warn("k8s: device %s: capacity \"%s\" %s: left out", d->name, name ? name : "", w);
            continue;
        }
        if (json_object_set_new(caps, name, cap_json(d, &d->caps[i])) < 0) {
            return -ENOMEM;
        }
        (*fields)++;
    }
    return 0;
}

/* The device's taints into taints, bad ones left out (logged). timeAdded
 * as the API writes it (RFC 3339, UTC, seconds). Returns 0 or -ENOMEM. */
static int add_taints(const kdp__slice_dev *d, json_t *taints)
{
    for (size_t i = 0; i < d->n_taints; i++) {
        const kdp__slice_taint *t = &d->taints[i];
        const char *w = NULL;
        if (kdp__k8snames_label_name(t->key, &w) == 0 &&
            kdp__k8snames_label_value(t->value, &w) == 0 &&
            (!t->effect ||
             (strcmp(t->effect, "NoSchedule") != 0 && strcmp(t->effect, "NoExecute") != 0 &&
              strcmp(t->effect, "None") != 0))) {
            w = "has an effect that is not NoSchedule, NoExecute or None";
        }
        if (!w && json_array_size(taints) >= KDP__SLICEBUILD_MAX_TAINTS) {
            w = "is past the 16 taints a device may have";
        }
        if (w) {
            log_warn("k8s: device %s: taint \"%s\" %s: left out", d->name, t->key ? t->key : "", w);
            continue;
        }
        json_t *o = json_pack("{s:s, s:s}", "key", t->key, "effect", t->effect);
        if (o && t->value && *t->value) {
            json_object_set_new(o, "value", json_string(t->value));
        }
        if (o && t->time_added > 0) {
            char ts[32];
            time_t tt = (time_t)t->time_added;
            struct tm tm;
            strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&tt, &tm));
            json_object_set_new(o, "timeAdded", json_string(ts));
        }
        if (!o || json_array_append_new(taints, o) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

static json_t *strv_json(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

/* bindsToNode (only true), bindingConditions and bindingFailureConditions
 * (only when set): a bad pair of lists is left out (logged), bindsToNode
 * kept. Returns 0 or -ENOMEM. */
static int add_binding(const kdp__slice_dev *d, json_t *dev)
{
    if (d->binds_to_node && json_object_set_new(dev, "bindsToNode", json_true()) < 0) {
        return -ENOMEM;
    }
    if (d->n_bind_conds + d->n_bind_fails == 0) {
        return 0;
    }
    kdp__bind_err e;
    if ((d->n_bind_conds && !d->bind_conds) || (d->n_bind_fails && !d->bind_fails)) {
        log_warn("k8s: device %s: binding conditions: a list is NULL: left out", d->name);
        return 0;
    }
    if (kdp__bindcheck(d->bind_conds, d->n_bind_conds, d->bind_fails, d->n_bind_fails, &e) < 0) {
        log_warn("k8s: device %s: %s: %s: the binding conditions are left out", d->name, e.field,
                 e.why);
        return 0;
    }
    json_t *c = strv_json(d->bind_conds, d->n_bind_conds);
    json_t *f = strv_json(d->bind_fails, d->n_bind_fails);
    int r = c && f && json_object_set(dev, "bindingConditions", c) == 0 &&
                    json_object_set(dev, "bindingFailureConditions", f) == 0
                ? 0
                : -ENOMEM;
    json_decref(c);
    json_decref(f);
    return r;
}

json_t *kdp__slicebuild_device(const kdp__slice_dev *d, char *why, size_t why_len)
{
    const char *w = NULL;
    if (why && why_len) {
        why[0] = '\0';
    }
    if (kdp__k8snames_dns_label(d->name, &w) < 0) {
        snprintf(why, why_len, "device name \"%s\" %s", d->name ? d->name : "", w);
        return NULL;
    }
    /* a bad consumption leaves the device out: published without it, it
     * would be handed out beside the partitions it overlaps */
    json_t *consumes = NULL;
    if (d->n_consumes) {
        char w2[300];
        consumes = kdp__slicectr_consumes(d->consumes, d->n_consumes, w2, sizeof(w2));
        if (!consumes) {
            if (w2[0]) {
                snprintf(why, why_len, "device %s: %s", d->name, w2);
            }
            return NULL;
        }
    }
    json_t *attrs = json_object();
    json_t *caps = json_object();
    json_t *taints = json_array();
    json_t *dev = json_object();
    size_t fields = 0;
    bool bad = !attrs || !caps || !taints || !dev || add_attrs(d, attrs, &fields) < 0 ||
               add_caps(d, caps, &fields) < 0 || add_taints(d, taints) < 0 ||
               json_object_set_new(dev, "name", json_string(d->name)) < 0 ||
               (json_object_size(attrs) && json_object_set(dev, "attributes", attrs) < 0) ||
               (json_object_size(caps) && json_object_set(dev, "capacity", caps) < 0) ||
               (json_array_size(taints) && json_object_set(dev, "taints", taints) < 0) ||
               (consumes && json_object_set(dev, "consumesCounters", consumes) < 0) ||
               (d->allow_multiple &&
                json_object_set_new(dev, "allowMultipleAllocations", json_true()) < 0) ||
               add_binding(d, dev) < 0;
    json_decref(attrs);
    json_decref(caps);
    json_decref(taints);
    json_decref(consumes);
    if (bad) {
        json_decref(dev);
        return NULL;
    }
    return dev;
}

json_t *kdp__slicebuild_shape(const char *version, json_t *dev)
{
    if (strcmp(version, "v1beta1") != 0) {
        return json_incref(dev);
    }
    /* every field but the name under "basic" */
    json_t *basic = json_object();
    json_t *out = json_pack("{s:O}", "name", json_object_get(dev, "name"));
    bool bad = !basic || !out;
    const char *key;
    json_t *v;
    json_object_foreach(dev, key, v)
    {
        bad = bad || (strcmp(key, "name") != 0 && json_object_set(basic, key, v) < 0);
    }
    if (bad || json_object_set(out, "basic", basic) < 0) {
        json_decref(out);
        out = NULL;
    }
    json_decref(basic);
    return out;
}

json_t *kdp__slicebuild_object(const char *version, const char *driver, const char *node,
                               const char *node_uid, uint64_t generation, size_t count, bool sets,
                               json_t *const *items, size_t n, const char *name,
                               const char *resource_version)
{
    char api_version[64];
    snprintf(api_version, sizeof(api_version), GROUP "/%s", version);
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        json_t *it = sets ? json_incref(items[i]) : kdp__slicebuild_shape(version, items[i]);
        if (json_array_append_new(list, it) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    if (!list) {
        return NULL;
    }
    json_t *meta = json_pack("{s:[{s:s,s:s,s:s,s:s,s:b}]}", "ownerReferences", "apiVersion", "v1",
                             "kind", "Node", "name", node, "uid", node_uid, "controller", 1);
    char gen_name[64];
    kdp__slicebuild_generate_name(node, driver, gen_name, sizeof(gen_name));
    if (meta && name) {
        json_object_set_new(meta, "name", json_string(name));
        if (resource_version) {
            json_object_set_new(meta, "resourceVersion", json_string(resource_version));
        }
    } else if (meta) {
        json_object_set_new(meta, "generateName", json_string(gen_name));
    }
    json_t *obj = json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:{s:s,s:I,s:I},s:o}}", "apiVersion",
                            api_version, "kind", "ResourceSlice", "metadata", meta, "spec",
                            "driver", driver, "nodeName", node, "pool", "name", node, "generation",
                            (json_int_t)generation, "resourceSliceCount", (json_int_t)count,
                            sets ? "sharedCounters" : "devices", list);
    return obj; /* json_pack's "o" steals meta and list, even on failure */
}

static int cmp_dev(const void *x, const void *y)
{
    json_t *const *a = x;
    json_t *const *b = y;
    return strcmp(json_string_value(json_object_get(*a, "name")),
                  json_string_value(json_object_get(*b, "name")));
}

/* Sorts devs by name and drops the second of a name (logged). Returns
 * how many are left. */
static size_t sort_unique(json_t **devs, size_t n)
{
    if (n < 2) {
        return n;
    }
    qsort(devs, n, sizeof(json_t *), cmp_dev);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && cmp_dev(&devs[w - 1], &devs[i]) == 0) {
            log_warn("k8s: device name %s is there twice: the second one is left out of the "
                     "ResourceSlices",
                     json_string_value(json_object_get(devs[i], "name")));
            json_decref(devs[i]);
            continue;
        }
        devs[w++] = devs[i];
    }
    return w;
}

int kdp__slicebuild_devices(const kdp__slice_dev *devs, size_t n, json_t *const *sets,
                            size_t n_sets, json_t ***ret)
{
    if (n > KDP__SLICEBUILD_MAX_POOL) {
        log_error("k8s: %zu devices: more than the %u a pool of kdp holds", n,
                  KDP__SLICEBUILD_MAX_POOL);
        return -E2BIG;
    }
    json_t **out = calloc(n ? n : 1, sizeof(json_t *));
    if (!out) {
        return -ENOMEM;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        char why[400];
        json_t *d = kdp__slicebuild_device(&devs[i], why, sizeof(why));
        if (!d && !why[0]) {
            for (size_t k = 0; k < kept; k++) {
                json_decref(out[k]);
            }
            free(out);
            return -ENOMEM;
        }
        if (d && kdp__slicectr_unresolved(d, sets, n_sets, why, sizeof(why))) {
            log_warn("k8s: device %s: %s: left out of the ResourceSlices", devs[i].name, why);
            json_decref(d);
            continue;
        }
        if (!d) {
            log_warn("k8s: %s: left out of the ResourceSlices", why);
            continue;
        }
        out[kept++] = d;
    }
    *ret = out;
    return (int)sort_unique(out, kept);
}
