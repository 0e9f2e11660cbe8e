/* SPDX-License-Identifier: MIT */
/*
 * loop_int: what loop.c, timer.c and signal.c share. Every io, timer, wakeup
 * and signal starts with a struct kdp__obj header that links it into its kind's
 * list; freeing from a callback only marks it dead and queues it (dead
 * objects are skipped and freed after the batch).
 */
#ifndef KDP_LOOP_INT_H
#define KDP_LOOP_INT_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/list.h"
#include "runtime/loop.h"

enum kdp__obj_kind {
    KDP__OBJ_IO,
    KDP__OBJ_TIMER,
    KDP__OBJ_WAKEUP,
    KDP__OBJ_SIGNAL,
    KDP__OBJ_KINDS,
    /* The loop's own fds; never dead, never in a list. */
    KDP__SRC_TIMERFD = KDP__OBJ_KINDS,
    KDP__SRC_EVENTFD,
    KDP__SRC_SIGNALFD,
};

#define KDP__OBJ_OF(l) KDP__CONTAINER_OF(l, struct kdp__obj, link)

struct kdp__obj {
    uint8_t kind; /* first: epoll data.ptr points at a struct kdp__obj */
    bool dead;
    kdp__loop *loop;
    kdp__link link;             /* in loop->objs[kind] */
    struct kdp__obj *next_dead; /* loop->dead list */
};

struct kdp__io {
    struct kdp__obj o; /* first */
    int fd;
    kdp__io_cb cb;
    void *ud;
};

struct kdp__timer {
    struct kdp__obj o; /* first */
    size_t idx;        /* position in loop->heap, or NOT_ARMED */
    uint64_t deadline_us;
    uint64_t seq; /* start order: ties, and no re-run within one pass */
    kdp__timer_cb cb;
    void *ud;
};

struct kdp__wakeup {
    struct kdp__obj o; /* first */
    atomic_bool pending;
    kdp__wakeup_cb cb;
    void *ud;
};

struct kdp__signal {
    struct kdp__obj o; /* first */
    int signo;
    kdp__signal_cb cb;
    void *ud;
};

struct kdp__loop {
    int epfd, tfd, efd, sfd;
    struct kdp__obj tfd_src, efd_src, sfd_src;
    kdp__link objs[KDP__OBJ_KINDS]; /* every object of each kind, in creation order */
    struct kdp__obj *dead;
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

/* Links o into l's list of its kind. */
void kdp__loop_obj_link(kdp__loop *l, struct kdp__obj *o, enum kdp__obj_kind kind);
/* Frees o at once, or after the current batch if a dispatch is running. */
void kdp__loop_obj_release(struct kdp__obj *o);
/* Watches one of the loop's own fds (timerfd, eventfd, signalfd). */
int kdp__loop_add_src(kdp__loop *l, int fd, struct kdp__obj *src, enum kdp__obj_kind kind);
/* The timerfd fired: runs the due timers (timer.c). Returns the calls made. */
int kdp__loop_run_timers(kdp__loop *l);
/* The signalfd is readable: runs the handlers (signal.c). Returns the calls. */
int kdp__loop_run_signals(kdp__loop *l);
/* Unblocks every signal the loop blocked (signal.c). */
void kdp__loop_restore_sigmask(kdp__loop *l);

#endif
