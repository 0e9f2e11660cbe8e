/* SPDX-License-Identifier: MIT */
/*
 * slices: the node's ResourceSlices, published on the loop. The decisions
 * are slicerec's (what should be against what the API server has, the
 * next call; its header says how they are made: one pool named after the
 * node, at most 128 devices per slice, a generation above every existing
 * one, list + watch with every write's answer, 409s re-read, backoffs); the
 * objects are slicebuild's. This is the thin part between them and the
 * API: it turns slicerec's actions into calls, their answers and the
 * watch's events back into slicerec's events, and arms one timer for the
 * time slicerec hands back. Bursts of kdp__slices_set coalesce
 * (KDP__SLICES_COALESCE_MS). Idle and published, the only armed timer is
 * the resync. kdp__slices_free() leaves the slices in place (a restarted
 * driver takes them over; the kubelet deletes them when the driver is
 * gone).
 *
 * Threading: loop thread only.
 */
#ifndef KDP_K8S_SLICES_H
#define KDP_K8S_SLICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "k8s/api.h"
#include "k8s/slicebuild.h"
#include "k8s/slicerec.h"

#define KDP__SLICES_COALESCE_MS     20U   /* kdp__slices_set bursts */
#define KDP__SLICES_WATCH_TIMEOUT_S 1800U /* the server ends a watch after this */

typedef kdp__sr_status kdp__slices_status;
typedef struct kdp__slices kdp__slices;
typedef void (*kdp__slices_status_cb)(const kdp__slices_status *st, void *ud);

/* A publisher for driver's pool on node (node_uid: the Node's UID if
 * known, else NULL: read from the API server). resync_ms 0 = 10 minutes.
 * status (may be NULL) runs on every change of the status. Starts at once
 * (discovery, the Node, the list), publishing nothing until the first
 * kdp__slices_set() (an empty set then publishes an empty pool). Returns
 * 0, -EINVAL (a bad driver or node name, logged), -ENOMEM. */
int kdp__slices_new(kdp__api *a, const char *driver, const char *node, const char *node_uid,
                    unsigned resync_ms, kdp__slices_status_cb status, void *ud, kdp__slices **ret);
/* The devices and the pool's counter sets to publish (copied; see
 * kdp__slicebuild_devices and kdp__slicectr_sets). Published soon after
 * (bursts coalesce). Returns the number of devices kept, or -ENOMEM,
 * -E2BIG. */
int kdp__slices_set(kdp__slices *s, const kdp__slice_dev *devs, size_t n,
                    const kdp_dra_counter_set *sets, size_t nsets);
void kdp__slices_get_status(const kdp__slices *s, kdp__slices_status *ret);
/* Stops (the slices stay). NULL is fine. Not from its status callback. */
void kdp__slices_free(kdp__slices *s);

#endif
