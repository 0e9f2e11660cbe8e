/* SPDX-License-Identifier: MIT */
/*
 * worker: runs user callbacks off the loop thread, one at a time, in order.
 *
 * A job's run() executes on the worker thread; its done() then runs on the
 * loop thread (through a wakeup). The loop may abandon a job at any time (a
 * deadline passed, the caller went away): a queued job is dropped unrun; a
 * running one is left to finish on its own thread, which retires afterwards,
 * while a fresh thread takes over the queue, so one hung callback never
 * holds back the calls after it. An abandoned job's done() never runs; its
 * free() runs once, on whichever thread last holds it.
 */
#ifndef KDP_WORKER_H
#define KDP_WORKER_H

#include <stdbool.h>

#include "loop.h"

typedef struct kdp__worker kdp__worker;
typedef struct kdp__job kdp__job;

struct kdp__job {
    void (*run)(kdp__job *j);  /* worker thread */
    void (*done)(kdp__job *j); /* loop thread, unless abandoned */
    void (*free)(kdp__job *j); /* frees the job; any thread */
    /* private to worker.c */
    kdp__job *next;
    int state;
};

int kdp__worker_new(kdp__loop *l, kdp__worker **ret);
/* Queues j. Returns 0 or -errno (-ENOMEM when a thread cannot be made). */
int kdp__worker_submit(kdp__worker *w, kdp__job *j);
/* Drops j: done() will not run, free() will (now if the job was not
 * running). Returns true if its run() is executing right now (it is then
 * left to finish on a retired thread). */
bool kdp__worker_abandon(kdp__worker *w, kdp__job *j);
/* The job whose run() is executing on the calling thread, or NULL. */
kdp__job *kdp__worker_current(void);
/* Abandons queued jobs, waits up to wait_ms for running callbacks (retired
 * ones included) to return, then frees. Threads still stuck after that are
 * detached and clean up after themselves. NULL is fine. Returns true if a
 * callback was left running (what it may still read must stay). */
bool kdp__worker_free(kdp__worker *w, unsigned wait_ms);

#endif
