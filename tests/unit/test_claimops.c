/* SPDX-License-Identifier: MIT */
/* claimops: the claim operations' state machine on a real loop and real
 * slots, the API server and the table stood in for by the test: order on
 * one claim, claims side by side (and one at a time by default), a claim
 * recorded in this boot and in an earlier one, an unprepare of a claim
 * never prepared, a read that fails, a device that is not healthy, a
 * callback past its bound keeping its claim busy, an answer no longer
 * wanted. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dra/claimops.h"

#define BOOT_A    "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
#define BOOT_B    "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
#define MAX_ANS   16
#define MAX_READS 16

typedef struct answer {
    bool done;
    bool ok;
    char err[300];
    int seq; /* the order answers came in */
} answer;

typedef struct pending_read {
    bool used;
    char uid[64];
    char ns[32];
    char name[32];
    kdp__cop_read_cb cb;
    void *cb_ud;
} pending_read;

typedef struct world {
    kdp__loop *loop;
    char dir[64];
    char cdi[96];
    kdp__ckpt *ckpt;
    kdp__abandoned *ab;
    kdp__cj_env *env;
    kdp__dra_claims c;
    bool made;
    pending_read reads[MAX_READS];
    int n_reads;
    bool read_fails;
    answer ans[MAX_ANS];
    int seq;
    unsigned ended;
    unsigned ended_rec;       /* ... with the claim's record */
    unsigned ended_unprepare; /* ... an unprepare's record, its UID u1 */
    unsigned prepare_ms;
    atomic_int prepares, unprepares, running, max_running;
} world;

static world W;

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* ---- the author's ops (the slots' threads) ---- */

static int prepare(kdp_plugin *p, const kdp_dra_claim *c, kdp_dra_prepared *out, void *ud)
{
    (void)p;
    (void)c;
    (void)out;
    world *w = ud;
    int now = atomic_fetch_add(&w->running, 1) + 1;
    int max = atomic_load(&w->max_running);
    while (now > max && !atomic_compare_exchange_weak(&w->max_running, &max, now)) {
    }
    sleep_ms(w->prepare_ms);
    atomic_fetch_add(&w->prepares, 1);
    atomic_fetch_sub(&w->running, 1);
    return 0;
}

static int unprepare(kdp_plugin *p, const kdp_dra_claim *c, void *ud)
{
    (void)p;
    (void)c;
    atomic_fetch_add(&((world *)ud)->unprepares, 1);
    return 0;
}

/* ---- the API server and the table, stood in for ---- */

static int read_claim(void *ud, const kdp_dra_claim_ref *ref, kdp__cop_read_cb cb, void *cb_ud,
                      void **handle, char *why, size_t len)
{
    world *w = ud;
    if (w->read_fails) {
        snprintf(why, len, "cannot read claim %s/%s: connection refused", ref->ns, ref->name);
        return -ECONNREFUSED;
    }
    assert_true(w->n_reads < MAX_READS);
    pending_read *r = &w->reads[w->n_reads++];
    *r = (pending_read){.used = true, .cb = cb, .cb_ud = cb_ud};
    snprintf(r->uid, sizeof(r->uid), "%s", ref->uid);
    snprintf(r->ns, sizeof(r->ns), "%s", ref->ns);
    snprintf(r->name, sizeof(r->name), "%s", ref->name);
    *handle = r;
    return 0;
}

static void cancel_read(void *ud, void *handle)
{
    (void)ud;
    ((pending_read *)handle)->used = false;
}

/* The claims read, answered (never from inside the read call): one device
 * each, dev-<UID>. The claim of name "sick" has a device that is not
 * healthy; those named "same...", "admin..." and "share-X" all have dev-0,
 * "admin..." with admin access, "share-X" a share of it (share ID X). */
static void deliver_reads(world *w)
{
    for (int i = 0; i < w->n_reads; i++) {
        pending_read *r = &w->reads[i];
        if (!r->used) {
            continue;
        }
        r->used = false;
        kdp__dra_rec *rec = kdp__dra_rec_new(r->ns, r->name, r->uid);
        assert_non_null(rec);
        char own[80];
        snprintf(own, sizeof(own), "dev-%s", r->uid);
        bool zero = strncmp(r->name, "same", 4) == 0 || strncmp(r->name, "admin", 5) == 0 ||
                    strncmp(r->name, "share-", 6) == 0;
        const char *dev = strcmp(r->name, "sick") == 0 ? "sick-0" : zero ? "dev-0" : own;
        const char *share = strncmp(r->name, "share-", 6) == 0 ? r->name + 6 : NULL;
        bool admin = strncmp(r->name, "admin", 5) == 0;
        assert_int_equal(kdp__dra_rec_add_dev(rec, "gpu", dev, share, admin, NULL), 0);
        r->cb(r->cb_ud, 0, NULL, rec);
    }
    w->n_reads = 0;
}

