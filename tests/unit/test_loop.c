/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "runtime/loop.h"

/* Every test that could block forever on a bug is killed by SIGALRM. */
#define WATCHDOG_S 10

static int setup(void **state)
{
    kdp__loop *l = NULL;
    assert_int_equal(kdp__loop_new(&l), 0);
    *state = l;
    alarm(WATCHDOG_S);
    return 0;
}

static int teardown(void **state)
{
    alarm(0);
    kdp__loop_free(*state);
    return 0;
}

/* Dispatches with a timeout until *done or about 5 s have passed. */
static void dispatch_until(kdp__loop *l, const int *done)
{
    for (int i = 0; i < 50 && !*done; i++) {
        assert_true(kdp__loop_dispatch(l, 100) >= 0);
    }
    assert_true(*done);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static bool sig_blocked(int signo)
{
    sigset_t cur;
    assert_int_equal(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
    return sigismember(&cur, signo) == 1;
}

/* --- loop --- */

static void dummy_timer_cb(kdp__timer *t, void *ud)
{
    (void)t;
    (void)ud;
}

static void dummy_io_cb(kdp__io *io, uint32_t events, void *ud)
{
    (void)io;
    (void)events;
    (void)ud;
}

static void dummy_wakeup_cb(kdp__wakeup *w, void *ud)
{
    (void)w;
    (void)ud;
}

static void dummy_signal_cb(kdp__signal *s, int signo, void *ud)
{
    (void)s;
    (void)signo;
    (void)ud;
}

static void test_new_free_args(void **state)
{
    kdp__loop *l = *state;
    assert_true(kdp__loop_fd(l) >= 0);
    assert_int_equal(kdp__loop_new(NULL), -EINVAL);
    assert_int_equal(kdp__loop_dispatch(NULL, 0), -EINVAL);
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1);
    kdp__loop_free(NULL);
    kdp__io_del(NULL);
    kdp__timer_free(NULL);
    kdp__wakeup_free(NULL);
    kdp__signal_free(NULL);

    /* *ret untouched on failure. */
    kdp__io *io = (kdp__io *)0x1;
    assert_int_equal(kdp__io_add(l, -1, EPOLLIN, dummy_io_cb, NULL, &io), -EINVAL);
    assert_int_equal(kdp__io_add(l, 12345, EPOLLIN, dummy_io_cb, NULL, &io), -EBADF);
    assert_ptr_equal(io, (kdp__io *)0x1);
    kdp__timer *t = (kdp__timer *)0x1;
    assert_int_equal(kdp__timer_new(l, NULL, NULL, &t), -EINVAL);
    assert_ptr_equal(t, (kdp__timer *)0x1);
    kdp__wakeup *w = (kdp__wakeup *)0x1;
    assert_int_equal(kdp__wakeup_new(NULL, dummy_wakeup_cb, NULL, &w), -EINVAL);
    assert_ptr_equal(w, (kdp__wakeup *)0x1);
    kdp__signal *s = (kdp__signal *)0x1;
    assert_int_equal(kdp__signal_add(l, SIGKILL, dummy_signal_cb, NULL, &s), -EINVAL);
    assert_int_equal(kdp__signal_add(l, 0, dummy_signal_cb, NULL, &s), -EINVAL);
    assert_ptr_equal(s, (kdp__signal *)0x1);
}

/* --- timers --- */

struct order {
    int fired[1024];
    int n;
    kdp__timer *other; /* freed by free_cb */
    kdp__loop *loop;
};

struct tctx {
    struct order *ord;
    int id;
};

static void order_cb(kdp__timer *t, void *ud)
{
    struct tctx *c = ud;
    (void)t;
    assert_true(c->ord->n < 1024);
    c->ord->fired[c->ord->n++] = c->id;
}

static void test_timer_order(void **state)
{
    kdp__loop *l = *state;
    struct order ord = {.n = 0};
    struct tctx ctx[3];
    kdp__timer *t[3];
    const uint64_t delays_us[3] = {30000, 10000, 20000};
    uint64_t base = kdp__now_us();
    for (int i = 0; i < 3; i++) {
        ctx[i] = (struct tctx){&ord, i};
        assert_int_equal(kdp__timer_new(l, order_cb, &ctx[i], &t[i]), 0);
        assert_false(kdp__timer_armed(t[i]));
        kdp__timer_start_at(t[i], base + delays_us[i]);
        assert_true(kdp__timer_armed(t[i]));
    }
    for (int i = 0; i < 50 && ord.n < 3; i++) {
        assert_true(kdp__loop_dispatch(l, 100) >= 0);
    }
    assert_int_equal(ord.n, 3);
    assert_int_equal(ord.fired[0], 1);
    assert_int_equal(ord.fired[1], 2);
    assert_int_equal(ord.fired[2], 0);
    for (int i = 0; i < 3; i++) {
        assert_false(kdp__timer_armed(t[i]));
        kdp__timer_free(t[i]);
    }
}

/* Many due timers, some stopped or re-armed: the heap pops them in order. */
static void test_timer_heap_many(void **state)
{
    enum { N = 600 };
    kdp__loop *l = *state;
    static struct order ord;
    static struct tctx ctx[N];
    static kdp__timer *t[N];
    static uint64_t deadline[N];
    memset(&ord, 0, sizeof(ord));
    uint64_t now = kdp__now_us();
    srand(42);
    for (int i = 0; i < N; i++) {
        ctx[i] = (struct tctx){&ord, i};
        assert_int_equal(kdp__timer_new(l, order_cb, &ctx[i], &t[i]), 0);
        deadline[i] = now - 1000000 + (uint64_t)(rand() % 1000000);
        kdp__timer_start_at(t[i], deadline[i]);
    }
    int expect = N;
    for (int i = 0; i < N; i += 7) {
        kdp__timer_stop(t[i]);
        expect--;
    }
    for (int i = 3; i < N; i += 11) {
        deadline[i] = now - 2000000 + (uint64_t)(rand() % 1000000);
        kdp__timer_start_at(t[i], deadline[i]); /* re-arm, armed or not */
        expect += i % 7 == 0;
    }
    assert_int_equal(kdp__loop_next_timeout_ms(l), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), expect);
    assert_int_equal(ord.n, expect);
    for (int i = 1; i < ord.n; i++) {
        assert_true(deadline[ord.fired[i - 1]] <= deadline[ord.fired[i]]);
    }
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1);
    for (int i = 0; i < N; i++) {
        kdp__timer_free(t[i]);
    }
}

