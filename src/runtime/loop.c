/* SPDX-License-Identifier: MIT */
/*
 * loop: epoll + one timerfd (min-heap of timers, timer.c) + one eventfd
 * (wakeups) + one lazily created signalfd (signal.c); io watches.
 */
#include "runtime/loop.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/list.h"
#include "runtime/loop_int.h"

#define MAX_EVENTS 64

uint64_t kdp__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000U + (uint64_t)ts.tv_nsec / 1000U;
}

/* --- objects and deferred removal --- */

void kdp__loop_obj_link(kdp__loop *l, struct kdp__obj *o, enum kdp__obj_kind kind)
{
    o->kind = (uint8_t)kind;
    o->loop = l;
    kdp__list_append(&l->objs[kind], &o->link);
}

static void obj_destroy(struct kdp__obj *o)
{
    kdp__loop *l = o->loop;
    kdp__link_remove(&o->link);
    if (o->kind == KDP__OBJ_TIMER) {
        l->ntimers--;
    }
    free(o); /* the header is the first member of every object */
}

/* Frees at once, or after the current batch if a dispatch is running. */
void kdp__loop_obj_release(struct kdp__obj *o)
{
    kdp__loop *l = o->loop;
    assert(!o->dead);
    o->dead = true;
    if (l->depth > 0) {
        o->next_dead = l->dead;
        l->dead = o;
    } else {
        obj_destroy(o);
    }
}

static void reap_dead(kdp__loop *l)
{
    while (l->dead) {
        struct kdp__obj *o = l->dead;
        l->dead = o->next_dead;
        obj_destroy(o);
    }
}

int kdp__loop_add_src(kdp__loop *l, int fd, struct kdp__obj *src, enum kdp__obj_kind kind)
{
    src->kind = (uint8_t)kind;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = src};
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* --- loop --- */

int kdp__loop_new(kdp__loop **ret)
{
    if (!ret) {
        return -EINVAL;
    }
    kdp__loop *l = calloc(1, sizeof(*l));
    if (!l) {
        return -ENOMEM;
    }
    for (int k = 0; k < KDP__OBJ_KINDS; k++) {
        kdp__link_init(&l->objs[k]);
    }
    l->tfd = l->efd = l->sfd = -1;
    sigemptyset(&l->sigmask);
    sigemptyset(&l->sig_blocked);
    int r;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        goto fail_errno;
    }
    l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (l->tfd < 0) {
        goto fail_errno;
    }
    l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->efd < 0) {
        goto fail_errno;
    }
    r = kdp__loop_add_src(l, l->tfd, &l->tfd_src, KDP__SRC_TIMERFD);
    if (r == 0) {
        r = kdp__loop_add_src(l, l->efd, &l->efd_src, KDP__SRC_EVENTFD);
    }
    if (r < 0) {
        goto fail;
    }
    *ret = l;
    return 0;
fail_errno:
    r = -errno;
fail:
    kdp__loop_free(l);
    return r;
}

