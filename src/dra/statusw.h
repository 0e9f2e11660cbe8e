/* SPDX-License-Identifier: MIT */
/*
 * statusw: the claims' status writes of a DRA driver (its entries in each
 * claim's status.devices), one claim at a time each, from the records the
 * prepares leave (a device's status, dra/devstatus.h) or none (an
 * unprepare: its entries removed). A claim asked again while its write is
 * under way is written again after it with the latest entries. A write
 * that fails for a passing reason (429, 5xx, the transport, RBAC) is tried
 * again with backoff (1 s doubling to 30 s, KDP__STATUSW_TRIES in all); a
 * claim that is gone or replaced is dropped; each failure is logged with
 * the claim and why. At most KDP__STATUSW_MAX claims wait.
 *
 * Owns its queue; writes through the function it is given. Loop thread,
 * but for kdp__statusw_post (an inbox under a mutex, taken on a wakeup).
 */
#ifndef KDP_DRA_STATUSW_H
#define KDP_DRA_STATUSW_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/list.h"
#include "dra/claimrec.h"
#include "k8s/claimstatus.h"
#include "runtime/loop.h"

#define KDP__STATUSW_MAX   1024
#define KDP__STATUSW_TRIES 6

typedef struct kdp__statusw_cfg {
    const char *driver; /* borrowed, for log lines */
    /* Starts a write (kdp__dra_api_write_status's contract). */
    int (*write)(void *ud, const kdp_dra_claim_ref *ref, const kdp__cstat_entry *e, size_t n,
                 kdp__cstat_done_cb done, void *done_ud, kdp__cstat_req **ret);
    void *ud;
} kdp__statusw_cfg;

typedef struct kdp__statusw {
    kdp__loop *loop;
    kdp__statusw_cfg cfg;
    kdp__link items;
    size_t n;
    kdp__timer *retry;
    /* any thread, under in_mu: records posted, then put on the loop */
    pthread_mutex_t in_mu;
    kdp__dra_rec **inbox;
    size_t n_inbox;
    kdp__wakeup *wake;
} kdp__statusw;

/* Returns 0 or -ENOMEM. */
int kdp__statusw_init(kdp__statusw *w, kdp__loop *l, const kdp__statusw_cfg *cfg);
/* Cancels what is under way. */
void kdp__statusw_done(kdp__statusw *w);
/* The claim of rec gets its devices' statuses (those that have one);
 * remove: none of this driver's (an unprepare). A prepared record without
 * any status writes nothing. */
void kdp__statusw_put(kdp__statusw *w, const kdp__dra_rec *rec, bool remove);
/* kdp__statusw_put(w, rec, false) from any thread, soon, on the loop (rec
 * taken over). Returns 0, -EAGAIN (KDP__STATUSW_MAX posted already), or
 * -ENOMEM (rec freed either way on an error). */
int kdp__statusw_post(kdp__statusw *w, kdp__dra_rec *rec);

#endif
