/* SPDX-License-Identifier: MIT */
/*
 * restarts: the lifecycle's restart backoff, so that no restart loop is
 * unbounded. A restart counts as one more in a loop when it ends a
 * registration that succeeded, lasted under 10 s
 * (KDP__STABLE_REGISTRATION_US), and the registration strategy says the
 * same kubelet is still there (kdp__reg_ops.same_peer). The first such
 * restart is immediate; each further one waits longer (50 ms doubling to
 * 30 s, with jitter). A registration that lasted resets it; a new kubelet
 * never waits. Also the count of restarts, for the status.
 *
 * The time is an argument (no clock read here). Loop thread.
 */
#ifndef KDP_RESTARTS_H
#define KDP_RESTARTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/backoff.h"
#include "plugin/reg.h"

/* A registration that lasted this long was a success: the restart after it
 * is immediate; restarts after shorter ones with the same kubelet back off. */
#define KDP__STABLE_REGISTRATION_US (10ULL * 1000000ULL)

typedef struct kdp__restarts {
    kdp__backoff backoff;
    uint64_t registered_us; /* when the current registration succeeded; 0 = none */
    bool counts;            /* the restart under way is one more in a loop */
    unsigned quick;         /* restarts in a loop so far */
    unsigned total;         /* every restart */
} kdp__restarts;

void kdp__restarts_init(kdp__restarts *r);

/* A registration succeeded at now_us; serving ended (none any more). */
static inline void kdp__restarts_registered(kdp__restarts *r, uint64_t now_us)
{
    r->registered_us = now_us;
}

static inline void kdp__restarts_unregistered(kdp__restarts *r)
{
    r->registered_us = 0;
}

/* A restart begins at now_us; registered: the plugin is REGISTERED. Whether
 * it counts as one more in a loop (reg->ops->same_peer asked only when it
 * may); a stable registration resets the backoff. */
void kdp__restarts_note(kdp__restarts *r, bool registered, kdp__reg *reg, uint64_t now_us);
/* How long to wait before starting again, once destroy ran: 0 unless the
 * restart counts, it is the second or later in a loop, and the kubelet is
 * still the same now (a new one may have come meanwhile). */
uint64_t kdp__restarts_delay(kdp__restarts *r, kdp__reg *reg);
/* The warning for a delay from kdp__restarts_delay. */
void kdp__restarts_say_delay(const kdp__restarts *r, const char *resource, uint64_t delay_us);

#endif
