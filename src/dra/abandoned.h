/* SPDX-License-Identifier: MIT */
/*
 * abandoned: the claim UIDs whose prepare or unprepare job overran its
 * deadline and still runs on a worker thread left to it. Its answer was
 * given (an error) and its op freed, but the callback may still write the
 * claim's CDI spec and checkpoint record: until it returns, no other op may
 * run on that claim (prepare.c fails them fast: "ask again").
 *
 * Thread-safe (a mutex): the loop adds and asks, the job's cleanup (on the
 * worker thread, when the callback returns) removes. Counted references: a
 * job can outlive its driver. Bounded by the worker's cap on stuck threads.
 */
#ifndef KDP_DRA_ABANDONED_H
#define KDP_DRA_ABANDONED_H

#include <stdbool.h>

typedef struct kdp__abandoned kdp__abandoned;

/* One reference, or NULL (out of memory). */
kdp__abandoned *kdp__abandoned_new(void);
kdp__abandoned *kdp__abandoned_ref(kdp__abandoned *a);
/* NULL is fine. */
void kdp__abandoned_unref(kdp__abandoned *a);
/* uid's job is abandoned (counted: two may be). Returns 0 or -ENOMEM. */
int kdp__abandoned_add(kdp__abandoned *a, const char *uid);
/* One abandoned job of uid returned. */
void kdp__abandoned_del(kdp__abandoned *a, const char *uid);
/* Whether a job of uid is abandoned and still running. */
bool kdp__abandoned_has(kdp__abandoned *a, const char *uid);

#endif
