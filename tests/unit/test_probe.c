/* SPDX-License-Identifier: MIT */
/*
 * Health checks: the hysteresis (N failures to Unhealthy, M successes back,
 * timeouts as failures, DOWN under both policies), the config's bounds, the
 * overlay of the probe's verdict on the author's health in the table (author
 * changes interleaved, replacement and whole tables keep the state, removal
 * drops it), the verdict as a single change with its undo, and rounds run by
 * a plugin on its own loop (no kubelet).
 */
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin/plugin_int.h"
#include "plugin/probe.h"
#include "plugin/tabops.h"

static char dir[64];

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const kdp__probe_cfg cfg32 = {
    .interval_ms = 1000, .unhealthy_after = 3, .healthy_after = 2, .down = 0};

/* ---- the hysteresis ---- */

static void test_step_n_and_m(void **state)
{
    (void)state;
    kdp__devprobe s = {0};
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32), KDP__PROBE_SAME);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32), KDP__PROBE_SAME);
    assert_false(s.bad);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32), KDP__PROBE_TURNED_UNHEALTHY);
    assert_true(s.bad);
    assert_int_equal(s.fails, 3);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32), KDP__PROBE_SAME);
    /* one success, then a failure: the successes start over */
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_OK, &cfg32), KDP__PROBE_SAME);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32), KDP__PROBE_SAME);
    assert_int_equal(s.oks, 0);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_OK, &cfg32), KDP__PROBE_SAME);
    assert_true(s.bad);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_OK, &cfg32), KDP__PROBE_TURNED_HEALTHY);
    assert_false(s.bad);
    assert_int_equal(s.fails, 0);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_OK, &cfg32), KDP__PROBE_SAME);
    /* two failures, one success: the failures start over */
    (void)kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32);
    (void)kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32);
    (void)kdp__probe_step(&s, KDP__PROBE_OK, &cfg32);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_FAIL, &cfg32), KDP__PROBE_SAME);
    assert_false(s.bad);
    /* N = M = 1: every answer turns it */
    kdp__probe_cfg one = {.interval_ms = 1000, .unhealthy_after = 1, .healthy_after = 1};
    kdp__devprobe t = {0};
    assert_int_equal(kdp__probe_step(&t, KDP__PROBE_FAIL, &one), KDP__PROBE_TURNED_UNHEALTHY);
    assert_int_equal(kdp__probe_step(&t, KDP__PROBE_OK, &one), KDP__PROBE_TURNED_HEALTHY);
}

static void test_flapping_never_turns(void **state)
{
    (void)state;
    kdp__probe_cfg c = {.interval_ms = 1000, .unhealthy_after = 2, .healthy_after = 2};
    kdp__devprobe s = {0};
    for (int i = 0; i < 1000; i++) {
        kdp__probe_answer a = i % 2 ? KDP__PROBE_OK : KDP__PROBE_FAIL;
        assert_int_equal(kdp__probe_step(&s, a, &c), KDP__PROBE_SAME);
    }
    assert_false(s.bad);
    /* and once Unhealthy, flapping keeps it so */
    (void)kdp__probe_step(&s, KDP__PROBE_FAIL, &c);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_FAIL, &c), KDP__PROBE_TURNED_UNHEALTHY);
    for (int i = 0; i < 1000; i++) {
        kdp__probe_answer a = i % 2 ? KDP__PROBE_FAIL : KDP__PROBE_OK;
        assert_int_equal(kdp__probe_step(&s, a, &c), KDP__PROBE_SAME);
    }
    assert_true(s.bad);
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(kdp__probe_classify(KDP_PROBE_HEALTHY), KDP__PROBE_OK);
    assert_int_equal(kdp__probe_classify(KDP_PROBE_UNHEALTHY), KDP__PROBE_FAIL);
    assert_int_equal(kdp__probe_classify(KDP_PROBE_DOWN), KDP__PROBE_DOWN);
    assert_int_equal(kdp__probe_classify(-ETIMEDOUT), KDP__PROBE_FAIL); /* a timeout */
    assert_int_equal(kdp__probe_classify(-EIO), KDP__PROBE_FAIL);
    assert_int_equal(kdp__probe_classify(3), KDP__PROBE_FAIL);
    assert_int_equal(kdp__probe_classify(-2), KDP__PROBE_FAIL); /* -ENOENT, not DOWN */
}

