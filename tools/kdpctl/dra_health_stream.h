/* SPDX-License-Identifier: MIT */
/*
 * dra_health_stream: `kdpctl dra kubelet`'s health stream of a registered
 * plugin (NodeWatchResources on its endpoint, the kubelet's bounds): every
 * list kept in the plugin (for the `health DRIVER` command) and printed;
 * when the stream ends it is reopened 5 s later through the plugin's retry
 * timer, advertised or not, as the kubelet does (UNIMPLEMENTED said once).
 */
#ifndef KDPCTL_DRA_HEALTH_STREAM_H
#define KDPCTL_DRA_HEALTH_STREAM_H

#include "dra.h"

/* Opens p's stream: nothing with --no-health or while p is not registered;
 * a stream that cannot start is tried again after KD_HEALTH_RETRY. */
void kd_health_open(kd_plugin *p);

#endif
