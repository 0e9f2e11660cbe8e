/* SPDX-License-Identifier: MIT */
/*
 * pstats: a plugin's counters for its /metrics page, one struct so that
 * other parts (health probes) can add theirs. Relaxed atomics: bumped on the
 * loop and on the worker without a lock or an allocation, read when a page
 * is built (a page is a snapshot of counters that may move meanwhile, as
 * every Prometheus client's is). What a page can read from the plugin's
 * status (state, restarts, the message's size, stuck callbacks) is not
 * counted twice here.
 */
#ifndef KDP_PSTATS_H
#define KDP_PSTATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/expfmt.h"
#include "kdp.h"
#include "plugin/status.h"

/* The callbacks timed (kdp_callback_duration_seconds{op}). */
typedef enum kdp__op {
    KDP__OP_LIST = 0,
    KDP__OP_ALLOCATE,
    KDP__OP_PREFERRED,
    KDP__OP_PRESTART,
    KDP__OP_REFRESH,
    KDP__OP_DESTROY,
    KDP__OP_PROBE,
    KDP__OP_N,
} kdp__op;

#define KDP__OP_NAMES                                                                              \
    {                                                                                              \
        "list", "allocate", "preferred", "prestart", "refresh", "destroy", "probe"                 \
    }

#define KDP__HIST_BOUNDS                                                                           \
    {                                                                                              \
        .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10        \
    }
#define KDP__HIST_N     16 /* bounds; one more bucket counts what is above the last */
#define KDP__GRPC_CODES 17 /* OK .. UNAUTHENTICATED */

typedef struct kdp__hist {
    /* buckets[i]: observations in (bound i-1, bound i]; [KDP__HIST_N]: above */
    atomic_uint_fast64_t buckets[KDP__HIST_N + 1];
    atomic_uint_fast64_t sum_ns;
} kdp__hist;

typedef struct kdp__pstats {
    atomic_uint_fast64_t allocations[KDP__GRPC_CODES]; /* Allocate RPCs by final status */
    kdp__hist callbacks[KDP__OP_N];
    atomic_uint_fast64_t deadline_exceeded[KDP__OP_N];
    atomic_uint_fast64_t threads_abandoned;
    atomic_uint_fast64_t registrations;         /* accepted */
    atomic_uint_fast64_t registration_failures; /* refused, failed, or could not be sent */
    atomic_uint_fast64_t lw_messages;           /* ListAndWatch messages queued */
    atomic_uint_fast64_t health_to[2];          /* [0] to Healthy, [1] to Unhealthy */
} kdp__pstats;

/* A family of the /metrics page an extension adds ("counter", "gauge" or
 * "histogram"). */
typedef struct kdp__ext_family {
    const char *name;
    const char *type;
    const char *help;
} kdp__ext_family;

/* An extension's families (one table for every plugin of the same kind:
 * the samples of all of them go under one header) and the writer of
 * family f's samples for one plugin (resource: the plugin's, for the first
 * label), on the loop thread. */
typedef struct kdp__ext_metrics {
    const kdp__ext_family *families;
    size_t n_families;
    void (*write)(void *ud, size_t f, const char *resource, kdp__expfmt *w);
    void *ud;
} kdp__ext_metrics;

/* What the /metrics page and /healthz show of a plugin, taken on the loop
 * thread (kdp__member_ops.view). The pointers are valid while the plugin
 * is. */
typedef struct kdp__pview {
    const char *resource;
    kdp_plugin_status st;
    char reg_error[KDP__REG_ERROR_MAX]; /* the last registration failure, "" if none */
    const kdp__pstats *stats;
    const struct kdp__probe_stats *probe; /* probe.h; NULL without a probe op */
    size_t healthy, unhealthy;            /* physical devices in the table */
    unsigned streams;                     /* open ListAndWatch streams */
    bool watcher;                         /* registers through the kubelet's plugin watcher */
    /* A second API served from the table (a DRA driver): its side on its
     * own, and whether the device-plugin side is served at all. */
    bool ext;
    bool ext_up;
    bool device_plugin; /* the device-plugin side is served (false: the ext only) */
    const char *ext_name;
    char ext_why[256];
    /* Its families on /metrics and their writer (write NULL: none). */
    kdp__ext_metrics ext_metrics;
} kdp__pview;

static inline void kdp__pstats_init(kdp__pstats *s)
{
    memset(s, 0, sizeof(*s)); /* all-zero atomics are zero-valued */
}

static inline void kdp__count(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static inline uint64_t kdp__count_get(const atomic_uint_fast64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* The op of a job's what ("allocate", "preferred allocation" ...), or
 * KDP__OP_N for none. */
static inline kdp__op kdp__op_of(const char *what)
{
    if (!what) {
        return KDP__OP_N;
    }
    switch (what[0]) {
    case 'l':
        return KDP__OP_LIST;
    case 'a':
        return KDP__OP_ALLOCATE;
    case 'r':
        return KDP__OP_REFRESH;
    case 'd':
        return KDP__OP_DESTROY;
    case 'p': /* "preferred allocation", "pre-start", "probe" */
        if (what[1] == 'r' && what[2] == 'o') {
            return KDP__OP_PROBE;
        }
        return what[1] == 'r' && what[2] == 'e' && what[3] == 'f' ? KDP__OP_PREFERRED
                                                                  : KDP__OP_PRESTART;
    default:
        return KDP__OP_N;
    }
}

/* One observation of a callback that took ns nanoseconds. */
static inline void kdp__hist_observe(kdp__hist *h, uint64_t ns)
{
    static const uint64_t bounds_ns[KDP__HIST_N] = {
        100000ULL,     250000ULL,     500000ULL,     1000000ULL,    2500000ULL,   5000000ULL,
        10000000ULL,   25000000ULL,   50000000ULL,   100000000ULL,  250000000ULL, 500000000ULL,
        1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL};
    size_t i = 0;
    while (i < KDP__HIST_N && ns > bounds_ns[i]) {
        i++;
    }
    kdp__count(&h->buckets[i], 1);
    kdp__count(&h->sum_ns, ns);
}

#endif
