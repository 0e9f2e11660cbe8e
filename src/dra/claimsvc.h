/* SPDX-License-Identifier: MIT */
/*
 * claimsvc: the DRAPlugin service the kubelet calls (v1 and v1beta1: the
 * same messages, v1beta1 without share_id): NodePrepareResources and
 * NodeUnprepareResources. Each claim of a call is an operation of
 * dra/claims, all of them under way at once (ops on one claim in order),
 * each answered in the call's map. A call is answered before its deadline
 * (the kubelet's grpc-timeout, else 45 s, less a margin) whatever is still
 * under way: those claims get an error, the kubelet asks again and finds
 * what finished meanwhile; the operations go on alone. A claim UID that is
 * not one is refused (it names files).
 *
 * Loop thread.
 */
#ifndef KDP_DRA_CLAIMSVC_H
#define KDP_DRA_CLAIMSVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/list.h"
#include "dra/claimops.h"
#include "grpc/server.h"

#define KDP__DRA_MAX_CLAIMS_PER_CALL 1024U

/* The calls answered, for /metrics: [0] NodePrepareResources, [1]
 * NodeUnprepareResources; their claims by outcome and the time each call
 * took to be answered, in buckets of kdp__dra_svc_bounds (seconds; the
 * last one counts those above). */
#define KDP__DRA_SVC_BOUNDS 14
typedef struct kdp__dra_svc_stats {
    unsigned long calls[2];
    unsigned long claims_ok[2];
    unsigned long claims_failed[2];
    uint64_t buckets[2][KDP__DRA_SVC_BOUNDS + 1];
    double seconds[2];
} kdp__dra_svc_stats;
extern const double kdp__dra_svc_bounds[KDP__DRA_SVC_BOUNDS];

typedef struct kdp__dra_claimsvc {
    kdp__loop *loop;
    kdp__dra_claims *claims;
    const char *driver; /* borrowed */
    const char *pool;   /* borrowed */
    /* A call of version ("v1.DRAPlugin", "v1beta1.DRAPlugin") came. */
    void (*called)(void *ud, const char *version);
    void *ud;
    kdp__link calls; /* answered yet */
    kdp__dra_svc_stats stats;
} kdp__dra_claimsvc;

void kdp__dra_claimsvc_init(kdp__dra_claimsvc *s, kdp__loop *l, kdp__dra_claims *claims,
                            const char *driver, const char *pool,
                            void (*called)(void *ud, const char *version), void *ud);
/* Forgets the calls (their server ended them) and detaches their ops. */
void kdp__dra_claimsvc_done(kdp__dra_claimsvc *s);
/* The methods (v1 and v1beta1) into out; how many (0 if cap is short). */
size_t kdp__dra_claimsvc_methods(kdp__dra_claimsvc *s, kdp__method *out, size_t cap);
/* Whether uid is one kdp takes: 1-128 of [A-Za-z0-9._-], not starting
 * with '.' (it names the claim's CDI spec and checkpoint record). NULL, or
 * what is wrong. */
const char *kdp__dra_uid_problem(const char *uid);

#endif
