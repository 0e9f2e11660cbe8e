/* SPDX-License-Identifier: MIT */
#include "runtime/worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "base/log.h"

enum { J_QUEUED = 1, J_RUNNING, J_DONE, J_ABANDONED };

typedef struct wthread wthread;

/* Shared with the threads; outlives the kdp__worker while a retired or stuck
 * thread still runs. */
typedef struct core {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was queued, or closing */
    pthread_cond_t idle; /* a thread exited */
    kdp__job *q_head, *q_tail;
    kdp__job *done_head, *done_tail;
    wthread *threads;
    wthread *exited;    /* returned, not joined yet (joined by the loop thread) */
    kdp__wakeup *wake;  /* NULL once the worker is freed */
    unsigned refs;      /* 1 for the worker + 1 per thread */
    unsigned max_stuck; /* retired threads still in an abandoned job, at most */
    bool closing;
} core;

struct wthread {
    core *c;
    wthread *next;
    kdp__job *running;
    uint64_t stuck_since; /* when running was abandoned; 0 if it was not */
    pthread_t tid;
    bool retired;
    bool detached; /* left behind at kdp__worker_free: frees itself */
};

struct kdp__worker {
    core *c;
    kdp__wakeup *wake;
};

static _Thread_local kdp__job *current_job;

kdp__job *kdp__worker_current(void)
{
    return current_job;
}

static void push(kdp__job **head, kdp__job **tail, kdp__job *j)
{
    j->next = NULL;
    if (*tail) {
        (*tail)->next = j;
    } else {
        *head = j;
    }
    *tail = j;
}

static bool unlink_job(kdp__job **head, kdp__job **tail, kdp__job *j)
{
    kdp__job *prev = NULL;
    for (kdp__job *it = *head; it; prev = it, it = it->next) {
        if (it != j) {
            continue;
        }
        if (prev) {
            prev->next = j->next;
        } else {
            *head = j->next;
        }
        if (*tail == j) {
            *tail = prev;
        }
        return true;
    }
    return false;
}

static void core_unref_locked(core *c)
{
    if (--c->refs > 0) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    pthread_mutex_unlock(&c->mu);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void thread_forget(core *c, wthread *t)
{
    for (wthread **pp = &c->threads; *pp; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    }
}

/* Runs one job outside the lock; returns with the lock held again. */
static void run_job(core *c, wthread *t, kdp__job *j)
{
    j->state = J_RUNNING;
    j->started_us = kdp__now_us();
    t->running = j;
    pthread_mutex_unlock(&c->mu);
    current_job = j;
    j->run(j);
    current_job = NULL;
    pthread_mutex_lock(&c->mu);
    t->running = NULL;
    t->stuck_since = 0;
    if (j->state == J_ABANDONED || c->closing) {
        pthread_mutex_unlock(&c->mu);
        j->free(j);
        pthread_mutex_lock(&c->mu);
        return;
    }
    j->state = J_DONE;
    push(&c->done_head, &c->done_tail, j);
    kdp__wakeup_signal(c->wake);
}

static void *thread_main(void *arg)
{
    wthread *t = arg;
    core *c = t->c;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!t->retired && !c->closing && !c->q_head) {
            pthread_cond_wait(&c->work, &c->mu);
        }
        if (t->retired || c->closing) {
            break;
        }
        kdp__job *j = c->q_head;
        (void)unlink_job(&c->q_head, &c->q_tail, j);
        run_job(c, t, j);
    }
    thread_forget(c, t);
    if (t->detached) {
        free(t);
    } else {
        t->next = c->exited; /* joined, then freed, by the loop thread */
        c->exited = t;
    }
    pthread_cond_broadcast(&c->idle);
    core_unref_locked(c);
    return NULL;
}

/* Starts a thread (lock held). All signals are blocked in it: they are for
 * the application's threads and kdp_ctx_run()'s handlers, not for callbacks. */
static int spawn_locked(core *c)
{
    wthread *t = calloc(1, sizeof(*t));
    if (!t) {
        return -ENOMEM;
    }
    t->c = c;
    pthread_attr_t attr;
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&t->tid, &attr, thread_main, t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        free(t);
        return -r;
    }
    t->next = c->threads;
    c->threads = t;
    c->refs++;
    return 0;
}

/* Joins the threads that have returned (retired ones, or all at the end), so
 * none of their stacks or TLS outlive them. Loop thread; lock not held. */
static void join_exited(core *c)
{
    pthread_mutex_lock(&c->mu);
    wthread *list = c->exited;
    c->exited = NULL;
    pthread_mutex_unlock(&c->mu);
    while (list) {
        wthread *t = list;
        list = t->next;
        pthread_join(t->tid, NULL);
        free(t);
    }
}

static void on_wake(kdp__wakeup *wk, void *ud)
{
    (void)wk;
    kdp__worker *w = ud;
    core *c = w->c;
    /* One at a time, each taken under the lock: a completion may abandon a
     * job later in the list, which kdp__worker_abandon() must still find. */
    for (;;) {
        pthread_mutex_lock(&c->mu);
        kdp__job *j = c->done_head;
        if (j) {
            (void)unlink_job(&c->done_head, &c->done_tail, j);
        }
        pthread_mutex_unlock(&c->mu);
        if (!j) {
            return;
        }
        j->done(j);
        j->free(j);
    }
}

int kdp__worker_new(kdp__loop *l, unsigned max_stuck, kdp__worker **ret)
{
    kdp__worker *w = calloc(1, sizeof(*w));
    core *c = calloc(1, sizeof(*c));
    if (!w || !c) {
        free(w);
        free(c);
        return -ENOMEM;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->idle, NULL);
    c->refs = 1;
    c->max_stuck = max_stuck > 0 ? max_stuck : 1;
    w->c = c;
    int r = kdp__wakeup_new(l, on_wake, w, &w->wake);
    if (r < 0) {
        pthread_mutex_lock(&c->mu);
        core_unref_locked(c);
        free(w);
        return r;
    }
    c->wake = w->wake;
    *ret = w;
    return 0;
}

