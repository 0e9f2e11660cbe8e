/* SPDX-License-Identifier: MIT */
/*
 * jobs: a plugin's user callbacks, each run on the plugin's worker under a
 * deadline (kdp__jobs holds the worker, the bound and the jobs in flight).
 *
 * A job's fn runs on the worker thread and sets result (and, through
 * kdp_plugin_set_error, msg). complete runs on the loop thread exactly once:
 * with timed_out false when fn returned in time, or true when the deadline
 * passed first; in that case the late result is dropped and the job is freed
 * by whichever thread holds it last. complete must not keep the job.
 */
#ifndef KDP_JOBS_H
#define KDP_JOBS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/list.h"
#include "plugin/pstats.h"
#include "runtime/loop.h"
#include "runtime/worker.h"

#define KDP__JOB_MSG_MAX 512
/* kdp_config.callback_timeout_ms 0 */
#define KDP__DEFAULT_CB_TIMEOUT_MS 10000U

typedef struct kdp__jobs {
    kdp__loop *loop;
    kdp__worker *worker;
    unsigned timeout_ms;     /* the bound on each callback */
    const char *resource;    /* for log lines; borrowed */
    kdp__link pending;       /* jobs whose complete may still run */
    uint64_t busy_logged_us; /* the last "callbacks are stuck" line */
    kdp__pstats *stats;      /* callback durations, overruns (NULL: none); set after init */
} kdp__jobs;

typedef struct kdp__pjob kdp__pjob;

struct kdp__pjob {
    kdp__job base;
    kdp__jobs *js;
    void *owner;      /* whose job it is (the module that made it) */
    const char *what; /* "allocate", "refresh" ... for log lines */
    void (*fn)(kdp__pjob *j);
    void (*complete)(kdp__pjob *j, bool timed_out);
    void (*cleanup)(kdp__pjob *j); /* frees what data holds; any thread; may be NULL */
    void *data;
    kdp__timer *deadline;
    uint64_t call_deadline_us; /* the caller's, absolute (0: none) */
    unsigned bound_ms;         /* its own bound if shorter than the jobs' (0: theirs) */
    kdp__link link;            /* in js->pending while complete may still run */
    int result;
    bool has_msg;
    char msg[KDP__JOB_MSG_MAX];
};

/* A worker with at most max_stuck threads left in abandoned callbacks (see
 * kdp__worker_new). resource is borrowed. Returns 0 or -errno. */
int kdp__jobs_init(kdp__jobs *js, kdp__loop *l, unsigned timeout_ms, unsigned max_stuck,
                   const char *resource);
/* No complete runs any more for the jobs in flight, and their deadline
 * timers go (the worker frees the jobs themselves). */
void kdp__jobs_forget_all(kdp__jobs *js);
/* forget_all, then frees the worker, waiting up to wait_ms for running
 * callbacks; returns true if one was left running (what it reads must stay). */
bool kdp__jobs_done(kdp__jobs *js, unsigned wait_ms);
/* Callbacks stuck past their deadline (kdp__worker_stuck). Any thread. */
unsigned kdp__jobs_stuck(kdp__jobs *js);

/* A zeroed job of owner. Returns NULL on allocation failure. */
kdp__pjob *kdp__pjob_new(kdp__jobs *js, const char *what, void *owner);
/* Queues j. It is bounded twice: by the callback bound (the jobs'
 * timeout, or j->bound_ms if set and shorter), which counts its own running time from when the
 * worker starts it, never its time in the queue; and by deadline_us (absolute kdp__now_us(); 0:
 * none), the caller's, past which its answer is useless whether it ran or waited. On failure the
 * job is freed and -errno returned (complete is not called): -EBUSY when every thread the cap
 * allows is stuck (kdp__pjob_busy_message says which callback). */
int kdp__pjob_submit(kdp__pjob *j, uint64_t deadline_us);
/* The result is no longer wanted (loop thread): complete will not run. */
void kdp__pjob_cancel(kdp__pjob *j);
/* A callback's return value as kdp takes it (worker thread): 0 or -errno as
 * is; a positive value, a mistake (`return EINVAL;`), is logged and turned
 * into its negative. */
int kdp__pjob_checked(kdp__pjob *j, int r);
/* The message for a call refused with -EBUSY: which callback hangs, since
 * when; also logged, at most once a minute (with `refused`, what was
 * refused). Returns what snprintf returns. */
int kdp__pjob_busy_message(kdp__jobs *js, const char *refused, char *buf, size_t cap);
/* For kdp_plugin_set_error(): cur is the job running on this thread. */
void kdp__job_set_error(kdp__job *cur, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif
