/* SPDX-License-Identifier: MIT */
/*
 * dra_health_stream: `kdpctl dra kubelet`'s health stream of a registered
 * plugin (NodeWatchResources on its endpoint, the kubelet's bounds): every
 * list kept in the plugin (for the `health DRIVER` command) and printed.
 * The version is the one registration chose (dra_reg.c: as 1.37, or
 * legacy); a stream that ends is reopened 5 s later through the plugin's
 * retry timer, but after UNIMPLEMENTED only in legacy mode (said once
 * either way).
 */
#ifndef KDPCTL_DRA_HEALTH_STREAM_H
#define KDPCTL_DRA_HEALTH_STREAM_H

#include "dra.h"

/* Opens p's stream: nothing with --no-health or while p is not registered;
 * a stream that cannot start is tried again after KD_HEALTH_RETRY. */
void kd_health_open(kd_plugin *p);
/* Where p's stream stands, for `state`: "open", "reopening", "not asked
 * again (UNIMPLEMENTED)", "none advertised", "off (--no-health)". */
const char *kd_health_state(const kd_plugin *p);

#endif
