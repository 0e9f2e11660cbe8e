/* SPDX-License-Identifier: MIT */
/*
 * reg_watcher: registration through the kubelet's plugin watcher (the way of
 * CSI and DRA plugins, also open to device plugins): the plugin's socket
 * lives in <kubelet-root>/plugins_registry/ and serves, besides the
 * DevicePlugin service, pluginregistration.Registration. The kubelet finds
 * the socket (inotify, and a walk of the directory at its start), asks
 * GetInfo (type "DevicePlugin", the resource name, an empty endpoint: this
 * same socket, version "v1beta1"), connects as after a Register, and says
 * how it went with NotifyRegistrationStatus. Nothing is sent to kubelet.sock.
 *
 * A refusal is logged with the kubelet's reason and retried by re-creating
 * the socket (the kubelet only asks again for a new socket), after a capped
 * backoff. A kubelet restart needs nothing of ours: when the kubelet's
 * stream ends, the socket stays and the plugin waits for the new kubelet's
 * walk of the directory to ask GetInfo again (re-creating the socket then
 * would make the kubelet deregister and register it once more, ending the
 * new stream: a ping-pong); only if none comes within LOST_US is the socket
 * re-created.
 */
#ifndef KDP_REG_WATCHER_H
#define KDP_REG_WATCHER_H

#include <stdbool.h>

#include "base/backoff.h"
#include "plugin/reg.h"
#include "plugin/svc.h"
#include "runtime/loop.h"

/* What GetInfo answers (borrowed). The device plugin's: type
 * "DevicePlugin", the resource name, an empty endpoint (this socket), the
 * version "v1beta1". A DRA driver's: "DRAPlugin", the driver name, its
 * service socket's absolute path, its services' versions. */
typedef struct kdp__reg_info {
    const char *type;
    const char *name;
    const char *endpoint;
    const char *const *versions;
    size_t n_versions;
} kdp__reg_info;

typedef struct kdp__reg_watcher {
    kdp__reg base;
    kdp__reg_info info;
    kdp__svc svc;            /* pluginregistration.Registration, on the plugin's socket */
    const char *resource;    /* borrowed */
    const char *socket_path; /* borrowed */
    bool active;             /* between start and stop */
    kdp__reg_state state;
    kdp__timer *retry; /* after a refusal: the restart that re-creates the socket */
    kdp__timer *lost;  /* after the kubelet's stream ended: no GetInfo since, restart */
    kdp__backoff backoff;
    unsigned infos;            /* GetInfo calls answered */
    unsigned infos_registered; /* infos when the last registration succeeded */
} kdp__reg_watcher;

/* info NULL: the device plugin's (resource's); else copied (its strings
 * borrowed). */
int kdp__reg_watcher_init(kdp__reg_watcher *w, kdp__loop *l, const char *socket_path,
                          const char *resource, const kdp__reg_info *info, const kdp__reg_up *up);
void kdp__reg_watcher_done(kdp__reg_watcher *w);

#endif
