/* SPDX-License-Identifier: MIT */
/*
 * dra_check_class: `kdpctl dra apiserver`'s checks of a DeviceClass, as the
 * API server makes them (validateDeviceClassSpec): at most 32 selectors,
 * each a CEL expression of at most 10 KiB (not evaluated), at most 32
 * opaque configs (a driver name, parameters a JSON object of at most
 * 10 KiB), and an extendedResourceName that is one (KEP-5004: a '/', not
 * kubernetes.io's, not "requests.", "requests." + it a qualified name).
 * Pure: dra_rest.c answers what it finds.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "dra_check.h"

enum { MAX_SELECTORS = 32, MAX_CONFIGS = 32, MAX_CEL = 10 * 1024, MAX_PARAMS = 10 * 1024 };

static const char *check_selectors(const json_t *sel, char *field, size_t cap, const char **detail)
{
    if (sel && (!json_is_array(sel) || json_array_size(sel) > MAX_SELECTORS)) {
        *detail = "Invalid value: a list of at most 32 selectors";
        return "spec.selectors";
    }
    size_t i;
    const json_t *s;
    json_array_foreach(sel, i, s)
    {
        const char *e = json_string_value(json_object_get(json_object_get(s, "cel"), "expression"));
        snprintf(field, cap, "spec.selectors[%zu].cel.expression", i);
        if (!e || !*e) {
            *detail = "Required value";
            return field;
        }
        if (strlen(e) > MAX_CEL) {
            *detail = "Too long: may not be more than 10240 bytes";
            return field;
        }
    }
    return NULL;
}

static const char *check_configs(const json_t *cfg, char *field, size_t cap, const char **detail)
{
    if (cfg && (!json_is_array(cfg) || json_array_size(cfg) > MAX_CONFIGS)) {
        *detail = "Invalid value: a list of at most 32 configs";
        return "spec.config";
    }
    size_t i;
    const json_t *c;
    json_array_foreach(cfg, i, c)
    {
        const json_t *op = json_object_get(c, "opaque");
        const char *drv = json_string_value(json_object_get(op, "driver"));
        const json_t *params = json_object_get(op, "parameters");
        const char *why = NULL;
        snprintf(field, cap, "spec.config[%zu].opaque.driver", i);
        if (!drv || kdp__k8snames_driver_name(drv, &why) != 0) {
            *detail = drv ? "Invalid value: not a driver name (a DNS subdomain of at most 63)"
                          : "Required value";
            return field;
        }
        snprintf(field, cap, "spec.config[%zu].opaque.parameters", i);
        char *text = json_is_object(params) ? json_dumps(params, JSON_COMPACT) : NULL;
        size_t n = text ? strlen(text) : 0;
        free(text);
        if (!json_is_object(params) || n > MAX_PARAMS) {
            *detail = "Invalid value: a JSON object of at most 10240 bytes";
            return field;
        }
    }
    return NULL;
}

/* KEP-5004's rule for extendedResourceName (IsExtendedResourceName). */
static bool extended_resource_name(const char *s)
{
    char q[320];
    return strchr(s, '/') && !strstr(s, "kubernetes.io/") && strncmp(s, "requests.", 9) != 0 &&
           (size_t)snprintf(q, sizeof(q), "requests.%s", s) < sizeof(q) &&
           kdp__k8snames_qualified_name(q, NULL) == 0;
}

const char *kd_check_class(const json_t *o, char *field, size_t cap, const char **detail)
{
    const json_t *spec = json_object_get(o, "spec");
    if (!json_is_object(spec)) {
        *detail = "Required value";
        return "spec";
    }
    const char *f = check_selectors(json_object_get(spec, "selectors"), field, cap, detail);
    if (!f) {
        f = check_configs(json_object_get(spec, "config"), field, cap, detail);
    }
    const json_t *ext = json_object_get(spec, "extendedResourceName");
    if (!f && ext && (!json_is_string(ext) || !extended_resource_name(json_string_value(ext)))) {
        *detail = "Invalid value: must be a valid extended resource name (example.com/gpu: a "
                  "domain and a name, not kubernetes.io's, not starting with \"requests.\")";
        f = "spec.extendedResourceName";
    }
    return f;
}