static void test_down_policies(void **state)
{
    (void)state;
    /* unhealthy: at once, and back only after M successes */
    kdp__devprobe s = {0};
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_DOWN, &cfg32), KDP__PROBE_TURNED_UNHEALTHY);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_DOWN, &cfg32), KDP__PROBE_SAME);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_OK, &cfg32), KDP__PROBE_SAME);
    /* down again mid-recovery: the successes start over */
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_DOWN, &cfg32), KDP__PROBE_SAME);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_OK, &cfg32), KDP__PROBE_SAME);
    assert_int_equal(kdp__probe_step(&s, KDP__PROBE_OK, &cfg32), KDP__PROBE_TURNED_HEALTHY);
    /* keep: DOWN counts neither way */
    kdp__probe_cfg keep = cfg32;
    keep.down = KDP_PROBE_DOWN_KEEP;
    kdp__devprobe k = {0};
    (void)kdp__probe_step(&k, KDP__PROBE_FAIL, &keep);
    (void)kdp__probe_step(&k, KDP__PROBE_FAIL, &keep);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(kdp__probe_step(&k, KDP__PROBE_DOWN, &keep), KDP__PROBE_SAME);
    }
    assert_int_equal(k.fails, 2);
    assert_false(k.bad);
    assert_int_equal(kdp__probe_step(&k, KDP__PROBE_FAIL, &keep), KDP__PROBE_TURNED_UNHEALTHY);
    (void)kdp__probe_step(&k, KDP__PROBE_OK, &keep);
    assert_int_equal(kdp__probe_step(&k, KDP__PROBE_DOWN, &keep), KDP__PROBE_SAME);
    assert_int_equal(k.oks, 1);
    assert_true(k.bad);
    assert_int_equal(kdp__probe_step(&k, KDP__PROBE_OK, &keep), KDP__PROBE_TURNED_HEALTHY);
}

static void test_config_bounds(void **state)
{
    (void)state;
    kdp_config c = {0};
    kdp__probe_cfg pc;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), 0);
    assert_int_equal(pc.interval_ms, 10000);
    assert_int_equal(pc.unhealthy_after, 3);
    assert_int_equal(pc.healthy_after, 2);
    assert_int_equal(pc.down, KDP_PROBE_DOWN_UNHEALTHY);
    c.probe_interval_ms = 99;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), -EINVAL);
    c.probe_interval_ms = 100;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), 0);
    c.probe_interval_ms = 86400001;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), -EINVAL);
    c.probe_interval_ms = 0;
    c.probe_unhealthy_after = 1001;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), -EINVAL);
    c.probe_unhealthy_after = 1000;
    c.probe_healthy_after = 1001;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), -EINVAL);
    c.probe_healthy_after = 1000;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), 0);
    c.probe_down = (kdp_probe_down_policy)7;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), -EINVAL);
    c.probe_down = KDP_PROBE_DOWN_KEEP;
    /* the probe's deadline: 1 s, or the callback deadline if shorter; never
     * longer than it */
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), 0);
    assert_int_equal(pc.timeout_ms, 1000);
    c.callback_timeout_ms = 300;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), 0);
    assert_int_equal(pc.timeout_ms, 300);
    c.probe_timeout_ms = 300;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), 0);
    assert_int_equal(pc.timeout_ms, 300);
    c.probe_timeout_ms = 301;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), -EINVAL);
    c.callback_timeout_ms = 0;
    c.probe_timeout_ms = 10000;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), 0);
    c.probe_timeout_ms = 10001;
    assert_int_equal(kdp__probe_cfg_from(&c, &pc), -EINVAL);
    /* kdp_plugin_new refuses them too */
    kdp_config bad = {.resource_name = "example.com/p",
                      .socket_name = "p.sock",
                      .device_plugin_dir = dir,
                      .probe_interval_ms = 50};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_plugin_new(NULL, &bad, NULL, NULL, &p), -EINVAL);
    assert_null(p);
    bad.probe_interval_ms = 0;
    bad.probe_healthy_after = 5000;
    assert_int_equal(kdp_plugin_new(NULL, &bad, NULL, NULL, &p), -EINVAL);
}

