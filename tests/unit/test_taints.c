/* SPDX-License-Identifier: MIT */
/* The author's taints: checked (each bad field refused), replaced per
 * device, their timeAdded kept while unchanged, taken by the loop on a
 * wakeup (one `changed` per batch), bounded; from another thread too. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dra/taints.h"

typedef struct world {
    kdp__loop *loop;
    kdp__dra_taints t;
    int changed;
} world;

static void on_changed(void *ud)
{
    ((world *)ud)->changed++;
}

static int setup(void **state)
{
    static world w;
    memset(&w, 0, sizeof(w));
    assert_int_equal(kdp__loop_new(&w.loop), 0);
    assert_int_equal(kdp__dra_taints_init(&w.t, w.loop, "gpu.example.com",
                                          "gpu.example.com/unhealthy", on_changed, &w),
                     0);
    *state = &w;
    return 0;
}

static int teardown(void **state)
{
    world *w = *state;
    kdp__dra_taints_done(&w->t);
    kdp__loop_free(w->loop);
    return 0;
}

/* Runs the loop until `changed` grew (or 2 s). */
static void settle(world *w)
{
    int before = w->changed;
    for (int i = 0; i < 200 && w->changed == before; i++) {
        (void)kdp__loop_dispatch(w->loop, 10);
    }
}

static void test_set_get_remove(void **state)
{
    world *w = *state;
    kdp_dra_taint t[2] = {
        {.key = "gpu.example.com/maintenance", .value = "fw", .effect = KDP_DRA_TAINT_NO_SCHEDULE},
        {.key = "inventory", .effect = KDP_DRA_TAINT_INFORMATIONAL},
    };
    assert_int_equal(kdp__dra_taints_set(&w->t, "gpu-1", t, 2), 0);
    assert_int_equal(kdp__dra_taints_set(&w->t, "gpu-0", t, 1), 0);
    kdp__slice_taint out[KDP_DRA_MAX_TAINTS];
    /* the loop's copy is taken on the wakeup, once for both calls */
    assert_int_equal(kdp__dra_taints_get(&w->t, "gpu-1", out, 8), 0);
    settle(w);
    assert_int_equal(w->changed, 1);
    assert_int_equal(kdp__dra_taints_get(&w->t, "gpu-1", out, 8), 2);
    assert_string_equal(out[0].key, "gpu.example.com/maintenance");
    assert_string_equal(out[0].value, "fw");
    assert_string_equal(out[0].effect, "NoSchedule");
    assert_null(out[1].value);
    assert_string_equal(out[1].effect, "None");
    assert_true(out[0].time_added > 0);
    assert_int_equal(kdp__dra_taints_get(&w->t, "gpu-1", out, 1), 1); /* capped */
    assert_int_equal(kdp__dra_taints_get(&w->t, "gpu-0", out, 8), 1);
    assert_int_equal(kdp__dra_taints_get(&w->t, "gpu-2", out, 8), 0);
    /* removed */
    assert_int_equal(kdp__dra_taints_set(&w->t, "gpu-1", NULL, 0), 0);
    assert_int_equal(kdp__dra_taints_set(&w->t, "gpu-9", NULL, 0), 0); /* none: fine */
    settle(w);
    assert_int_equal(kdp__dra_taints_get(&w->t, "gpu-1", out, 8), 0);
    assert_int_equal(kdp__dra_taints_get(&w->t, "gpu-0", out, 8), 1);
}

static void test_time_added_kept(void **state)
{
    world *w = *state;
    kdp_dra_taint a = {.key = "k", .value = "v", .effect = KDP_DRA_TAINT_NO_EXECUTE};
    assert_int_equal(kdp__dra_taints_set(&w->t, "d", &a, 1), 0);
    /* what the first call stamped, made old by hand (white box: the shared set) */
    w->t.shared.v[0].t[0].time_added = 1000;
    kdp_dra_taint two[2] = {a, {.key = "k2", .effect = KDP_DRA_TAINT_NO_SCHEDULE}};
    assert_int_equal(kdp__dra_taints_set(&w->t, "d", two, 2), 0);
    settle(w);
    kdp__slice_taint out[2];
    assert_int_equal(kdp__dra_taints_get(&w->t, "d", out, 2), 2);
    assert_int_equal(out[0].time_added, 1000); /* unchanged: kept */
    assert_true(out[1].time_added > 1000);     /* new: now */
    /* a changed value is a new taint */
    two[0].value = "other";
    assert_int_equal(kdp__dra_taints_set(&w->t, "d", two, 2), 0);
    settle(w);
    assert_int_equal(kdp__dra_taints_get(&w->t, "d", out, 2), 2);
    assert_true(out[0].time_added > 1000);
}

