/* SPDX-License-Identifier: MIT */
/*
 * loop: epoll + one timerfd (min-heap of timers) + one eventfd (wakeups) +
 * one lazily created signalfd.
 *
 * Every io, timer, wakeup and signal starts with a struct obj header that
 * links it into its kind's list. Freeing from a callback only marks it dead
 * and queues it: dead objects are skipped and freed after the batch.
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

#define MAX_EVENTS  64
#define MAX_SIGINFO 8
#define NOT_ARMED   SIZE_MAX

enum obj_kind {
    OBJ_IO,
    OBJ_TIMER,
    OBJ_WAKEUP,
    OBJ_SIGNAL,
    OBJ_KINDS,
    /* The loop's own fds; never dead, never in a list. */
    SRC_TIMERFD = OBJ_KINDS,
    SRC_EVENTFD,
    SRC_SIGNALFD,
};

#define OBJ_OF(l) KDP__CONTAINER_OF(l, struct obj, link)

struct obj {
    uint8_t kind; /* first: epoll data.ptr points at a struct obj */
    bool dead;
    kdp__loop *loop;
    kdp__link link;        /* in loop->objs[kind] */
    struct obj *next_dead; /* loop->dead list */
};

struct kdp__io {
    struct obj o; /* first */
    int fd;
    kdp__io_cb cb;
    void *ud;
};

struct kdp__timer {
    struct obj o; /* first */
    size_t idx;   /* position in loop->heap, or NOT_ARMED */
    uint64_t deadline_us;
    uint64_t seq; /* start order: ties, and no re-run within one pass */
    kdp__timer_cb cb;
    void *ud;
};

struct kdp__wakeup {
    struct obj o; /* first */
    atomic_bool pending;
    kdp__wakeup_cb cb;
    void *ud;
};

struct kdp__signal {
    struct obj o; /* first */
    int signo;
    kdp__signal_cb cb;
    void *ud;
};

struct kdp__loop {
    int epfd, tfd, efd, sfd;
    struct obj tfd_src, efd_src, sfd_src;
    kdp__link objs[OBJ_KINDS]; /* every object of each kind, in creation order */
    struct obj *dead;
    unsigned depth; /* nesting of kdp__loop_dispatch() */
    bool quit;
    bool timers_running; /* defer timerfd re-arming until the pass ends */
    kdp__timer **heap;
    size_t heap_len, heap_cap, ntimers;
    uint64_t timer_seq;
    uint64_t tfd_deadline_us; /* what the timerfd is armed to, 0 = disarmed */
    sigset_t sigmask;         /* signals in the signalfd */
    sigset_t sig_blocked;     /* signals we blocked, to unblock later */
};

uint64_t kdp__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000U + (uint64_t)ts.tv_nsec / 1000U;
}

/* --- objects and deferred removal --- */

static void obj_link(kdp__loop *l, struct obj *o, enum obj_kind kind)
{
    o->kind = (uint8_t)kind;
    o->loop = l;
    kdp__list_append(&l->objs[kind], &o->link);
}

static void obj_destroy(struct obj *o)
{
    kdp__loop *l = o->loop;
    kdp__link_remove(&o->link);
    if (o->kind == OBJ_TIMER) {
        l->ntimers--;
    }
    free(o); /* the header is the first member of every object */
}

/* Frees at once, or after the current batch if a dispatch is running. */
static void obj_release(struct obj *o)
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
        struct obj *o = l->dead;
        l->dead = o->next_dead;
        obj_destroy(o);
    }
}

static int epoll_add_src(kdp__loop *l, int fd, struct obj *src, enum obj_kind kind)
{
    src->kind = (uint8_t)kind;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = src};
    return epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* --- loop --- */

static void restore_sigmask(kdp__loop *l);

