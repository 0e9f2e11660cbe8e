/* SPDX-License-Identifier: MIT */
/*
 * dra_check: the checks of `kdpctl dra apiserver` on what a request stores,
 * as the API server makes them (the parts a driver meets): a name (an RFC
 * 1123 subdomain), a ResourceSlice (spec.driver, spec.pool, exactly one
 * node selection, its devices: names, attributes and capacities, taints,
 * binding conditions, at most 128, or 64 when one has taints or consumes
 * counters (binding conditions do not count); what sharing adds:
 * dra_check_share.c) and the fields of a slice that an update may not
 * change.
 * Pure: no request, no store; dra_rest.c answers what they find.
 */
#include "dra_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "dra_api.h"
#include "k8s/bindcheck.h"

enum { MAX_TAINTS = 16, MAX_DEV_WITH_TAINTS = 64 };

/* One taint of device i: key a label name, value a label value, effect
 * one of the three the API knows. */
static const char *check_taint(const json_t *t, size_t i, size_t k, char *field, size_t cap,
                               const char **detail)
{
    const char *key = json_string_value(json_object_get(t, "key"));
    const char *value = json_string_value(json_object_get(t, "value"));
    const char *effect = json_string_value(json_object_get(t, "effect"));
    const char *why = NULL;
    snprintf(field, cap, "spec.devices[%zu].taints[%zu].key", i, k);
    if (!key || kdp__k8snames_label_name(key, &why) != 0) {
        *detail = key ? "Invalid value: a qualified name must be [prefix/]name, the name at most "
                        "63 of [A-Za-z0-9-_.] with an alphanumeric at both ends"
                      : "Required value";
        return field;
    }
    snprintf(field, cap, "spec.devices[%zu].taints[%zu].value", i, k);
    if (value && kdp__k8snames_label_value(value, &why) != 0) {
        *detail = "Invalid value: a valid label must be at most 63 of [A-Za-z0-9-_.] with an "
                  "alphanumeric at both ends";
        return field;
    }
    snprintf(field, cap, "spec.devices[%zu].taints[%zu].effect", i, k);
    if (!effect || (strcmp(effect, "NoSchedule") != 0 && strcmp(effect, "NoExecute") != 0 &&
                    strcmp(effect, "None") != 0)) {
        *detail = effect ? "Unsupported value: supported values: \"NoSchedule\", \"NoExecute\", "
                           "\"None\""
                         : "Required value";
        return field;
    }
    return NULL;
}

static const char *check_taints(const json_t *taints, size_t i, char *field, size_t cap,
                                const char **detail)
{
    snprintf(field, cap, "spec.devices[%zu].taints", i);
    if (taints && !json_is_array(taints)) {
        *detail = "Invalid value: must be a list";
        return field;
    }
    if (json_array_size(taints) > MAX_TAINTS) {
        *detail = "Too many: must have at most 16 items";
        return field;
    }
    for (size_t k = 0; k < json_array_size(taints); k++) {
        const char *f = check_taint(json_array_get(taints, k), i, k, field, cap, detail);
        if (f) {
            return f;
        }
    }
    return NULL;
}

static char bind_detail[300]; /* *detail's storage: valid until the next check */

/* The strings of list key of o into *ret (a new array, NULL for none):
 * NULL, or the field at fault (not a list, an item not a string). */
static const char *strings(const json_t *o, const char *key, const char *path, const char ***ret,
                           size_t *n, char *field, size_t cap, const char **detail)
{
    const json_t *a = json_object_get(o, key);
    *ret = NULL;
    *n = 0;
    snprintf(field, cap, "%s.%s", path, key);
    if (a && !json_is_array(a)) {
        *detail = "Invalid value: must be a list";
        return field;
    }
    if (json_array_size(a) == 0) {
        return NULL;
    }
    *ret = calloc(json_array_size(a), sizeof(**ret));
    if (!*ret) {
        *detail = "Internal error: out of memory";
        return field;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        if (!json_is_string(v)) {
            snprintf(field, cap, "%s.%s[%zu]", path, key, i);
            *detail = "Invalid value: must be a string";
            return field;
        }
        (*ret)[(*n)++] = json_string_value(v);
    }
    return NULL;
}

