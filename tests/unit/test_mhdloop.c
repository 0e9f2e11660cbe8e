/* SPDX-License-Identifier: MIT */
/* mhdloop with a stand-in daemon: run when its fd is readable, when its
 * timeout comes, when poked; never after stop. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdbool.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "runtime/mhdloop.h"

typedef struct fake {
    int fd; /* stands in for the daemon's epoll fd */
    unsigned runs;
    bool has_timeout;
    uint64_t timeout_ms;
} fake;

static void run(void *daemon)
{
    fake *f = daemon;
    f->runs++;
    uint64_t v;
    (void)read(f->fd, &v, sizeof(v)); /* what was ready is handled */
}

static bool timeout(void *daemon, uint64_t *ret_ms)
{
    fake *f = daemon;
    *ret_ms = f->timeout_ms;
    return f->has_timeout;
}

static void spin(kdp__loop *l, unsigned ms)
{
    uint64_t end = kdp__now_us() + (uint64_t)ms * 1000U;
    while (kdp__now_us() < end) {
        (void)kdp__loop_dispatch(l, 5);
    }
}

static void test_runs(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    fake f = {.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    assert_true(f.fd >= 0);
    kdp__mhdloop m;
    kdp__mhdloop_fns fns = {.run = run, .timeout = timeout};
    assert_int_equal(kdp__mhdloop_start(&m, l, &f, f.fd, &fns), 0);
    spin(l, 50);
    assert_int_equal(f.runs, 0); /* nothing ready, no timeout */
    uint64_t one = 1;
    assert_int_equal(write(f.fd, &one, sizeof(one)), sizeof(one));
    spin(l, 50);
    assert_int_equal(f.runs, 1); /* readable */
    f.has_timeout = true;
    f.timeout_ms = 20;
    kdp__mhdloop_poke(&m);
    spin(l, 10);
    assert_true(f.runs >= 2); /* poked; its timeout armed again after it */
    unsigned before = f.runs;
    spin(l, 100);
    assert_true(f.runs > before); /* the timeout came */
    kdp__mhdloop_run(&m);
    kdp__mhdloop_stop(&m);
    before = f.runs;
    assert_int_equal(write(f.fd, &one, sizeof(one)), sizeof(one));
    spin(l, 60);
    assert_int_equal(f.runs, before); /* stopped: neither fd nor timer */
    kdp__mhdloop_stop(&m);            /* idempotent */
    close(f.fd);
    kdp__loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
