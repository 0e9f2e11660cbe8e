/* SPDX-License-Identifier: MIT */
/*
 * jobs: a user callback run on the plugin's worker under a deadline.
 *
 * fn runs on the worker thread and sets result (and, through
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

#include "plugin/plugin_int.h"
#include "runtime/worker.h"

#define KDP_JOB_MSG_MAX 512

typedef struct kdp__pjob kdp__pjob;

struct kdp__pjob {
    kdp__job base;
    kdp_plugin *p;
    const char *what; /* "allocate", "refresh" ... for log lines */
    void (*fn)(kdp__pjob *j);
    void (*complete)(kdp__pjob *j, bool timed_out);
    void (*cleanup)(kdp__pjob *j); /* frees what data holds; any thread; may be NULL */
    void *data;
    kdp__timer *deadline;
    kdp__pjob *lprev, *lnext; /* in p->jobs while complete may still run */
    bool listed;
    int result;
    bool has_msg;
    char msg[KDP_JOB_MSG_MAX];
};

/* A zeroed job for p. Returns NULL on allocation failure. */
kdp__pjob *kdp__pjob_new(kdp_plugin *p, const char *what);
/* Queues j with a deadline at deadline_us (absolute kdp__now_us()), or
 * p->cb_timeout_ms from now if 0 or later than that. On failure the job is
 * freed and -errno returned (complete is not called). */
int kdp__pjob_submit(kdp__pjob *j, uint64_t deadline_us);
/* The result is no longer wanted (loop thread): complete will not run. */
void kdp__pjob_cancel(kdp__pjob *j);
/* kdp_plugin_free(): no complete will run for p's outstanding jobs any more
 * and their deadline timers go (the worker frees the jobs themselves). */
void kdp__pjob_forget_all(kdp_plugin *p);
/* A callback's return value as kdp takes it (worker thread): 0 or -errno as
 * is; a positive value, a mistake (`return EINVAL;`), is logged and turned
 * into its negative. */
int kdp__pjob_checked(kdp__pjob *j, int r);
/* The message for a call refused because the worker is saturated
 * (kdp__pjob_submit returned -EBUSY): which callback hangs, since when.
 * Returns what snprintf returns. */
int kdp__pjob_busy_message(kdp_plugin *p, char *buf, size_t cap);
/* For kdp_plugin_set_error(): cur is the job running on this thread. */
void kdp__job_set_error(kdp__job *cur, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#endif
