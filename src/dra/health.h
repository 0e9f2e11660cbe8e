/* SPDX-License-Identifier: MIT */
/*
 * health: the DRA driver's health stream, DRAResourceHealth/
 * NodeWatchResources as v1 (Kubernetes 1.37+) and, unless switched off, as
 * v1alpha1 (1.34-1.36): the same messages, two service names. The owner
 * sets the pool's devices with their health and its reason (the
 * message, Kubernetes 1.36+; kdp__dra_health_set: copied); every open stream gets the full list at
 * its start, at every change, and every KDP__DRA_HEALTH_RESEND_S while a
 * stream is open: the kubelet takes a device it has heard nothing of for
 * its health timeout (30 s by default; health_check_timeout_seconds, sent
 * as KDP__DRA_HEALTH_TIMEOUT_S, from 1.35) as Unknown, and a device missing
 * from a message likewise. No stream, no timer: an idle driver nobody
 * watches does not wake up. At most KDP__DRA_HEALTH_MAX_STREAMS streams.
 *
 * Loop thread.
 */
#ifndef KDP_DRA_HEALTH_H
#define KDP_DRA_HEALTH_H

#include <stdbool.h>
#include <stddef.h>

#include "base/list.h"
#include "grpc/server.h"
#include "runtime/loop.h"

#define KDP__DRA_HEALTH_MAX_STREAMS 16
/* The kubelet's default (1.34's fixed healthTimeout), said explicitly. */
#define KDP__DRA_HEALTH_TIMEOUT_S 30
/* A third of it: two messages may be lost before a device goes Unknown. */
#define KDP__DRA_HEALTH_RESEND_S (KDP__DRA_HEALTH_TIMEOUT_S / 3)
/* For tests only: the resend interval in ms (100 up to the default), so
 * that a test of the resends waits seconds, not tens of seconds. */
#define KDP__DRA_HEALTH_RESEND_ENV "KDP_DRA_HEALTH_RESEND_MS"

/* A device's health as the kubelet is told (the proto's values). */
typedef enum kdp__dra_hstate {
    KDP__DRA_UNKNOWN = 0,
    KDP__DRA_HEALTHY = 1,
    KDP__DRA_UNHEALTHY = 2,
} kdp__dra_hstate;

/* The message's bound: the kubelet keeps 1024 characters. */
#define KDP__DRA_HEALTH_MSG_MAX 256

typedef struct kdp__dra_hdev {
    char name[64]; /* the device's name in the pool */
    kdp__dra_hstate health;
    char message[KDP__DRA_HEALTH_MSG_MAX]; /* why (valid UTF-8; "" when Healthy) */
} kdp__dra_hdev;

typedef struct kdp__dra_health {
    kdp__loop *loop;
    const char *driver; /* borrowed, for log lines */
    const char *pool;   /* borrowed */
    kdp__dra_hdev *devs;
    size_t n;
    kdp__link streams;
    size_t n_streams;
    kdp__timer *resend;
    uint64_t resend_us; /* KDP__DRA_HEALTH_RESEND_S, or the tests' $KDP__DRA_HEALTH_RESEND_ENV */
} kdp__dra_health;

/* driver and pool are borrowed. Returns 0 or -ENOMEM. */
int kdp__dra_health_init(kdp__dra_health *h, kdp__loop *l, const char *driver, const char *pool);
/* Ends the streams' bookkeeping (their server is gone first). */
void kdp__dra_health_done(kdp__dra_health *h);
/* The methods to serve into out: v1, and v1alpha1 too when v1alpha1 is
 * true; how many (0 when cap is short). */
size_t kdp__dra_health_methods(kdp__dra_health *h, bool v1alpha1, kdp__method *out, size_t cap);
/* The pool's devices now (copied), sent to every stream. Returns 0 or
 * -ENOMEM (the last list stays). */
int kdp__dra_health_set(kdp__dra_health *h, const kdp__dra_hdev *devs, size_t n);

#endif