/* ---- the verdict as a single change ---- */

static void test_verdict_op_and_undo(void **state)
{
    (void)state;
    kdp__devtab t;
    kdp__devtab_init(&t);
    kdp_device a = {.id = "a", .health = KDP_HEALTHY};
    kdp_device b = {.id = "b", .health = KDP_UNHEALTHY};
    assert_int_equal(kdp__devtab_add(&t, &a, NULL), 0);
    assert_int_equal(kdp__devtab_add(&t, &b, NULL), 0);
    kdp__tabop ops[3] = {
        {.kind = KDP__TABOP_VERDICT, .id = strdup("a"), .bad = true},
        {.kind = KDP__TABOP_VERDICT, .id = strdup("b"), .bad = true}, /* the author's already */
        {.kind = KDP__TABOP_HEALTH, .id = strdup("a"), .health = KDP_UNHEALTHY},
    };
    kdp__tabundo undo[3];
    assert_int_equal(kdp__tabops_apply(&t, ops, 3, undo), 0);
    assert_true(undo[0].did && undo[0].visible);
    assert_int_equal(undo[0].new_health, KDP_UNHEALTHY);
    assert_true(undo[1].did);
    assert_false(undo[1].visible); /* Unhealthy either way */
    assert_true(undo[2].did);
    assert_false(undo[2].visible); /* the probe holds it Unhealthy already */
    const kdp__dev *da = kdp__devtab_find(&t, "a");
    assert_int_equal(da->health, KDP_UNHEALTHY);
    assert_int_equal(da->author_health, KDP_UNHEALTHY);
    assert_true(da->probe.bad);
    kdp__tabops_undo(&t, undo, 3);
    kdp__tabundo_free(undo, 3);
    da = kdp__devtab_find(&t, "a");
    assert_int_equal(da->health, KDP_HEALTHY);
    assert_int_equal(da->author_health, KDP_HEALTHY);
    assert_false(da->probe.bad);
    assert_false(kdp__devtab_find(&t, "b")->probe.bad);
    assert_int_equal(kdp__devtab_find(&t, "b")->health, KDP_UNHEALTHY);
    /* a copy keeps the state */
    assert_int_equal(kdp__devtab_set_verdict(&t, "a", true), 1);
    assert_int_equal(kdp__devtab_set_verdict(&t, "a", true), 0);
    assert_int_equal(kdp__devtab_set_verdict(&t, "zz", true), -ENOENT);
    kdp__devtab c;
    kdp__devtab_init(&c);
    assert_int_equal(kdp__devtab_copy(&c, &t), 0);
    assert_true(kdp__devtab_find(&c, "a")->probe.bad);
    assert_int_equal(kdp__devtab_find(&c, "a")->health, KDP_UNHEALTHY);
    kdp__devtab_clear(&c);
    kdp__devtab_clear(&t);
}

/* ---- the overlay, through a plugin's table ---- */

static int dummy_probe(kdp_plugin *p, const kdp_device *d, void *ud)
{
    (void)p;
    (void)d;
    (void)ud;
    return KDP_PROBE_HEALTHY;
}

