/* SPDX-License-Identifier: MIT */
/*
 * devplugin: the v1beta1 DevicePlugin service a plugin serves (a kdp__svc):
 * its method table, GetDevicePluginOptions, and ListAndWatch: every open
 * stream gets the device table's message when it changes, and the first
 * stream after a registration is taken for the kubelet's (its end, or its
 * absence, is told up as the peer gone). The calls that run the author's
 * callbacks (Allocate, GetPreferredAllocation, PreStartContainer) are
 * plugin/devcalls.h's, a part it owns. Loop thread.
 */
#ifndef KDP_DEVPLUGIN_H
#define KDP_DEVPLUGIN_H

#include <stdbool.h>

#include "base/list.h"
#include "deviceplugin.pb-c.h"
#include "kdp.h"
#include "plugin/devcalls.h"
#include "plugin/jobs.h"
#include "plugin/pstats.h"
#include "plugin/svc.h"
#include "plugin/table.h"
#include "runtime/loop.h"

/* At most this many ListAndWatch streams at once (the kubelet opens one;
 * tools a few): each holds up to two copies of the list. */
#define KDP__MAX_LIST_STREAMS 64U

typedef struct kdp__devplugin {
    kdp__svc base;
    const char *resource; /* borrowed */
    kdp__table *table;    /* borrowed */
    kdp__devcalls calls;  /* Allocate, GetPreferredAllocation, PreStartContainer */
    kdp__link streams;    /* open ListAndWatch streams */
    unsigned n_streams;
    void *peer_stream; /* the kubelet's, once it opened it after a Register */
    bool expect_peer;
    kdp__timer *peer_wait; /* a registration went out and no stream came yet */
    uint64_t peer_wait_us; /* 1 s, doubled (to 30 s) each time it expires */
    kdp__pstats *stats;    /* the plugin's counters (NULL: none) */
} kdp__devplugin;

void kdp__devplugin_init(kdp__devplugin *d, kdp_plugin *owner, const kdp_ops *ops, void *ud,
                         const char *resource, const char *env_name, kdp__table *table,
                         kdp__jobs *jobs, const kdp__svc_up *up);
/* The timer of the wait for the kubelet's stream (loop thread; before the
 * plugin serves), and its release (before the loop goes). */
int kdp__devplugin_init_loop(kdp__devplugin *d, kdp__loop *l);
void kdp__devplugin_release_loop(kdp__devplugin *d);
/* The options that follow from the ops (the same in Register and in
 * GetDevicePluginOptions). */
void kdp__devplugin_options(const kdp__devplugin *d, V1beta1__DevicePluginOptions *out);
/* Sends the table's message to every open ListAndWatch stream. */
void kdp__devplugin_broadcast(kdp__devplugin *d);

#endif
