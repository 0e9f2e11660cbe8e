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

#include "plugin/plugin_int.h" /* test_coalesced counts the table's messages */

static char dir[64];
static atomic_int list_running;
static atomic_int destroys;
static atomic_int destroying;
static atomic_int max_destroying;

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

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

static kdp_plugin *new_plugin(kdp_ctx *ctx, const char *res, const char *sock, const kdp_ops *ops)
{
    kdp_config cfg = {.resource_name = res,
                      .socket_name = sock,
                      .device_plugin_dir = dir,
                      .callback_timeout_ms = 100};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_plugin_new(ctx, &cfg, ops, NULL, &p), 0);
    return p;
}

static void dispatch_for(kdp_ctx *ctx, int ms)
{
    for (int i = 0; i < ms / 5; i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        sleep_ms(5);
    }
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

/* Log lines, kept for the assertions below (the sink runs under kdp's log
 * lock: one line at a time). */
static char logged[8192];
static pthread_mutex_t logged_mu = PTHREAD_MUTEX_INITIALIZER;

static void keep_line(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    pthread_mutex_lock(&logged_mu);
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
    pthread_mutex_unlock(&logged_mu);
}

static void logged_clear(void)
{
    pthread_mutex_lock(&logged_mu);
    logged[0] = '\0';
    pthread_mutex_unlock(&logged_mu);
}

static bool logged_has(const char *needle)
{
    pthread_mutex_lock(&logged_mu);
    bool has = strstr(logged, needle) != NULL;
    pthread_mutex_unlock(&logged_mu);
    return has;
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

/* Reading the table back: one device's health, a snapshot in one block. */
static void test_read_back(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_plugin *p = new_plugin(ctx, "example.com/rb", "rb.sock", NULL);
    kdp_health h;
    kdp_device *devs = (kdp_device *)&h; /* must be reset */
    size_t n = 7;
    assert_int_equal(kdp_plugin_get_devices(p, &devs, &n), 0);
    assert_null(devs);
    assert_int_equal(n, 0);
    assert_int_equal(kdp_plugin_get_health(p, "a", &h), -ENOENT);
    int64_t numa_b[] = {1, 0, -1};
    int mine = 7;
    kdp_device in[] = {
        {.id = "b", .health = KDP_UNHEALTHY, .numa_nodes = numa_b, .n_numa_nodes = 3},
        {.id = "a",
         .health = KDP_HEALTHY,
         .host_path = "/dev/a",
         .permissions = "r",
         .data = &mine},
    };
    assert_int_equal(kdp_plugin_set_devices(p, in, 2), 0);
    assert_int_equal(kdp_plugin_get_health(p, "b", &h), 0);
    assert_int_equal(h, KDP_UNHEALTHY);
    void *data = &h;
    assert_int_equal(kdp_plugin_get_device_data(p, "a", &data), 0);
    assert_ptr_equal(data, &mine);
    assert_int_equal(kdp_plugin_get_device_data(p, "b", &data), 0);
    assert_null(data);
    assert_int_equal(kdp_plugin_get_device_data(p, "c", &data), -ENOENT);
    assert_int_equal(kdp_plugin_get_device_data(p, NULL, &data), -EINVAL);
    assert_int_equal(kdp_plugin_set_health(p, "b", KDP_HEALTHY), 0);
    assert_int_equal(kdp_plugin_get_health(p, "b", &h), 0);
    assert_int_equal(h, KDP_HEALTHY);
    assert_int_equal(kdp_plugin_get_devices(p, &devs, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(devs[0].id, "a"); /* sorted */
    assert_int_equal(devs[0].health, KDP_HEALTHY);
    assert_string_equal(devs[0].host_path, "/dev/a");
    assert_null(devs[0].container_path);
    assert_string_equal(devs[0].permissions, "r");
    assert_ptr_equal(devs[0].data, &mine);
    assert_null(devs[0].numa_nodes);
    assert_string_equal(devs[1].id, "b");
    assert_int_equal(devs[1].health, KDP_HEALTHY);
    assert_int_equal(devs[1].n_numa_nodes, 2); /* sorted, -1 dropped */
    assert_int_equal(devs[1].numa_nodes[0], 0);
    assert_int_equal(devs[1].numa_nodes[1], 1);
    assert_null(devs[1].host_path);
    /* The copy is the caller's: a later change does not show in it. */
    assert_int_equal(kdp_plugin_set_devices(p, NULL, 0), 0);
    assert_string_equal(devs[1].id, "b");
    free(devs);
    assert_int_equal(kdp_plugin_get_health(p, "b", &h), -ENOENT);
    assert_int_equal(kdp_plugin_get_health(NULL, "b", &h), -EINVAL);
    assert_int_equal(kdp_plugin_get_health(p, NULL, &h), -EINVAL);
    assert_int_equal(kdp_plugin_get_devices(p, NULL, &n), -EINVAL);
    kdp_ctx_free(ctx);
}

struct reader {
    kdp_plugin *p;
    atomic_bool stop;
    atomic_int snapshots;
    int bad;
};

static long elapsed_ms(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Snapshots taken while another thread flips health: each one whole. */
static void *read_loop(void *arg)
{
    struct reader *r = arg;
    while (!atomic_load(&r->stop)) {
        kdp_device *devs;
        size_t n;
        if (kdp_plugin_get_devices(r->p, &devs, &n) != 0 || n != 64) {
            r->bad++;
        }
        for (size_t i = 0; i < n; i++) {
            char want[24];
            snprintf(want, sizeof(want), "d%02zu", i);
            r->bad += strcmp(devs[i].id, want) != 0;
        }
        free(devs);
        kdp_health h;
        r->bad += kdp_plugin_get_health(r->p, "d07", &h) != 0;
        atomic_fetch_add(&r->snapshots, 1);
    }
    return NULL;
}

static void test_read_back_threads(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_plugin *p = new_plugin(ctx, "example.com/rbt", "rbt.sock", NULL);
    char ids[64][8];
    kdp_device in[64];
    for (int i = 0; i < 64; i++) {
        snprintf(ids[i], sizeof(ids[i]), "d%02d", i);
        in[i] = (kdp_device){.id = ids[i], .health = KDP_HEALTHY};
    }
    assert_int_equal(kdp_plugin_set_devices(p, in, 64), 0);
    struct reader r = {.p = p};
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, read_loop, &r), 0);
    /* 2000 changes at least, and until the reader took 20 snapshots (5 s at
     * most: a machine too busy to run the reader fails the count below). */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 2000 || (atomic_load(&r.snapshots) < 20 && elapsed_ms(&t0) < 5000); i++) {
        assert_int_equal(kdp_plugin_set_health(p, ids[i % 64], i % 3 ? KDP_HEALTHY : KDP_UNHEALTHY),
                         0);
        if (i % 500 == 0) {
            assert_int_equal(kdp_plugin_set_devices(p, in, 64), 0);
        }
    }
    atomic_store(&r.stop, true);
    assert_int_equal(pthread_join(tid, NULL), 0);
    assert_int_equal(r.bad, 0);
    assert_true(atomic_load(&r.snapshots) >= 20);
    kdp_ctx_free(ctx);
}

/* What the kubelet is being served (kdp_plugin_get_status' devices) once
 * the loop took the latest changes. */
static size_t served(kdp_ctx *ctx, kdp_plugin *p)
{
    kdp_plugin_status st;
    for (int i = 0; i < 3; i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
    }
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    return st.devices;
}

/* Single changes: add, replace, remove, health; their refusals; the table
 * read back and the one served agree after each. */
static void test_single_changes(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_plugin *p = new_plugin(ctx, "example.com/one", "one.sock", NULL);
    dispatch_for(ctx, 20);
    int mine = 1;
    kdp_device a = {.id = "a", .health = KDP_HEALTHY, .host_path = "/dev/a", .data = &mine};
    kdp_device b = {.id = "b", .health = KDP_UNHEALTHY};
    assert_int_equal(kdp_plugin_set_device(p, &a), 0);
    assert_int_equal(kdp_plugin_set_device(p, &b), 0);
    assert_int_equal(served(ctx, p), 2);
    kdp_health h;
    assert_int_equal(kdp_plugin_get_health(p, "b", &h), 0);
    assert_int_equal(h, KDP_UNHEALTHY);
    /* a replacement keeps one device with that ID, with the new fields */
    b.health = KDP_HEALTHY;
    b.host_path = "/dev/b";
    assert_int_equal(kdp_plugin_set_device(p, &b), 0);
    kdp_device *devs;
    size_t n;
    assert_int_equal(kdp_plugin_get_devices(p, &devs, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(devs[1].id, "b");
    assert_int_equal(devs[1].health, KDP_HEALTHY);
    assert_string_equal(devs[1].host_path, "/dev/b");
    assert_ptr_equal(devs[0].data, &mine);
    free(devs);
    assert_int_equal(served(ctx, p), 2);
    assert_int_equal(kdp_plugin_remove_device(p, "a"), 0);
    assert_int_equal(kdp_plugin_remove_device(p, "a"), -ENOENT);
    assert_int_equal(kdp_plugin_get_health(p, "a", &h), -ENOENT);
    assert_int_equal(served(ctx, p), 1);
    assert_int_equal(kdp_plugin_set_health(p, "b", KDP_UNHEALTHY), 0);
    assert_int_equal(kdp_plugin_set_health(p, "a", KDP_UNHEALTHY), -ENOENT);
    /* refusals change nothing */
    logged_clear();
    kdp_log_set(KDP_LOG_ERROR, keep_line, NULL);
    kdp_device bad = {.id = "bad id", .health = KDP_HEALTHY};
    assert_int_equal(kdp_plugin_set_device(p, &bad), -EINVAL);
    assert_true(logged_has("kdp_plugin_set_device: device \"bad id\""));
    assert_int_equal(kdp_plugin_set_device(p, NULL), -EINVAL);
    assert_int_equal(kdp_plugin_set_device(NULL, &a), -EINVAL);
    assert_int_equal(kdp_plugin_remove_device(p, NULL), -EINVAL);
    assert_int_equal(kdp_plugin_remove_device(NULL, "b"), -EINVAL);
    assert_int_equal(served(ctx, p), 1);
    assert_int_equal(kdp_plugin_get_health(p, "b", &h), 0);
    assert_int_equal(h, KDP_UNHEALTHY);
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    kdp_ctx_free(ctx);
}

/* A single change that would take the message over the kubelet's limit is
 * refused; one that fits is taken; the table served never goes over. */
static void test_single_change_over_limit(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_plugin *p = new_plugin(ctx, "example.com/big", "big.sock", NULL);
    dispatch_for(ctx, 20);
    /* 255-byte IDs, Healthy: 270 bytes of message each (tag and 2-byte
     * length for the ID, 9 for the health, tag and 2-byte length around) */
    enum { ID = 255 };
    size_t n = KDP_MAX_LIST_MESSAGE / 270;
    char(*ids)[ID + 1] = calloc(n + 1, sizeof(*ids));
    kdp_device *in = calloc(n, sizeof(*in));
    assert_non_null(ids);
    assert_non_null(in);
    for (size_t i = 0; i <= n; i++) {
        memset(ids[i], 'x', ID);
        snprintf(ids[i], 16, "%014zu", i);
        ids[i][14] = 'x';
        if (i < n) {
            in[i] = (kdp_device){.id = ids[i], .health = KDP_HEALTHY};
        }
    }
    assert_int_equal(kdp_plugin_set_devices(p, in, n), 0);
    assert_int_equal(served(ctx, p), n);
    kdp_log_set(KDP_LOG_ERROR + 1, NULL, NULL); /* the refusal's line is expected */
    kdp_device more = {.id = ids[n], .health = KDP_HEALTHY};
    assert_int_equal(kdp_plugin_set_device(p, &more), -EMSGSIZE);
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    assert_int_equal(kdp_plugin_remove_device(p, ids[0]), 0);
    assert_int_equal(kdp_plugin_set_device(p, &more), 0); /* fits again */
    assert_int_equal(served(ctx, p), n);
    free(in);
    free(ids);
    kdp_ctx_free(ctx);
}

/* Changes made while the list op runs are newer than what it read: they
 * are applied on top of its result, removals and health changes included
 * (the table did not have those devices yet). */
static atomic_int list_gate; /* 0 closed, 1 open */
static atomic_int list_entered;

static int gated_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    (void)ud;
    atomic_store(&list_entered, 1);
    for (int i = 0; i < 400 && !atomic_load(&list_gate); i++) {
        sleep_ms(5);
    }
    /* what the list read before the changes below were made */
    kdp_device devs[] = {{.id = "gone", .health = KDP_HEALTHY},
                         {.id = "sick", .health = KDP_HEALTHY},
                         {.id = "kept", .health = KDP_HEALTHY}};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(kdp_device_list_add(out, &devs[i]), 0);
    }
    return 0;
}

static void test_changes_during_list(void **state)
{
    (void)state;
    atomic_store(&list_gate, 0);
    atomic_store(&list_entered, 0);
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.list = gated_list};
    kdp_config cfg = {.resource_name = "example.com/race",
                      .socket_name = "race.sock",
                      .device_plugin_dir = dir,
                      .callback_timeout_ms = 5000};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_plugin_new(ctx, &cfg, &ops, NULL, &p), 0);
    for (int i = 0; i < 400 && !atomic_load(&list_entered); i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        sleep_ms(5);
    }
    assert_true(atomic_load(&list_entered));
    kdp_device fresh = {.id = "new", .health = KDP_HEALTHY};
    assert_int_equal(kdp_plugin_set_device(p, &fresh), 0);
    assert_int_equal(kdp_plugin_remove_device(p, "gone"), -ENOENT); /* not in the table yet */
    assert_int_equal(kdp_plugin_set_health(p, "sick", KDP_UNHEALTHY), -ENOENT);
    atomic_store(&list_gate, 1);
    kdp_device *devs = NULL;
    size_t n = 0;
    for (int i = 0; i < 400; i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        free(devs);
        assert_int_equal(kdp_plugin_get_devices(p, &devs, &n), 0);
        if (n > 1) {
            break;
        }
        sleep_ms(5);
    }
    assert_int_equal(n, 3);
    assert_string_equal(devs[0].id, "kept");
    assert_string_equal(devs[1].id, "new");
    assert_string_equal(devs[2].id, "sick");
    assert_int_equal(devs[2].health, KDP_UNHEALTHY);
    free(devs);
    assert_int_equal(served(ctx, p), 3);
    kdp_ctx_free(ctx);
}

