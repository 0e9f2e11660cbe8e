/* SPDX-License-Identifier: MIT */
/*
 * counters: the pool's counter sets (kdp_plugin_set_dra_counter_sets:
 * partitionable devices), as the author declares them. Set from any thread:
 * checked (k8s/sharecheck; a bad set is logged, naming the field and the
 * rule, and nothing changes), copied, and handed over under the mutex; the
 * loop takes the newest on a wakeup and `changed` tells the owner to
 * publish. Publishing reads the loop's copy without a lock.
 */
#ifndef KDP_DRA_COUNTERS_H
#define KDP_DRA_COUNTERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "k8s/slicectr.h"
#include "kdp_dra.h"
#include "runtime/loop.h"

#define KDP__DRA_COUNTER_SETS_MAX KDP__SLICECTR_MAX_SETS

/* A deep copy of counter sets. */
typedef struct kdp__dra_setv {
    kdp_dra_counter_set *v;
    size_t n;
} kdp__dra_setv;

typedef struct kdp__dra_counters {
    const char *driver; /* borrowed, for log lines */
    void (*changed)(void *ud);
    void *ud;
    kdp__wakeup *wake;
    pthread_mutex_t mu;
    kdp__dra_setv pending; /* under mu */
    bool has_pending;      /* under mu */
    kdp__dra_setv loop;    /* loop thread */
} kdp__dra_counters;

/* driver is borrowed; changed runs on the loop thread. Returns 0 or
 * -ENOMEM. */
int kdp__dra_counters_init(kdp__dra_counters *c, kdp__loop *l, const char *driver,
                           void (*changed)(void *), void *ud);
void kdp__dra_counters_done(kdp__dra_counters *c);
/* kdp_plugin_set_dra_counter_sets (any thread): see kdp_dra.h. */
int kdp__dra_counters_set(kdp__dra_counters *c, const kdp_dra_counter_set *sets, size_t n);
/* The sets now (loop thread; valid until the loop runs again). */
const kdp__dra_setv *kdp__dra_counters_get(const kdp__dra_counters *c);

#endif
