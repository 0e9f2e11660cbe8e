/* SPDX-License-Identifier: MIT */
/* The lifecycle's restart backoff: which restarts count as a loop, the
 * first immediate, the next ones waiting longer, a stable registration or
 * a new kubelet resetting or skipping the wait. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "plugin/restarts.h"

#define S (1000000ULL)

/* A registration strategy whose kubelet is the same one while same is set,
 * counting the questions. */
typedef struct fake_reg {
    kdp__reg base;
    bool same;
    int asked;
} fake_reg;

static bool fake_same_peer(kdp__reg *r)
{
    fake_reg *f = (fake_reg *)r;
    f->asked++;
    return f->same;
}

static const kdp__reg_ops fake_ops = {.same_peer = fake_same_peer};

static void fake_init(fake_reg *f)
{
    *f = (fake_reg){.base = {.ops = &fake_ops}, .same = true};
}

/* A registration at `at`, then a restart at `at + lasted`: its delay. */
static uint64_t cycle(kdp__restarts *r, fake_reg *f, uint64_t at, uint64_t lasted)
{
    kdp__restarts_registered(r, at);
    kdp__restarts_note(r, true, &f->base, at + lasted);
    kdp__restarts_unregistered(r);
    return kdp__restarts_delay(r, &f->base);
}

static void test_quick_restarts_back_off(void **state)
{
    (void)state;
    kdp__restarts r;
    fake_reg f;
    kdp__restarts_init(&r);
    fake_init(&f);
    assert_int_equal(cycle(&r, &f, 1 * S, S / 10), 0); /* the first one: at once */
    assert_int_equal(r.quick, 1);
    uint64_t prev = 0;
    for (int i = 0; i < 6; i++) {
        uint64_t d = cycle(&r, &f, (10U + i) * S, S / 10);
        assert_true(d >= 40000 && d <= 30 * S); /* 50 ms +-20 %, up to 30 s */
        if (i > 0) {
            assert_true(d > prev); /* doubling beats the jitter */
        }
        prev = d;
    }
    assert_int_equal(r.total, 7);
}

static void test_stable_registration_resets(void **state)
{
    (void)state;
    kdp__restarts r;
    fake_reg f;
    kdp__restarts_init(&r);
    fake_init(&f);
    (void)cycle(&r, &f, 1 * S, S / 10);
    assert_true(cycle(&r, &f, 2 * S, S / 10) > 0);
    /* one that lasted 10 s: immediate, and the loop starts over */
    assert_int_equal(cycle(&r, &f, 3 * S, KDP__STABLE_REGISTRATION_US), 0);
    assert_int_equal(r.quick, 0);
    assert_int_equal(cycle(&r, &f, 20 * S, S / 10), 0);
    uint64_t d = cycle(&r, &f, 21 * S, S / 10);
    assert_true(d >= 40000 && d <= 60000); /* from 50 ms again */
}

static void test_new_kubelet_never_waits(void **state)
{
    (void)state;
    kdp__restarts r;
    fake_reg f;
    kdp__restarts_init(&r);
    fake_init(&f);
    (void)cycle(&r, &f, 1 * S, S / 10);
    f.same = false; /* a kubelet of its own restarted */
    assert_int_equal(cycle(&r, &f, 2 * S, S / 10), 0);
    assert_false(r.counts);
    /* the same kubelet when the restart began, a new one once destroy ran */
    f.same = true;
    kdp__restarts_registered(&r, 3 * S);
    kdp__restarts_note(&r, true, &f.base, 3 * S + S / 10);
    assert_true(r.counts);
    f.same = false;
    assert_int_equal(kdp__restarts_delay(&r, &f.base), 0);
}

static void test_unregistered_never_counts(void **state)
{
    (void)state;
    kdp__restarts r;
    fake_reg f;
    kdp__restarts_init(&r);
    fake_init(&f);
    for (int i = 0; i < 3; i++) {
        /* not REGISTERED (a Register failing), or no registration recorded */
        kdp__restarts_note(&r, false, &f.base, (1U + i) * S);
        assert_false(r.counts);
        assert_int_equal(kdp__restarts_delay(&r, &f.base), 0);
        kdp__restarts_note(&r, true, &f.base, (1U + i) * S);
        assert_false(r.counts);
    }
    assert_int_equal(f.asked, 0); /* the strategy is asked only when it may matter */
    assert_int_equal(r.total, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quick_restarts_back_off),
        cmocka_unit_test(test_stable_registration_resets),
        cmocka_unit_test(test_new_kubelet_never_waits),
        cmocka_unit_test(test_unregistered_never_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