/* The table's "changed" callback, counted: one per message the kubelet
 * would be sent. */
static atomic_int messages;
static void (*real_changed)(void *ud);

static void count_changed(void *ud)
{
    atomic_fetch_add(&messages, 1);
    real_changed(ud);
}

/* Changes made between two turns of the loop make one message, whatever
 * their number; a batch that undoes itself makes none. */
static void test_coalesced(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_plugin *p = new_plugin(ctx, "example.com/co", "co.sock", NULL);
    dispatch_for(ctx, 20);
    real_changed = p->table.cbs.changed;
    p->table.cbs.changed = count_changed;
    atomic_store(&messages, 0);
    char id[16];
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof(id), "c%d", i);
        kdp_device d = {.id = id, .health = KDP_HEALTHY};
        assert_int_equal(kdp_plugin_set_device(p, &d), 0);
    }
    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof(id), "c%d", i);
        assert_int_equal(kdp_plugin_remove_device(p, id), 0);
    }
    for (int i = 100; i < 150; i++) {
        snprintf(id, sizeof(id), "c%d", i);
        assert_int_equal(kdp_plugin_set_health(p, id, KDP_UNHEALTHY), 0);
    }
    assert_int_equal(atomic_load(&messages), 0); /* the loop has not run */
    assert_int_equal(served(ctx, p), 200);
    assert_int_equal(atomic_load(&messages), 1);
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    pthread_mutex_lock(&p->table.shared.mu);
    assert_int_equal(st.message_bytes, p->table.shared.bytes);
    pthread_mutex_unlock(&p->table.shared.mu);
    /* added then removed before the loop ran: nothing for the kubelet */
    kdp_device x = {.id = "x", .health = KDP_HEALTHY};
    assert_int_equal(kdp_plugin_set_device(p, &x), 0);
    assert_int_equal(kdp_plugin_remove_device(p, "x"), 0);
    assert_int_equal(served(ctx, p), 200);
    assert_int_equal(atomic_load(&messages), 1);
    /* past the queue's cap: the whole table is taken, still one message */
    for (int i = 0; i < 5000; i++) {
        snprintf(id, sizeof(id), "m%d", i);
        kdp_device d = {.id = id, .health = KDP_HEALTHY};
        assert_int_equal(kdp_plugin_set_device(p, &d), 0);
    }
    assert_int_equal(served(ctx, p), 5200);
    assert_int_equal(atomic_load(&messages), 2);
    kdp_ctx_free(ctx);
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
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    snprintf(dir, sizeof(dir), "/tmp/kdp-unit-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    alarm(60);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_free_plugin_with_running_job),
        cmocka_unit_test(test_destroy_once),
        cmocka_unit_test(test_added_after_stop),
        cmocka_unit_test(test_one_thread_runs_it),
        cmocka_unit_test(test_dispatch_owner),
        cmocka_unit_test(test_positive_return_fails),
        cmocka_unit_test(test_read_back),
        cmocka_unit_test(test_read_back_threads),
        cmocka_unit_test(test_single_changes),
        cmocka_unit_test(test_single_change_over_limit),
        cmocka_unit_test(test_changes_during_list),
        cmocka_unit_test(test_coalesced),
        cmocka_unit_test(test_post),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)!system(cmd);
    return r;
}
