/* SPDX-License-Identifier: MIT */
/*
 * claimbind: what a claim says of its devices' binding (KEP-5007): each
 * result's bindingConditions and bindingFailureConditions (checked with
 * k8s/bindcheck's rules), this driver's entries in status.devices, and
 * whether a device's binding conditions are met, as the scheduler's PreBind
 * check decides it. For k8s/claims' parse and k8s/claimstatus' merge.
 * Pure.
 */
#ifndef KDP_K8S_CLAIMBIND_H
#define KDP_K8S_CLAIMBIND_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Result r (index idx) of a claim: its bindingConditions then its
 * bindingFailureConditions into *ret (malloc'd strings; *n_bind and
 * *n_fail of each; NULL when none), checked with k8s/bindcheck's rules.
 * Returns 0, -EINVAL (why names the field and rule), -ENOMEM. */
int kdp__claim_read_binding(json_t *r, size_t idx, char ***ret, size_t *n_bind, size_t *n_fail,
                            char *why, size_t why_len);
/* The claim's status.devices entry of driver, pool, device and share_id
 * (NULL: not shared): its own fields (conditions, data, networkData) as
 * JSON text (malloc'd), or NULL (none, or *oom set). */
char *kdp__claim_status_fields(json_t *claim, const char *driver, const char *pool,
                               const char *device, const char *share_id, bool *oom);
/* The entry of driver, pool and device (and share_id, NULL: not shared,
 * unless any_share) in a claim's status.devices list, or NULL. */
json_t *kdp__claim_status_entry(const json_t *devices, const char *driver, const char *pool,
                                const char *device, const char *share_id, bool any_share);
/* Whether a device's binding conditions (bind[0..n_bind), then its failure
 * conditions bind[n_bind..n_bind+n_fail)) are met in the claim (the
 * scheduler's PreBind check: driver's status.devices entry for the pool
 * and device, shareID aside): 1 (every binding condition type has a
 * condition "True"), 0 (not yet), -1 (a failure condition type is
 * "True"). A device without binding conditions is 1. */
int kdp__claim_binding_state(json_t *claim, const char *driver, const char *pool,
                             const char *device, char *const *bind, size_t n_bind, size_t n_fail);

#endif