/* The thread that serves the queue (the one not retired), or NULL. */
static wthread *live_thread(const core *c)
{
    for (wthread *t = c->threads; t; t = t->next) {
        if (!t->retired) {
            return t;
        }
    }
    return NULL;
}

static unsigned count_retired(const core *c)
{
    unsigned n = 0;
    for (const wthread *t = c->threads; t; t = t->next) {
        n += t->retired;
    }
    return n;
}

int kdp__worker_submit(kdp__worker *w, kdp__job *j)
{
    core *c = w->c;
    join_exited(c);
    pthread_mutex_lock(&c->mu);
    int r = 0;
    wthread *live = live_thread(c);
    if (live && live->stuck_since) {
        /* Stuck in an abandoned job (the cap was reached when it overran):
         * retire it now if a stuck thread has returned since, else refuse. */
        if (count_retired(c) + 1 < c->max_stuck) {
            live->retired = true;
            live = NULL;
        } else {
            r = -EBUSY;
        }
    }
    if (r == 0 && !live) {
        r = spawn_locked(c);
    }
    if (r == 0) {
        j->state = J_QUEUED;
        j->started_us = 0;
        push(&c->q_head, &c->q_tail, j);
    }
    pthread_mutex_unlock(&c->mu);
    /* Signalled after the unlock: a worker woken under the lock would only
     * block on it at once (two more context switches per job). The core
     * outlives this call (the worker holds a reference). */
    if (r == 0) {
        pthread_cond_signal(&c->work);
    }
    return r;
}

unsigned kdp__worker_stuck(kdp__worker *w, const char **ret_name, uint64_t *ret_since_us)
{
    core *c = w->c;
    unsigned n = 0;
    const wthread *oldest = NULL;
    pthread_mutex_lock(&c->mu);
    for (const wthread *t = c->threads; t; t = t->next) {
        if (t->stuck_since) {
            n++;
            if (!oldest || t->stuck_since < oldest->stuck_since) {
                oldest = t;
            }
        }
    }
    if (ret_name) {
        *ret_name = oldest ? oldest->running->name : NULL;
    }
    if (ret_since_us) {
        *ret_since_us = oldest ? oldest->stuck_since : 0;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

bool kdp__worker_blocked(kdp__worker *w)
{
    core *c = w->c;
    pthread_mutex_lock(&c->mu);
    wthread *live = live_thread(c);
    bool blocked = live && live->stuck_since && count_retired(c) + 1 >= c->max_stuck;
    pthread_mutex_unlock(&c->mu);
    return blocked;
}

uint64_t kdp__worker_started(kdp__worker *w, const kdp__job *j)
{
    core *c = w->c;
    pthread_mutex_lock(&c->mu);
    uint64_t t = j->state == J_QUEUED ? 0 : j->started_us;
    pthread_mutex_unlock(&c->mu);
    return t;
}

bool kdp__worker_abandon(kdp__worker *w, kdp__job *j)
{
    core *c = w->c;
    pthread_mutex_lock(&c->mu);
    if (j->state == J_RUNNING) {
        j->state = J_ABANDONED;
        for (wthread *t = c->threads; t; t = t->next) {
            if (t->running != j) {
                continue;
            }
            t->stuck_since = kdp__now_us();
            /* The last one the cap allows stays the thread serving the
             * queue: what is queued waits for it, new submits are refused
             * (-EBUSY) until a stuck thread returns. */
            if (count_retired(c) + 1 < c->max_stuck) {
                t->retired = true; /* finishes j, then exits */
            }
        }
        if (c->q_head && !live_thread(c) && spawn_locked(c) < 0) {
            log_error("cannot start a worker thread: queued callbacks wait for the stuck one");
        }
        pthread_cond_broadcast(&c->work);
        pthread_mutex_unlock(&c->mu);
        return true;
    }
    bool found =
        unlink_job(&c->q_head, &c->q_tail, j) || unlink_job(&c->done_head, &c->done_tail, j);
    pthread_mutex_unlock(&c->mu);
    if (found) {
        j->free(j);
    }
    return false;
}

static void free_list(kdp__job *j)
{
    while (j) {
        kdp__job *next = j->next;
        j->free(j);
        j = next;
    }
}

bool kdp__worker_free(kdp__worker *w, unsigned wait_ms)
{
    if (!w) {
        return false;
    }
    core *c = w->c;
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    kdp__job *dropped = c->q_head;
    c->q_head = c->q_tail = NULL;
    pthread_cond_broadcast(&c->work);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (c->threads && pthread_cond_timedwait(&c->idle, &c->mu, &until) == 0) {
    }
    bool left = c->threads != NULL;
    if (left) {
        log_warn("a callback is still running at shutdown; leaving it behind");
    }
    for (wthread *t = c->threads; t; t = t->next) {
        t->detached = true; /* nobody will join it: it frees itself */
        pthread_detach(t->tid);
    }
    wthread *exited = c->exited;
    c->exited = NULL;
    kdp__job *done = c->done_head;
    c->done_head = c->done_tail = NULL;
    c->wake = NULL;
    core_unref_locked(c);
    while (exited) {
        wthread *t = exited;
        exited = t->next;
        pthread_join(t->tid, NULL);
        free(t);
    }
    free_list(dropped);
    free_list(done);
    kdp__wakeup_free(w->wake);
    free(w);
    return left;
}
