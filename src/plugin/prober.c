/* SPDX-License-Identifier: MIT */
#include "plugin/prober.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

/* A skipped round is said this often at most. */
#define SKIP_LOG_US (60ULL * 1000000ULL)

static void run_next(kdp__prober *pr);

/* The next round, an interval after this one began (at once if that has
 * passed: a round slower than the interval is followed by the next). */
static void end_round(kdp__prober *pr)
{
    free((void *)pr->round);
    pr->round = NULL;
    pr->round_n = pr->round_next = 0;
    if (pr->serving) {
        kdp__timer_start_at(pr->timer, pr->round_start_us + (uint64_t)pr->cfg.interval_ms * 1000U);
    }
}

/* The IDs of the table the kubelet has been told, sorted, copied (the
 * table may change during the round): one allocation. */
static int snapshot(kdp__prober *pr)
{
    const kdp__devtab *tab = kdp__table_told(pr->table);
    pr->round = NULL;
    pr->round_n = pr->round_next = 0;
    if (tab->n == 0) {
        return 0; /* no device: an empty round */
    }
    const kdp__dev **sorted = NULL;
    if (kdp__devtab_sorted(tab, &sorted) < 0) {
        return -ENOMEM;
    }
    size_t bytes = tab->n * sizeof(char *);
    for (size_t i = 0; i < tab->n; i++) {
        bytes += strlen(sorted[i]->id) + 1;
    }
    char **v = malloc(bytes);
    if (!v) {
        free((void *)sorted);
        return -ENOMEM;
    }
    char *pos = (char *)(v + tab->n);
    for (size_t i = 0; i < tab->n; i++) {
        size_t len = strlen(sorted[i]->id) + 1;
        memcpy(pos, sorted[i]->id, len);
        v[i] = pos;
        pos += len;
    }
    free((void *)sorted);
    pr->round = v;
    pr->round_n = tab->n;
    pr->round_next = 0;
    return 0;
}

static void begin_round(kdp__prober *pr)
{
    pr->round_start_us = kdp__now_us();
    if (snapshot(pr) < 0) {
        log_error("probe: %s: out of memory starting a round of health checks; trying again "
                  "in %u ms",
                  pr->resource, pr->cfg.interval_ms);
        end_round(pr);
        return;
    }
    if (pr->round_n == 0) {
        end_round(pr);
        return;
    }
    run_next(pr);
}

static void on_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__prober *pr = ud;
    if (!pr->serving || pr->job) {
        return;
    }
    if (pr->round) {
        run_next(pr);
    } else {
        begin_round(pr);
    }
}

/* After a probe: the next one at its slot of the round (probe k of n at
 * k/n of the interval), at once if that has passed. */
static void schedule_next(kdp__prober *pr)
{
    if (!pr->serving) {
        return;
    }
    if (pr->round_next >= pr->round_n) {
        end_round(pr);
        return;
    }
    uint64_t slot =
        pr->round_start_us + (uint64_t)pr->cfg.interval_ms * 1000U * pr->round_next / pr->round_n;
    if (slot > kdp__now_us()) {
        kdp__timer_start_at(pr->timer, slot);
    } else {
        run_next(pr);
    }
}

/* What the transition lines say of an answer. */
static void reason_of(const kdp__prober *pr, const kdp__pjob *j, bool timed_out, int result,
                      char *buf, size_t cap)
{
    if (timed_out) {
        snprintf(buf, cap, "the probe did not answer within its deadline (%u ms)",
                 pr->cfg.timeout_ms);
    } else if (j->has_msg) {
        snprintf(buf, cap, "%s", j->msg);
    } else if (result == KDP_PROBE_UNHEALTHY) {
        snprintf(buf, cap, "the probe said Unhealthy (no reason given)");
    } else if (result == KDP_PROBE_DOWN) {
        snprintf(buf, cap, "the probe said the health subsystem is down (no reason given)");
    } else if (result < 0 && result > -4096) {
        snprintf(buf, cap, "%s", strerror(-result));
    } else {
        snprintf(buf, cap, "the probe returned %d", result);
    }
}

