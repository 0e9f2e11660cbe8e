/* SPDX-License-Identifier: MIT */
/* lcstate: the lifecycle's states and their transitions (see lcstate.h). */
#include "plugin/lcstate.h"

#include "base/log.h"

static const char *const state_names[] = {
    [KDP__LC_IDLE] = "IDLE",
    [KDP__LC_STARTING] = "STARTING",
    [KDP__LC_WAITING] = "WAITING",
    [KDP__LC_REGISTERING] = "REGISTERING",
    [KDP__LC_REGISTERED] = "REGISTERED",
    [KDP__LC_STOPPING] = "STOPPING",
    [KDP__LC_STOPPED] = "STOPPED",
};

#define TO(s) (1U << (s))
#define SERVING_TO                                                                                 \
    (TO(KDP__LC_WAITING) | TO(KDP__LC_REGISTERING) | TO(KDP__LC_REGISTERED) |                      \
     TO(KDP__LC_STARTING) | TO(KDP__LC_STOPPING))

/* The allowed transitions: allowed[from] has bit `to`. */
static const unsigned allowed[] = {
    [KDP__LC_IDLE] = TO(KDP__LC_STARTING) | TO(KDP__LC_STOPPED),
    [KDP__LC_STARTING] = TO(KDP__LC_STARTING) | TO(KDP__LC_WAITING) | TO(KDP__LC_REGISTERING) |
                         TO(KDP__LC_STOPPING) | TO(KDP__LC_STOPPED),
    [KDP__LC_WAITING] = SERVING_TO,
    [KDP__LC_REGISTERING] = SERVING_TO,
    [KDP__LC_REGISTERED] = SERVING_TO,
    [KDP__LC_STOPPING] = TO(KDP__LC_STOPPED),
    [KDP__LC_STOPPED] = 0,
};

bool kdp__lcstate_allowed(kdp__lc_state from, kdp__lc_state to)
{
    return (allowed[from] & TO(to)) != 0;
}

void kdp__lcstate_set(_Atomic kdp__lc_state *state, const char *resource, kdp__lc_state to,
                      const char *why)
{
    kdp__lc_state from = atomic_load(state);
    if (from == to && to != KDP__LC_STARTING && to != KDP__LC_REGISTERING) {
        return;
    }
    if (!kdp__lcstate_allowed(from, to)) {
        log_error("%s: internal error: no transition %s -> %s (%s)", resource, state_names[from],
                  state_names[to], why);
        return;
    }
    log_debug("%s: %s -> %s (%s)", resource, state_names[from], state_names[to], why);
    atomic_store(state, to);
}
