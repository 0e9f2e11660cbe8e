/* SPDX-License-Identifier: MIT */
/*
 * reg: the seam for how a plugin registers with the kubelet. The lifecycle
 * starts a registration once it serves and stops it before it stops
 * serving; the strategy reports where it stands (waiting for the kubelet,
 * registering, registered) and when the kubelet it registered with went
 * away. Today: Register on kubelet.sock (reg_kubelet.c); the
 * plugins_registry way plugs in the same way.
 */
#ifndef KDP_REG_H
#define KDP_REG_H

#include <stdbool.h>

typedef struct kdp__reg kdp__reg;

typedef enum kdp__reg_state {
    KDP__REG_WAITING = 0, /* no kubelet to register with */
    KDP__REG_REGISTERING, /* in flight, or to be retried */
    KDP__REG_REGISTERED,
} kdp__reg_state;

/* What a strategy tells the lifecycle (loop thread). */
typedef struct kdp__reg_up {
    void (*state)(void *ud, kdp__reg_state st, const char *why);
    /* A registration went out (sent) or failed (!sent): the served
     * services then expect the kubelet's stream, or stop expecting it. */
    void (*attempt)(void *ud, bool sent);
    /* The registration cannot stand (the kubelet restarted, our socket went
     * away): restart. */
    void (*restart)(void *ud, const char *why);
    /* A new kubelet appeared while not serving: a start waiting to be
     * retried should go now. */
    void (*peer_appeared)(void *ud);
    /* Our socket is still ours (Register failures tell a kubelet that could
     * not dial us back). */
    bool (*socket_intact)(void *ud);
    /* A registration failed: refused by the kubelet (reason: its words,
     * peer-controlled) or could not be made (reason: ours). Counted and
     * kept for /healthz until one succeeds. May be NULL. */
    void (*failed)(void *ud, const char *reason);
    void *ud;
} kdp__reg_up;

typedef struct kdp__reg_ops {
    const char *name; /* for log lines */
    /* Serving: register (retried as the strategy sees fit). */
    void (*start)(kdp__reg *r);
    /* Serving ends: cancel whatever is in flight, stop retrying. */
    void (*stop)(kdp__reg *r);
    /* An event in the device-plugin directory (KDP__WATCH_*), in every
     * state, serving or not. */
    void (*dir_event)(kdp__reg *r, int what, const char *name);
    /* The kubelet of the last registration is still the one there (no new
     * one since): restarts with the same kubelet back off. */
    bool (*same_peer)(kdp__reg *r);
    /* The kubelet's stream ended. NULL, or false: the lifecycle restarts
     * (re-creates the socket, registers again); true: the strategy waits
     * for the kubelet to come back by itself (the plugin watcher's kubelet
     * walks the directory again), and asks for a restart if it does not. */
    bool (*peer_gone)(kdp__reg *r, const char *why);
} kdp__reg_ops;

struct kdp__reg {
    const kdp__reg_ops *ops;
    kdp__reg_up up;
};

#endif
