/* SPDX-License-Identifier: MIT */
/*
 * claimops: the claim operations of a DRA driver (prepare, unprepare), each
 * a small state machine with one transition function (every change checked
 * against the table of allowed ones, logged at debug level):
 *
 *   QUEUED   behind an earlier operation on the same claim (ops on one
 *            claim run in the order they came; others never wait for it)
 *   READING  the claim asked of the API server (a prepare not recorded)
 *   WAITING  for a free slot: at most `slots` prepare and unprepare
 *            callbacks run at once (1 by default: the author's one-at-a-
 *            time contract), each slot its own worker thread, so that the
 *            callback bound counts a callback's own running time and a
 *            slow claim never holds back the device-plugin side
 *   RUNNING  its job (dra/claimjob.h) on the slot's worker
 *   DONE     answered (the answer callback ran, if still wanted)
 *
 * A prepare of a claim recorded in this boot runs a RECORDED job (the CDI
 * spec again if gone); of a claim recorded in an earlier boot, the claim's
 * devices are checked again and the prepare op runs again; otherwise the
 * claim is read, its devices checked, then prepared. An unprepare of a
 * claim not recorded succeeds at once. A bind op (a claim the watch saw
 * allocated devices with binding conditions) runs a BIND job on the record
 * it was given. An operation whose callback overran
 * its deadline is answered with an error and the claim stays busy until
 * the callback returns.
 *
 * Loop thread; the jobs on the slots' workers.
 */
#ifndef KDP_DRA_CLAIMOPS_H
#define KDP_DRA_CLAIMOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/list.h"
#include "dra/claimjob.h"
#include "kdp_dra.h"
#include "plugin/jobs.h"
#include "runtime/loop.h"

/* The most slots (kdp_dra_config.concurrent_claims). */
#define KDP__DRA_MAX_SLOTS 16U
/* Operations kept at most (a node prepares far fewer at once). */
#define KDP__DRA_MAX_OPS 4096U

typedef enum kdp__cop_state {
    KDP__COP_QUEUED = 0,
    KDP__COP_READING,
    KDP__COP_WAITING,
    KDP__COP_RUNNING,
    KDP__COP_DONE,
    KDP__COP_N,
} kdp__cop_state;

typedef struct kdp__dra_claims kdp__dra_claims;
typedef struct kdp__cop kdp__cop;

/* The answer of an operation: err NULL on success (rec: the prepared
 * record, borrowed for the call; NULL for an unprepare). */
typedef void (*kdp__cop_done_cb)(void *ud, const char *err, const kdp__dra_rec *rec);

/* What a claim read from the API server gives: 0 and rec (taken over), or
 * -errno and why. */
typedef void (*kdp__cop_read_cb)(void *ud, int err, const char *why, kdp__dra_rec *rec);

typedef struct kdp__dra_claims_cfg {
    unsigned slots; /* 1 .. KDP__DRA_MAX_SLOTS */
    unsigned timeout_ms;
    kdp__cj_env *env; /* referenced */
    /* Reads a claim: 0 and cb later (never from inside), *handle until
     * then; or -errno with why. NULL: no API server (every read fails). */
    int (*read)(void *ud, const kdp_dra_claim_ref *ref, kdp__cop_read_cb cb, void *cb_ud,
                void **handle, char *why, size_t why_len);
    void (*cancel)(void *ud, void *handle);
    /* The claim's devices against the table: their kdp IDs and default
     * nodes filled in, or false with msg (unknown, unhealthy). */
    bool (*check)(void *ud, kdp__dra_rec *rec, char *msg, size_t len);
    /* A recorded claim's devices no longer in the table lose their ID. */
    void (*forget_gone)(void *ud, kdp__dra_rec *rec);
    /* An operation ended (the count of prepared claims may have changed):
     * rec is the claim's record (borrowed for the call) when it succeeded
     * with one: the prepared claim, or the recorded claim unprepared. */
    void (*ended)(void *ud, bool unprepare, const kdp__dra_rec *rec);
    void *ud;
} kdp__dra_claims_cfg;

struct kdp__dra_claims {
    kdp__loop *loop;
    kdp__dra_claims_cfg cfg;
    const char *driver; /* for log lines */
    kdp__jobs slots[KDP__DRA_MAX_SLOTS];
    kdp__cop *running[KDP__DRA_MAX_SLOTS];
    unsigned n_slots;
    kdp__link ops; /* in arrival order */
    size_t n_ops;
    kdp__timer *kick; /* starts what can start, from the loop */
};

/* Returns 0 or -errno (the slots' workers). */
int kdp__dra_claims_init(kdp__dra_claims *c, kdp__loop *l, const char *driver,
                         const kdp__dra_claims_cfg *cfg);
/* No answer runs any more; the slots' workers wait up to wait_ms for their
 * callbacks. Returns true if one is still running then (left to finish:
 * what it reads must stay). */
bool kdp__dra_claims_done(kdp__dra_claims *c, unsigned wait_ms);

/* Queues an operation on ref (copied), answered through done; it starts
 * at the next kdp__dra_claims_kick (or a later loop iteration), never from
 * inside this call. *ret names it for kdp__dra_claims_detach until done
 * runs. Returns 0, -EAGAIN (KDP__DRA_MAX_OPS under way), -ENOMEM. */
int kdp__dra_claims_add(kdp__dra_claims *c, bool unprepare, const kdp_dra_claim_ref *ref,
                        kdp__cop_done_cb done, void *ud, kdp__cop **ret);
/* The answer of a bind op (tag: as given): err NULL on success. */
typedef void (*kdp__cop_bound_cb)(void *ud, const char *uid, uint64_t tag, const char *err);
/* Queues the bind op (kdp_dra_ops.bind; unbind: the unbind op) on rec
 * (taken over, freed on an error too: a claim as the watch read it, its
 * devices those with binding conditions), in order with the claim's other
 * operations; bound answers it. Returns 0, -EAGAIN, -ENOMEM. */
int kdp__dra_claims_add_bind(kdp__dra_claims *c, kdp__dra_rec *rec, uint64_t tag, bool unbind,
                             kdp__cop_bound_cb bound, void *ud);
/* Starts what can start now (done callbacks may run from here). */
void kdp__dra_claims_kick(kdp__dra_claims *c);
/* The answer is no longer wanted (the op goes on alone). */
void kdp__dra_claims_detach(kdp__cop *op);
/* Operations under way. */
size_t kdp__dra_claims_count(const kdp__dra_claims *c);
/* A state's name ("QUEUED" ...). */
const char *kdp__cop_state_name(kdp__cop_state s);

#endif
