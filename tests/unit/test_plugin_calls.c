/* SPDX-License-Identifier: MIT */
/*
 * The plugin's table calls (plugin_calls.c) without a kubelet: one device's
 * health and a snapshot read back, whole while another thread changes the
 * table; single changes and their refusals; changes made while the list op
 * runs; changes between two turns of the loop coalesced into one message.
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
#include <time.h>

#include "plugin/plugin_int.h" /* test_coalesced counts the table's messages */
#include "plugin_fixture.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_back),           cmocka_unit_test(test_read_back_threads),
        cmocka_unit_test(test_single_changes),      cmocka_unit_test(test_single_change_over_limit),
        cmocka_unit_test(test_changes_during_list), cmocka_unit_test(test_coalesced),
    };
    return run_in_dir(tests, sizeof(tests) / sizeof(tests[0]));
}