static bool check(void *ud, kdp__dra_rec *rec, char *msg, size_t len)
{
    (void)ud;
    for (size_t i = 0; i < rec->n_devs; i++) {
        if (strncmp(rec->devs[i].device, "sick", 4) == 0) {
            snprintf(msg, len, "device %s is unhealthy", rec->devs[i].device);
            return false;
        }
        assert_int_equal(kdp__dra_rec_set(&rec->devs[i].device_id, "ID-0"), 0);
    }
    return true;
}

static void forget_gone(void *ud, kdp__dra_rec *rec)
{
    (void)ud;
    (void)rec;
}

static void ended(void *ud, bool unprepare, const kdp__dra_rec *rec)
{
    world *w = ud;
    w->ended++;
    w->ended_rec += rec != NULL;
    w->ended_unprepare += unprepare && rec && strcmp(rec->uid, "u1") == 0;
}

/* ---- the world ---- */

static void make_claims(world *w, const char *boot, unsigned slots, unsigned timeout_ms)
{
    kdp_dra_ops ops = {.prepare = prepare, .unprepare = unprepare};
    w->env = kdp__cj_env_new(NULL, &ops, w, "gpu.example.com", w->cdi, "k8s.gpu.example.com/claim",
                             boot, w->ckpt, w->ab);
    assert_non_null(w->env);
    kdp__dra_claims_cfg cfg = {.slots = slots,
                               .timeout_ms = timeout_ms,
                               .env = w->env,
                               .read = read_claim,
                               .cancel = cancel_read,
                               .check = check,
                               .forget_gone = forget_gone,
                               .ended = ended,
                               .ud = w};
    assert_int_equal(kdp__dra_claims_init(&w->c, w->loop, "gpu.example.com", &cfg), 0);
    w->made = true;
}

static void drop_claims(world *w)
{
    if (w->made) {
        (void)kdp__dra_claims_done(&w->c, 5000);
        w->made = false;
    }
    kdp__cj_env_unref(w->env);
    w->env = NULL;
}