static kdp_plugin *new_plugin(kdp_ctx *ctx, const char *res, const char *sock, const kdp_ops *ops,
                              unsigned interval_ms, kdp_probe_down_policy down)
{
    kdp_config cfg = {.resource_name = res,
                      .socket_name = sock,
                      .device_plugin_dir = dir,
                      .callback_timeout_ms = 2000,
                      .probe_timeout_ms = 150, /* the probe's own deadline applies */
                      .probe_interval_ms = interval_ms,
                      .probe_unhealthy_after = 3,
                      .probe_healthy_after = 2,
                      .probe_down = down};
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

static kdp_health health_of(kdp_plugin *p, const char *id)
{
    kdp_health h = (kdp_health)-1;
    assert_int_equal(kdp_plugin_get_health(p, id, &h), 0);
    return h;
}

static int answer(kdp_plugin *p, const char *id, kdp__probe_answer a)
{
    kdp__devprobe st;
    return kdp__tabshared_probe_result(&p->table.shared, id, a, &p->prober.cfg, &st);
}

/* What the kubelet is told of id, after the loop took the changes. */
static kdp_health told(kdp_ctx *ctx, kdp_plugin *p, const char *id)
{
    for (int i = 0; i < 3; i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
    }
    const kdp__dev *d = kdp__devtab_find(kdp__table_told(&p->table), id);
    assert_non_null(d);
    return d->health;
}

static unsigned held(kdp_plugin *p)
{
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    return st.probe_unhealthy;
}

static void test_overlay(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.probe = dummy_probe};
    /* a day between rounds: the first one (an empty table) is all there is */
    kdp_plugin *p = new_plugin(ctx, "example.com/ov", "ov.sock", &ops, 86400000, 0);
    dispatch_for(ctx, 50);
    assert_true(p->prober.serving);
    assert_null(p->prober.round); /* the first round (no device) is over */
    kdp_device devs[] = {{.id = "a", .health = KDP_HEALTHY}, {.id = "b", .health = KDP_HEALTHY}};
    assert_int_equal(kdp_plugin_set_devices(p, devs, 2), 0);
    assert_int_equal(told(ctx, p, "a"), KDP_HEALTHY);
    /* N failures */
    assert_int_equal(answer(p, "a", KDP__PROBE_FAIL), KDP__PROBE_SAME);
    assert_int_equal(answer(p, "a", KDP__PROBE_FAIL), KDP__PROBE_SAME);
    assert_int_equal(health_of(p, "a"), KDP_HEALTHY);
    assert_int_equal(answer(p, "a", KDP__PROBE_FAIL), KDP__PROBE_TURNED_UNHEALTHY);
    assert_int_equal(health_of(p, "a"), KDP_UNHEALTHY);
    assert_int_equal(told(ctx, p, "a"), KDP_UNHEALTHY);
    assert_int_equal(held(p), 1);
    kdp_device *all = NULL;
    size_t n = 0;
    assert_int_equal(kdp_plugin_get_devices(p, &all, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(all[0].id, "a");
    assert_int_equal(all[0].health, KDP_UNHEALTHY);
    free(all);
    /* the author's changes: kept, hidden while the probe holds it */
    assert_int_equal(kdp_plugin_set_health(p, "a", KDP_HEALTHY), 0);
    assert_int_equal(health_of(p, "a"), KDP_UNHEALTHY);
    assert_int_equal(kdp_plugin_set_health(p, "a", KDP_UNHEALTHY), 0);
    assert_int_equal(kdp_plugin_set_health(p, "b", KDP_UNHEALTHY), 0);
    assert_int_equal(told(ctx, p, "b"), KDP_UNHEALTHY);
    /* the probe's verdict back to Healthy: the author's Unhealthy stays */
    assert_int_equal(answer(p, "a", KDP__PROBE_OK), KDP__PROBE_SAME);
    assert_int_equal(answer(p, "a", KDP__PROBE_OK), KDP__PROBE_TURNED_HEALTHY);
    assert_int_equal(health_of(p, "a"), KDP_UNHEALTHY);
    assert_int_equal(held(p), 0);
    assert_int_equal(kdp_plugin_set_health(p, "a", KDP_HEALTHY), 0);
    assert_int_equal(health_of(p, "a"), KDP_HEALTHY);
    assert_int_equal(told(ctx, p, "a"), KDP_HEALTHY);
    /* a replacement (same ID) keeps the verdict, so does a whole table */
    for (int i = 0; i < 3; i++) {
        (void)answer(p, "a", KDP__PROBE_FAIL);
    }
    kdp_device a2 = {.id = "a", .health = KDP_HEALTHY, .host_path = "/dev/a2"};
    assert_int_equal(kdp_plugin_set_device(p, &a2), 0);
    assert_int_equal(health_of(p, "a"), KDP_UNHEALTHY);
    assert_int_equal(told(ctx, p, "a"), KDP_UNHEALTHY);
    kdp_device three[] = {{.id = "a", .health = KDP_HEALTHY},
                          {.id = "b", .health = KDP_HEALTHY},
                          {.id = "c", .health = KDP_HEALTHY}};
    assert_int_equal(kdp_plugin_set_devices(p, three, 3), 0);
    assert_int_equal(health_of(p, "a"), KDP_UNHEALTHY);
    assert_int_equal(health_of(p, "b"), KDP_HEALTHY); /* the author's new health */
    assert_int_equal(health_of(p, "c"), KDP_HEALTHY); /* new: Healthy, no probe yet */
    assert_int_equal(told(ctx, p, "a"), KDP_UNHEALTHY);
    assert_int_equal(held(p), 1);
    /* two failures of c, then c removed and added again: its state is gone */
    (void)answer(p, "c", KDP__PROBE_FAIL);
    (void)answer(p, "c", KDP__PROBE_FAIL);
    assert_int_equal(kdp_plugin_remove_device(p, "c"), 0);
    assert_int_equal(answer(p, "c", KDP__PROBE_FAIL), -ENOENT);
    assert_int_equal(kdp_plugin_set_device(p, &three[2]), 0);
    assert_int_equal(answer(p, "c", KDP__PROBE_FAIL), KDP__PROBE_SAME);
    assert_int_equal(health_of(p, "c"), KDP_HEALTHY);
    /* a removed Unhealthy device: no longer counted, back Healthy when added */
    assert_int_equal(kdp_plugin_remove_device(p, "a"), 0);
    assert_int_equal(held(p), 0);
    assert_int_equal(kdp_plugin_set_device(p, &three[0]), 0);
    assert_int_equal(health_of(p, "a"), KDP_HEALTHY);
    assert_int_equal(told(ctx, p, "a"), KDP_HEALTHY);
    /* DOWN (the default policy): every device at once */
    assert_int_equal(kdp__tabshared_probe_all(&p->table.shared, KDP__PROBE_DOWN, &p->prober.cfg),
                     3);
    assert_int_equal(held(p), 3);
    assert_int_equal(told(ctx, p, "a"), KDP_UNHEALTHY);
    assert_int_equal(told(ctx, p, "b"), KDP_UNHEALTHY);
    assert_int_equal(told(ctx, p, "c"), KDP_UNHEALTHY);
    pthread_mutex_lock(&p->table.shared.mu);
    assert_int_equal(p->table.shared.bytes, kdp__devtab_encoded_size_replicas(
                                                &p->table.shared.devs, p->table.shared.replicas));
    pthread_mutex_unlock(&p->table.shared.mu);
    kdp_ctx_free(ctx);
}

/* A list op that waits, the second time, until released. */
static atomic_int list_calls;
static atomic_bool list_entered;
static atomic_bool list_release;

static int gated_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    (void)ud;
    if (atomic_fetch_add(&list_calls, 1) > 0) {
        atomic_store(&list_entered, true);
        for (int i = 0; i < 2000 && !atomic_load(&list_release); i++) {
            sleep_ms(1);
        }
    }
    kdp_device a = {.id = "a", .health = KDP_HEALTHY};
    return kdp_device_list_add(out, &a);
}

/* A device replaced while a list runs (the change kept for the list's
 * result, with the verdict of that moment), then turned Healthy again by
 * the probe before the list returns: the list's result takes the verdict
 * of now, and the health that makes, not the replacement's old Unhealthy. */
static void test_verdict_across_list(void **state)
{
    (void)state;
    atomic_store(&list_calls, 0);
    atomic_store(&list_entered, false);
    atomic_store(&list_release, false);
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.list = gated_list, .probe = dummy_probe};
    kdp_plugin *p = new_plugin(ctx, "example.com/vl", "vl.sock", &ops, 86400000, 0);
    dispatch_for(ctx, 50);
    assert_int_equal(told(ctx, p, "a"), KDP_HEALTHY);
    for (int i = 0; i < 3; i++) {
        (void)answer(p, "a", KDP__PROBE_FAIL);
    }
    assert_int_equal(told(ctx, p, "a"), KDP_UNHEALTHY);
    assert_int_equal(kdp_plugin_rescan(p), 0);
    for (int i = 0; i < 400 && !atomic_load(&list_entered); i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        sleep_ms(5);
    }
    assert_true(atomic_load(&list_entered));
    kdp_device a2 = {.id = "a", .health = KDP_HEALTHY, .host_path = "/dev/a2"};
    assert_int_equal(kdp_plugin_set_device(p, &a2), 0);
    assert_int_equal(answer(p, "a", KDP__PROBE_OK), KDP__PROBE_SAME);
    assert_int_equal(answer(p, "a", KDP__PROBE_OK), KDP__PROBE_TURNED_HEALTHY);
    assert_int_equal(health_of(p, "a"), KDP_HEALTHY);
    atomic_store(&list_release, true);
    for (int i = 0; i < 400 && atomic_load(&list_calls) < 2; i++) {
        sleep_ms(1);
    }
    dispatch_for(ctx, 100);
    assert_int_equal(held(p), 0);
    assert_int_equal(health_of(p, "a"), KDP_HEALTHY);
    assert_int_equal(told(ctx, p, "a"), KDP_HEALTHY);
    pthread_mutex_lock(&p->table.shared.mu);
    assert_int_equal(p->table.shared.bytes, kdp__devtab_encoded_size_replicas(
                                                &p->table.shared.devs, p->table.shared.replicas));
    pthread_mutex_unlock(&p->table.shared.mu);
    kdp_ctx_free(ctx);
}

