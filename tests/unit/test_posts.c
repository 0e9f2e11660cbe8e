/* SPDX-License-Identifier: MIT */
/* posts: kdp_ctx_post's queue on its own (plugin/posts.h). */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>

#include "plugin/posts.h"

static int ran[KDP_MAX_POSTS + 8];
static size_t n_ran;
static kdp__posts *self;

static void record(kdp_ctx *ctx, void *arg)
{
    (void)ctx;
    ran[n_ran++] = (int)(intptr_t)arg;
}

static void record_and_post(kdp_ctx *ctx, void *arg)
{
    record(ctx, arg);
    assert_int_equal(kdp__posts_add(self, record, (void *)(intptr_t)99), 0);
}

static void post_while_closing(kdp_ctx *ctx, void *arg)
{
    record(ctx, arg);
    assert_int_equal(kdp__posts_add(self, record, NULL), -ESHUTDOWN);
}

/* In order; a call posted by a call runs at the next run, not this one. */
static void test_order_and_next_turn(void **state)
{
    (void)state;
    kdp__loop *l = NULL;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__posts s;
    self = &s;
    assert_int_equal(kdp__posts_init(&s, l, NULL), 0);
    n_ran = 0;
    assert_int_equal(kdp__posts_run(&s), 0);
    assert_int_equal(kdp__posts_add(&s, record, (void *)1), 0);
    assert_int_equal(kdp__posts_add(&s, record_and_post, (void *)2), 0);
    assert_int_equal(kdp__posts_add(&s, record, (void *)3), 0);
    assert_int_equal(kdp__loop_dispatch(l, 0), 1); /* the wakeup came */
    assert_int_equal(kdp__posts_run(&s), 3);
    assert_int_equal(n_ran, 3);
    assert_int_equal(ran[0], 1);
    assert_int_equal(ran[1], 2);
    assert_int_equal(ran[2], 3);
    assert_int_equal(kdp__posts_run(&s), 1);
    assert_int_equal(ran[3], 99);
    kdp__posts_done(&s);
    kdp__loop_free(l);
}

/* Bounded: past KDP_MAX_POSTS waiting, -EAGAIN, and room again once run;
 * closed, -ESHUTDOWN, and what waited runs at the close. */
static void test_bounded_and_closed(void **state)
{
    (void)state;
    kdp__loop *l = NULL;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__posts s;
    assert_int_equal(kdp__posts_init(&s, l, NULL), 0);
    n_ran = 0;
    for (unsigned i = 0; i < KDP_MAX_POSTS; i++) {
        assert_int_equal(kdp__posts_add(&s, record, (void *)(intptr_t)i), 0);
    }
    assert_int_equal(kdp__posts_add(&s, record, NULL), -EAGAIN);
    assert_int_equal(kdp__posts_add(&s, record, NULL), -EAGAIN);
    assert_int_equal(kdp__posts_run(&s), KDP_MAX_POSTS);
    assert_int_equal(ran[KDP_MAX_POSTS - 1], (int)KDP_MAX_POSTS - 1);
    assert_int_equal(kdp__posts_add(&s, record, (void *)7), 0);
    assert_int_equal(kdp__posts_add(&s, post_while_closing, (void *)8), 0);
    n_ran = 0;
    self = &s;
    kdp__posts_done(&s);
    assert_int_equal(n_ran, 2);
    assert_int_equal(ran[1], 8);
    kdp__loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_next_turn),
        cmocka_unit_test(test_bounded_and_closed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