const char *kd_check_binding(const json_t *o, const char *path, char *field, size_t cap,
                             const char **detail)
{
    const json_t *btn = json_object_get(o, "bindsToNode");
    if (btn && !json_is_boolean(btn)) {
        snprintf(field, cap, "%s.bindsToNode", path);
        *detail = "Invalid value: must be a boolean";
        return field;
    }
    const char **c = NULL;
    const char **f = NULL;
    size_t nc = 0;
    size_t nf = 0;
    const char *at = strings(o, "bindingConditions", path, &c, &nc, field, cap, detail);
    if (!at) {
        at = strings(o, "bindingFailureConditions", path, &f, &nf, field, cap, detail);
    }
    kdp__bind_err e;
    if (!at && kdp__bindcheck(c, nc, f, nf, &e) < 0) {
        snprintf(field, cap, "%s.%s", path, e.field);
        snprintf(bind_detail, sizeof(bind_detail), "%s", e.why);
        *detail = bind_detail;
        at = field;
    }
    free((void *)c);
    free((void *)f);
    return at;
}

static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-')) {
            return false;
        }
    }
    return true;
}

bool kd_dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253) {
        return false;
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *save = NULL, *p = strtok_r(buf, ".", &save); p; p = strtok_r(NULL, ".", &save)) {
        if (!dns_label(p)) {
            return false;
        }
    }
    return s[0] != '.' && s[n - 1] != '.' && !strstr(s, "..");
}

/* A device's checks: NULL, or the field with *detail set. */
static const char *check_device(const json_t *d, size_t i, char *field, size_t cap,
                                const char **detail)
{
    const char *name = json_string_value(json_object_get(d, "name"));
    snprintf(field, cap, "spec.devices[%zu].name", i);
    if (!name || !dns_label(name)) {
        *detail = name ? "Invalid value: a lowercase RFC 1123 label must consist of lower case "
                         "alphanumeric characters or '-'"
                       : "Required value";
        return field;
    }
    json_t *attrs = json_object_get(d, "attributes");
    json_t *caps = json_object_get(d, "capacity");
    if (json_object_size(attrs) + json_object_size(caps) > 32) {
        snprintf(field, cap, "spec.devices[%zu]", i);
        *detail = "Too many: attributes and capacities must not exceed 32";
        return field;
    }
    const char *key;
    json_t *v;
    json_object_foreach(attrs, key, v)
    {
        int set = !!json_object_get(v, "int") + !!json_object_get(v, "bool") +
                  !!json_object_get(v, "string") + !!json_object_get(v, "version");
        if (set != 1) {
            snprintf(field, cap, "spec.devices[%zu].attributes[%.64s]", i, key);
            *detail = "Invalid value: exactly one value must be specified";
            return field;
        }
        const char *str = json_string_value(json_object_get(v, "string"));
        if (str && strlen(str) > 64) {
            snprintf(field, cap, "spec.devices[%zu].attributes[%.64s].string", i, key);
            *detail = "Too long: may not be more than 64 bytes";
            return field;
        }
    }
    const char *f = check_taints(json_object_get(d, "taints"), i, field, cap, detail);
    char path[48];
    snprintf(path, sizeof(path), "spec.devices[%zu]", i);
    f = f ? f : kd_check_binding(d, path, field, cap, detail);
    return f ? f : kd_check_device_sharing(d, i, field, cap, detail);
}

/* spec.driver and spec.pool. */
static const char *check_pool(const json_t *spec, const char **detail)
{
    const char *driver = json_string_value(json_object_get(spec, "driver"));
    *detail = "Required value";
    if (!driver || !*driver) {
        return "spec.driver";
    }
    if (strlen(driver) > 63 || !kd_dns_subdomain(driver)) {
        *detail = "Invalid value: a lowercase RFC 1123 subdomain of at most 63 characters";
        return "spec.driver";
    }
    json_t *pool = json_object_get(spec, "pool");
    const char *pname = json_string_value(json_object_get(pool, "name"));
    if (!pname || !*pname) {
        return "spec.pool.name";
    }
    json_t *gen = json_object_get(pool, "generation");
    if (gen && (!json_is_integer(gen) || json_integer_value(gen) < 0)) {
        *detail = "Invalid value: must be greater than or equal to 0";
        return "spec.pool.generation";
    }
    json_t *count = json_object_get(pool, "resourceSliceCount");
    if (!json_is_integer(count) || json_integer_value(count) <= 0) {
        *detail = "Invalid value: must be greater than zero";
        return "spec.pool.resourceSliceCount";
    }
    return NULL;
}

