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
#include <stdint.h>

#include "runtime/loop.h"

typedef struct kdp__worker kdp__worker;
typedef struct kdp__job kdp__job;

struct kdp__job {
    const char *name;          /* static, for messages ("allocate") */
    void (*run)(kdp__job *j);  /* worker thread */
    void (*done)(kdp__job *j); /* loop thread, unless abandoned */
    void (*free)(kdp__job *j); /* frees the job; any thread */
    /* private to worker.c */
    kdp__job *next;
    int state;
    uint64_t started_us; /* when run() began (0: not yet) */
};

/* max_stuck (>= 1) caps the threads running an abandoned job (a callback
 * past its deadline): the first max_stuck - 1 are retired and a fresh thread
 * serves the queue; the max_stuck-th stays the queue's thread, and submits
 * fail with -EBUSY until one of them returns. So the worker never has more
 * than max_stuck threads. */
int kdp__worker_new(kdp__loop *l, unsigned max_stuck, kdp__worker **ret);
/* Queues j. Returns 0, -EBUSY (every thread is stuck in an abandoned job, see
 * kdp__worker_stuck) or -ENOMEM (a thread cannot be made). */
int kdp__worker_submit(kdp__worker *w, kdp__job *j);
/* How many threads are stuck in an abandoned job right now; *ret_name (may
 * be NULL) gets the name of the job stuck longest (NULL if none), and
 * *ret_since_us (may be NULL) when it was abandoned (kdp__now_us()). Any
 * thread. */
unsigned kdp__worker_stuck(kdp__worker *w, const char **ret_name, uint64_t *ret_since_us);
/* Drops j: done() will not run, free() will (now if the job was not
 * running). Returns true if its run() is executing right now (it is then
 * left to finish on a retired thread). */
bool kdp__worker_abandon(kdp__worker *w, kdp__job *j);
/* When j's run() began (kdp__now_us()), or 0 while it waits in the queue:
 * a deadline counts a callback's own running time, not its wait. Any
 * thread, while j is not freed. */
uint64_t kdp__worker_started(kdp__worker *w, const kdp__job *j);
/* Whether the queue cannot move until a stuck thread returns: the thread
 * serving it is stuck in an abandoned job and the cap allows no other
 * (what waits in the queue then waits for that). Any thread. */
bool kdp__worker_blocked(kdp__worker *w);
/* The job whose run() is executing on the calling thread, or NULL. */
kdp__job *kdp__worker_current(void);
/* Abandons queued jobs, waits up to wait_ms for running callbacks (retired
 * ones included) to return, then frees. Threads still stuck after that are
 * detached and clean up after themselves. NULL is fine. Returns true if a
 * callback was left running (what it may still read must stay). */
bool kdp__worker_free(kdp__worker *w, unsigned wait_ms);

#endif