/* ---- rounds on the plugin's loop ---- */

#define N_DEV 3
static const char *ids[N_DEV] = {"r0", "r1", "r2"};
static atomic_int answers[N_DEV]; /* what each device's probe returns; 99: hang */
static atomic_int calls[N_DEV];
static atomic_int in_probe;
static atomic_int max_in_probe;

static int scripted_probe(kdp_plugin *p, const kdp_device *d, void *ud)
{
    (void)ud;
    int i = d->id[1] - '0';
    atomic_fetch_add(&calls[i], 1);
    int now = atomic_fetch_add(&in_probe, 1) + 1;
    int max = atomic_load(&max_in_probe);
    while (now > max && !atomic_compare_exchange_weak(&max_in_probe, &max, now)) {
    }
    int a = atomic_load(&answers[i]);
    if (a == 99) {
        atomic_fetch_sub(&in_probe, 1);
        sleep_ms(400); /* past the probe's 150 ms deadline */
        return KDP_PROBE_HEALTHY;
    }
    if (a != KDP_PROBE_HEALTHY) {
        kdp_plugin_set_error(p, "scripted %d", a);
    }
    atomic_fetch_sub(&in_probe, 1);
    return a;
}

/* Dispatches until told(id) is h, at most ms; returns whether it became so. */
static bool wait_told(kdp_ctx *ctx, kdp_plugin *p, const char *id, kdp_health h, int ms)
{
    for (int i = 0; i < ms / 5; i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        const kdp__dev *d = kdp__devtab_find(kdp__table_told(&p->table), id);
        if (d && d->health == h) {
            return true;
        }
        sleep_ms(5);
    }
    return false;
}