static void log_turn(kdp__prober *pr, const char *id, kdp__probe_turn turn, const kdp__devprobe *st,
                     const char *reason)
{
    if (turn == KDP__PROBE_TURNED_UNHEALTHY) {
        kdp__probe_count(&pr->stats.to_unhealthy, 1);
        if (pr->down) {
            log_warn("probe: %s device %s Unhealthy: the health subsystem is down "
                     "(onProbeDown: unhealthy): %s",
                     pr->resource, id, reason);
        } else {
            log_warn("probe: %s device %s Unhealthy after %u failures: %s", pr->resource, id,
                     st->fails, reason);
        }
    } else if (turn == KDP__PROBE_TURNED_HEALTHY) {
        kdp__probe_count(&pr->stats.to_healthy, 1);
        log_info("probe: %s device %s Healthy again after %u successes", pr->resource, id, st->oks);
    }
}

/* Probing goes down (the first DOWN answer) or comes back (the first other
 * answer after DOWN ones): one line each. */
static void set_down(kdp__prober *pr, bool down, const char *id, const char *reason)
{
    pr->down = down;
    atomic_store_explicit(&pr->stats.down, down, memory_order_relaxed);
    if (!down) {
        log_info("probe: %s: the health subsystem answers again (device %s)%s", pr->resource, id,
                 pr->cfg.down == KDP_PROBE_DOWN_KEEP
                     ? ""
                     : "; each device held Unhealthy comes back after its successes in a row");
        return;
    }
    if (pr->cfg.down == KDP_PROBE_DOWN_KEEP) {
        log_warn("probe: %s: the health subsystem is down (device %s: %s): keeping every "
                 "device's last state until it answers again (policy: keep)",
                 pr->resource, id, reason);
        return;
    }
    size_t n = kdp__tabshared_probe_all(&pr->table->shared, KDP__PROBE_DOWN, &pr->cfg);
    kdp__probe_count(&pr->stats.to_unhealthy, n);
    log_warn("probe: %s: the health subsystem is down (device %s: %s): every device "
             "Unhealthy (%zu turned so; policy: unhealthy), each back after %u successful "
             "probes in a row",
             pr->resource, id, reason, n, pr->cfg.healthy_after);
}

static void tell(kdp__prober *pr, const char *id, kdp__probe_note note, const char *why)
{
    if (pr->note) {
        pr->note(pr->note_ud, id, note, note == KDP__NOTE_OK ? "" : why);
    }
}

/* One answer about device id, counted, applied and told (no_answer: the
 * probe did not answer in time or could not run). */
static void answer(kdp__prober *pr, const char *id, kdp__probe_answer a, bool no_answer,
                   const char *reason)
{
    if (a == KDP__PROBE_DOWN) {
        kdp__probe_count(&pr->stats.down_answers, 1);
        if (!pr->down) {
            set_down(pr, true, id, reason);
            tell(pr, NULL, KDP__NOTE_DOWN, reason);
            return;
        }
    } else if (pr->down) {
        set_down(pr, false, id, reason);
    }
    if (a == KDP__PROBE_FAIL) {
        kdp__probe_count(&pr->stats.failures, 1);
    }
    kdp__devprobe st = {0};
    int turn = kdp__tabshared_probe_result(&pr->table->shared, id, a, &pr->cfg, &st);
    if (turn > 0) {
        log_turn(pr, id, (kdp__probe_turn)turn, &st, reason);
    }
    tell(pr, id,
         a == KDP__PROBE_DOWN ? KDP__NOTE_DOWN
         : no_answer          ? KDP__NOTE_NO_ANSWER
         : a == KDP__PROBE_OK ? KDP__NOTE_OK
                              : KDP__NOTE_FAIL,
         reason);
}

static void fn_probe(kdp__pjob *j)
{
    kdp__prober *pr = j->owner;
    kdp__dev *d = j->data;
    kdp_device v = kdp__dev_view(d);
    /* not kdp__pjob_checked: 1 and 2 are answers here, not mistakes */
    j->result = pr->fn(pr->owner, &v, pr->ud);
}

static void cleanup_probe(kdp__pjob *j)
{
    kdp__dev *d = j->data;
    if (d) {
        kdp__dev_free(d);
        free(d);
    }
}

