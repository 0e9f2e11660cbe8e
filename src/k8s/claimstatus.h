/* SPDX-License-Identifier: MIT */
/*
 * claimstatus: a driver's entries in a ResourceClaim's status.devices
 * (KEP-4817), written through the /status subresource. The merge is pure:
 * the entries of this driver and pool replaced by the ones given (none:
 * removed), every other entry kept in its place; a condition whose type and
 * status did not change keeps its lastTransitionTime. The writer reads the
 * claim (its UID checked), merges, and writes only if that changed
 * anything, with the resourceVersion it read: a 409 reads again (at most
 * KDP__CSTAT_MAX_CONFLICTS times).
 *
 * Threading: loop thread (the writer); the merge is pure.
 */
#ifndef KDP_K8S_CLAIMSTATUS_H
#define KDP_K8S_CLAIMSTATUS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "k8s/api.h"

#define KDP__CSTAT_MAX_CONFLICTS 5
/* The most entries one write carries (a claim has at most 32 requests). */
#define KDP__CSTAT_MAX_ENTRIES 256

typedef struct kdp__cstat_entry {
    const char *device;
    const char *share_id; /* NULL: not shared */
    const char *fields;   /* the entry's own fields, a JSON object (text) */
    /* fields unused: the claim's own entry for the device is left as it is
     * (none if it has none) */
    bool keep;
} kdp__cstat_entry;

/* claim's status.devices with driver/pool's entries replaced by e[0..n).
 * Returns the new list (a new reference) and *changed, or NULL: -ENOMEM,
 * or -EINVAL when an entry's fields are not a JSON object (*err). */
json_t *kdp__cstat_merge(const json_t *claim, const char *driver, const char *pool,
                         const kdp__cstat_entry *e, size_t n, bool *changed, int *err);

typedef struct kdp__cstat_req kdp__cstat_req;
/* done(0, NULL, ud): written (or nothing to change); else -errno and why:
 * -ENOENT (the claim is gone), -ESTALE (another claim of that name, or
 * conflicts past the bound), the API's errors (api.h). */
typedef void (*kdp__cstat_done_cb)(int err, const char *why, void *ud);

/* Writes driver/pool's entries (copied) of claim ns/name with UID uid.
 * Returns 0 (done runs later, never from inside), -EINVAL, -ENOMEM, or
 * the api's errors; *ret cancels it. */
int kdp__cstat_write(kdp__api *a, const char *version, const char *ns, const char *name,
                     const char *uid, const char *driver, const char *pool,
                     const kdp__cstat_entry *e, size_t n, kdp__cstat_done_cb done, void *ud,
                     kdp__cstat_req **ret);
/* No done runs for it after this. NULL is fine. Not from its own done. */
void kdp__cstat_cancel(kdp__cstat_req *r);

#endif