struct rearm {
    int calls;
    int max;
    uint64_t delay_us;
};

static void rearm_cb(kdp__timer *t, void *ud)
{
    struct rearm *r = ud;
    if (++r->calls < r->max) {
        kdp__timer_start(t, r->delay_us);
    }
}

static void test_timer_rearm_stop(void **state)
{
    kdp__loop *l = *state;
    struct rearm ra = {0, 3, 1000}, rb = {0, 1, 0};
    kdp__timer *a, *b;
    assert_int_equal(kdp__timer_new(l, rearm_cb, &ra, &a), 0);
    assert_int_equal(kdp__timer_new(l, rearm_cb, &rb, &b), 0);

    /* Re-armed from its own callback: fires 3 times. */
    kdp__timer_start(a, 1000);
    for (int i = 0; i < 50 && ra.calls < 3; i++) {
        assert_true(kdp__loop_dispatch(l, 100) >= 0);
    }
    assert_int_equal(ra.calls, 3);
    assert_false(kdp__timer_armed(a));

    /* Re-armed earlier and later before it fires. */
    kdp__timer_start(b, 3600ULL * 1000000);
    assert_true(kdp__loop_next_timeout_ms(l) > 3500 * 1000);
    kdp__timer_start(b, 0);
    assert_int_equal(kdp__loop_next_timeout_ms(l), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(rb.calls, 1);

    /* Stopped before it is due: never fires. */
    kdp__timer_start(b, 0);
    kdp__timer_stop(b);
    kdp__timer_stop(b); /* twice is fine */
    assert_false(kdp__timer_armed(b));
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);
    assert_int_equal(rb.calls, 1);

    kdp__timer_free(a);
    kdp__timer_free(b);
}

/* A callback re-arming with delay 0 runs once per dispatch, not forever. */
static void test_timer_rearm_zero_no_starvation(void **state)
{
    kdp__loop *l = *state;
    struct rearm r = {0, 1000000, 0};
    kdp__timer *t;
    assert_int_equal(kdp__timer_new(l, rearm_cb, &r, &t), 0);
    kdp__timer_start(t, 0);
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
        assert_int_equal(r.calls, i);
        assert_true(kdp__timer_armed(t));
    }
    kdp__timer_free(t);
}

