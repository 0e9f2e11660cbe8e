/* SPDX-License-Identifier: MIT */
/* restarts: the lifecycle's restart backoff (see restarts.h). */
#include "plugin/restarts.h"

#include "base/log.h"

#define RESTART_BACKOFF_MIN_US (50ULL * 1000ULL)
#define RESTART_BACKOFF_MAX_US (30ULL * 1000000ULL)

void kdp__restarts_init(kdp__restarts *r)
{
    *r = (kdp__restarts){0};
    kdp__backoff_init(&r->backoff, RESTART_BACKOFF_MIN_US, RESTART_BACKOFF_MAX_US, 0);
}

/* A restart of the kubelet itself never counts: a new kubelet wants us at
 * once, and its restarts are its own, bounded by its own backoff. Nor does
 * a Register that failed (that one has its own). */
void kdp__restarts_note(kdp__restarts *r, bool registered, kdp__reg *reg, uint64_t now_us)
{
    registered = registered && r->registered_us;
    bool stable = registered && now_us - r->registered_us >= KDP__STABLE_REGISTRATION_US;
    if (stable) {
        r->quick = 0;
        kdp__backoff_reset(&r->backoff);
    }
    r->counts = registered && !stable && reg->ops->same_peer(reg);
    r->total++;
}

uint64_t kdp__restarts_delay(kdp__restarts *r, kdp__reg *reg)
{
    if (!r->counts || !reg->ops->same_peer(reg) || r->quick++ == 0) {
        return 0;
    }
    return kdp__backoff_next(&r->backoff);
}

void kdp__restarts_say_delay(const kdp__restarts *r, const char *resource, uint64_t delay_us)
{
    log_warn("%s: starting again in %llu ms: the same kubelet ended %u registrations in a row "
             "before they lasted %llu s (each restart waits longer, up to %llu s; a new kubelet "
             "starts it at once)",
             resource, (unsigned long long)(delay_us / 1000), r->quick,
             (unsigned long long)(KDP__STABLE_REGISTRATION_US / 1000000U),
             (unsigned long long)(RESTART_BACKOFF_MAX_US / 1000000U));
}
