/* SPDX-License-Identifier: MIT */
/*
 * dra_check_status: `kdpctl dra apiserver`'s checks of a ResourceClaim's
 * status.devices, as the API server makes them (validateDeviceStatus,
 * ValidateConditions), and the binding conditions of its allocation
 * results (validateDeviceBindingParameters): each status entry's driver,
 * pool, device and shareID, each one an allocated device of the claim and
 * there once; its conditions,
 * data and networkData by the rules kdp's driver checks its own with
 * (dra/devstatus.h), plus each condition's lastTransitionTime.
 * Pure: dra_rest.c answers what it finds.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "dra/devstatus.h"
#include "dra_check.h"

enum { MAX_CONDITIONS = KDP__DRA_STATUS_MAX_CONDITIONS, MAX_IPS = KDP__DRA_STATUS_MAX_IPS };

static char detail_buf[600]; /* *detail's storage: valid until the next check */

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The entry's key names an allocated result of the claim. */
static bool allocated(const json_t *claim, const json_t *e)
{
    const json_t *results = json_object_get(
        json_object_get(json_object_get(json_object_get(claim, "status"), "allocation"), "devices"),
        "results");
    size_t i;
    const json_t *r;
    json_array_foreach(results, i, r)
    {
        if (same(str(r, "driver"), str(e, "driver")) && same(str(r, "pool"), str(e, "pool")) &&
            same(str(r, "device"), str(e, "device")) &&
            same(str(r, "shareID"), str(e, "shareID"))) {
            return true;
        }
    }
    return false;
}

/* Key k's value s (0 driver, 1 pool, 2 device, 3 shareID): 0, or -1 and
 * *why. */
static int check_value(size_t k, const char *s, const char **why)
{
    switch (k) {
    case 0:
        return kdp__k8snames_driver_name(s, why) != 0 ? -1 : 0;
    case 1:
        *why = "must be no more than 253 characters";
        return strlen(s) > 253 ? -1 : 0;
    case 2:
        return kdp__k8snames_dns_label(s, why) != 0 ? -1 : 0;
    default:
        return kdp__k8snames_uuid(s, why) != 0 ? -1 : 0;
    }
}

/* driver, pool, device, shareID of entry i. */
static const char *check_key(const json_t *e, size_t i, char *field, size_t cap,
                             const char **detail)
{
    static const char *const keys[] = {"driver", "pool", "device", "shareID"};
    for (size_t k = 0; k < 4; k++) {
        const json_t *v = json_object_get(e, keys[k]);
        const char *s = json_string_value(v);
        const char *why = NULL;
        snprintf(field, cap, "status.devices[%zu].%s", i, keys[k]);
        if (!v && k < 3) {
            *detail = "Required value";
            return field;
        }
        if (v && !s) {
            *detail = "Invalid value: must be a string";
            return field;
        }
        if (s && check_value(k, s, &why) < 0) {
            snprintf(detail_buf, sizeof(detail_buf), "Invalid value: \"%.100s\": %s", s,
                     why ? why : "not valid");
            *detail = detail_buf;
            return field;
        }
    }
    return NULL;
}

/* The entry's conditions, data and networkData as kdp's own checks see
 * them: converted to a kdp_dra_device_status and checked there. */
static const char *check_fields(const json_t *e, size_t i, char *field, size_t cap,
                                const char **detail)
{
    const json_t *conds = json_object_get(e, "conditions");
    const json_t *nd = json_object_get(e, "networkData");
    const json_t *ips = json_object_get(nd, "ips");
    snprintf(field, cap, "status.devices[%zu]", i);
    if ((conds && !json_is_array(conds)) || json_array_size(conds) > MAX_CONDITIONS ||
        (nd && !json_is_object(nd)) || (ips && !json_is_array(ips)) ||
        json_array_size(ips) > MAX_IPS) {
        *detail = "Invalid value: conditions and networkData.ips are lists (at most 8 and 16), "
                  "networkData an object";
        return field;
    }
    kdp_dra_condition c[MAX_CONDITIONS];
    const char *ip[MAX_IPS];
    size_t k;
    const json_t *v;
    json_array_foreach(conds, k, v)
    {
        if (!str(v, "lastTransitionTime")) {
            snprintf(field, cap, "status.devices[%zu].conditions[%zu].lastTransitionTime", i, k);
            *detail = "Required value";
            return field;
        }
        c[k] = (kdp_dra_condition){str(v, "type"), str(v, "status"), str(v, "reason"),
                                   str(v, "message")};
    }
    json_array_foreach(ips, k, v)
    {
        ip[k] = json_string_value(v) ? json_string_value(v) : "";
    }
    const json_t *data = json_object_get(e, "data");
    char *text = data ? json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    kdp_dra_device_status st = {.conditions = c,
                                .n_conditions = json_array_size(conds),
                                .data = text,
                                .interface_name = str(nd, "interfaceName"),
                                .ips = ip,
                                .n_ips = json_array_size(ips),
                                .hardware_address = str(nd, "hardwareAddress")};
    char why[400];
    char *out = NULL;
    int r = kdp__dra_devstatus_json(&st, 0, &out, why, sizeof(why));
    free(text);
    free(out);
    if (r < 0) {
        snprintf(detail_buf, sizeof(detail_buf), "Invalid value: %s",
                 r == -EINVAL ? why : "out of memory");
        *detail = detail_buf;
        return field;
    }
    return NULL;
}

/* status.allocation.devices.results: each one's binding conditions (what
 * the scheduler copied from the device). */
static const char *check_results(const json_t *claim, char *field, size_t cap, const char **detail)
{
    const json_t *results = json_object_get(
        json_object_get(json_object_get(json_object_get(claim, "status"), "allocation"), "devices"),
        "results");
    size_t i;
    const json_t *r;
    json_array_foreach(results, i, r)
    {
        char path[64];
        snprintf(path, sizeof(path), "status.allocation.devices.results[%zu]", i);
        const char *f = kd_check_binding(r, path, field, cap, detail);
        if (f) {
            return f;
        }
    }
    return NULL;
}

const char *kd_check_claim_status(const json_t *claim, char *field, size_t cap, const char **detail)
{
    const char *rf = check_results(claim, field, cap, detail);
    if (rf) {
        return rf;
    }
    const json_t *devs = json_object_get(json_object_get(claim, "status"), "devices");
    if (devs && !json_is_array(devs)) {
        *detail = "Invalid value: must be a list";
        return "status.devices";
    }
    size_t i;
    const json_t *e;
    json_array_foreach(devs, i, e)
    {
        const char *f = check_key(e, i, field, cap, detail);
        if (!f && !allocated(claim, e)) {
            snprintf(field, cap, "status.devices[%zu]", i);
            *detail = "Invalid value: must be an allocated device in the claim";
            f = field;
        }
        for (size_t j = 0; !f && j < i; j++) {
            const json_t *o = json_array_get(devs, j);
            if (same(str(o, "driver"), str(e, "driver")) && same(str(o, "pool"), str(e, "pool")) &&
                same(str(o, "device"), str(e, "device")) &&
                same(str(o, "shareID"), str(e, "shareID"))) {
                snprintf(field, cap, "status.devices[%zu]", i);
                *detail = "Duplicate value";
                f = field;
            }
        }
        if (!f) {
            f = check_fields(e, i, field, cap, detail);
        }
        if (f) {
            return f;
        }
    }
    return NULL;
}
