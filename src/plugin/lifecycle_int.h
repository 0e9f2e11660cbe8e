/* SPDX-License-Identifier: MIT */
/*
 * lifecycle_int: what the lifecycle's two files share, lifecycle.c (the
 * state machine) and lifecycle_up.c (what the parts say to it), beside the
 * struct of lifecycle.h. Loop thread.
 */
#ifndef KDP_LIFECYCLE_INT_H
#define KDP_LIFECYCLE_INT_H

#include "plugin/lcstate.h"
#include "plugin/lifecycle.h"

/* The one way the state changes (plugin/lcstate.h checks the transition). */
static inline void kdp__lifecycle_set_state(kdp__lifecycle *lc, kdp__lc_state to, const char *why)
{
    kdp__lcstate_set(&lc->state, lc->cfg.resource, to, why);
}

static inline bool kdp__lifecycle_serving(const kdp__lifecycle *lc)
{
    return kdp__lcstate_serving(kdp__lifecycle_state(lc));
}

/* A newer instance (who) registered, or outranks this one: stop as
 * kdp_plugin_stop() would, from a zero-delay timer (lifecycle_up.c). */
void kdp__lifecycle_superseded(kdp__lifecycle *lc, const char *who);

#endif
