/* SPDX-License-Identifier: MIT */
/*
 * The plugin's own life, without a kubelet: freeing a plugin while its
 * callbacks are queued or running, on a context that keeps running for
 * another plugin; destroy exactly once. (The sanitizer builds turn a
 * use-after-free here into a failure.)
 */
/* cmocka needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <kdp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "plugin_fixture.h"

static atomic_int list_running;
static atomic_int destroys;
static atomic_int destroying;
static atomic_int max_destroying;

static int slow_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    (void)out;
    (void)ud;
    atomic_store(&list_running, 1);
    sleep_ms(300); /* past the 100 ms callback deadline */
    return 0;
}

static void counting_destroy(kdp_plugin *p, void *ud)
{
    (void)p;
    (void)ud;
    int now = atomic_fetch_add(&destroying, 1) + 1;
    int max = atomic_load(&max_destroying);
    while (now > max && !atomic_compare_exchange_weak(&max_destroying, &max, now)) {
    }
    sleep_ms(200); /* long enough for a second, concurrent call to show */
    atomic_fetch_add(&destroys, 1);
    atomic_fetch_sub(&destroying, 1);
}

/* A plugin freed while its list callback runs past its deadline, the context
 * going on for another plugin: the job's deadline must not fire on freed
 * memory, and nothing else of the freed plugin may run. */
static void test_free_plugin_with_running_job(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops slow = {.list = slow_list};
    kdp_plugin *a = new_plugin(ctx, "kdp.test/a", "a.sock", &slow);
    kdp_plugin *b = new_plugin(ctx, "kdp.test/b", "b.sock", NULL);
    (void)b;
    for (int i = 0; i < 200 && !atomic_load(&list_running); i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        sleep_ms(5);
    }
    assert_true(atomic_load(&list_running));
    kdp_plugin_free(a);     /* the list is still sleeping */
    dispatch_for(ctx, 500); /* past a's deadline and the list's return */
    kdp_ctx_free(ctx);
}

/* Stopped through the context, destroy started on the worker, then the
 * context freed: destroy runs once, never twice at the same time. */
static void test_destroy_once(void **state)
{
    (void)state;
    atomic_store(&destroys, 0);
    atomic_store(&max_destroying, 0);
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.destroy = counting_destroy};
    (void)new_plugin(ctx, "kdp.test/c", "c.sock", &ops);
    dispatch_for(ctx, 100); /* started: serving, waiting for the kubelet */
    assert_int_equal(kdp_ctx_stop(ctx), 0);
    dispatch_for(ctx, 50); /* the stop drains, then destroy starts on the worker */
    kdp_ctx_free(ctx);
    assert_int_equal(atomic_load(&destroys), 1);
    assert_int_equal(atomic_load(&max_destroying), 1);
}

/* A plugin added after the context was stopped ends stopped, not idle. */
static void test_added_after_stop(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    (void)new_plugin(ctx, "kdp.test/d", "d.sock", NULL);
    dispatch_for(ctx, 50);
    assert_int_equal(kdp_ctx_stop(ctx), 0);
    int r = 0;
    for (int i = 0; i < 400 && r == 0; i++) {
        r = kdp_ctx_dispatch(ctx);
        sleep_ms(5);
    }
    assert_int_equal(r, 1);
    (void)new_plugin(ctx, "kdp.test/e", "e.sock", NULL);
    assert_int_equal(kdp_ctx_dispatch(ctx), 1); /* stopped at once, not left idle */
    kdp_ctx_free(ctx);
}

static void *run_ctx(void *arg)
{
    static int r;
    r = kdp_ctx_run(arg);
    return &r;
}

static void wait_state(kdp_plugin *p, kdp_plugin_state want)
{
    kdp_plugin_status st = {0};
    for (int i = 0; i < 400; i++) {
        assert_int_equal(kdp_plugin_get_status(p, &st), 0);
        if (st.state == want) {
            return;
        }
        sleep_ms(5);
    }
    fail_msg("state %d, not %d", (int)st.state, (int)want);
}

/* A context runs on one thread at a time, and what is the loop's is refused
 * from elsewhere while it runs, with a line naming what to do instead; a
 * context whose plugins have all stopped does not run again. */
