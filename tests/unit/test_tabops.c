/* SPDX-License-Identifier: MIT */
/*
 * Single changes to a device table: applied in order, taken back exactly
 * (undo restores every field and the index), replayed on a fresh table, and
 * a queue that never grows past its cap.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdp.h"
#include "plugin/devices.h"
#include "plugin/tabops.h"

static kdp__tabop op_put(const char *id, kdp_health h, const char *host_path)
{
    kdp_device d = {.id = id, .health = h, .host_path = host_path};
    kdp__tabop op = {.kind = KDP__TABOP_PUT};
    assert_int_equal(kdp__dev_from_public(&op.dev, &d, NULL), 0);
    return op;
}

static kdp__tabop op_id(kdp__tabop_kind kind, const char *id, kdp_health h)
{
    kdp__tabop op = {.kind = kind, .id = strdup(id), .health = h};
    assert_non_null(op.id);
    return op;
}

static void table_of(kdp__devtab *t, size_t n)
{
    kdp__devtab_init(t);
    char id[16];
    for (size_t i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "d%zu", i);
        kdp_device d = {.id = id, .health = KDP_HEALTHY, .host_path = "/dev/null"};
        assert_int_equal(kdp__devtab_add(t, &d, NULL), 0);
    }
}

/* a and b hold the same devices, host paths included, each where the index
 * says. */
static void assert_same(const kdp__devtab *a, const kdp__devtab *b)
{
    assert_true(kdp__devtab_same_for_kubelet(a, b));
    for (size_t i = 0; i < a->n; i++) {
        const kdp__dev *o = kdp__devtab_find(b, a->devs[i].id);
        assert_non_null(o);
        assert_true((o->host_path == NULL) == (a->devs[i].host_path == NULL));
        if (o->host_path) {
            assert_string_equal(o->host_path, a->devs[i].host_path);
        }
        assert_ptr_equal(kdp__devtab_find(a, a->devs[i].id), &a->devs[i]);
    }
}

static void test_apply_and_log(void **state)
{
    (void)state;
    kdp__devtab t;
    table_of(&t, 3);
    kdp__tabop ops[] = {
        op_put("new", KDP_HEALTHY, NULL),                 /* added */
        op_put("d0", KDP_HEALTHY, "/dev/zero"),           /* replaced, same for the kubelet */
        op_put("d1", KDP_UNHEALTHY, NULL),                /* replaced, health changed */
        op_id(KDP__TABOP_REMOVE, "d2", KDP_HEALTHY),      /* removed */
        op_id(KDP__TABOP_REMOVE, "nope", KDP_HEALTHY),    /* nothing */
        op_id(KDP__TABOP_HEALTH, "new", KDP_UNHEALTHY),   /* health */
        op_id(KDP__TABOP_HEALTH, "new", KDP_UNHEALTHY),   /* already so */
        op_id(KDP__TABOP_HEALTH, "missing", KDP_HEALTHY), /* nothing */
    };
    enum { N = sizeof(ops) / sizeof(ops[0]) };
    kdp__tabundo undo[N];
    assert_int_equal(kdp__tabops_apply(&t, ops, N, undo), 0);
    bool did[N] = {true, true, true, true, false, true, false, false};
    bool visible[N] = {true, false, true, true, false, true, false, false};
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(undo[i].did, did[i]);
        assert_int_equal(undo[i].visible, visible[i]);
        assert_non_null(undo[i].id);
    }
    assert_string_equal(undo[0].id, "new");
    assert_false(undo[0].had);
    assert_true(undo[2].had);
    assert_int_equal(undo[2].old.health, KDP_HEALTHY);
    assert_int_equal(undo[2].new_health, KDP_UNHEALTHY);
    assert_string_equal(undo[3].old.id, "d2");
    assert_int_equal(undo[5].old_health, KDP_HEALTHY);
    assert_int_equal(t.n, 3);
    assert_string_equal(kdp__devtab_find(&t, "d0")->host_path, "/dev/zero");
    assert_int_equal(kdp__devtab_find(&t, "d1")->health, KDP_UNHEALTHY);
    assert_null(kdp__devtab_find(&t, "d2"));
    assert_int_equal(kdp__devtab_find(&t, "new")->health, KDP_UNHEALTHY);
    kdp__tabundo_free(undo, N);
    kdp__devtab_clear(&t);
}

