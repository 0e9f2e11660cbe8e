/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "base/backoff.h"

/* The bounds of a delay drawn at base: +-20%, then clamped to [min, max]. */
static void assert_in_bounds(const kdp__backoff *b, uint64_t base, uint64_t d)
{
    uint64_t lo = base - base / 5;
    uint64_t hi = base + base / 5;
    if (lo < b->min_us) {
        lo = b->min_us;
    }
    if (hi > b->max_us || hi < base) {
        hi = b->max_us;
    }
    assert_in_range(d, lo, hi);
}

static void test_doubles_and_caps(void **state)
{
    (void)state;
    kdp__backoff b;
    kdp__backoff_init(&b, 100, 1000, 1);
    const uint64_t bases[] = {100, 200, 400, 800, 1000, 1000, 1000};
    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        assert_int_equal(b.cur_us, bases[i]);
        uint64_t d = kdp__backoff_next(&b);
        assert_in_bounds(&b, bases[i], d);
    }
    assert_int_equal(b.cur_us, 1000);

    /* A cap that is not a power-of-two multiple of min is still reached. */
    kdp__backoff_init(&b, 50000, 10000000, 7);
    uint64_t base = 50000;
    for (int i = 0; i < 20; i++) {
        assert_int_equal(b.cur_us, base);
        assert_in_bounds(&b, base, kdp__backoff_next(&b));
        base = base * 2 > 10000000 ? 10000000 : base * 2;
    }
    assert_int_equal(b.cur_us, 10000000);
}

static void test_jitter_bounds(void **state)
{
    (void)state;
    const uint64_t min = 1000000;
    const uint64_t max = min * 64;
    uint64_t lowest[8];
    uint64_t highest[8];
    for (int k = 0; k < 8; k++) {
        lowest[k] = UINT64_MAX;
        highest[k] = 0;
    }
    for (uint32_t seed = 1; seed <= 5000; seed++) {
        kdp__backoff b;
        kdp__backoff_init(&b, min, max, seed);
        uint64_t base = min;
        for (int k = 0; k < 8; k++) {
            uint64_t d = kdp__backoff_next(&b);
            assert_in_bounds(&b, base, d);
            lowest[k] = d < lowest[k] ? d : lowest[k];
            highest[k] = d > highest[k] ? d : highest[k];
            base = base * 2 > max ? max : base * 2;
        }
    }
    /* The draws spread over the whole window: near both edges. */
    uint64_t base = min;
    for (int k = 0; k < 8; k++) {
        uint64_t lo = k == 0 ? min : base - base / 5; /* the first is clamped at min */
        uint64_t hi = base + base / 5 > max ? max : base + base / 5;
        assert_true(lowest[k] <= lo + base / 50);
        assert_true(highest[k] >= hi - base / 50);
        base = base * 2 > max ? max : base * 2;
    }
}

static void test_reset(void **state)
{
    (void)state;
    kdp__backoff b;
    kdp__backoff_init(&b, 100, 100000, 3);
    for (int i = 0; i < 10; i++) {
        (void)kdp__backoff_next(&b);
    }
    assert_true(b.cur_us > 100);
    kdp__backoff_reset(&b);
    assert_int_equal(b.cur_us, 100);
    assert_in_bounds(&b, 100, kdp__backoff_next(&b));
    assert_int_equal(b.cur_us, 200);
}

static void test_seeds_and_edges(void **state)
{
    (void)state;
    /* The same seed gives the same sequence; seed 0 picks one. */
    kdp__backoff a;
    kdp__backoff b;
    kdp__backoff_init(&a, 1000, 1000000, 42);
    kdp__backoff_init(&b, 1000, 1000000, 42);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(kdp__backoff_next(&a), kdp__backoff_next(&b));
    }
    kdp__backoff_init(&a, 1000, 1000000, 0);
    assert_int_not_equal(a.seed, 0);
    for (int i = 0; i < 20; i++) {
        assert_in_range(kdp__backoff_next(&a), 1000, 1000000);
    }

    /* min == max: always that. */
    kdp__backoff_init(&a, 500, 500, 9);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(kdp__backoff_next(&a), 500);
    }

    /* Tiny delays have no room for jitter; huge ones do not overflow. */
    kdp__backoff_init(&a, 1, 4, 5);
    assert_int_equal(kdp__backoff_next(&a), 1);
    assert_int_equal(kdp__backoff_next(&a), 2);
    kdp__backoff_init(&a, 1, UINT64_MAX, 5);
    uint64_t base = 1;
    for (int i = 0; i < 80; i++) {
        uint64_t d = kdp__backoff_next(&a);
        assert_in_bounds(&a, base, d);
        base = base > UINT64_MAX / 2 ? UINT64_MAX : base * 2;
    }
    assert_int_equal(a.cur_us, UINT64_MAX);
    assert_true(kdp__backoff_next(&a) >= UINT64_MAX - UINT64_MAX / 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doubles_and_caps),
        cmocka_unit_test(test_jitter_bounds),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_seeds_and_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
