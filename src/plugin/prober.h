/* SPDX-License-Identifier: MIT */
/*
 * prober: the rounds of health checks (kdp_ops.probe). While the plugin
 * serves: every device of the loop's table once per interval, ONE probe job
 * at a time on the plugin's worker (the next queued after the previous one
 * completed, paced over the interval: probe k of n at k/n of it), so a call
 * of the kubelet waits for one probe at most, never a round. Rounds never
 * overlap; a round that the stuck-callback cap refuses is skipped (said at
 * most once a minute). Each answer goes through the hysteresis
 * (plugin/probe.h) into the table (kdp__tabshared_probe_result), and every turn
 * of a verdict is logged and counted. Each answer is also told upward as a
 * note with its reason (kdp__prober_set_note), the health subsystem going
 * down as one note for every device.
 */
#ifndef KDP_PROBER_H
#define KDP_PROBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp.h"
#include "plugin/jobs.h"
#include "plugin/probe.h"
#include "plugin/table.h"
#include "runtime/loop.h"

typedef int (*kdp__prober_fn)(kdp_plugin *p, const kdp_device *d, void *ud);
/* One answer about device id (NULL: every device) and why ("" for OK). */
typedef void (*kdp__prober_note_fn)(void *ud, const char *id, kdp__probe_note note,
                                    const char *why);

typedef struct kdp__prober {
    kdp__table *table; /* borrowed, as the rest */
    kdp__jobs *jobs;
    kdp_plugin *owner;
    kdp__prober_fn fn; /* NULL: no probing */
    void *ud;
    const char *resource;
    kdp__probe_cfg cfg;
    kdp__probe_stats stats;

    /* loop thread */
    kdp__timer *timer; /* the next probe of the round, or the next round */
    bool serving;
    char **round; /* the round's device IDs (one allocation); NULL between rounds */
    size_t round_n, round_next;
    uint64_t round_start_us;
    kdp__pjob *job; /* the probe in flight */
    bool down;
    uint64_t skip_logged_us;
    kdp__prober_note_fn note; /* NULL: none */
    void *note_ud;
} kdp__prober;

/* fn NULL: a probe that never runs. Returns 0 or -ENOMEM. */
int kdp__prober_init(kdp__prober *pr, kdp__loop *l, kdp__table *t, kdp__jobs *js, kdp_plugin *owner,
                     kdp__prober_fn fn, void *ud, const char *resource, const kdp__probe_cfg *cfg);
/* Where each answer is told (before the plugin runs). */
void kdp__prober_set_note(kdp__prober *pr, kdp__prober_note_fn fn, void *ud);
/* Serving begins (a round starts at once) or ends (the probe in flight is
 * dropped, no probe runs until serving begins again). Loop thread. */
void kdp__prober_serving(kdp__prober *pr, bool on);
/* Frees what the probe has on the loop (its timer, the job in flight):
 * before the loop goes. */
void kdp__prober_release_loop(kdp__prober *pr);

#endif
