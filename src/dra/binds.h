/* SPDX-License-Identifier: MIT */
/*
 * binds: the claims allocated devices of this driver's pool that have
 * binding conditions (KEP-5007), from a watch of the cluster's
 * ResourceClaims (k8s/informer). Each allocation is tracked while it lasts
 * (by claim UID and the devices allocated): one that is pending (a binding
 * condition not "True" yet, no failure condition "True": the scheduler's
 * PreBind check) when first seen gets the bind op, once; one seen already
 * met or failed gets none (an allocation is its time and devices: a claim
 * allocated anew is a new one); a bind op that cannot start (too many
 * operations) is started again when one ends or the next event comes. An
 * allocation that ends (the claim deallocated, allocated anew or deleted,
 * also while the watch was down) gets the unbind op, unless its bind op
 * never started. The author's statuses for its devices
 * (kdp_plugin_set_dra_device_status) are kept beside the claim's own, so
 * that each write carries all of this driver's entries. A bind op that
 * fails sets each device's first failure condition "True".
 *
 * Owns its table (under a mutex: statuses come from any thread); starts
 * bind ops and status writes through its owner's functions. Loop thread
 * but for kdp__dra_binds_set_status.
 */
#ifndef KDP_DRA_BINDS_H
#define KDP_DRA_BINDS_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dra/claimrec.h"

/* Allocations tracked at most (past it, one more is logged and left). */
#define KDP__DRA_MAX_BINDS 4096U

typedef struct kdp__dra_bind {
    char *uid;
    char *sig;          /* the allocation: its time, "device/share;" for each device */
    uint64_t seq;       /* this allocation's number (a bind op answers for it) */
    kdp__dra_rec *rec;  /* every device of the pool; statuses as last known */
    kdp__dra_rec *view; /* the bind and unbind ops' claim: its devices with binding
                         * conditions */
    bool to_start;      /* its bind op is to start (it could not yet) */
    bool seen;          /* in the sync under way */
} kdp__dra_bind;

typedef struct kdp__dra_binds_cfg {
    const char *driver; /* borrowed */
    const char *pool;
    /* Queues the bind op (unbind: the unbind op) on rec (taken over,
     * freed on an error too) for allocation seq. Returns 0 or -errno.
     * Called with the part's mutex held: it must not call back into the
     * part. */
    int (*start)(void *ud, kdp__dra_rec *rec, uint64_t seq, bool unbind);
    /* The author has an unbind op: an allocation's end is told. */
    bool unbind;
    /* Writes the claim's entries of rec (taken over). */
    void (*write)(void *ud, kdp__dra_rec *rec);
    void *ud;
} kdp__dra_binds_cfg;

typedef struct kdp__dra_binds {
    kdp__dra_binds_cfg cfg;
    pthread_mutex_t mu;
    kdp__dra_bind *v;
    size_t n;
    uint64_t seq; /* allocations numbered */
    bool full_said;
} kdp__dra_binds;

/* Returns 0 or -errno. */
int kdp__dra_binds_init(kdp__dra_binds *b, const kdp__dra_binds_cfg *cfg);
void kdp__dra_binds_done(kdp__dra_binds *b);

/* The informer's view (k8s/informer.h's callbacks). */
void kdp__dra_binds_sync_begin(kdp__dra_binds *b);
void kdp__dra_binds_event(kdp__dra_binds *b, const char *type, json_t *obj);
void kdp__dra_binds_sync_end(kdp__dra_binds *b);

/* The bind op of allocation seq of claim uid ended: failed (why not
 * NULL): its devices' first failure conditions "True", unless the claim
 * was allocated anew meanwhile. Either way the bind ops that could not
 * start are tried again. */
void kdp__dra_binds_ended(kdp__dra_binds *b, const char *uid, uint64_t seq, const char *why);
/* An operation ended: the bind ops that could not start, started if they
 * can now. */
void kdp__dra_binds_retry(kdp__dra_binds *b);
/* The freshest statuses of claim rec->uid's devices with binding
 * conditions (the author's, set while it waited for them) into their
 * api_status, for its prepare. */
void kdp__dra_binds_fill(kdp__dra_binds *b, kdp__dra_rec *rec);

/* Device (and share) of tracked claim uid gets status (JSON text,
 * copied); *ret a copy of the claim's record to write. Any thread.
 * Returns 0, -ENOENT (no such claim), -ENODEV (no such device), -ENOMEM. */
int kdp__dra_binds_set_status(kdp__dra_binds *b, const char *uid, const char *device,
                              const char *share_id, const char *status, kdp__dra_rec **ret);

/* Allocations tracked now. Thread-safe. */
size_t kdp__dra_binds_count(kdp__dra_binds *b);

#endif
