/* SPDX-License-Identifier: MIT */
/* jobs: a callback's bound counts its own running time, never its time in
 * the queue; the caller's deadline counts both. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "plugin/jobs.h"

#define BOUND_MS 2000U

typedef struct rec {
    unsigned sleep_ms;
    atomic_bool ran;
    bool completed;
    bool timed_out;
} rec;

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void fn(kdp__pjob *j)
{
    rec *r = j->data;
    atomic_store(&r->ran, true);
    sleep_ms(r->sleep_ms);
    j->result = 0;
}

static void complete(kdp__pjob *j, bool timed_out)
{
    rec *r = j->data;
    r->completed = true;
    r->timed_out = timed_out;
}

static void submit(kdp__jobs *js, rec *r, uint64_t deadline_us)
{
    kdp__pjob *j = kdp__pjob_new(js, "allocate", NULL);
    assert_non_null(j);
    j->data = r;
    j->fn = fn;
    j->complete = complete;
    assert_int_equal(kdp__pjob_submit(j, deadline_us), 0);
}

static void run_until(kdp__loop *l, const rec *const *rs, size_t n)
{
    uint64_t end = kdp__now_us() + 20ULL * 1000000ULL;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < n; i++) {
            all &= rs[i]->completed;
        }
        if (all) {
            return;
        }
        assert_true(kdp__now_us() < end);
        (void)kdp__loop_dispatch(l, 20);
    }
}

/* b waits 1.5 s behind a, then runs 0.6 s: 2.1 s after its submit, past
 * the 2 s bound, but its own 0.6 s are well within it. */
static void test_queue_time_not_counted(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__jobs js;
    assert_int_equal(kdp__jobs_init(&js, l, BOUND_MS, 4, "test"), 0);
    rec a = {.sleep_ms = 1500};
    rec b = {.sleep_ms = 600};
    submit(&js, &a, 0);
    submit(&js, &b, 0);
    const rec *const rs[] = {&a, &b};
    run_until(l, rs, 2);
    assert_false(a.timed_out);
    assert_false(b.timed_out);
    assert_true(atomic_load(&b.ran));
    (void)kdp__jobs_done(&js, 5000);
    kdp__loop_free(l);
}

/* A job past its own bound is timed out; one whose caller's deadline
 * passes while it waits is timed out without running. */
static void test_bound_and_call_deadline(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__jobs js;
    assert_int_equal(kdp__jobs_init(&js, l, 400, 4, "test"), 0);
    rec slow = {.sleep_ms = 1200};
    rec late = {.sleep_ms = 0};
    submit(&js, &slow, 0);
    submit(&js, &late, kdp__now_us() + 200000ULL);
    const rec *const rs[] = {&slow, &late};
    run_until(l, rs, 2);
    assert_true(slow.timed_out);
    assert_true(late.timed_out);
    sleep_ms(1300); /* the abandoned one returns; the late one never ran */
    assert_false(atomic_load(&late.ran));
    (void)kdp__jobs_done(&js, 5000);
    kdp__loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_time_not_counted),
        cmocka_unit_test(test_bound_and_call_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
