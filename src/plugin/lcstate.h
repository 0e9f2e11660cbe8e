/* SPDX-License-Identifier: MIT */
/*
 * lcstate: the lifecycle's states (plugin/lifecycle.h drives them), their
 * names, the table of allowed transitions and the one function that changes
 * a state: it refuses a transition the table does not allow (logged as an
 * internal error, the state kept) and logs "resource: FROM -> TO (why)" at
 * debug level. Pure but for the log; the state is an atomic that other
 * threads may read (kdp_plugin_get_status), written by one thread (the
 * loop's).
 */
#ifndef KDP_LCSTATE_H
#define KDP_LCSTATE_H

#include <stdatomic.h>
#include <stdbool.h>

typedef enum kdp__lc_state {
    KDP__LC_IDLE = 0,    /* not started */
    KDP__LC_STARTING,    /* lock, refresh, first list, socket; or waiting to start again */
    KDP__LC_WAITING,     /* serving; no kubelet to register with */
    KDP__LC_REGISTERING, /* serving; registration in flight or to be retried */
    KDP__LC_REGISTERED,  /* serving; registered */
    KDP__LC_STOPPING,    /* the final stop: streams ending, destroy */
    KDP__LC_STOPPED,
} kdp__lc_state;

/* The table allows from -> to. */
bool kdp__lcstate_allowed(kdp__lc_state from, kdp__lc_state to);
/* Makes *state to if the table allows it, else logs an internal error and
 * leaves it. Going to the state it is in does nothing, but for STARTING and
 * REGISTERING (a retry: logged again). resource and why: for the log. */
void kdp__lcstate_set(_Atomic kdp__lc_state *state, const char *resource, kdp__lc_state to,
                      const char *why);
/* WAITING, REGISTERING or REGISTERED: the socket is served. */
static inline bool kdp__lcstate_serving(kdp__lc_state s)
{
    return s == KDP__LC_WAITING || s == KDP__LC_REGISTERING || s == KDP__LC_REGISTERED;
}

#endif