static void complete_probe(kdp__pjob *j, bool timed_out)
{
    kdp__prober *pr = j->owner;
    kdp__dev *d = j->data;
    pr->job = NULL;
    kdp__probe_count(&pr->stats.probes, 1);
    if (timed_out) {
        kdp__probe_count(&pr->stats.timeouts, 1);
    }
    int result = timed_out ? -ETIMEDOUT : j->result;
    char reason[KDP__JOB_MSG_MAX + 64];
    reason_of(pr, j, timed_out, result, reason, sizeof(reason));
    answer(pr, d->id, kdp__probe_classify(result), timed_out, reason);
    schedule_next(pr);
}

/* The round's skipped: every thread the cap allows is stuck in a callback. */
static void skip_round(kdp__prober *pr)
{
    kdp__probe_count(&pr->stats.skipped_rounds, 1);
    uint64_t now = kdp__now_us();
    if (!pr->skip_logged_us || now - pr->skip_logged_us >= SKIP_LOG_US) {
        pr->skip_logged_us = now;
        log_warn("probe: %s: a round of health checks skipped: %u callbacks are stuck past "
                 "their deadline (the cap is %u); %llu rounds skipped so far (said at most "
                 "once a minute)",
                 pr->resource, kdp__jobs_stuck(pr->jobs), KDP_MAX_STUCK_CALLBACKS,
                 (unsigned long long)kdp__probe_stat(&pr->stats.skipped_rounds));
    }
    end_round(pr);
}

/* Submits the round's next device still in the table. */
static void run_next(kdp__prober *pr)
{
    while (pr->round_next < pr->round_n) {
        const char *id = pr->round[pr->round_next++];
        const kdp__dev *cur = kdp__devtab_find(kdp__table_told(pr->table), id);
        if (!cur) {
            continue; /* removed since the round began */
        }
        kdp__pjob *j = kdp__pjob_new(pr->jobs, "probe", pr);
        kdp__dev *copy = calloc(1, sizeof(*copy));
        if (!j || !copy || kdp__dev_dup(copy, cur) < 0) {
            free(j);
            kdp__dev_free(copy);
            free(copy);
            log_error("probe: %s: out of memory probing device %s", pr->resource, id);
            continue;
        }
        j->data = copy;
        j->fn = fn_probe;
        j->complete = complete_probe;
        j->cleanup = cleanup_probe;
        j->bound_ms = pr->cfg.timeout_ms; /* from when it runs */
        pr->job = j;
        int r = kdp__pjob_submit(j, 0);
        if (r == 0) {
            return;
        }
        pr->job = NULL;
        if (r == -EBUSY) {
            skip_round(pr);
            return;
        }
        log_error("probe: %s: cannot run the probe of device %s: %s", pr->resource, id,
                  strerror(-r));
        char why[128];
        snprintf(why, sizeof(why), "kdp cannot run the health check: %s", strerror(-r));
        tell(pr, id, KDP__NOTE_NO_ANSWER, why);
    }
    end_round(pr);
}

/* ---- life ---- */

int kdp__prober_init(kdp__prober *pr, kdp__loop *l, kdp__table *t, kdp__jobs *js, kdp_plugin *owner,
                     kdp__prober_fn fn, void *ud, const char *resource, const kdp__probe_cfg *cfg)
{
    memset(pr, 0, sizeof(*pr));
    pr->table = t;
    pr->jobs = js;
    pr->owner = owner;
    pr->fn = fn;
    pr->ud = ud;
    pr->resource = resource;
    pr->cfg = *cfg;
    if (!fn) {
        return 0;
    }
    return kdp__timer_new(l, on_timer, pr, &pr->timer);
}

void kdp__prober_set_note(kdp__prober *pr, kdp__prober_note_fn fn, void *ud)
{
    pr->note = fn;
    pr->note_ud = ud;
}

void kdp__prober_serving(kdp__prober *pr, bool on)
{
    if (!pr->fn || pr->serving == on) {
        return;
    }
    pr->serving = on;
    if (on) {
        kdp__timer_start(pr->timer, 0);
        return;
    }
    kdp__timer_stop(pr->timer);
    if (pr->job) {
        kdp__pjob_cancel(pr->job);
        pr->job = NULL;
    }
    free((void *)pr->round);
    pr->round = NULL;
    pr->round_n = pr->round_next = 0;
}

void kdp__prober_release_loop(kdp__prober *pr)
{
    kdp__prober_serving(pr, false);
    kdp__timer_free(pr->timer);
    pr->timer = NULL;
}