static void test_rounds(void **state)
{
    (void)state;
    for (int i = 0; i < N_DEV; i++) {
        atomic_store(&answers[i], KDP_PROBE_HEALTHY);
        atomic_store(&calls[i], 0);
    }
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.probe = scripted_probe};
    kdp_plugin *p = new_plugin(ctx, "example.com/rounds", "rounds.sock", &ops, 100, 0);
    kdp_device devs[N_DEV];
    for (int i = 0; i < N_DEV; i++) {
        devs[i] = (kdp_device){.id = ids[i], .health = KDP_HEALTHY};
    }
    assert_int_equal(kdp_plugin_set_devices(p, devs, N_DEV), 0);
    dispatch_for(ctx, 350);
    for (int i = 0; i < N_DEV; i++) {
        assert_true(atomic_load(&calls[i]) >= 2); /* a round per 100 ms */
    }
    assert_int_equal(atomic_load(&max_in_probe), 1); /* one at a time */
    /* failures: Unhealthy after 3 of them */
    int before = atomic_load(&calls[1]);
    atomic_store(&answers[1], KDP_PROBE_UNHEALTHY);
    assert_true(wait_told(ctx, p, "r1", KDP_UNHEALTHY, 3000));
    assert_true(atomic_load(&calls[1]) - before >= 3);
    assert_int_equal(told(ctx, p, "r0"), KDP_HEALTHY);
    atomic_store(&answers[1], KDP_PROBE_HEALTHY);
    assert_true(wait_told(ctx, p, "r1", KDP_HEALTHY, 3000));
    /* a probe past its deadline is a failure */
    atomic_store(&answers[2], 99);
    assert_true(wait_told(ctx, p, "r2", KDP_UNHEALTHY, 5000));
    assert_true(kdp__probe_stat(&p->prober.stats.timeouts) >= 3);
    atomic_store(&answers[2], KDP_PROBE_HEALTHY);
    assert_true(wait_told(ctx, p, "r2", KDP_HEALTHY, 5000));
    /* DOWN: every device at once; back after the successes */
    atomic_store(&answers[0], KDP_PROBE_DOWN);
    assert_true(wait_told(ctx, p, "r0", KDP_UNHEALTHY, 3000));
    assert_int_equal(told(ctx, p, "r1"), KDP_UNHEALTHY);
    assert_int_equal(told(ctx, p, "r2"), KDP_UNHEALTHY);
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    assert_true(st.probe_down);
    assert_int_equal(st.probe_unhealthy, N_DEV);
    atomic_store(&answers[0], KDP_PROBE_HEALTHY);
    for (int i = 0; i < N_DEV; i++) {
        assert_true(wait_told(ctx, p, ids[i], KDP_HEALTHY, 3000));
    }
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    assert_false(st.probe_down);
    assert_int_equal(st.probe_unhealthy, 0);
    assert_true(kdp__probe_stat(&p->prober.stats.down_answers) >= 1);
    assert_true(kdp__probe_stat(&p->prober.stats.to_unhealthy) >= 2 + N_DEV);
    kdp_ctx_free(ctx);
}