int kdp__loop_new(kdp__loop **ret)
{
    if (!ret) {
        return -EINVAL;
    }
    kdp__loop *l = calloc(1, sizeof(*l));
    if (!l) {
        return -ENOMEM;
    }
    for (int k = 0; k < OBJ_KINDS; k++) {
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
    r = epoll_add_src(l, l->tfd, &l->tfd_src, SRC_TIMERFD);
    if (r == 0) {
        r = epoll_add_src(l, l->efd, &l->efd_src, SRC_EVENTFD);
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
    for (int k = 0; k < OBJ_KINDS; k++) {
        kdp__link *first;
        while ((first = kdp__list_first(&l->objs[k]))) {
            obj_destroy(OBJ_OF(first));
        }
    }
    restore_sigmask(l);
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

static int run_timers(kdp__loop *l);
static int run_wakeups(kdp__loop *l);
static int run_signals(kdp__loop *l);

static int dispatch_one(kdp__loop *l, const struct epoll_event *ev)
{
    struct obj *o = ev->data.ptr;
    switch (o->kind) {
    case OBJ_IO: {
        kdp__io *io = (kdp__io *)o;
        if (o->dead) {
            return 0; /* deleted earlier in this batch */
        }
        io->cb(io, ev->events, io->ud);
        return 1;
    }
    case SRC_TIMERFD:
        return run_timers(l);
    case SRC_EVENTFD:
        return run_wakeups(l);
    case SRC_SIGNALFD:
        return run_signals(l);
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
    io->o.kind = OBJ_IO;
    struct epoll_event ev = {.events = events, .data.ptr = &io->o};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int r = -errno;
        free(io);
        return r;
    }
    io->fd = fd;
    io->cb = cb;
    io->ud = ud;
    obj_link(l, &io->o, OBJ_IO);
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
    obj_release(&io->o);
}

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

static int run_timers(kdp__loop *l)
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
    obj_link(l, &t->o, OBJ_TIMER);
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
    obj_release(&t->o);
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
    obj_link(l, &w->o, OBJ_WAKEUP);
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
    kdp__list_for_each(it, &l->objs[OBJ_WAKEUP])
    {
        struct obj *o = OBJ_OF(it);
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
        obj_release(&w->o);
    }
}

/* --- signals --- */

static bool signo_in_use(const kdp__loop *l, int signo)
{
    const kdp__link *it;
    kdp__list_for_each(it, &l->objs[OBJ_SIGNAL])
    {
        const struct obj *o = OBJ_OF(it);
        if (!o->dead && ((const kdp__signal *)o)->signo == signo) {
            return true;
        }
    }
    return false;
}

/* Unblocks signo if we blocked it. Pending instances are discarded first:
 * unblocking would otherwise run the default action, which for most signals
 * kills the process. */
static void unblock_signo(kdp__loop *l, int signo)
{
    if (!sigismember(&l->sig_blocked, signo)) {
        return;
    }
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signo);
    const struct timespec zero = {0, 0};
    int saved = errno;
    while (sigtimedwait(&one, NULL, &zero) == signo) {
    }
    errno = saved;
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    sigdelset(&l->sig_blocked, signo);
}

static void restore_sigmask(kdp__loop *l)
{
    for (int signo = 1; signo <= SIGRTMAX; signo++) {
        if (sigismember(&l->sig_blocked, signo) == 1) {
            unblock_signo(l, signo);
        }
    }
}

/* Points the signalfd at mask, creating it on first use. */
static int signalfd_set(kdp__loop *l, const sigset_t *mask)
{
    if (l->sfd >= 0) {
        return signalfd(l->sfd, mask, 0) < 0 ? -errno : 0;
    }
    int fd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = epoll_add_src(l, fd, &l->sfd_src, SRC_SIGNALFD);
    if (r < 0) {
        close(fd);
        return r;
    }
    l->sfd = fd;
    return 0;
}

/* Adds signo to the signalfd mask, blocking it first. */
static int watch_signo(kdp__loop *l, int signo)
{
    sigset_t one, old, mask = l->sigmask;
    sigemptyset(&one);
    sigaddset(&one, signo);
    sigaddset(&mask, signo);
    int r = pthread_sigmask(SIG_BLOCK, &one, &old);
    if (r != 0) {
        return -r;
    }
    r = signalfd_set(l, &mask);
    if (r < 0) {
        if (!sigismember(&old, signo)) {
            pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        }
        return r;
    }
    if (!sigismember(&old, signo)) {
        sigaddset(&l->sig_blocked, signo);
    }
    l->sigmask = mask;
    return 0;
}

int kdp__signal_add(kdp__loop *l, int signo, kdp__signal_cb cb, void *ud, kdp__signal **ret)
{
    if (!l || !cb || !ret || signo <= 0 || signo > SIGRTMAX || signo == SIGKILL ||
        signo == SIGSTOP) {
        return -EINVAL;
    }
    kdp__signal *s = calloc(1, sizeof(*s));
    if (!s) {
        return -ENOMEM;
    }
    if (!sigismember(&l->sigmask, signo)) {
        int r = watch_signo(l, signo);
        if (r < 0) {
            free(s);
            return r;
        }
    }
    s->signo = signo;
    s->cb = cb;
    s->ud = ud;
    obj_link(l, &s->o, OBJ_SIGNAL);
    *ret = s;
    return 0;
}

void kdp__signal_free(kdp__signal *s)
{
    if (!s) {
        return;
    }
    kdp__loop *l = s->o.loop;
    int signo = s->signo;
    obj_release(&s->o); /* s is dead or gone: it no longer counts */
    if (!signo_in_use(l, signo)) {
        sigdelset(&l->sigmask, signo);
        /* Cannot fail for an existing signalfd and a valid mask. */
        (void)signalfd(l->sfd, &l->sigmask, 0);
        unblock_signo(l, signo);
    }
}

static void call_handlers(kdp__loop *l, int signo, int *calls)
{
    kdp__link *last = l->objs[OBJ_SIGNAL].prev; /* not handlers added meanwhile */
    kdp__link *it;
    kdp__list_for_each(it, &l->objs[OBJ_SIGNAL])
    {
        struct obj *o = OBJ_OF(it);
        kdp__signal *s = (kdp__signal *)o;
        if (!o->dead && s->signo == signo) {
            s->cb(s, signo, s->ud);
            (*calls)++;
        }
        if (it == last) {
            break;
        }
    }
}

static int run_signals(kdp__loop *l)
{
    struct signalfd_siginfo si[MAX_SIGINFO];
    ssize_t n = read(l->sfd, si, sizeof(si));
    int calls = 0;
    for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof(si[0]); i++) {
        call_handlers(l, (int)si[i].ssi_signo, &calls);
    }
    return calls;
}