struct same {
    int calls;
    uint64_t deadline;
};

static void same_deadline_cb(kdp__timer *t, void *ud)
{
    struct same *c = ud;
    c->calls++;
    kdp__timer_start_at(t, c->deadline);
}

/* Re-armed from its callback to the deadline the timerfd just fired for: it
 * must still fire on the next dispatch. */
static void test_timer_rearm_same_deadline(void **state)
{
    kdp__loop *l = *state;
    struct same c = {0, kdp__now_us() - 1000};
    kdp__timer *t;
    assert_int_equal(kdp__timer_new(l, same_deadline_cb, &c, &t), 0);
    kdp__timer_start_at(t, c.deadline);
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(kdp__loop_dispatch(l, 100), 1);
        assert_int_equal(c.calls, i);
    }
    kdp__timer_free(t);
}

static void free_self_and_other_cb(kdp__timer *t, void *ud)
{
    struct order *o = ud;
    o->fired[o->n++] = 1;
    kdp__timer_free(o->other);
    kdp__timer_free(t);
}

static void must_not_run_cb(kdp__timer *t, void *ud)
{
    (void)t;
    (void)ud;
    fail_msg("freed timer ran");
}

static void test_timer_free_in_callback(void **state)
{
    kdp__loop *l = *state;
    struct order ord = {.n = 0};
    kdp__timer *a, *b, *c;
    assert_int_equal(kdp__timer_new(l, free_self_and_other_cb, &ord, &a), 0);
    assert_int_equal(kdp__timer_new(l, must_not_run_cb, NULL, &b), 0);
    assert_int_equal(kdp__timer_new(l, dummy_timer_cb, NULL, &c), 0);
    ord.other = b;
    uint64_t now = kdp__now_us();
    kdp__timer_start_at(a, now - 2000);
    kdp__timer_start_at(b, now - 1000); /* due in the same pass, after a */
    kdp__timer_start_at(c, now - 500);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 2); /* a and c */
    assert_int_equal(ord.n, 1);
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);
    kdp__timer_free(c);
}

static void test_next_timeout(void **state)
{
    kdp__loop *l = *state;
    kdp__timer *t;
    assert_int_equal(kdp__timer_new(l, dummy_timer_cb, NULL, &t), 0);
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1);
    kdp__timer_start(t, 1000000);
    int ms = kdp__loop_next_timeout_ms(l);
    assert_true(ms > 900 && ms <= 1000);
    kdp__timer_start(t, 1500); /* rounded up: never early */
    ms = kdp__loop_next_timeout_ms(l);
    assert_true(ms >= 1 && ms <= 2);
    kdp__timer_start_at(t, kdp__now_us() - 10);
    assert_int_equal(kdp__loop_next_timeout_ms(l), 0);
    kdp__timer_start(t, UINT64_MAX);
    assert_int_equal(kdp__loop_next_timeout_ms(l), 2147483647);
    kdp__timer_stop(t);
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1);
    kdp__timer_free(t);
}

struct when {
    int done;
    uint64_t at_us;
};

static void when_cb(kdp__timer *t, void *ud)
{
    struct when *w = ud;
    (void)t;
    w->done = 1;
    w->at_us = kdp__now_us();
}

static void test_timer_not_early(void **state)
{
    kdp__loop *l = *state;
    struct when w = {0, 0};
    kdp__timer *t;
    assert_int_equal(kdp__timer_new(l, when_cb, &w, &t), 0);
    uint64_t start = kdp__now_us();
    kdp__timer_start(t, 10000);
    dispatch_until(l, &w.done);
    assert_true(w.at_us - start >= 10000);
    kdp__timer_free(t);
}

/* --- io --- */

struct io_rec {
    int calls;
    uint32_t events;
    kdp__io *other; /* deleted by del_other_cb */
    int *total;
};

static void rec_io_cb(kdp__io *io, uint32_t events, void *ud)
{
    struct io_rec *r = ud;
    (void)io;
    r->calls++;
    r->events = events;
}