static void test_one_thread_runs_it(void **state)
{
    (void)state;
    logged_clear();
    kdp_log_set(KDP_LOG_ERROR, keep_line, NULL);
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_plugin *p = new_plugin(ctx, "kdp.test/f", "f.sock", NULL);
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, run_ctx, ctx), 0);
    wait_state(p, KDP_PLUGIN_WAITING); /* serving: no kubelet here */

    assert_int_equal(kdp_ctx_run(ctx), -EBUSY);
    assert_true(logged_has("kdp_ctx_run: the context is already running"));
    assert_int_equal(kdp_plugin_run(p), -EBUSY);
    assert_int_equal(kdp_ctx_dispatch(ctx), -EBUSY);
    kdp_plugin *q = NULL;
    kdp_config cfg = {.resource_name = "kdp.test/g", .socket_name = "g.sock"};
    assert_int_equal(kdp_plugin_new(ctx, &cfg, NULL, NULL, &q), -EBUSY);
    assert_null(q);
    assert_int_equal(kdp_plugin_watch_path(p, "/tmp", 0, NULL), -EBUSY);
    logged_clear();
    kdp_plugin_free(p); /* refused: the plugin keeps running */
    assert_true(logged_has("kdp_plugin_free called from thread"));
    assert_true(logged_has("kdp_plugin_stop()"));
    kdp_ctx_free(ctx); /* refused too */
    assert_true(logged_has("kdp_ctx_free called from thread"));
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    assert_int_equal(st.state, KDP_PLUGIN_WAITING);

    assert_int_equal(kdp_plugin_stop(p), 0);
    void *ret = NULL;
    assert_int_equal(pthread_join(tid, &ret), 0);
    assert_int_equal(*(int *)ret, 0);
    /* Once stopped, it stays stopped: running it again says so. */
    logged_clear();
    assert_int_equal(kdp_ctx_run(ctx), -ESHUTDOWN);
    assert_true(logged_has("create a new one with kdp_plugin_new()"));
    assert_int_equal(kdp_plugin_run(p), -ESHUTDOWN);
    kdp_ctx_free(ctx); /* now from any thread */
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
}

/* Embedding: the thread that dispatches owns the context until dispatch
 * reports the end; then any thread may free it. */
static void *dispatch_other(void *arg)
{
    static int r;
    r = kdp_ctx_dispatch(arg);
    return &r;
}

static void test_dispatch_owner(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_plugin *p = new_plugin(ctx, "kdp.test/h", "h.sock", NULL);
    dispatch_for(ctx, 50);
    pthread_t tid;
    void *ret = NULL;
    assert_int_equal(pthread_create(&tid, NULL, dispatch_other, ctx), 0);
    assert_int_equal(pthread_join(tid, &ret), 0);
    assert_int_equal(*(int *)ret, -EBUSY);
    assert_int_equal(kdp_plugin_stop(p), 0);
    int r = 0;
    for (int i = 0; i < 400 && r == 0; i++) {
        r = kdp_ctx_dispatch(ctx);
        sleep_ms(5);
    }
    assert_int_equal(r, 1);
    assert_int_equal(pthread_create(&tid, NULL, dispatch_other, ctx), 0);
    assert_int_equal(pthread_join(tid, &ret), 0);
    assert_int_equal(*(int *)ret, 1); /* finished: no owner any more */
    kdp_ctx_free(ctx);
}

/* A list op that returns a positive value (a mistaken `return EIO;`) failed:
 * the status says so, and the op is called again. */
static atomic_int list_calls;

static int positive_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    (void)out;
    (void)ud;
    atomic_fetch_add(&list_calls, 1);
    return EIO;
}

static void test_positive_return_fails(void **state)
{
    (void)state;
    atomic_store(&list_calls, 0);
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.list = positive_list};
    kdp_plugin *p = new_plugin(ctx, "kdp.test/i", "i.sock", &ops);
    dispatch_for(ctx, 400); /* 100 ms between the first two calls, 200 next */
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    assert_int_equal(st.list_error, -EIO);
    assert_int_equal(st.devices, 0);
    assert_true(atomic_load(&list_calls) >= 2);
    kdp_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_plugin_with_running_job),
        cmocka_unit_test(test_destroy_once),
        cmocka_unit_test(test_added_after_stop),
        cmocka_unit_test(test_one_thread_runs_it),
        cmocka_unit_test(test_dispatch_owner),
        cmocka_unit_test(test_positive_return_fails),
    };
    return run_in_dir(tests, sizeof(tests) / sizeof(tests[0]));
}
