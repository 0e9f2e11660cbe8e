/* SPDX-License-Identifier: MIT */
/*
 * dra_claim_check: `kdpctl dra claim`'s check of what it is about to
 * allocate against the slices the API server has (as the scheduler would
 * only allocate what a slice offers): each device in a slice of the driver
 * on the node (the pool kdp names after the node); a share only of a device
 * that allows multiple allocations; what a share consumed only of the
 * device's capacities. Pure.
 */
#include <stdio.h>
#include <string.h>

#include "dra_api.h"

/* The device named name in the node's slices of driver, or NULL. */
const json_t *kd_claim_find_device(const json_t *list, const char *driver, const char *node,
                                   const char *name)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(list, "items"), i, s)
    {
        const json_t *spec = json_object_get(s, "spec");
        const char *d = json_string_value(json_object_get(spec, "driver"));
        const char *n = json_string_value(json_object_get(spec, "nodeName"));
        const char *pool =
            json_string_value(json_object_get(json_object_get(spec, "pool"), "name"));
        if (!d || !n || !pool || strcmp(d, driver) != 0 || strcmp(n, node) != 0 ||
            strcmp(pool, node) != 0) {
            continue;
        }
        size_t k;
        json_t *dev;
        json_array_foreach(json_object_get(spec, "devices"), k, dev)
        {
            const char *dn = json_string_value(json_object_get(dev, "name"));
            if (dn && strcmp(dn, name) == 0) {
                return dev;
            }
        }
    }
    return NULL;
}

const char *kd_claim_problem(const json_t *list, const char *driver, const char *node,
                             const kc_strv *devices, bool shared, const json_t *consumed, char *why,
                             size_t len)
{
    for (size_t i = 0; i < devices->n; i++) {
        const char *name = devices->v[i];
        const json_t *dev = kd_claim_find_device(list, driver, node, name);
        if (!dev) {
            snprintf(why, len,
                     "device %s is in no ResourceSlice of driver %s on node %s: the scheduler "
                     "would not allocate it",
                     name, driver, node);
            return why;
        }
        if (shared && !json_is_true(json_object_get(dev, "allowMultipleAllocations"))) {
            snprintf(why, len,
                     "device %s does not allow multiple allocations (allowMultipleAllocations): "
                     "it cannot be shared (--share-id)",
                     name);
            return why;
        }
        const char *cap;
        json_t *v;
        json_object_foreach((json_t *)consumed, cap, v)
        {
            if (!json_object_get(json_object_get(dev, "capacity"), cap)) {
                snprintf(why, len, "device %s has no capacity %s (--consumed)", name, cap);
                return why;
            }
        }
    }
    return NULL;
}
