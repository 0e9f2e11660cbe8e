/* SPDX-License-Identifier: MIT */
/*
 * apilink: the DRA driver's API-server side, over src/k8s: the
 * configuration loaded at the start (kubeconfig or in-cluster), the claims
 * read at prepare (k8s/claims: resource.k8s.io's version found by discovery
 * once, the UID checked, filtered to this driver and this node's pool,
 * turned into a claim record), and the node's slices (k8s/slices), published
 * from the devices it is given, from when the driver first runs, and left
 * in place at the end (a restarted driver takes them over), and this
 * driver's entries in a claim's status.devices (k8s/claimstatus), and,
 * for a driver with binding conditions, the cluster's claims in view
 * (k8s/informer).
 *
 * Loop thread.
 */
#ifndef KDP_DRA_APILINK_H
#define KDP_DRA_APILINK_H

#include <stdbool.h>
#include <stddef.h>

#include "dra/claimrec.h"
#include "k8s/api.h"
#include "k8s/claimstatus.h"
#include "k8s/informer.h"
#include "k8s/slices.h"
#include "kdp_dra.h"
#include "runtime/loop.h"

typedef struct kdp__dra_api kdp__dra_api;

typedef struct kdp__dra_api_cfg {
    const char *driver; /* borrowed, as every string here */
    const char *node;
    const char *kubeconfig; /* NULL: $KUBECONFIG, else in-cluster */
    unsigned resync_ms;
    /* The slices' status changed (published, generation, the last error). */
    void (*status)(void *ud, const kdp__slices_status *st);
    /* The last API-server failure of a claim read ("" when one worked). */
    void (*error)(void *ud, const char *why);
    void *ud;
} kdp__dra_api_cfg;

/* The answer of a claim read: 0 and rec (taken over), or -errno and why. */
typedef void (*kdp__dra_api_claim_cb)(void *ud, int err, const char *why, kdp__dra_rec *rec);

/* Loads the configuration (logged: -ENOENT none, with what to set;
 * -EINVAL a bad one) and makes the client; nothing is sent yet. */
int kdp__dra_api_new(kdp__loop *l, const kdp__dra_api_cfg *cfg, kdp__dra_api **ret);
/* Cancels every call (no callback runs). NULL is fine. */
void kdp__dra_api_free(kdp__dra_api *a);
/* The driver runs: publishing starts (discovery, the Node, the list). */
void kdp__dra_api_start(kdp__dra_api *a);
/* Reads a claim: 0 and cb later (on the loop, never from inside this
 * call), *ret a handle for kdp__dra_api_cancel until then; or -errno with
 * why (cb never runs). A claim with no device of this driver and pool is
 * -ENODEV. */
int kdp__dra_api_get_claim(kdp__dra_api *a, const kdp_dra_claim_ref *ref, kdp__dra_api_claim_cb cb,
                           void *ud, void **ret, char *why, size_t why_len);
void kdp__dra_api_cancel(kdp__dra_api *a, void *handle);
/* Keeps the cluster's ResourceClaims (every namespace) in view through
 * cbs (k8s/informer), from when resource.k8s.io's version is known (the
 * slices' discovery, or a claim read's). Once. Returns 0 or -EINVAL. */
int kdp__dra_api_watch_claims(kdp__dra_api *a, const kdp__inf_cbs *cbs);
/* Writes this driver and pool's entries (n 0: removes them) of claim ref
 * (k8s/claimstatus: the same returns). */
int kdp__dra_api_write_status(kdp__dra_api *a, const kdp_dra_claim_ref *ref,
                              const kdp__cstat_entry *e, size_t n, kdp__cstat_done_cb done,
                              void *ud, kdp__cstat_req **ret);
/* The slices' status and the API client's figures (either may be NULL).
 * False when there is no API server (a is NULL). */
bool kdp__dra_api_get_stats(const kdp__dra_api *a, kdp__slices_status *slices, kdp__api_stats *api);
/* The devices and counter sets to publish (copied). */
void kdp__dra_api_publish(kdp__dra_api *a, const kdp__slice_dev *devs, size_t n,
                          const kdp_dra_counter_set *sets, size_t n_sets);

#endif