static int setup(void **state)
{
    (void)state;
    memset(&W, 0, sizeof(W));
    snprintf(W.dir, sizeof(W.dir), "/tmp/kdp-claimops-XXXXXX");
    assert_non_null(mkdtemp(W.dir));
    snprintf(W.cdi, sizeof(W.cdi), "%s/cdi", W.dir);
    assert_int_equal(kdp__loop_new(&W.loop), 0);
    char st[96];
    snprintf(st, sizeof(st), "%s/state", W.dir);
    assert_int_equal(kdp__ckpt_open(st, BOOT_A, &W.ckpt), 0);
    W.ab = kdp__abandoned_new();
    assert_non_null(W.ab);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    drop_claims(&W);
    kdp__abandoned_unref(W.ab);
    kdp__ckpt_unref(W.ckpt);
    kdp__loop_free(W.loop);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", W.dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void on_answer(void *ud, const char *err, const kdp__dra_rec *rec)
{
    answer *a = ud;
    assert_false(a->done);
    a->done = true;
    a->ok = err == NULL;
    a->seq = ++W.seq;
    snprintf(a->err, sizeof(a->err), "%s", err ? err : "");
    if (!err && rec) {
        assert_true(rec->prepared);
    }
}

/* Queues an operation; its answer into W.ans[i]. */
static void add(int i, bool unprepare, const char *name, const char *uid)
{
    kdp_dra_claim_ref ref = {"default", name, uid};
    kdp__cop *op = NULL;
    memset(&W.ans[i], 0, sizeof(W.ans[i]));
    assert_int_equal(kdp__dra_claims_add(&W.c, unprepare, &ref, on_answer, &W.ans[i], &op), 0);
}

/* Runs the loop until answers [from, to) are in (bounded). */
static void run_until(int from, int to)
{
    kdp__dra_claims_kick(&W.c);
    uint64_t end = kdp__now_us() + 20ULL * 1000000ULL;
    for (;;) {
        deliver_reads(&W);
        bool all = true;
        for (int i = from; i < to; i++) {
            all &= W.ans[i].done;
        }
        if (all) {
            return;
        }
        assert_true(kdp__now_us() < end);
        (void)kdp__loop_dispatch(W.loop, 10);
    }
}

/* ---- the tests ---- */

/* prepare, unprepare, prepare of one claim: answered in that order, each
 * on what the one before it left. */
static void test_one_claim_in_order(void **state)
{
    (void)state;
    make_claims(&W, BOOT_A, 2, 5000);
    add(0, false, "c1", "u1");
    add(1, true, "c1", "u1");
    add(2, false, "c1", "u1");
    run_until(0, 3);
    for (int i = 0; i < 3; i++) {
        assert_true(W.ans[i].ok);
        assert_int_equal(W.ans[i].seq, i + 1);
    }
    assert_int_equal(atomic_load(&W.prepares), 2);
    assert_int_equal(atomic_load(&W.unprepares), 1);
    assert_int_equal(kdp__ckpt_count(W.ckpt), 1);
    assert_int_equal(W.ended, 3);
    assert_int_equal(W.ended_rec, 3);
    assert_int_equal(W.ended_unprepare, 1);
    assert_int_equal(kdp__dra_claims_count(&W.c), 0);
}

static void side_by_side(unsigned slots, int want_max)
{
    W.prepare_ms = 300;
    make_claims(&W, BOOT_A, slots, 5000);
    char uid[8][8];
    char name[8][8];
    for (int i = 0; i < 6; i++) {
        snprintf(uid[i], sizeof(uid[i]), "u%d", i);
        snprintf(name[i], sizeof(name[i]), "c%d", i);
        add(i, false, name[i], uid[i]);
    }
    run_until(0, 6);
    for (int i = 0; i < 6; i++) {
        assert_true(W.ans[i].ok);
    }
    assert_int_equal(atomic_load(&W.prepares), 6);
    assert_int_equal(atomic_load(&W.max_running), want_max);
}

/* Three slots: three claims at once, never more. */
static void test_side_by_side(void **state)
{
    (void)state;
    side_by_side(3, 3);
}

/* The default: one at a time, each within its bound although the last
 * one waited 1.5 s behind the others (bound 1 s). */
static void test_one_at_a_time(void **state)
{
    (void)state;
    W.prepare_ms = 300;
    make_claims(&W, BOOT_A, 1, 1000);
    char uid[6][8];
    for (int i = 0; i < 6; i++) {
        snprintf(uid[i], sizeof(uid[i]), "u%d", i);
        add(i, false, "c", uid[i]);
    }
    run_until(0, 6);
    for (int i = 0; i < 6; i++) {
        assert_true(W.ans[i].ok);
    }
    assert_int_equal(atomic_load(&W.max_running), 1);
}

/* Recorded in this boot: answered from the record (no prepare op, no
 * read). Recorded in an earlier boot: checked and prepared again. */
static void test_recorded_and_rebooted(void **state)
{
    (void)state;
    make_claims(&W, BOOT_A, 1, 5000);
    add(0, false, "c1", "u1");
    run_until(0, 1);
    add(1, false, "c1", "u1");
    run_until(1, 2);
    assert_true(W.ans[1].ok);
    assert_int_equal(atomic_load(&W.prepares), 1);
    drop_claims(&W);
    make_claims(&W, BOOT_B, 1, 5000); /* the node rebooted */
    add(2, false, "c1", "u1");
    run_until(2, 3);
    assert_true(W.ans[2].ok);
    assert_int_equal(atomic_load(&W.prepares), 2);
    kdp__dra_rec *r = kdp__ckpt_get(W.ckpt, "u1");
    assert_non_null(r);
    assert_string_equal(r->boot_id, BOOT_B);
    kdp__dra_rec_free(r);
}

/* Never prepared here: unprepared at once, the op not called. */
static void test_unprepare_unknown(void **state)
{
    (void)state;
    make_claims(&W, BOOT_A, 1, 5000);
    add(0, true, "c9", "u9");
    run_until(0, 1);
    assert_true(W.ans[0].ok);
    assert_int_equal(atomic_load(&W.unprepares), 0);
}

/* The claim cannot be read, or a device is not healthy: an error naming
 * why, no prepare op, nothing recorded. */
static void test_refusals(void **state)
{
    (void)state;
    make_claims(&W, BOOT_A, 1, 5000);
    W.read_fails = true;
    add(0, false, "c1", "u1");
    run_until(0, 1);
    assert_false(W.ans[0].ok);
    assert_non_null(strstr(W.ans[0].err, "connection refused"));
    W.read_fails = false;
    add(1, false, "sick", "u2");
    run_until(1, 2);
    assert_false(W.ans[1].ok);
    assert_non_null(strstr(W.ans[1].err, "sick-0 is unhealthy"));
    assert_int_equal(atomic_load(&W.prepares), 0);
    assert_int_equal(kdp__ckpt_count(W.ckpt), 0);
}

/* A prepare past its bound: answered with an error, and its claim stays
 * busy until the callback returns (then it has recorded the claim). */
static void test_overrun_keeps_the_claim_busy(void **state)
{
    (void)state;
    W.prepare_ms = 800;
    make_claims(&W, BOOT_A, 1, 200);
    add(0, false, "c1", "u1");
    run_until(0, 1);
    assert_false(W.ans[0].ok);
    assert_non_null(strstr(W.ans[0].err, "overran its deadline"));
    add(1, false, "c1", "u1");
    run_until(1, 2);
    assert_false(W.ans[1].ok);
    assert_non_null(strstr(W.ans[1].err, "still running"));
    uint64_t end = kdp__now_us() + 10ULL * 1000000ULL;
    while (kdp__abandoned_has(W.ab, "u1")) {
        assert_true(kdp__now_us() < end);
        sleep_ms(20);
    }
    add(2, false, "c1", "u1");
    run_until(2, 3);
    assert_true(W.ans[2].ok); /* recorded by the late callback */
    assert_int_equal(atomic_load(&W.prepares), 1);
}

/* An answer no longer wanted (the call's deadline came): the operation
 * goes on alone. */
static void test_detached(void **state)
{
    (void)state;
    make_claims(&W, BOOT_A, 1, 5000);
    kdp_dra_claim_ref ref = {"default", "c1", "u1"};
    kdp__cop *op = NULL;
    assert_int_equal(kdp__dra_claims_add(&W.c, false, &ref, on_answer, &W.ans[0], &op), 0);
    kdp__dra_claims_detach(op);
    kdp__dra_claims_kick(&W.c);
    uint64_t end = kdp__now_us() + 10ULL * 1000000ULL;
    while (kdp__dra_claims_count(&W.c) > 0) {
        assert_true(kdp__now_us() < end);
        deliver_reads(&W);
        (void)kdp__loop_dispatch(W.loop, 10);
    }
    assert_false(W.ans[0].done);
    assert_int_equal(atomic_load(&W.prepares), 1);
    assert_int_equal(kdp__ckpt_count(W.ckpt), 1);
}

/* A device prepared for one claim is refused to another (the message
 * names both), prepared or still being prepared; admin access and shares
 * with distinct share IDs are not double use. */
static void test_double_use(void **state)
{
    (void)state;
    W.prepare_ms = 300;
    make_claims(&W, BOOT_A, 2, 5000);
    add(0, false, "same1", "u1");
    add(1, false, "same2", "u2"); /* at the same time: u1 is being prepared */
    run_until(0, 2);
    assert_true(W.ans[0].ok);
    assert_false(W.ans[1].ok);
    assert_non_null(strstr(W.ans[1].err, "device dev-0 is prepared for claim default/same1 (u1"));
    assert_non_null(strstr(W.ans[1].err, "claim default/same2 (u2) cannot have it too"));
    add(2, false, "same3", "u3"); /* u1 recorded now */
    run_until(2, 3);
    assert_false(W.ans[2].ok);
    assert_non_null(strstr(W.ans[2].err, "default/same1 (u1)"));
    add(3, false, "admin", "u4");
    run_until(3, 4);
    assert_true(W.ans[3].ok);
    add(4, true, "same1", "u1"); /* unprepared: dev-0 is free for shares */
    run_until(4, 5);
    add(5, false, "share-s1", "u5");
    add(6, false, "share-s2", "u6");
    add(7, false, "share-s2", "u7"); /* the same share ID twice */
    run_until(4, 8);
    assert_true(W.ans[4].ok && W.ans[5].ok && W.ans[6].ok);
    assert_false(W.ans[7].ok);
    assert_non_null(strstr(W.ans[7].err, "default/share-s2 (u6"));
    assert_int_equal(atomic_load(&W.prepares), 4);
}

static void test_state_names(void **state)
{
    (void)state;
    assert_string_equal(kdp__cop_state_name(KDP__COP_QUEUED), "QUEUED");
    assert_string_equal(kdp__cop_state_name(KDP__COP_DONE), "DONE");
    assert_string_equal(kdp__cop_state_name(KDP__COP_N), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_claim_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_side_by_side, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recorded_and_rebooted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unprepare_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overrun_keeps_the_claim_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detached, setup, teardown),
        cmocka_unit_test_setup_teardown(test_double_use, setup, teardown),
        cmocka_unit_test(test_state_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
