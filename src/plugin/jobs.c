/* SPDX-License-Identifier: MIT */
#include "plugin/jobs.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define JOB_OF(b)   KDP__CONTAINER_OF(b, kdp__pjob, base)
#define BUSY_LOG_US (60ULL * 1000000ULL)

int kdp__jobs_init(kdp__jobs *js, kdp__loop *l, unsigned timeout_ms, unsigned max_stuck,
                   const char *resource)
{
    js->loop = l;
    js->timeout_ms = timeout_ms;
    js->resource = resource;
    js->busy_logged_us = 0;
    js->stats = NULL;
    kdp__link_init(&js->pending);
    return kdp__worker_new(l, max_stuck, &js->worker);
}

static void unlist(kdp__pjob *j)
{
    kdp__link_remove(&j->link);
    kdp__timer_free(j->deadline);
    j->deadline = NULL;
}

void kdp__jobs_forget_all(kdp__jobs *js)
{
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &js->pending)
    {
        unlist(KDP__CONTAINER_OF(l, kdp__pjob, link));
    }
}

bool kdp__jobs_done(kdp__jobs *js, unsigned wait_ms)
{
    kdp__jobs_forget_all(js);
    bool left = kdp__worker_free(js->worker, wait_ms);
    js->worker = NULL;
    return left;
}

unsigned kdp__jobs_stuck(kdp__jobs *js)
{
    return js->worker ? kdp__worker_stuck(js->worker, NULL, NULL) : 0;
}

/* Worker thread. The counters outlive a callback left running: the plugin
 * is kept for it (kdp_plugin_free). */
static void run(kdp__job *b)
{
    kdp__pjob *j = JOB_OF(b);
    kdp__pstats *stats = j->js->stats;
    kdp__op op = kdp__op_of(j->what);
    if (!stats || op == KDP__OP_N) {
        j->fn(j);
        return;
    }
    uint64_t t0 = kdp__now_us(); /* microseconds: the smallest bucket is 100 */
    j->fn(j);
    kdp__hist_observe(&stats->callbacks[op], (kdp__now_us() - t0) * 1000U);
}

static void done(kdp__job *b)
{
    kdp__pjob *j = JOB_OF(b);
    unlist(j);
    j->complete(j, false);
}

static void job_free(kdp__job *b)
{
    kdp__pjob *j = JOB_OF(b);
    if (j->cleanup) {
        j->cleanup(j);
    }
    free(j);
}

kdp__pjob *kdp__pjob_new(kdp__jobs *js, const char *what, void *owner)
{
    kdp__pjob *j = calloc(1, sizeof(*j));
    if (!j) {
        return NULL;
    }
    j->js = js;
    j->owner = owner;
    j->what = what;
    j->base.name = what;
    j->base.run = run;
    j->base.done = done;
    j->base.free = job_free;
    kdp__link_init(&j->link);
    return j;
}

static unsigned bound_ms(const kdp__pjob *j)
{
    unsigned t = j->js->timeout_ms;
    return j->bound_ms && j->bound_ms < t ? j->bound_ms : t;
}

/* When j is due: the caller's deadline, or the bound counted from when it
 * began running (from now while it waits behind others that run; now if
 * the queue cannot move: a stuck callback at the cap holds it). */
static uint64_t due(kdp__pjob *j, uint64_t now)
{
    kdp__jobs *js = j->js;
    uint64_t started = kdp__worker_started(js->worker, &j->base);
    if (!started && kdp__worker_blocked(js->worker)) {
        return now;
    }
    uint64_t at = (started ? started : now) + (uint64_t)bound_ms(j) * 1000U;
    if (j->call_deadline_us && j->call_deadline_us < at) {
        at = j->call_deadline_us;
    }
    return at;
}

static void on_deadline(kdp__timer *t, void *ud)
{
    kdp__pjob *j = ud;
    kdp__jobs *js = j->js;
    uint64_t now = kdp__now_us();
    uint64_t at = due(j, now);
    if (at > now) {
        kdp__timer_start_at(t, at); /* it waited in the queue: its time began later */
        return;
    }
    unlist(j); /* frees t: safe from its own callback */
    bool ran = kdp__worker_started(js->worker, &j->base) != 0;
    if (ran) {
        log_error("%s: the %s callback did not return within its deadline; %s", js->resource,
                  j->what,
                  strcmp(j->what, "probe") == 0
                      ? "the check counts as failed (its result, when it comes, is dropped)"
                      : "its result will be dropped");
    } else {
        log_error("%s: the %s callback could not start before its deadline (%s): not run",
                  js->resource, j->what,
                  kdp__worker_blocked(js->worker)
                      ? "the callbacks stuck past their deadline are at the cap"
                      : "its caller's deadline passed while others ran");
    }
    kdp__op op = kdp__op_of(j->what);
    if (js->stats && op != KDP__OP_N) {
        kdp__count(&js->stats->deadline_exceeded[op], 1);
    }
    j->complete(j, true);
    /* frees j, now or when fn returns */
    if (kdp__worker_abandon(js->worker, &j->base) && js->stats) {
        kdp__count(&js->stats->threads_abandoned, 1);
    }
}

int kdp__pjob_submit(kdp__pjob *j, uint64_t deadline_us)
{
    kdp__jobs *js = j->js;
    uint64_t now = kdp__now_us();
    j->call_deadline_us = deadline_us;
    uint64_t at = now + (uint64_t)bound_ms(j) * 1000U;
    if (deadline_us && deadline_us < at) {
        at = deadline_us;
    }
    int r = kdp__timer_new(js->loop, on_deadline, j, &j->deadline);
    if (r == 0) {
        kdp__timer_start_at(j->deadline, at);
        /* listed before the submit: a fast worker cannot race the loop here */
        kdp__list_append(&js->pending, &j->link);
        r = kdp__worker_submit(js->worker, &j->base);
    }
    if (r < 0) {
        unlist(j);
        job_free(&j->base);
    }
    return r;
}

void kdp__pjob_cancel(kdp__pjob *j)
{
    unlist(j);
    (void)kdp__worker_abandon(j->js->worker, &j->base);
}

int kdp__pjob_checked(kdp__pjob *j, int r)
{
    if (r <= 0) {
        return r;
    }
    log_warn("%s: the %s callback returned %d, a positive value: callbacks return 0 or a "
             "negative errno (-%d?); treated as the error -%d",
             j->js->resource, j->what, r, r, r);
    return r > 4095 ? -EIO : -r;
}

int kdp__pjob_busy_message(kdp__jobs *js, const char *refused, char *buf, size_t cap)
{
    const char *name = NULL;
    uint64_t since = 0;
    unsigned n = kdp__worker_stuck(js->worker, &name, &since);
    uint64_t now = kdp__now_us();
    int len = snprintf(buf, cap,
                       "%s: %u callbacks are stuck past their deadline (the cap is %u; the "
                       "oldest, the %s callback, for %llu ms): calls are refused until one "
                       "returns",
                       js->resource, n, KDP_MAX_STUCK_CALLBACKS, name ? name : "?",
                       (unsigned long long)(now > since ? (now - since) / 1000U : 0));
    if (!js->busy_logged_us || now - js->busy_logged_us >= BUSY_LOG_US) {
        js->busy_logged_us = now;
        log_error("%s (refusing a %s call; said at most once a minute)", buf, refused);
    }
    return len;
}

void kdp__job_set_error(kdp__job *cur, const char *fmt, va_list ap)
{
    kdp__pjob *j = JOB_OF(cur);
    vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
    j->has_msg = true;
}
