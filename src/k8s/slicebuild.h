/* SPDX-License-Identifier: MIT */
/*
 * slicebuild: ResourceSlice objects as the API server takes them, from
 * devices described in C: the devices' JSON (v1 shape; v1beta1 nests a
 * device's attributes and capacity under "basic"), every field checked with
 * the API's rules (base/k8snames), a bad one left out with a log line
 * naming it; and the slice objects of a pool (nodeName, pool name,
 * generation and resourceSliceCount, an ownerReference to the Node,
 * generateName "<node>-<driver>-").
 *
 * Pure: no I/O, any thread.
 */
#ifndef KDP_K8S_SLICEBUILD_H
#define KDP_K8S_SLICEBUILD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp_dra.h"

#define KDP__SLICEBUILD_MAX_FIELDS KDP_DRA_MAX_DEVICE_FIELDS
/* The most taints a device has (the API's DeviceTaintsMaxLength). */
#define KDP__SLICEBUILD_MAX_TAINTS 16U
/* The most devices a pool of kdp holds. */
#define KDP__SLICEBUILD_MAX_POOL 16384U

/* A taint of a device (KEP-5055, GA in 1.37): the scheduler allocates a
 * tainted device only to claims that tolerate it; NoExecute also evicts. */
typedef struct kdp__slice_taint {
    const char *key;    /* a label name ("gpu.example.com/unhealthy") */
    const char *value;  /* a label value, or NULL */
    const char *effect; /* "NoSchedule", "NoExecute" or "None" */
    int64_t time_added; /* Unix seconds (0: the API server's now) */
} kdp__slice_taint;

/* A capacity of a device. */
typedef struct kdp__slice_cap {
    const char *name;                     /* a qualified name */
    const char *value;                    /* a quantity */
    const kdp_dra_request_policy *policy; /* NULL: none (only with allow_multiple) */
} kdp__slice_cap;

/* A device to publish (strings borrowed for the call). */
typedef struct kdp__slice_dev {
    const char *name; /* a DNS label, unique */
    const kdp_dra_attr *attrs;
    size_t n_attrs;
    const kdp__slice_cap *caps;
    size_t n_caps;
    const kdp__slice_taint *taints; /* at most KDP__SLICEBUILD_MAX_TAINTS */
    size_t n_taints;
    const kdp_dra_consumption *consumes; /* consumesCounters */
    size_t n_consumes;
    bool allow_multiple; /* allowMultipleAllocations */
    /* binding conditions (k8s/bindcheck's rules; a bad set left out) */
    const char *const *bind_conds; /* bindingConditions */
    size_t n_bind_conds;
    const char *const *bind_fails; /* bindingFailureConditions */
    size_t n_bind_fails;
    bool binds_to_node; /* bindsToNode */
} kdp__slice_dev;

/* One device in the v1 shape ({name, attributes, capacity, taints,
 * consumesCounters, allowMultipleAllocations, bindsToNode,
 * bindingConditions, bindingFailureConditions}); bad
 * fields are left out with a log line naming them. NULL: the name is bad (why
 * says so) or -ENOMEM (why empty). */
json_t *kdp__slicebuild_device(const kdp__slice_dev *d, char *why, size_t why_len);
/* The devices of a pool: each as kdp__slicebuild_device makes it (a device
 * with a bad name or consumption left out, logged; so is one that consumes
 * counters sets[0..n_sets) does not have: k8s/slicectr), sorted by name,
 * the second of a name left out (logged). *ret (an array of new
 * references, n of them) for kdp__sr_set_devices. Returns the count,
 * -E2BIG (more than KDP__SLICEBUILD_MAX_POOL, logged) or -ENOMEM. */
int kdp__slicebuild_devices(const kdp__slice_dev *devs, size_t n, json_t *const *sets,
                            size_t n_sets, json_t ***ret);
/* The device as version wants it (a new reference): v1 and v1beta2 as
 * they are, v1beta1 with every field but the name under "basic". */
json_t *kdp__slicebuild_shape(const char *version, json_t *dev);
/* generateName for the node's slices: "<node>-<driver>-" with '.' as '-',
 * cut to fit (at most 58 characters, a valid name with 5 random ones
 * appended). */
void kdp__slicebuild_generate_name(const char *node, const char *driver, char *out, size_t len);
/* A ResourceSlice object (new reference) holding items[0..n): devices (v1
 * shape, converted for version) or, with sets, counter sets
 * (sharedCounters: a slice holds one or the other), the pool's generation
 * and slice count. name NULL: a generateName; else name and
 * resource_version (PUT). */
json_t *kdp__slicebuild_object(const char *version, const char *driver, const char *node,
                               const char *node_uid, uint64_t generation, size_t count, bool sets,
                               json_t *const *items, size_t n, const char *name,
                               const char *resource_version);

#endif
