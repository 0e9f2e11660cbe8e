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
#include <kdp.h>
#include <stdatomic.h>

#include "plugin/posts.h"
#include "plugin_fixture.h"

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

/* kdp_ctx_post from a callback (a worker thread) and from an author's own
 * thread: each runs on the context's thread, in order, where a loop-only
 * call (kdp_plugin_watch_path, kdp_plugin_new on the running context) is
 * taken; one still waiting at kdp_ctx_free runs then. */
typedef struct post_state {
    kdp_ctx *ctx;
    kdp_plugin *p;
    pid_t loop_tid;
    atomic_int order[4];
    atomic_int n;
    int watch_rc;
    int new_rc;
    int run_rc, dispatch_rc;
    atomic_int list_posted, post_failed;
    kdp_plugin *added;
} post_state;

static post_state posted;

static void on_posted(kdp_ctx *ctx, void *arg)
{
    assert_ptr_equal(ctx, posted.ctx);
    int k = atomic_fetch_add(&posted.n, 1);
    if (k < 4) {
        atomic_store(&posted.order[k], (int)(intptr_t)arg);
    }
    assert_int_equal(gettid(), posted.loop_tid);
    if ((intptr_t)arg == 1) {
        posted.watch_rc = kdp_plugin_watch_path(posted.p, dir, 0, NULL);
        kdp_config cfg = {.resource_name = "kdp.test/added",
                          .socket_name = "added.sock",
                          .device_plugin_dir = dir};
        posted.new_rc = kdp_plugin_new(ctx, &cfg, NULL, NULL, &posted.added);
    }
    if ((intptr_t)arg == 2) { /* what it may not: its own context's free, run, dispatch */
        kdp_ctx_free(ctx);    /* refused: the test goes on with ctx */
        posted.run_rc = kdp_ctx_run(ctx);
        posted.dispatch_rc = kdp_ctx_dispatch(ctx);
    }
}

static int posting_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)out;
    (void)ud;
    /* once: the watch it sets up makes later listings (the second plugin's
     * socket appears in dir), which may come as the context is freed */
    if (atomic_exchange(&posted.list_posted, 1) == 0 &&
        kdp_ctx_post(kdp_plugin_get_ctx(p), on_posted, (void *)(intptr_t)1) < 0) {
        atomic_store(&posted.post_failed, 1);
    }
    return 0;
}

static void *author_thread(void *arg)
{
    (void)arg;
    assert_int_equal(kdp_ctx_post(posted.ctx, on_posted, (void *)(intptr_t)2), 0);
    return NULL;
}

static void test_post(void **state)
{
    (void)state;
    memset(&posted, 0, sizeof(posted));
    assert_int_equal(kdp_ctx_new(&posted.ctx), 0);
    posted.loop_tid = gettid();
    kdp_ops ops = {.list = posting_list};
    posted.p = new_plugin(posted.ctx, "kdp.test/post", "post.sock", &ops);
    assert_int_equal(kdp_ctx_post(NULL, on_posted, NULL), -EINVAL);
    assert_int_equal(kdp_ctx_post(posted.ctx, NULL, NULL), -EINVAL);
    for (int i = 0; i < 400 && atomic_load(&posted.n) < 1; i++) {
        assert_true(kdp_ctx_dispatch(posted.ctx) >= 0);
        sleep_ms(5);
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, author_thread, NULL), 0);
    pthread_join(t, NULL);
    for (int i = 0; i < 400 && atomic_load(&posted.n) < 2; i++) {
        assert_true(kdp_ctx_dispatch(posted.ctx) >= 0);
        sleep_ms(5);
    }
    assert_int_equal(atomic_load(&posted.n), 2);
    assert_false(atomic_load(&posted.post_failed));
    assert_int_equal(atomic_load(&posted.order[0]), 1);
    assert_int_equal(atomic_load(&posted.order[1]), 2);
    assert_int_equal(posted.watch_rc, 0);
    assert_int_equal(posted.new_rc, 0);
    assert_int_equal(posted.run_rc, -EPERM);
    assert_int_equal(posted.dispatch_rc, -EPERM);
    assert_true(kdp_ctx_dispatch(posted.ctx) >= 0); /* still there */
    assert_non_null(posted.added);
    /* waiting at the free: run then, on the freeing thread */
    assert_int_equal(kdp_ctx_post(posted.ctx, on_posted, (void *)(intptr_t)3), 0);
    kdp_ctx_free(posted.ctx);
    assert_int_equal(atomic_load(&posted.n), 3);
    assert_int_equal(atomic_load(&posted.order[2]), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_next_turn),
        cmocka_unit_test(test_bounded_and_closed),
        cmocka_unit_test(test_post),
    };
    return run_in_dir(tests, sizeof(tests) / sizeof(tests[0]));
}
