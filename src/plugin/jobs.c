/* SPDX-License-Identifier: MIT */
#include "plugin/jobs.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"

#define JOB_OF(b) ((kdp__pjob *)((char *)(b)-offsetof(kdp__pjob, base)))

static void list_add(kdp__pjob *j)
{
    kdp_plugin *p = j->p;
    j->lprev = NULL;
    j->lnext = p->jobs;
    if (p->jobs) {
        p->jobs->lprev = j;
    }
    p->jobs = j;
    j->listed = true;
}

static void list_del(kdp__pjob *j)
{
    if (!j->listed) {
        return;
    }
    if (j->lprev) {
        j->lprev->lnext = j->lnext;
    } else {
        j->p->jobs = j->lnext;
    }
    if (j->lnext) {
        j->lnext->lprev = j->lprev;
    }
    j->listed = false;
}

static void run(kdp__job *b)
{
    kdp__pjob *j = JOB_OF(b);
    j->fn(j);
}

static void done(kdp__job *b)
{
    kdp__pjob *j = JOB_OF(b);
    list_del(j);
    kdp__timer_free(j->deadline);
    j->deadline = NULL;
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

kdp__pjob *kdp__pjob_new(kdp_plugin *p, const char *what)
{
    kdp__pjob *j = calloc(1, sizeof(*j));
    if (!j) {
        return NULL;
    }
    j->p = p;
    j->what = what;
    j->base.name = what;
    j->base.run = run;
    j->base.done = done;
    j->base.free = job_free;
    return j;
}

static void on_deadline(kdp__timer *t, void *ud)
{
    kdp__pjob *j = ud;
    list_del(j);
    kdp__timer_free(t);
    j->deadline = NULL;
    kdp_plugin *p = j->p;
    log_error("%s: the %s callback did not return within its deadline; its result will be "
              "dropped",
              p->resource, j->what);
    j->complete(j, true);
    (void)kdp__worker_abandon(p->worker, &j->base); /* frees j, now or when fn returns */
}

int kdp__pjob_submit(kdp__pjob *j, uint64_t deadline_us)
{
    kdp_plugin *p = j->p;
    uint64_t limit = kdp__now_us() + (uint64_t)p->cb_timeout_ms * 1000U;
    if (deadline_us == 0 || deadline_us > limit) {
        deadline_us = limit;
    }
    int r = kdp__timer_new(p->ctx->loop, on_deadline, j, &j->deadline);
    if (r == 0) {
        kdp__timer_start_at(j->deadline, deadline_us);
        list_add(j); /* before the submit: a fast worker cannot race the loop here */
        r = kdp__worker_submit(p->worker, &j->base);
    }
    if (r < 0) {
        list_del(j);
        kdp__timer_free(j->deadline);
        j->deadline = NULL;
        job_free(&j->base);
    }
    return r;
}

void kdp__pjob_forget_all(kdp_plugin *p)
{
    while (p->jobs) {
        kdp__pjob *j = p->jobs;
        list_del(j);
        kdp__timer_free(j->deadline);
        j->deadline = NULL;
    }
}

void kdp__pjob_cancel(kdp__pjob *j)
{
    list_del(j);
    kdp__timer_free(j->deadline);
    j->deadline = NULL;
    (void)kdp__worker_abandon(j->p->worker, &j->base);
}

int kdp__pjob_checked(kdp__pjob *j, int r)
{
    if (r <= 0) {
        return r;
    }
    log_warn("%s: the %s callback returned %d, a positive value: callbacks return 0 or a "
             "negative errno (-%d?); treated as the error -%d",
             j->p->resource, j->what, r, r, r);
    return r > 4095 ? -EIO : -r;
}

int kdp__pjob_busy_message(kdp_plugin *p, char *buf, size_t cap)
{
    const char *name = NULL;
    uint64_t since = 0;
    unsigned n = kdp__worker_stuck(p->worker, &name, &since);
    uint64_t now = kdp__now_us();
    return snprintf(buf, cap,
                    "%s: %u callbacks are stuck past their deadline (the cap is %u; the oldest, "
                    "the %s callback, for %llu ms): calls are refused until one returns",
                    p->resource, n, KDP_MAX_STUCK_CALLBACKS, name ? name : "?",
                    (unsigned long long)(now > since ? (now - since) / 1000U : 0));
}

void kdp__job_set_error(kdp__job *cur, const char *fmt, va_list ap)
{
    kdp__pjob *j = JOB_OF(cur);
    vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
    j->has_msg = true;
}