static void test_io_readable_modify(void **state)
{
    kdp__loop *l = *state;
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    struct io_rec r = {0};
    kdp__io *io;
    assert_int_equal(kdp__io_add(l, sp[0], EPOLLIN, rec_io_cb, &r, &io), 0);
    assert_int_equal(kdp__io_fd(io), sp[0]);
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);
    assert_int_equal(r.calls, 0);

    assert_int_equal(write(sp[1], "x", 1), 1);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(r.calls, 1);
    assert_true(r.events & EPOLLIN);
    assert_false(r.events & EPOLLOUT);
    char c;
    assert_int_equal(read(sp[0], &c, 1), 1);
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);

    assert_int_equal(kdp__io_modify(io, EPOLLOUT), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(r.calls, 2);
    assert_int_equal(r.events, EPOLLOUT);

    kdp__io_del(io);
    close(sp[0]);
    close(sp[1]);
}

static void del_other_cb(kdp__io *io, uint32_t events, void *ud)
{
    struct io_rec *r = ud;
    (void)io;
    (void)events;
    r->calls++;
    (*r->total)++;
    kdp__io_del(r->other);
    r->other = NULL;
}

/* Both fds are readable in one batch; whichever callback runs first deletes
 * the other watch, whose pending event must then be skipped. */
static void test_io_del_other_in_batch(void **state)
{
    kdp__loop *l = *state;
    int a[2], b[2], total = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "x", 1), 1);
    struct io_rec ra = {.total = &total}, rb = {.total = &total};
    kdp__io *ia, *ib;
    assert_int_equal(kdp__io_add(l, a[0], EPOLLIN, del_other_cb, &ra, &ia), 0);
    assert_int_equal(kdp__io_add(l, b[0], EPOLLIN, del_other_cb, &rb, &ib), 0);
    ra.other = ib;
    rb.other = ia;
    /* Make sure both events are ready before the batch is collected. */
    struct pollfd pf[2] = {{a[0], POLLIN, 0}, {b[0], POLLIN, 0}};
    assert_int_equal(poll(pf, 2, 1000), 2);

    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(total, 1);
    assert_int_equal(kdp__loop_dispatch(l, 20), 1); /* the survivor, again */
    assert_int_equal(total, 2);
    assert_true(ra.calls == 2 || rb.calls == 2);
    kdp__io_del(ra.calls ? ia : ib);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

static void del_self_cb(kdp__io *io, uint32_t events, void *ud)
{
    int *calls = ud;
    (void)events;
    (*calls)++;
    int fd = kdp__io_fd(io);
    kdp__io_del(io);
    close(fd); /* allowed right after kdp__io_del() */
}

static void test_io_del_self(void **state)
{
    kdp__loop *l = *state;
    int sp[2], calls = 0;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    kdp__io *io;
    assert_int_equal(kdp__io_add(l, sp[0], EPOLLIN | EPOLLRDHUP, del_self_cb, &calls, &io), 0);
    close(sp[1]);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);
    assert_int_equal(calls, 1);
}

/* --- wakeups --- */

static void count_wakeup_cb(kdp__wakeup *w, void *ud)
{
    (void)w;
    (*(int *)ud)++;
}

static void *signal_later(void *arg)
{
    sleep_ms(50);
    kdp__wakeup_signal(arg);
    return NULL;
}

static void test_wakeup_thread(void **state)
{
    kdp__loop *l = *state;
    int calls = 0;
    kdp__wakeup *w;
    assert_int_equal(kdp__wakeup_new(l, count_wakeup_cb, &calls, &w), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, signal_later, w), 0);
    assert_int_equal(kdp__loop_dispatch(l, -1), 1); /* the watchdog bounds it */
    assert_int_equal(calls, 1);
    assert_int_equal(pthread_join(th, NULL), 0);
    kdp__wakeup_free(w);
}

static void test_wakeup_coalesce(void **state)
{
    kdp__loop *l = *state;
    int calls = 0, other = 0;
    kdp__wakeup *w, *idle;
    assert_int_equal(kdp__wakeup_new(l, count_wakeup_cb, &calls, &w), 0);
    assert_int_equal(kdp__wakeup_new(l, count_wakeup_cb, &other, &idle), 0);
    errno = 1234;
    for (int i = 0; i < 5; i++) {
        kdp__wakeup_signal(w);
    }
    assert_int_equal(errno, 1234);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(calls, 1);
    assert_int_equal(other, 0);
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);
    /* Another wakeup's signal does not re-run the first one. */
    kdp__wakeup_signal(idle);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(calls, 1);
    assert_int_equal(other, 1);
    kdp__wakeup_free(w);
    kdp__wakeup_free(idle);
}

