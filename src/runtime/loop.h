/* SPDX-License-Identifier: MIT */
/*
 * loop: one epoll instance driving fd watches, timers, cross-thread wakeups
 * and signals. Nothing here busy-polls: with no armed timer, an idle loop
 * sleeps in epoll_wait() and makes zero wakeups.
 *
 * Threading: every call is loop-thread only, except kdp__wakeup_signal(),
 * which is safe from any thread and from a signal handler.
 *
 * Callbacks may add or remove any watch, timer or wakeup, including the one
 * being dispatched: removal is deferred until the current batch of events
 * has been handled, so no callback ever runs on freed memory.
 */
#ifndef KDP_LOOP_H
#define KDP_LOOP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kdp__loop kdp__loop;
typedef struct kdp__io kdp__io;
typedef struct kdp__timer kdp__timer;
typedef struct kdp__wakeup kdp__wakeup;
typedef struct kdp__signal kdp__signal;

/* events is a mask of EPOLLIN/EPOLLOUT/EPOLLERR/EPOLLHUP/EPOLLRDHUP. */
typedef void (*kdp__io_cb)(kdp__io *io, uint32_t events, void *ud);
typedef void (*kdp__timer_cb)(kdp__timer *t, void *ud);
typedef void (*kdp__wakeup_cb)(kdp__wakeup *w, void *ud);
typedef void (*kdp__signal_cb)(kdp__signal *s, int signo, void *ud);

/* Monotonic clock (CLOCK_MONOTONIC) in microseconds. */
uint64_t kdp__now_us(void);

/* Creates a loop. Returns 0 or -errno; *ret untouched on failure. */
int kdp__loop_new(kdp__loop **ret);
/* Frees the loop and every watch, timer, wakeup and signal still attached
 * (their callbacks are not called). NULL is fine. */
void kdp__loop_free(kdp__loop *l);
/* The epoll fd: readable whenever kdp__loop_dispatch(l, 0) has work. For
 * embedding in another event loop. */
int kdp__loop_fd(const kdp__loop *l);
/* Waits up to timeout_ms (-1 = forever, 0 = poll) for events and runs the
 * ready callbacks once. Returns the number of callbacks run (>= 0) or -errno
 * (EINTR is retried internally, never returned). */
int kdp__loop_dispatch(kdp__loop *l, int timeout_ms);
/* Dispatches until kdp__loop_quit(). Returns 0 or -errno. */
int kdp__loop_run(kdp__loop *l);
/* Makes kdp__loop_run() return after the current dispatch. Loop thread only. */
void kdp__loop_quit(kdp__loop *l);
/* Milliseconds until the earliest armed timer is due, or -1 if none. */
int kdp__loop_next_timeout_ms(const kdp__loop *l);

/* Watches fd for events (the loop does not own fd and never closes it).
 * Returns 0 or -errno. */
int kdp__io_add(kdp__loop *l, int fd, uint32_t events, kdp__io_cb cb, void *ud, kdp__io **ret);
/* Changes the event mask. Returns 0 or -errno. */
int kdp__io_modify(kdp__io *io, uint32_t events);
int kdp__io_fd(const kdp__io *io);
/* Stops watching and frees (deferred if called from a callback). NULL is fine.
 * The fd is removed from epoll at once, so the caller may close it right after. */
void kdp__io_del(kdp__io *io);

/* A one-shot timer, created disarmed. Many timers share one timerfd. */
int kdp__timer_new(kdp__loop *l, kdp__timer_cb cb, void *ud, kdp__timer **ret);
/* Arms (or re-arms) the timer to fire once, delay_us from now. */
void kdp__timer_start(kdp__timer *t, uint64_t delay_us);
/* Arms the timer for an absolute kdp__now_us() deadline. */
void kdp__timer_start_at(kdp__timer *t, uint64_t deadline_us);
void kdp__timer_stop(kdp__timer *t);
bool kdp__timer_armed(const kdp__timer *t);
/* Disarms and frees. NULL is fine. */
void kdp__timer_free(kdp__timer *t);

/* A wakeup: kdp__wakeup_signal() from any thread (or a signal handler) makes
 * cb run once on the loop thread soon after. Signals coalesce: several before
 * the loop runs give one call. */
int kdp__wakeup_new(kdp__loop *l, kdp__wakeup_cb cb, void *ud, kdp__wakeup **ret);
/* Thread-safe and async-signal-safe. */
void kdp__wakeup_signal(kdp__wakeup *w);
void kdp__wakeup_free(kdp__wakeup *w);

/* Delivers signo through a signalfd. The signal is blocked in the calling
 * thread (call before starting other threads so they inherit the mask) and
 * unblocked again when the last handler for it is freed. */
int kdp__signal_add(kdp__loop *l, int signo, kdp__signal_cb cb, void *ud, kdp__signal **ret);
void kdp__signal_free(kdp__signal *s);

#endif
