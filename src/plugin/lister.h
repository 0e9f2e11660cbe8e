/* SPDX-License-Identifier: MIT */
/*
 * lister: the runs of a plugin's list op (kdp_ops.list) for its device
 * table. One list call at a time, as a job on the plugin's worker
 * (plugin/jobs.h): at each start (kdp__lister_start), when a rescan is
 * wanted (kdp_plugin_rescan, a list's result that could not keep up with the
 * changes made meanwhile), every rescan interval while serving, and again
 * after a failure, with backoff (100 ms doubling to 30 s); the previous
 * table is kept meanwhile. The last call's outcome is the status's
 * list_error.
 *
 * It knows nothing of the table: the table owns it and is told through
 * kdp__lister_cbs (a list begins or ended without a result, its result, the
 * error changed, the start's list is done) and asked through them (how many
 * devices the kubelet was told, for the log; to bring itself up to date).
 *
 * Threading: the loop thread, but kdp__lister_want (any thread: an atomic;
 * the caller wakes the loop).
 */
#ifndef KDP_LISTER_H
#define KDP_LISTER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/backoff.h"
#include "kdp.h"
#include "plugin/devices.h"
#include "plugin/jobs.h"
#include "runtime/loop.h"

typedef struct kdp__lister_cbs {
    /* A list begins (on: the changes made from now on are kept for its
     * result) or ended without a result (off: they are dropped). */
    void (*listing)(void *ud, bool on);
    /* A list's result, before it is taken: 0, or -errno to refuse it
     * (said by the callee; the list counts as failed). */
    int (*check)(void *ud, const kdp__devtab *d);
    /* A list's result (d: taken). */
    void (*result)(void *ud, kdp__devtab *d);
    /* The devices the kubelet was told (0: none yet), for the log. */
    size_t (*told)(void *ud);
    /* The last call's error (kdp__lister_error) changed. */
    void (*status)(void *ud);
    /* Bring the table up to date, running a wanted list (kdp__lister_poll):
     * the rescan timer fired, or a rescan was wanted while a list ran. */
    void (*sync)(void *ud);
    /* The start's list is done, whatever its outcome. */
    void (*start_listed)(void *ud);
    void *ud;
} kdp__lister_cbs;

typedef struct kdp__lister {
    const char *resource; /* borrowed */
    kdp__jobs *jobs;      /* borrowed */
    kdp_plugin *owner;    /* handed to the list op */
    kdp_list_fn fn;       /* NULL: no list op (the table is what was set) */
    void *fn_ud;
    kdp__lister_cbs cbs;
    atomic_bool wanted; /* a rescan was asked for (any thread) */

    /* loop thread */
    bool serving; /* rescans are armed only while serving */
    bool running; /* one list call at a time */
    kdp__pjob *start_job;
    unsigned rescan_ms;
    kdp__timer *timer; /* a failed list's retry, else the rescan interval */
    kdp__backoff backoff;
    int error; /* the last list call's -errno; 0 = it succeeded */
    uint64_t retry_us;
} kdp__lister;

void kdp__lister_init(kdp__lister *ls, const char *resource, kdp__jobs *jobs, kdp_plugin *owner,
                      kdp_list_fn fn, void *fn_ud, unsigned rescan_ms, const kdp__lister_cbs *cbs);
/* Its timer on l (loop thread, before the context runs), and its release
 * (before the loop goes). */
int kdp__lister_init_loop(kdp__lister *ls, kdp__loop *l);
void kdp__lister_release_loop(kdp__lister *ls);

static inline bool kdp__lister_has_op(const kdp__lister *ls)
{
    return ls->fn != NULL;
}

static inline int kdp__lister_error(const kdp__lister *ls)
{
    return ls->error;
}

/* The start's list (there is a list op): 0 if the job runs (start_listed
 * follows), or -errno if it could not be started (logged, counted as a
 * failure: its retry is armed when serving begins). */
int kdp__lister_start(kdp__lister *ls);
/* Serving begins or ends: the retry and the rescan interval run only while
 * serving. */
void kdp__lister_serving(kdp__lister *ls, bool on);
/* A rescan is wanted: run by the next kdp__lister_poll (any thread). */
void kdp__lister_want(kdp__lister *ls);
/* Runs the list op if a rescan is wanted and it may run now (serving, none
 * running); the request stays set otherwise: the running list's
 * completion, or the next start, takes it. */
void kdp__lister_poll(kdp__lister *ls);

#endif