static kdp__wakeup *handler_wakeup;

static void on_sigusr2(int signo)
{
    (void)signo;
    kdp__wakeup_signal(handler_wakeup);
}

static void test_wakeup_from_signal_handler(void **state)
{
    kdp__loop *l = *state;
    int calls = 0;
    assert_int_equal(kdp__wakeup_new(l, count_wakeup_cb, &calls, &handler_wakeup), 0);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigusr2;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
    assert_false(sig_blocked(SIGUSR2));
    assert_int_equal(raise(SIGUSR2), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(calls, 1);
    assert_int_equal(sigaction(SIGUSR2, &old, NULL), 0);
    kdp__wakeup_free(handler_wakeup);
    handler_wakeup = NULL;
}

struct wfree {
    int calls;
    kdp__wakeup *other;
};

static void wakeup_free_both_cb(kdp__wakeup *w, void *ud)
{
    struct wfree *f = ud;
    f->calls++;
    kdp__wakeup_free(f->other);
    kdp__wakeup_free(w);
}

static void wakeup_must_not_run_cb(kdp__wakeup *w, void *ud)
{
    (void)w;
    (void)ud;
    fail_msg("freed wakeup ran");
}

static void test_wakeup_free_in_callback(void **state)
{
    kdp__loop *l = *state;
    struct wfree f = {0, NULL};
    kdp__wakeup *a, *b;
    assert_int_equal(kdp__wakeup_new(l, wakeup_free_both_cb, &f, &a), 0);
    assert_int_equal(kdp__wakeup_new(l, wakeup_must_not_run_cb, NULL, &b), 0);
    f.other = b;
    kdp__wakeup_signal(b);
    kdp__wakeup_signal(a);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(f.calls, 1);
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);
}

/* --- signals --- */

struct sig_rec {
    int calls;
    int signo;
};

static void rec_signal_cb(kdp__signal *s, int signo, void *ud)
{
    struct sig_rec *r = ud;
    (void)s;
    r->calls++;
    r->signo = signo;
}

static void test_signal_delivery(void **state)
{
    kdp__loop *l = *state;
    assert_false(sig_blocked(SIGUSR1));
    struct sig_rec r1 = {0, 0}, r2 = {0, 0};
    kdp__signal *s1, *s2;
    assert_int_equal(kdp__signal_add(l, SIGUSR1, rec_signal_cb, &r1, &s1), 0);
    assert_int_equal(kdp__signal_add(l, SIGUSR1, rec_signal_cb, &r2, &s2), 0);
    assert_true(sig_blocked(SIGUSR1));

    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 2);
    assert_int_equal(r1.calls, 1);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r1.signo, SIGUSR1);

    assert_int_equal(kill(getpid(), SIGUSR1), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 2);
    assert_int_equal(r1.calls, 2);

    kdp__signal_free(s1);
    assert_true(sig_blocked(SIGUSR1)); /* s2 still wants it */
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(r1.calls, 2);
    assert_int_equal(r2.calls, 3);

    kdp__signal_free(s2);
    assert_false(sig_blocked(SIGUSR1));
    assert_int_equal(kdp__loop_dispatch(l, 20), 0);
}

static void signal_free_self_cb(kdp__signal *s, int signo, void *ud)
{
    (void)signo;
    (*(int *)ud)++;
    kdp__signal_free(s);
}

static void test_signal_free_in_callback(void **state)
{
    kdp__loop *l = *state;
    int calls = 0;
    kdp__signal *s;
    assert_int_equal(kdp__signal_add(l, SIGUSR1, signal_free_self_cb, &calls, &s), 0);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(kdp__loop_dispatch(l, 1000), 1);
    assert_int_equal(calls, 1);
    assert_false(sig_blocked(SIGUSR1));
}

static void test_signal_loop_free_unblocks(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__signal *s;
    struct sig_rec r = {0, 0};
    assert_int_equal(kdp__signal_add(l, SIGUSR1, rec_signal_cb, &r, &s), 0);
    assert_int_equal(kdp__signal_add(l, SIGUSR2, rec_signal_cb, &r, &s), 0);
    assert_true(sig_blocked(SIGUSR1));
    assert_true(sig_blocked(SIGUSR2));
    kdp__loop_free(l);
    assert_false(sig_blocked(SIGUSR1));
    assert_false(sig_blocked(SIGUSR2));
    assert_int_equal(r.calls, 0);
}

