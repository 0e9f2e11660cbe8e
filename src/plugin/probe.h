/* SPDX-License-Identifier: MIT */
/*
 * probe: health checks with hysteresis (kdp_ops.probe): the state, the
 * config and the counters. The rounds that call the probe op are
 * plugin/prober.h.
 *
 * The hysteresis is pure (kdp__probe_step on a device's kdp__devprobe):
 * a device's verdict turns Unhealthy after unhealthy_after consecutive
 * failures and Healthy again after healthy_after consecutive successes; a
 * DOWN answer (the health subsystem cannot tell) makes the verdict Unhealthy
 * at once under KDP_PROBE_DOWN_UNHEALTHY, and counts neither way under
 * KDP_PROBE_DOWN_KEEP. The state lives with each device in the table
 * (devices.h), whose overlay makes the health the kubelet sees (table.h).
 */
#ifndef KDP_PROBE_H
#define KDP_PROBE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp.h"
#include "plugin/devices.h"

/* kdp_config's defaults and bounds. */
#define KDP__PROBE_DEFAULT_INTERVAL_MS 10000U
#define KDP__PROBE_DEFAULT_UNHEALTHY   3U
#define KDP__PROBE_DEFAULT_HEALTHY     2U
#define KDP__PROBE_MIN_INTERVAL_MS     100U
#define KDP__PROBE_MAX_INTERVAL_MS     86400000U /* a day */
#define KDP__PROBE_MAX_AFTER           1000U
#define KDP__PROBE_DEFAULT_TIMEOUT_MS  1000U

typedef struct kdp__probe_cfg {
    unsigned interval_ms;
    unsigned unhealthy_after; /* N: consecutive failures, >= 1 */
    unsigned healthy_after;   /* M: consecutive successes, >= 1 */
    kdp_probe_down_policy down;
    unsigned timeout_ms; /* each probe's deadline, <= the callback deadline */
} kdp__probe_cfg;

/* kdp_config's probe fields with their defaults applied, checked. Returns 0,
 * or -EINVAL (logged, naming the field, the bound and the value). */
int kdp__probe_cfg_from(const kdp_config *cfg, kdp__probe_cfg *ret);

/* One answer, as the hysteresis counts it. */
typedef enum kdp__probe_answer {
    KDP__PROBE_OK = 0,
    KDP__PROBE_FAIL, /* KDP_PROBE_UNHEALTHY, any other value, a timeout */
    KDP__PROBE_DOWN,
} kdp__probe_answer;

/* A probe op's return value as an answer. */
kdp__probe_answer kdp__probe_classify(int result);

/* What one probe said of a device, as a second API tells it (the DRA
 * health stream's Unknown and message): not the verdict, which the
 * hysteresis makes. */
typedef enum kdp__probe_note {
    KDP__NOTE_OK = 0,    /* it said Healthy */
    KDP__NOTE_FAIL,      /* it said Unhealthy, or failed (the reason says how) */
    KDP__NOTE_NO_ANSWER, /* it overran its deadline, or could not be run */
    KDP__NOTE_DOWN,      /* it said the health subsystem cannot tell */
} kdp__probe_note;

typedef enum kdp__probe_turn {
    KDP__PROBE_SAME = 0,         /* the verdict did not change */
    KDP__PROBE_TURNED_UNHEALTHY, /* ... turned Unhealthy */
    KDP__PROBE_TURNED_HEALTHY,   /* ... turned Healthy again */
} kdp__probe_turn;

/* Counts answer a into s and says whether the verdict turned. Pure. */
kdp__probe_turn kdp__probe_step(kdp__devprobe *s, kdp__probe_answer a, const kdp__probe_cfg *c);

/* What probing did so far, for kdp_plugin_get_status() and the metrics:
 * any thread reads them (relaxed atomics). */
typedef struct kdp__probe_stats {
    atomic_ullong probes;          /* probe calls that completed or timed out */
    atomic_ullong failures;        /* answers counted as failures (timeouts included) */
    atomic_ullong timeouts;        /* probes past the callback deadline */
    atomic_ullong down_answers;    /* KDP_PROBE_DOWN answers */
    atomic_ullong to_unhealthy;    /* verdicts turned Unhealthy (DOWN's included) */
    atomic_ullong to_healthy;      /* verdicts turned Healthy again */
    atomic_ullong skipped_rounds;  /* rounds the stuck-callback cap refused */
    _Atomic size_t held_unhealthy; /* devices the probe holds Unhealthy (the table sets it) */
    atomic_bool down;              /* probing is down (the last answer was DOWN) */
} kdp__probe_stats;

static inline uint64_t kdp__probe_stat(const atomic_ullong *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}
static inline void kdp__probe_count(atomic_ullong *v, uint64_t n)
{
    atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

#endif
