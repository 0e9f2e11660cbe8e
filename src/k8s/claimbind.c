/* SPDX-License-Identifier: MIT */
/* claimbind: a claim's binding conditions and status entries (see
 * claimbind.h). */
#include "k8s/claimbind.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/bindcheck.h"

int kdp__claim_read_binding(json_t *r, size_t idx, char ***ret, size_t *n_bind, size_t *n_fail,
                            char *why, size_t why_len)
{
    json_t *lists[2] = {json_object_get(r, "bindingConditions"),
                        json_object_get(r, "bindingFailureConditions")};
    const char *v[2 * KDP__BIND_MAX];
    size_t n[2] = {0, 0};
    *ret = NULL;
    *n_bind = *n_fail = 0;
    for (int k = 0; k < 2; k++) {
        json_t *l = lists[k];
        if (l && !json_is_null(l) && (!json_is_array(l) || json_array_size(l) > KDP__BIND_MAX)) {
            snprintf(why, why_len,
                     "status.allocation.devices.results[%zu].%s must be a list of at most %u", idx,
                     k ? "bindingFailureConditions" : "bindingConditions", KDP__BIND_MAX);
            return -EINVAL;
        }
        for (size_t i = 0; i < json_array_size(l); i++) {
            v[n[0] + n[1]] = json_string_value(json_array_get(l, i));
            n[k]++;
        }
    }
    kdp__bind_err e;
    if ((n[0] || n[1]) && kdp__bindcheck(v, n[0], v + n[0], n[1], &e) < 0) {
        snprintf(why, why_len, "status.allocation.devices.results[%zu].%s: %s", idx, e.field,
                 e.why);
        return -EINVAL;
    }
    size_t total = n[0] + n[1];
    char **out = total ? calloc(total, sizeof(char *)) : NULL;
    bool oom = total && !out;
    for (size_t i = 0; !oom && i < total; i++) {
        oom = !(out[i] = strdup(v[i]));
    }
    if (oom) {
        for (size_t i = 0; out && i < total; i++) {
            free(out[i]);
        }
        free(out);
        snprintf(why, why_len, "out of memory reading the claim");
        return -ENOMEM;
    }
    *ret = out;
    *n_bind = n[0];
    *n_fail = n[1];
    return 0;
}

json_t *kdp__claim_status_entry(const json_t *devices, const char *driver, const char *pool,
                                const char *device, const char *share_id, bool any_share)
{
    size_t i;
    json_t *e;
    json_array_foreach(devices, i, e)
    {
        const char *d = json_string_value(json_object_get(e, "driver"));
        const char *p = json_string_value(json_object_get(e, "pool"));
        const char *n = json_string_value(json_object_get(e, "device"));
        const char *sh = json_string_value(json_object_get(e, "shareID"));
        if (d && p && n && strcmp(d, driver) == 0 && strcmp(p, pool) == 0 &&
            strcmp(n, device) == 0 &&
            (any_share || (sh && share_id ? strcmp(sh, share_id) == 0 : !sh && !share_id))) {
            return e;
        }
    }
    return NULL;
}

/* The claim's status.devices. */
static json_t *status_devices(json_t *claim)
{
    return json_object_get(json_object_get(claim, "status"), "devices");
}

/* Whether the entry has a condition of type t with status "True". */
static bool condition_true(json_t *entry, const char *t)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(entry, "conditions"), i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *st = json_string_value(json_object_get(c, "status"));
        if (type && st && strcmp(type, t) == 0 && strcmp(st, "True") == 0) {
            return true;
        }
    }
    return false;
}

int kdp__claim_binding_state(json_t *claim, const char *driver, const char *pool,
                             const char *device, char *const *bind, size_t n_bind, size_t n_fail)
{
    json_t *e = kdp__claim_status_entry(status_devices(claim), driver, pool, device, NULL, true);
    for (size_t i = 0; i < n_fail; i++) {
        if (condition_true(e, bind[n_bind + i])) {
            return -1;
        }
    }
    for (size_t i = 0; i < n_bind; i++) {
        if (!condition_true(e, bind[i])) {
            return 0;
        }
    }
    return 1;
}

char *kdp__claim_status_fields(json_t *claim, const char *driver, const char *pool,
                               const char *device, const char *share_id, bool *oom)
{
    static const char *const keys[] = {"driver", "pool", "device", "shareID"};
    json_t *e =
        kdp__claim_status_entry(status_devices(claim), driver, pool, device, share_id, false);
    json_t *own = json_is_object(e) ? json_deep_copy(e) : NULL;
    for (size_t k = 0; own && k < sizeof(keys) / sizeof(keys[0]); k++) {
        (void)json_object_del(own, keys[k]);
    }
    char *text = json_object_size(own) ? json_dumps(own, JSON_COMPACT) : NULL;
    *oom |= (e && !own) || (json_object_size(own) && !text);
    json_decref(own);
    return text;
}
