/* SPDX-License-Identifier: MIT */
/*
 * devcalls: the DevicePlugin calls that run the author's callbacks
 * (Allocate, GetPreferredAllocation, PreStartContainer), the handlers that
 * plugin/devplugin.h puts in its method table. A request is decoded and
 * checked on the loop thread: unknown, unhealthy (Allocate) or repeated
 * device IDs are refused here with the ID named, against what the kubelet
 * was told (kdp__table_told); with replicas the IDs are replica IDs,
 * resolved to their devices. The author's callback then runs as a job on
 * the plugin's worker (plugin/jobs.h), bounded by the callback deadline and
 * the kubelet's grpc-timeout, and its answer is packed there; without one,
 * kdp's default answer (Allocate, a preferred strategy) is made inline.
 *
 * Threading: the handlers and the completions on the loop thread; the
 * callbacks on the worker. Every pointer here is borrowed.
 */
#ifndef KDP_DEVCALLS_H
#define KDP_DEVCALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/server.h"
#include "kdp.h"
#include "plugin/jobs.h"
#include "plugin/pstats.h"
#include "plugin/table.h"

typedef struct kdp__devcalls {
    kdp_plugin *owner;                /* handed to the callbacks */
    const kdp_ops *ops;               /* borrowed */
    void *ud;                         /* the author's */
    const char *resource;             /* borrowed */
    const char *env_name;             /* the default allocation's env var, borrowed */
    kdp_preferred_strategy preferred; /* without ops->preferred */
    unsigned replicas;                /* kdp_config.replicas (plugin/replicas.h) */
    bool one_per_container;           /* kdp_config.replicas_one_per_container */
    kdp__table *table;                /* borrowed */
    kdp__jobs *jobs;                  /* borrowed */
    kdp__pstats *stats;               /* Allocate outcomes counted (NULL: none) */
} kdp__devcalls;

/* preferred, replicas, one_per_container and stats are set after it, before
 * the plugin serves. */
void kdp__devcalls_init(kdp__devcalls *c, kdp_plugin *owner, const kdp_ops *ops, void *ud,
                        const char *resource, const char *env_name, kdp__table *table,
                        kdp__jobs *jobs);

/* The handlers (kdp__handler_fn, ud: the kdp__devcalls). */
void kdp__devcalls_allocate(kdp__call *call, const uint8_t *msg, size_t len, void *ud);
void kdp__devcalls_preferred(kdp__call *call, const uint8_t *msg, size_t len, void *ud);
void kdp__devcalls_prestart(kdp__call *call, const uint8_t *msg, size_t len, void *ud);
/* Allocate's `ended` (kdp__method): every outcome counted, whichever path
 * ended it (a refused ID, the callback's error, its deadline, the kubelet
 * gone). */
void kdp__devcalls_allocate_ended(int status, void *ud);

#endif