/* A signal already blocked by the caller stays blocked afterwards. */
static void test_signal_keeps_caller_block(void **state)
{
    kdp__loop *l = *state;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR2);
    assert_int_equal(pthread_sigmask(SIG_BLOCK, &one, NULL), 0);
    kdp__signal *s;
    assert_int_equal(kdp__signal_add(l, SIGUSR2, dummy_signal_cb, NULL, &s), 0);
    kdp__signal_free(s);
    assert_true(sig_blocked(SIGUSR2));
    assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &one, NULL), 0);
}

/* --- idle, run/quit, teardown --- */

static void test_idle_zero_wakeups(void **state)
{
    kdp__loop *l = *state;
    struct pollfd pf = {kdp__loop_fd(l), POLLIN, 0};
    uint64_t start = kdp__now_us();
    assert_int_equal(kdp__loop_dispatch(l, 50), 0);
    assert_true(kdp__now_us() - start >= 49000); /* it slept */
    assert_int_equal(poll(&pf, 1, 0), 0);

    kdp__timer *t;
    assert_int_equal(kdp__timer_new(l, dummy_timer_cb, NULL, &t), 0);
    assert_int_equal(kdp__loop_dispatch(l, 50), 0);
    kdp__timer_start(t, 1000);
    kdp__timer_stop(t);
    start = kdp__now_us();
    assert_int_equal(kdp__loop_dispatch(l, 50), 0);
    assert_true(kdp__now_us() - start >= 49000);
    assert_int_equal(poll(&pf, 1, 0), 0); /* the timerfd is disarmed */
    kdp__timer_free(t);
}

struct quit_ctx {
    kdp__loop *loop;
    int calls;
};

static void quit_cb(kdp__timer *t, void *ud)
{
    struct quit_ctx *q = ud;
    if (++q->calls < 3) {
        kdp__timer_start(t, 1000);
    } else {
        kdp__loop_quit(q->loop);
    }
}

static void test_run_quit(void **state)
{
    struct quit_ctx q = {*state, 0};
    kdp__timer *t;
    assert_int_equal(kdp__timer_new(q.loop, quit_cb, &q, &t), 0);
    kdp__timer_start(t, 1000);
    assert_int_equal(kdp__loop_run(q.loop), 0); /* the watchdog bounds it */
    assert_int_equal(q.calls, 3);
    kdp__loop_quit(q.loop); /* before run: returns without waiting */
    assert_int_equal(kdp__loop_run(q.loop), 0);
    kdp__timer_free(t);
}

static void test_free_with_live_objects(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    assert_int_equal(write(sp[1], "x", 1), 1);
    kdp__io *io;
    assert_int_equal(kdp__io_add(l, sp[0], EPOLLIN, dummy_io_cb, NULL, &io), 0);
    kdp__timer *t[20];
    for (int i = 0; i < 20; i++) {
        assert_int_equal(kdp__timer_new(l, must_not_run_cb, NULL, &t[i]), 0);
        if (i % 2) {
            kdp__timer_start(t[i], 0);
        }
    }
    kdp__wakeup *w1, *w2;
    assert_int_equal(kdp__wakeup_new(l, wakeup_must_not_run_cb, NULL, &w1), 0);
    assert_int_equal(kdp__wakeup_new(l, wakeup_must_not_run_cb, NULL, &w2), 0);
    kdp__wakeup_signal(w1);
    kdp__signal *s;
    assert_int_equal(kdp__signal_add(l, SIGUSR1, dummy_signal_cb, NULL, &s), 0);
    kdp__loop_free(l); /* no callback runs; ASan/valgrind check the rest */
    assert_false(sig_blocked(SIGUSR1));
    /* The loop never closes watched fds. */
    assert_int_equal(write(sp[1], "y", 1), 1);
    close(sp[0]);
    close(sp[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_new_free_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_heap_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_rearm_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_rearm_zero_no_starvation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_rearm_same_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_free_in_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timer_not_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_readable_modify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_del_other_in_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_del_self, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wakeup_thread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wakeup_coalesce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wakeup_from_signal_handler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wakeup_free_in_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_delivery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_free_in_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_loop_free_unblocks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_keeps_caller_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_zero_wakeups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_quit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_with_live_objects, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
