/* SPDX-License-Identifier: MIT */
/*
 * podres: the kubelet's PodResources API v1 (kdp.h "Pod identity").
 *
 * podres.c turns one packed answer (List, Get or
 * GetAllocatableResources) into a kdp_pods snapshot and answers the lookups:
 * no I/O, tested and fuzzed on bytes. podres_call.c makes the calls on a
 * loop (kdp's async client, one connection per call) and the blocking ones
 * on a private loop; podres_query.c queues a plugin's queries to its
 * context's loop.
 */
#ifndef KDP_PODRES_H
#define KDP_PODRES_H

#include <stddef.h>
#include <stdint.h>

#include "kdp.h"
#include "runtime/loop.h"

typedef enum kdp__podres_kind {
    KDP__PODRES_LIST,
    KDP__PODRES_GET,
    KDP__PODRES_ALLOCATABLE,
} kdp__podres_kind;

/* The method's short name ("List", "Get", "GetAllocatableResources"). */
const char *kdp__podres_method(kdp__podres_kind kind);

/* Builds a snapshot from one packed answer of kind: the devices of resource
 * (NULL = all), physical IDs resolved with replicas (> 1: the replica
 * suffix dropped). Returns 0 with *ret, -EPROTO (not a valid answer: what
 * is wrong in why, e.g. "pod_resources[2].containers[0]: empty name"),
 * -E2BIG (more than KDP_PODS_MAX_DEVICES devices), -ENOMEM. why (cap
 * bytes) is written on failure only. */
int kdp__pods_build(kdp__podres_kind kind, const uint8_t *msg, size_t len, const char *resource,
                    unsigned replicas, kdp_pods **ret, char *why, size_t why_cap);

/* One call. */
typedef struct kdp__podres_req {
    kdp__podres_kind kind;
    const char *socket;   /* required */
    const char *resource; /* NULL = every resource */
    const char *ns, *pod; /* Get only */
    unsigned replicas;
    unsigned timeout_ms; /* 0 = KDP_PODS_TIMEOUT_MS */
} kdp__podres_req;

typedef struct kdp__podres_call kdp__podres_call;

/* Starts a call on l (the request's strings copied). done runs exactly once,
 * later, on the loop thread (never from inside this function), unless the
 * call is cancelled first; the error is logged before. Returns 0 or -errno
 * (-EINVAL, -ENOMEM). */
int kdp__podres_start(kdp__loop *l, const kdp__podres_req *req, kdp_pods_fn done, void *ud,
                      kdp__podres_call **ret);
/* Abandons the call: done is not called. Not from inside done. NULL ok. */
void kdp__podres_cancel(kdp__podres_call *c);
/* A call on a private loop of the calling thread, waited for. */
int kdp__podres_run(const kdp__podres_req *req, kdp_pods **ret);

/* podres_query.c: kdp_plugin_query_pods()'s queue, one per plugin, made
 * and freed by plugin.c (loop thread, or before the context runs). */
typedef struct kdp__podres_queue kdp__podres_queue;
int kdp__podres_queue_new(kdp__loop *l, kdp__podres_queue **ret);
/* Fails every query still queued or running with -ECANCELED (on the
 * calling thread) and frees the queue. NULL ok. */
void kdp__podres_queue_free(kdp__podres_queue *q);
/* Thread-safe: queues one query (req's strings copied). Returns 0,
 * -EAGAIN (KDP_PODS_MAX_QUERIES pending), -ENOMEM. */
int kdp__podres_queue_add(kdp__podres_queue *q, const kdp__podres_req *req, kdp_pods_fn done,
                          void *ud);

#endif