/* keep: DOWN answers change nothing */
static void test_rounds_down_keep(void **state)
{
    (void)state;
    for (int i = 0; i < N_DEV; i++) {
        atomic_store(&answers[i], KDP_PROBE_HEALTHY);
    }
    atomic_store(&answers[1], KDP_PROBE_UNHEALTHY);
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.probe = scripted_probe};
    kdp_plugin *p =
        new_plugin(ctx, "example.com/keep", "keep.sock", &ops, 100, KDP_PROBE_DOWN_KEEP);
    kdp_device devs[N_DEV];
    for (int i = 0; i < N_DEV; i++) {
        devs[i] = (kdp_device){.id = ids[i], .health = KDP_HEALTHY};
    }
    assert_int_equal(kdp_plugin_set_devices(p, devs, N_DEV), 0);
    assert_true(wait_told(ctx, p, "r1", KDP_UNHEALTHY, 3000));
    for (int i = 0; i < N_DEV; i++) {
        atomic_store(&answers[i], KDP_PROBE_DOWN);
    }
    dispatch_for(ctx, 500);
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    assert_true(st.probe_down);
    assert_int_equal(st.probe_unhealthy, 1);
    assert_int_equal(told(ctx, p, "r0"), KDP_HEALTHY);
    assert_int_equal(told(ctx, p, "r1"), KDP_UNHEALTHY);
    for (int i = 0; i < N_DEV; i++) {
        atomic_store(&answers[i], KDP_PROBE_HEALTHY);
    }
    assert_true(wait_told(ctx, p, "r1", KDP_HEALTHY, 3000));
    kdp_ctx_free(ctx);
}

/* ---- probes and author changes from another thread, at once ---- */

static atomic_uint chaos;
static atomic_bool frozen;

static int chaotic_probe(kdp_plugin *p, const kdp_device *d, void *ud)
{
    (void)p;
    (void)d;
    (void)ud;
    if (atomic_load(&frozen)) {
        return KDP_PROBE_HEALTHY;
    }
    unsigned n = (atomic_fetch_add(&chaos, 1) * 2654435761U) >> 16;
    static const int answers_of[8] = {
        KDP_PROBE_HEALTHY, KDP_PROBE_HEALTHY,   KDP_PROBE_HEALTHY, KDP_PROBE_UNHEALTHY, -EIO,
        KDP_PROBE_HEALTHY, KDP_PROBE_UNHEALTHY, KDP_PROBE_DOWN};
    return answers_of[n % 8];
}

