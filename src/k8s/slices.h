/* SPDX-License-Identifier: MIT */
/*
 * slices: the node's ResourceSlices, published the way the Go resourceslice
 * controller (k8s.io/dynamic-resource-allocation) does it:
 *   - resource.k8s.io/v1, else v1beta2, else v1beta1 (found by discovery;
 *     v1beta1 nests a device's attributes and capacity under "basic");
 *   - one pool named after the node; devices sorted by name, at most 128 per
 *     slice, at least one slice even with no device; every slice with
 *     nodeName, pool.resourceSliceCount and an ownerReference (controller)
 *     to the Node, named by generateName "<node>-<driver>-";
 *   - when the content changes, the pool's generation goes above every
 *     existing one; obsolete slices are deleted first, then the others
 *     updated or created;
 *   - the node's slices of the driver are listed and watched (field
 *     selector spec.nodeName, spec.driver) from the list's resourceVersion:
 *     a slice edited or deleted by someone else is put back; a 409 re-lists
 *     and retries (backoff 20 ms .. 5 s); a watch that ends is resumed (410: listed again); a list
 *     every resync_ms is the backstop;
 *   - failures retry with a capped backoff (100 ms .. 30 s), logged once
 *     per change of state, not per retry.
 * Calls go one at a time. Idle and published, the only armed timer is the
 * resync. kdp__slices_free() leaves the slices in place (a restarted driver
 * takes them over; the kubelet deletes them when the driver is gone).
 *
 * Threading: loop thread only.
 */
#ifndef KDP_K8S_SLICES_H
#define KDP_K8S_SLICES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "k8s/api.h"
#include "kdp_dra.h"

#define KDP__SLICES_MAX_DEVICES    KDP_DRA_MAX_DEVICES_PER_SLICE /* per slice */
#define KDP__SLICES_MAX_FIELDS     KDP_DRA_MAX_DEVICE_FIELDS
#define KDP__SLICES_MIN_BACKOFF_MS 100U
#define KDP__SLICES_MAX_BACKOFF_MS 30000U
/* After a 409 (re-list, write again): sooner, the server answers. */
#define KDP__SLICES_MIN_CONFLICT_MS   20U
#define KDP__SLICES_MAX_CONFLICT_MS   5000U
#define KDP__SLICES_COALESCE_MS       20U   /* kdp__slices_set bursts */
#define KDP__SLICES_POKE_MS           200U  /* someone else's change: re-list after */
#define KDP__SLICES_WATCH_TIMEOUT_S   1800U /* the server ends a watch after this */
#define KDP__SLICES_DEFAULT_RESYNC_MS (10U * 60U * 1000U)
#define KDP__SLICES_MAX_POOL          16384U /* devices kept at most */

/* A device to publish (strings borrowed for kdp__slices_set only). */
typedef struct kdp__slice_dev {
    const char *name; /* a DNS label, unique */
    const kdp_dra_attr *attrs;
    size_t n_attrs;
    const char *const *cap_names;  /* qualified names */
    const char *const *cap_values; /* quantities */
    size_t n_caps;
} kdp__slice_dev;

typedef struct kdp__slices_status {
    bool published;      /* the API server has the devices last set */
    uint64_t generation; /* the pool's */
    size_t slices;
    size_t devices;
    char version[16];     /* the resource.k8s.io version used ("" before) */
    char error[256];      /* the last failure, "" once published */
    unsigned long writes; /* creates, updates and deletes made */
    unsigned long lists;
} kdp__slices_status;

typedef struct kdp__slices kdp__slices;
typedef void (*kdp__slices_status_cb)(const kdp__slices_status *st, void *ud);

/* A publisher for driver's pool on node (node_uid: the Node's UID if
 * known, else NULL: read from the API server). resync_ms 0 = 10 minutes.
 * status (may be NULL) runs on every change of the status. Starts at once
 * (discovery, the Node, the list) and publishes an empty pool until
 * kdp__slices_set(). Returns 0, -EINVAL (a bad driver or node name),
 * -ENOMEM. */
int kdp__slices_new(kdp__api *a, const char *driver, const char *node, const char *node_uid,
                    unsigned resync_ms, kdp__slices_status_cb status, void *ud, kdp__slices **ret);
/* The devices to publish (copied; sorted by name here). Every field is
 * checked with k8snames: a device with a bad or duplicate name is left
 * out, and so is a bad attribute or capacity, each with a log line.
 * Published soon after (bursts coalesce). Returns the number of devices
 * kept, or -ENOMEM, -E2BIG (more than KDP__SLICES_MAX_POOL). */
int kdp__slices_set(kdp__slices *s, const kdp__slice_dev *devs, size_t n);
void kdp__slices_get_status(const kdp__slices *s, kdp__slices_status *ret);
/* Stops (the slices stay). NULL is fine. Not from its status callback. */
void kdp__slices_free(kdp__slices *s);

/* --- building (pure; for tests) --- */

/* One device in the v1 shape ({name, attributes, capacity}); bad fields
 * are left out with a log line naming them. NULL: the name is bad (why
 * says so) or -ENOMEM (why empty). */
json_t *kdp__slices_device(const kdp__slice_dev *d, char *why, size_t why_len);
/* The device as version wants it (a new reference): v1 and v1beta2 as
 * they are, v1beta1 with attributes and capacity under "basic". */
json_t *kdp__slices_device_shape(const char *version, json_t *dev);
/* How many slices n devices take (at least 1). */
size_t kdp__slices_count(size_t n);
/* generateName for the node's slices: "<node>-<driver>-" with '.' as '-',
 * cut to fit (at most 58 characters, a valid name with 5 random ones
 * appended). */
void kdp__slices_generate_name(const char *node, const char *driver, char *out, size_t len);
/* A ResourceSlice object (new reference): devs[0..n) (v1 shape, converted
 * for version), the pool's generation and slice count. name NULL: a
 * generateName; else name and resource_version (PUT). */
json_t *kdp__slices_object(const char *version, const char *driver, const char *node,
                           const char *node_uid, uint64_t generation, size_t count,
                           json_t *const *devs, size_t n, const char *name,
                           const char *resource_version);

#endif
