/* SPDX-License-Identifier: MIT */
/*
 * svc: the seam for the gRPC services a plugin serves on its socket. The
 * lifecycle makes one server from the methods of every service it serves,
 * and tells each when serving begins and ends; a service tells the
 * lifecycle when the peer it serves (the kubelet) is gone from it. Today:
 * the v1beta1 DevicePlugin service (devplugin.c); a DRA service plugs in
 * the same way.
 */
#ifndef KDP_SVC_H
#define KDP_SVC_H

#include <stdbool.h>
#include <stddef.h>

#include "grpc/server.h"

typedef struct kdp__svc kdp__svc;

/* What a service tells the lifecycle (loop thread). */
typedef struct kdp__svc_up {
    /* The peer's stream ended (the kubelet's ListAndWatch): restart. */
    void (*peer_gone)(void *ud, const char *why);
    /* The peer's stream began: the kubelet is fully connected. May be
     * NULL. */
    void (*peer_connected)(void *ud);
    void *ud;
} kdp__svc_up;

typedef struct kdp__svc_ops {
    const char *name; /* for log lines: "v1beta1.DevicePlugin" */
    /* Its methods, into out (room for cap); returns how many. */
    size_t (*methods)(kdp__svc *s, kdp__method *out, size_t cap);
    /* The server began (on), or is about to end (off: before its calls are
     * cancelled, so that the streams kdp ends itself mean nothing). */
    void (*serving)(kdp__svc *s, bool on);
    /* A registration went out: the next stream of the peer is the one whose
     * end means the peer is gone (on false: forget it). */
    void (*expect_peer)(kdp__svc *s, bool on);
} kdp__svc_ops;

struct kdp__svc {
    const kdp__svc_ops *ops;
    kdp__svc_up up;
};

#endif