static void test_refused(void **state)
{
    world *w = *state;
    kdp_dra_taint ok = {.key = "k", .effect = KDP_DRA_TAINT_NO_SCHEDULE};
    static const struct {
        kdp_dra_taint t;
    } bad[] = {
        {{.key = NULL, .effect = KDP_DRA_TAINT_NO_SCHEDULE}},
        {{.key = "Bad Key", .effect = KDP_DRA_TAINT_NO_SCHEDULE}},
        {{.key = "gpu.example.com/unhealthy", .effect = KDP_DRA_TAINT_NO_SCHEDULE}},
        {{.key = "k", .value = "-x", .effect = KDP_DRA_TAINT_NO_SCHEDULE}},
        {{.key = "k", .effect = KDP_DRA_TAINT_NONE}},
        {{.key = "k", .effect = (kdp_dra_taint_effect)42}},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(kdp__dra_taints_set(&w->t, "d", &bad[i].t, 1), -EINVAL);
    }
    kdp_dra_taint twice[2] = {ok, ok};
    assert_int_equal(kdp__dra_taints_set(&w->t, "d", twice, 2), -EINVAL);
    twice[1].effect = KDP_DRA_TAINT_NO_EXECUTE; /* same key, other effect: fine */
    assert_int_equal(kdp__dra_taints_set(&w->t, "d", twice, 2), 0);
    kdp_dra_taint many[KDP_DRA_MAX_TAINTS + 1];
    for (size_t i = 0; i < KDP_DRA_MAX_TAINTS + 1; i++) {
        many[i] = ok;
    }
    assert_int_equal(kdp__dra_taints_set(&w->t, "d", many, KDP_DRA_MAX_TAINTS + 1), -EINVAL);
    assert_int_equal(kdp__dra_taints_set(&w->t, "d", NULL, 1), -EINVAL);
    assert_int_equal(kdp__dra_taints_set(&w->t, "", &ok, 1), -EINVAL);
    assert_int_equal(kdp__dra_taints_set(&w->t, NULL, &ok, 1), -EINVAL);
    /* a refusal changes nothing */
    settle(w);
    kdp__slice_taint out[2];
    assert_int_equal(kdp__dra_taints_get(&w->t, "d", out, 2), 2);
}

static void test_bounded(void **state)
{
    world *w = *state;
    kdp_dra_taint ok = {.key = "k", .effect = KDP_DRA_TAINT_NO_SCHEDULE};
    char id[32];
    for (int i = 0; i < KDP__DRA_TAINTED_MAX; i++) {
        snprintf(id, sizeof(id), "dev-%05d", i);
        assert_int_equal(kdp__dra_taints_set(&w->t, id, &ok, 1), 0);
    }
    assert_int_equal(kdp__dra_taints_set(&w->t, "one-more", &ok, 1), -ENOSPC);
    assert_int_equal(kdp__dra_taints_set(&w->t, "dev-00007", &ok, 1), 0); /* a replacement */
    assert_int_equal(kdp__dra_taints_set(&w->t, "dev-00007", NULL, 0), 0);
    assert_int_equal(kdp__dra_taints_set(&w->t, "one-more", &ok, 1), 0);
    settle(w);
    kdp__slice_taint out[1];
    assert_int_equal(kdp__dra_taints_get(&w->t, "dev-04095", out, 1), 1);
    assert_int_equal(kdp__dra_taints_get(&w->t, "dev-00007", out, 1), 0);
}

static void *from_thread(void *arg)
{
    world *w = arg;
    kdp_dra_taint ok = {.key = "k", .effect = KDP_DRA_TAINT_NO_SCHEDULE};
    char id[32];
    for (int i = 0; i < 200; i++) {
        snprintf(id, sizeof(id), "t-%d", i % 10);
        (void)kdp__dra_taints_set(&w->t, id, &ok, (size_t)(i % 2));
    }
    return NULL;
}

static void test_other_thread(void **state)
{
    world *w = *state;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, from_thread, w), 0);
    for (int i = 0; i < 50; i++) {
        (void)kdp__loop_dispatch(w->loop, 1);
    }
    pthread_join(th, NULL);
    for (int i = 0; i < 5; i++) { /* the last wakeup, if the loop has not taken it */
        (void)kdp__loop_dispatch(w->loop, 10);
    }
    kdp__slice_taint out[1];
    /* the last call for t-k: i = 190 + k, n = k % 2 */
    for (int k = 0; k < 10; k++) {
        char id[16];
        snprintf(id, sizeof(id), "t-%d", k);
        assert_int_equal(kdp__dra_taints_get(&w->t, id, out, 1), (size_t)(k % 2));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_set_get_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_added_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_thread, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