/* Random batches applied then taken back: the table is as it was, fields
 * and index; the same batch replayed on a copy gives what apply gave. */
static void test_undo_restores(void **state)
{
    (void)state;
    enum { DEVS = 300, BATCH = 200, ROUNDS = 60 };
    kdp__devtab t;
    table_of(&t, DEVS / 2);
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    kdp__tabop *ops = calloc(BATCH, sizeof(*ops));
    kdp__tabop *again = calloc(BATCH, sizeof(*again));
    kdp__tabundo *undo = calloc(BATCH, sizeof(*undo));
    assert_non_null(ops);
    assert_non_null(again);
    assert_non_null(undo);
    char id[16];
    for (int round = 0; round < ROUNDS; round++) {
        kdp__devtab before;
        kdp__devtab_init(&before);
        assert_int_equal(kdp__devtab_copy(&before, &t), 0);
        size_t n = 1 + (size_t)(x % BATCH);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            snprintf(id, sizeof(id), "d%u", (unsigned)(x % DEVS));
            kdp_health h = (x >> 20) & 1 ? KDP_UNHEALTHY : KDP_HEALTHY;
            switch ((x >> 32) % 3) {
            case 0:
                ops[i] = op_put(id, h, (x >> 40) & 1 ? "/dev/a" : NULL);
                break;
            case 1:
                ops[i] = op_id(KDP__TABOP_REMOVE, id, h);
                break;
            default:
                ops[i] = op_id(KDP__TABOP_HEALTH, id, h);
                break;
            }
            assert_int_equal(kdp__tabop_dup(&again[i], &ops[i]), 0);
        }
        assert_int_equal(kdp__tabops_apply(&t, ops, n, undo), 0);
        kdp__devtab after;
        kdp__devtab_init(&after);
        assert_int_equal(kdp__devtab_copy(&after, &t), 0);
        kdp__tabops_undo(&t, undo, n);
        kdp__tabundo_free(undo, n);
        assert_int_equal(t.n, before.n);
        assert_same(&t, &before);
        /* the same ops replayed give what apply gave */
        kdp__tabops q = {.v = again, .n = n, .cap = BATCH};
        kdp__devtab replayed;
        kdp__devtab_init(&replayed);
        assert_int_equal(kdp__devtab_copy(&replayed, &before), 0);
        assert_int_equal(kdp__tabops_replay(&replayed, &q), 0);
        assert_same(&replayed, &after);
        again = calloc(BATCH, sizeof(*again)); /* the replay freed the queue */
        assert_non_null(again);
        /* keep every other round's result, so the table drifts */
        if (round % 2) {
            kdp__devtab_move(&t, &after);
        }
        kdp__devtab_clear(&after);
        kdp__devtab_clear(&replayed);
        kdp__devtab_clear(&before);
    }
    free(ops);
    free(again);
    free(undo);
    kdp__devtab_clear(&t);
}

static void test_queue_cap(void **state)
{
    (void)state;
    kdp__tabops q = {0};
    for (size_t i = 0; i < KDP__TABOPS_MAX; i++) {
        kdp__tabop op = op_id(KDP__TABOP_REMOVE, "x", KDP_HEALTHY);
        kdp__tabops_push(&q, &op);
        assert_null(op.id); /* taken */
    }
    assert_int_equal(q.n, KDP__TABOPS_MAX);
    assert_false(q.lost);
    kdp__tabop op = op_put("one-too-many", KDP_HEALTHY, NULL);
    kdp__tabops_push(&q, &op);
    assert_true(q.lost);
    assert_int_equal(q.n, 0); /* what is lost is dropped: memory back */
    op = op_id(KDP__TABOP_HEALTH, "y", KDP_HEALTHY);
    kdp__tabops_push(&q, &op);
    assert_int_equal(q.n, 0);
    kdp__tabops_clear(&q);
    assert_false(q.lost);
    op = op_id(KDP__TABOP_HEALTH, "y", KDP_HEALTHY);
    kdp__tabops_push(&q, &op);
    assert_int_equal(q.n, 1);
    kdp__tabops_clear(&q);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_and_log),
        cmocka_unit_test(test_undo_restores),
        cmocka_unit_test(test_queue_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