#define N_CHAOS 20

/* cmocka asserts only on the test's thread: errors are counted here */
static atomic_int author_errors;

static void *author_thread(void *arg)
{
    kdp_plugin *p = arg;
    char cids[N_CHAOS][8];
    kdp_device devs[N_CHAOS];
    for (int i = 0; i < N_CHAOS; i++) {
        snprintf(cids[i], sizeof(cids[i]), "c%d", i);
    }
    for (unsigned k = 0; k < 400; k++) {
        unsigned r = k * 2246822519U;
        const char *id = cids[(r >> 8) % N_CHAOS];
        if (k % 50 == 0) {
            for (int i = 0; i < N_CHAOS; i++) {
                devs[i] = (kdp_device){.id = cids[i], .health = (kdp_health)((r >> i) & 1)};
            }
            if (kdp_plugin_set_devices(p, devs, N_CHAOS - (k % 100 == 0)) != 0) {
                atomic_fetch_add(&author_errors, 1);
            }
        } else if (k % 7 == 0) {
            (void)kdp_plugin_remove_device(p, id);
        } else if (k % 5 == 0) {
            kdp_device d = {.id = id, .health = (kdp_health)((r >> 4) & 1)};
            if (kdp_plugin_set_device(p, &d) != 0) {
                atomic_fetch_add(&author_errors, 1);
            }
        } else {
            (void)kdp_plugin_set_health(p, id, (kdp_health)((r >> 5) & 1));
        }
        sleep_ms(2);
    }
    return NULL;
}

static void test_overlay_threads(void **state)
{
    (void)state;
    atomic_store(&frozen, false);
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    kdp_ops ops = {.probe = chaotic_probe};
    kdp_config cfg = {.resource_name = "example.com/chaos",
                      .socket_name = "chaos.sock",
                      .device_plugin_dir = dir,
                      .callback_timeout_ms = 500,
                      .probe_interval_ms = 100,
                      .probe_unhealthy_after = 1,
                      .probe_healthy_after = 1};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_plugin_new(ctx, &cfg, &ops, NULL, &p), 0);
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, author_thread, p), 0);
    dispatch_for(ctx, 1000);
    pthread_join(tid, NULL);
    assert_int_equal(atomic_load(&author_errors), 0);
    assert_true(kdp__probe_stat(&p->prober.stats.to_unhealthy) > 0);
    /* every device healthy for the probe, every author's health set Healthy:
     * after a round, the kubelet's view, the shared table and the counts agree */
    atomic_store(&frozen, true);
    kdp_device *all = NULL;
    size_t n = 0;
    assert_int_equal(kdp_plugin_get_devices(p, &all, &n), 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(kdp_plugin_set_health(p, all[i].id, KDP_HEALTHY), 0);
    }
    free(all);
    dispatch_for(ctx, 400);
    pthread_mutex_lock(&p->table.shared.mu);
    assert_int_equal(p->table.shared.bytes, kdp__devtab_encoded_size_replicas(
                                                &p->table.shared.devs, p->table.shared.replicas));
    assert_int_equal(p->table.shared.probe_bad, 0);
    assert_true(kdp__devtab_same_for_kubelet(&p->table.shared.devs, kdp__table_told(&p->table)));
    assert_int_equal(kdp__devtab_count_healthy(kdp__table_told(&p->table)), n);
    pthread_mutex_unlock(&p->table.shared.mu);
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(p, &st), 0);
    assert_int_equal(st.probe_unhealthy, 0);
    assert_false(st.probe_down);
    kdp_ctx_free(ctx);
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
        cmocka_unit_test(test_step_n_and_m),
        cmocka_unit_test(test_flapping_never_turns),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_down_policies),
        cmocka_unit_test(test_config_bounds),
        cmocka_unit_test(test_verdict_op_and_undo),
        cmocka_unit_test(test_overlay),
        cmocka_unit_test(test_rounds),
        cmocka_unit_test(test_rounds_down_keep),
        cmocka_unit_test(test_overlay_threads),
        cmocka_unit_test(test_verdict_across_list),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)!system(cmd);
    return r;
}
