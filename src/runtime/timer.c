/* SPDX-License-Identifier: MIT */
/* timer: the loop's timers, a binary min-heap of deadlines behind one timerfd. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "runtime/loop.h"
#include "runtime/loop_int.h"

#define NOT_ARMED SIZE_MAX /* kdp__timer.idx of a timer not in the heap */

/* --- timers: a binary min-heap ordered by (deadline, seq) --- */

static bool timer_before(const kdp__timer *a, const kdp__timer *b)
{
    return a->deadline_us < b->deadline_us || (a->deadline_us == b->deadline_us && a->seq < b->seq);
}

static void heap_set(kdp__loop *l, size_t i, kdp__timer *t)
{
    l->heap[i] = t;
    t->idx = i;
}

static void heap_up(kdp__loop *l, size_t i)
{
    kdp__timer *t = l->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!timer_before(t, l->heap[parent])) {
            break;
        }
        heap_set(l, i, l->heap[parent]);
        i = parent;
    }
    heap_set(l, i, t);
}

static void heap_down(kdp__loop *l, size_t i)
{
    kdp__timer *t = l->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->heap_len) {
            break;
        }
        if (c + 1 < l->heap_len && timer_before(l->heap[c + 1], l->heap[c])) {
            c++;
        }
        if (!timer_before(l->heap[c], t)) {
            break;
        }
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

static void heap_remove(kdp__loop *l, kdp__timer *t)
{
    size_t i = t->idx;
    kdp__timer *last = l->heap[--l->heap_len];
    t->idx = NOT_ARMED;
    if (last == t) {
        return;
    }
    heap_set(l, i, last);
    if (i > 0 && timer_before(last, l->heap[(i - 1) / 2])) {
        heap_up(l, i);
    } else {
        heap_down(l, i);
    }
}

/* Arms the timerfd to the earliest deadline, or disarms it. */
static void timerfd_sync(kdp__loop *l)
{
    if (l->timers_running) {
        return;
    }
    uint64_t want = 0;
    if (l->heap_len > 0) {
        want = l->heap[0]->deadline_us ? l->heap[0]->deadline_us : 1; /* 0 would disarm */
    }
    if (want == l->tfd_deadline_us) {
        return;
    }
    struct itimerspec its = {
        .it_value = {.tv_sec = (time_t)(want / 1000000U),
                     .tv_nsec = (long)(want % 1000000U) * 1000L},
    };
    /* Cannot fail: valid fd, valid values. */
    if (timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0) {
        l->tfd_deadline_us = want;
    }
}

int kdp__loop_run_timers(kdp__loop *l)
{
    uint64_t expirations;
    (void)!read(l->tfd, &expirations, sizeof(expirations));
    l->tfd_deadline_us = 0; /* one-shot: it has expired */

    uint64_t now = kdp__now_us();
    uint64_t last_seq = l->timer_seq; /* timers (re)started by callbacks wait a pass */
    bool was_running = l->timers_running;
    int calls = 0;
    l->timers_running = true;
    while (l->heap_len > 0) {
        kdp__timer *t = l->heap[0];
        if (t->deadline_us > now || t->seq > last_seq) {
            break;
        }
        heap_remove(l, t);
        t->cb(t, t->ud); /* may re-arm or free t, or free other timers */
        calls++;
    }
    l->timers_running = was_running;
    timerfd_sync(l);
    return calls;
}

int kdp__timer_new(kdp__loop *l, kdp__timer_cb cb, void *ud, kdp__timer **ret)
{
    if (!l || !cb || !ret) {
        return -EINVAL;
    }
    /* Reserve a heap slot now, so that starting a timer never allocates. */
    if (l->ntimers == l->heap_cap) {
        size_t cap = l->heap_cap ? l->heap_cap * 2 : 8;
        // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
        kdp__timer **heap = realloc(l->heap, cap * sizeof(*heap));
        if (!heap) {
            return -ENOMEM;
        }
        l->heap = heap;
        l->heap_cap = cap;
    }
    kdp__timer *t = calloc(1, sizeof(*t));
    if (!t) {
        return -ENOMEM;
    }
    t->idx = NOT_ARMED;
    t->cb = cb;
    t->ud = ud;
    kdp__loop_obj_link(l, &t->o, KDP__OBJ_TIMER);
    l->ntimers++;
    *ret = t;
    return 0;
}

void kdp__timer_start(kdp__timer *t, uint64_t delay_us)
{
    uint64_t now = kdp__now_us();
    kdp__timer_start_at(t, delay_us > UINT64_MAX - now ? UINT64_MAX : now + delay_us);
}

void kdp__timer_start_at(kdp__timer *t, uint64_t deadline_us)
{
    if (!t || t->o.dead) {
        return;
    }
    kdp__loop *l = t->o.loop;
    t->deadline_us = deadline_us;
    t->seq = ++l->timer_seq;
    if (t->idx == NOT_ARMED) {
        assert(l->heap_len < l->heap_cap);
        heap_set(l, l->heap_len++, t);
        heap_up(l, t->idx);
    } else {
        heap_up(l, t->idx); /* the key moved either way */
        heap_down(l, t->idx);
    }
    timerfd_sync(l);
}

void kdp__timer_stop(kdp__timer *t)
{
    if (!t || t->idx == NOT_ARMED) {
        return;
    }
    heap_remove(t->o.loop, t);
    timerfd_sync(t->o.loop);
}

bool kdp__timer_armed(const kdp__timer *t)
{
    return t && t->idx != NOT_ARMED;
}

void kdp__timer_free(kdp__timer *t)
{
    if (!t) {
        return;
    }
    kdp__timer_stop(t);
    kdp__loop_obj_release(&t->o);
}