void kdp__loop_free(kdp__loop *l)
{
    if (!l) {
        return;
    }
    assert(l->depth == 0);
    for (int k = 0; k < KDP__OBJ_KINDS; k++) {
        kdp__link *o;
        kdp__link *next;
        kdp__list_for_each_safe(o, next, &l->objs[k])
        {
            obj_destroy(KDP__OBJ_OF(o));
        }
    }
    kdp__loop_restore_sigmask(l);
    int fds[] = {l->sfd, l->efd, l->tfd, l->epfd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    free(l->heap);
    free(l);
}

int kdp__loop_fd(const kdp__loop *l)
{
    return l ? l->epfd : -EINVAL;
}

static int run_wakeups(kdp__loop *l);

static int dispatch_one(kdp__loop *l, const struct epoll_event *ev)
{
    struct kdp__obj *o = ev->data.ptr;
    switch (o->kind) {
    case KDP__OBJ_IO: {
        kdp__io *io = (kdp__io *)o;
        if (o->dead) {
            return 0; /* deleted earlier in this batch */
        }
        io->cb(io, ev->events, io->ud);
        return 1;
    }
    case KDP__SRC_TIMERFD:
        return kdp__loop_run_timers(l);
    case KDP__SRC_EVENTFD:
        return run_wakeups(l);
    case KDP__SRC_SIGNALFD:
        return kdp__loop_run_signals(l);
    default:
        assert(0);
        return 0;
    }
}

/* epoll_wait(), retrying on EINTR with what is left of the timeout. */
static int wait_events(kdp__loop *l, struct epoll_event *evs, int timeout_ms)
{
    uint64_t end = timeout_ms > 0 ? kdp__now_us() + (uint64_t)timeout_ms * 1000U : 0;
    for (;;) {
        int n = epoll_wait(l->epfd, evs, MAX_EVENTS, timeout_ms);
        if (n >= 0 || errno != EINTR) {
            return n < 0 ? -errno : n;
        }
        if (timeout_ms > 0) {
            uint64_t now = kdp__now_us();
            timeout_ms = now >= end ? 0 : (int)((end - now + 999U) / 1000U);
        }
    }
}

int kdp__loop_dispatch(kdp__loop *l, int timeout_ms)
{
    if (!l) {
        return -EINVAL;
    }
    struct epoll_event evs[MAX_EVENTS];
    int n = wait_events(l, evs, timeout_ms < 0 ? -1 : timeout_ms);
    if (n <= 0) {
        return n;
    }
    int calls = 0;
    l->depth++;
    for (int i = 0; i < n; i++) {
        calls += dispatch_one(l, &evs[i]);
    }
    if (--l->depth == 0) {
        reap_dead(l);
    }
    return calls;
}

int kdp__loop_run(kdp__loop *l)
{
    if (!l) {
        return -EINVAL;
    }
    int r = 0;
    while (!l->quit && r >= 0) {
        r = kdp__loop_dispatch(l, -1);
    }
    l->quit = false;
    return r < 0 ? r : 0;
}

void kdp__loop_quit(kdp__loop *l)
{
    if (l) {
        l->quit = true;
    }
}

int kdp__loop_next_timeout_ms(const kdp__loop *l)
{
    if (!l || l->heap_len == 0) {
        return -1;
    }
    uint64_t deadline = l->heap[0]->deadline_us;
    uint64_t now = kdp__now_us();
    if (deadline <= now) {
        return 0;
    }
    uint64_t ms = (deadline - now + 999U) / 1000U; /* round up: never wake early */
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* --- io --- */

int kdp__io_add(kdp__loop *l, int fd, uint32_t events, kdp__io_cb cb, void *ud, kdp__io **ret)
{
    if (!l || fd < 0 || !cb || !ret) {
        return -EINVAL;
    }
    kdp__io *io = calloc(1, sizeof(*io));
    if (!io) {
        return -ENOMEM;
    }
    io->o.kind = KDP__OBJ_IO;
    struct epoll_event ev = {.events = events, .data.ptr = &io->o};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int r = -errno;
        free(io);
        return r;
    }
    io->fd = fd;
    io->cb = cb;
    io->ud = ud;
    kdp__loop_obj_link(l, &io->o, KDP__OBJ_IO);
    *ret = io;
    return 0;
}

int kdp__io_modify(kdp__io *io, uint32_t events)
{
    if (!io || io->o.dead) {
        return -EINVAL;
    }
    struct epoll_event ev = {.events = events, .data.ptr = &io->o};
    return epoll_ctl(io->o.loop->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0 ? -errno : 0;
}

int kdp__io_fd(const kdp__io *io)
{
    return io ? io->fd : -EINVAL;
}

void kdp__io_del(kdp__io *io)
{
    if (!io) {
        return;
    }
    /* Fails only if the caller already closed fd, which drops it from epoll. */
    (void)epoll_ctl(io->o.loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
    kdp__loop_obj_release(&io->o);
}

/* --- wakeups --- */

int kdp__wakeup_new(kdp__loop *l, kdp__wakeup_cb cb, void *ud, kdp__wakeup **ret)
{
    if (!l || !cb || !ret) {
        return -EINVAL;
    }
    kdp__wakeup *w = calloc(1, sizeof(*w));
    if (!w) {
        return -ENOMEM;
    }
    atomic_init(&w->pending, false);
    w->cb = cb;
    w->ud = ud;
    kdp__loop_obj_link(l, &w->o, KDP__OBJ_WAKEUP);
    *ret = w;
    return 0;
}

void kdp__wakeup_signal(kdp__wakeup *w)
{
    if (!w) {
        return;
    }
    int saved = errno;
    uint64_t one = 1;
    atomic_store(&w->pending, true);
    /* EAGAIN (counter saturated) still leaves the eventfd readable. */
    (void)!write(w->o.loop->efd, &one, sizeof(one));
    errno = saved;
}

static int run_wakeups(kdp__loop *l)
{
    uint64_t count;
    (void)!read(l->efd, &count, sizeof(count));
    int calls = 0;
    /* Freed wakeups stay linked (dead) until the batch ends, so the next link is safe. */
    kdp__link *it;
    kdp__list_for_each(it, &l->objs[KDP__OBJ_WAKEUP])
    {
        struct kdp__obj *o = KDP__OBJ_OF(it);
        kdp__wakeup *w = (kdp__wakeup *)o;
        if (!o->dead && atomic_exchange(&w->pending, false)) {
            w->cb(w, w->ud);
            calls++;
        }
    }
    return calls;
}

void kdp__wakeup_free(kdp__wakeup *w)
{
    if (w) {
        kdp__loop_obj_release(&w->o);
    }
}