/* Exactly one of the node selections. */
static const char *check_nodes(const json_t *spec, const char **detail)
{
    const char *node = json_string_value(json_object_get(spec, "nodeName"));
    int which = (node && *node) + json_is_object(json_object_get(spec, "nodeSelector")) +
                json_is_true(json_object_get(spec, "allNodes")) +
                json_is_true(json_object_get(spec, "perDeviceNodeSelection"));
    if (which == 1) {
        return NULL;
    }
    *detail = which ? "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                      "`perDeviceNodeSelection` is required, but multiple fields are set"
                    : "Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                      "`perDeviceNodeSelection` is required";
    return "spec";
}

static const char *check_devices(const json_t *devs, char *field, size_t cap, const char **detail)
{
    if (devs && !json_is_array(devs)) {
        *detail = "Invalid value: must be a list";
        return "spec.devices";
    }
    if (json_array_size(devs) > KD_MAX_SLICE_DEV) {
        *detail = "Too many: must have at most 128 items";
        return "spec.devices";
    }
    bool tainted = false;
    for (size_t i = 0; i < json_array_size(devs); i++) {
        const json_t *d = json_array_get(devs, i);
        tainted |= json_array_size(json_object_get(d, "taints")) > 0 ||
                   json_array_size(json_object_get(d, "consumesCounters")) > 0;
    }
    if (tainted && json_array_size(devs) > MAX_DEV_WITH_TAINTS) {
        *detail = "Too many: must have at most 64 items when a device has taints or consumes "
                  "counters";
        return "spec.devices";
    }
    for (size_t i = 0; i < json_array_size(devs); i++) {
        const char *f = check_device(json_array_get(devs, i), i, field, cap, detail);
        if (f) {
            return f;
        }
        const char *ni = json_string_value(json_object_get(json_array_get(devs, i), "name"));
        for (size_t j = 0; j < i; j++) {
            const char *nj = json_string_value(json_object_get(json_array_get(devs, j), "name"));
            if (strcmp(ni, nj) == 0) {
                snprintf(field, cap, "spec.devices[%zu].name", i);
                *detail = "Duplicate value";
                return field;
            }
        }
    }
    return NULL;
}

const char *kd_check_slice(const json_t *o, char *field, size_t cap, const char **detail)
{
    json_t *spec = json_object_get(o, "spec");
    if (!json_is_object(spec)) {
        *detail = "Required value";
        return "spec";
    }
    const char *f = check_pool(spec, detail);
    if (!f) {
        f = check_nodes(spec, detail);
    }
    if (!f) {
        f = kd_check_shared_counters(spec, field, cap, detail);
    }
    return f ? f : check_devices(json_object_get(spec, "devices"), field, cap, detail);
}

const char *kd_slice_immutable(const json_t *old, const json_t *new)
{
    static const char *const paths[][2] = {{"driver", NULL}, {"pool", "name"}, {"nodeName", NULL}};
    for (size_t i = 0; i < 3; i++) {
        const json_t *a = json_object_get(json_object_get(old, "spec"), paths[i][0]);
        const json_t *b = json_object_get(json_object_get(new, "spec"), paths[i][0]);
        if (paths[i][1]) {
            a = json_object_get(a, paths[i][1]);
            b = json_object_get(b, paths[i][1]);
        }
        if (!(a == b || (a && b && json_equal(a, b)))) {
            return i == 0 ? "spec.driver" : i == 1 ? "spec.pool.name" : "spec.nodeName";
        }
    }
    return NULL;
}
