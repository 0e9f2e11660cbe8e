/* SPDX-License-Identifier: MIT */
/* claimops: the claim operations, each a state machine (see claimops.h). */
#include "dra/claimops.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct kdp__cop {
    kdp__link link; /* in c->ops */
    kdp__dra_claims *c;
    kdp__cop_state state;
    bool unprepare;
    bool bind;               /* a bind or unbind op (rec given at the start) */
    bool unbind;             /* ... the unbind op */
    kdp__cop_bound_cb bound; /* its answer (NULL once detached) */
    uint64_t tag;            /* the bind op's, given back */
    char *ns, *name, *uid;
    kdp__cop_done_cb done; /* NULL once detached */
    void *ud;
    void *read_handle;  /* READING */
    kdp__dra_rec *rec;  /* WAITING: what the job gets */
    kdp__dra_rec *held; /* a prepare's claim while it is under way (double use) */
    kdp__cj_kind kind;  /* WAITING: which job */
    unsigned slot;      /* RUNNING */
    kdp__pjob *job;     /* RUNNING */
};

static const char *const state_names[KDP__COP_N] = {
    [KDP__COP_QUEUED] = "QUEUED",   [KDP__COP_READING] = "READING", [KDP__COP_WAITING] = "WAITING",
    [KDP__COP_RUNNING] = "RUNNING", [KDP__COP_DONE] = "DONE",
};

#define TO(s) (1U << (s))
static const unsigned allowed[KDP__COP_N] = {
    [KDP__COP_QUEUED] = TO(KDP__COP_READING) | TO(KDP__COP_WAITING) | TO(KDP__COP_DONE),
    [KDP__COP_READING] = TO(KDP__COP_WAITING) | TO(KDP__COP_DONE),
    [KDP__COP_WAITING] = TO(KDP__COP_RUNNING) | TO(KDP__COP_DONE),
    [KDP__COP_RUNNING] = TO(KDP__COP_DONE),
    [KDP__COP_DONE] = 0,
};

const char *kdp__cop_state_name(kdp__cop_state s)
{
    return s < KDP__COP_N ? state_names[s] : "?";
}

/* What the operation is, for log lines. */
static const char *what(const kdp__cop *op)
{
    return op->unbind ? "unbind" : op->bind ? "bind" : op->unprepare ? "unprepare" : "prepare";
}

/* The one function that changes an operation's state. */
static void set_state(kdp__cop *op, kdp__cop_state to, const char *why)
{
    if (!(allowed[op->state] & TO(to))) {
        log_error("%s: claim %s: a transition that cannot happen, %s -> %s (%s): a bug in kdp",
                  op->c->driver, op->uid, state_names[op->state], state_names[to], why);
        assert(false);
    }
    log_debug("%s: %s claim %s/%s (%s): %s -> %s (%s)", op->c->driver, what(op), op->ns, op->name,
              op->uid, state_names[op->state], state_names[to], why);
    op->state = to;
}

/* ---- the end of an operation ---- */

static void op_free(kdp__cop *op)
{
    kdp__link_remove(&op->link);
    op->c->n_ops--;
    kdp__dra_rec_free(op->rec);
    kdp__dra_rec_free(op->held);
    free(op->ns);
    free(op->name);
    free(op->uid);
    free(op);
}

/* DONE: the answer (if still wanted), then the ops behind it. rec: the
 * claim's record on success (a prepare's as recorded, an unprepare's as it
 * was), else NULL. */
static void finish(kdp__cop *op, const char *err, const kdp__dra_rec *rec)
{
    kdp__dra_claims *c = op->c;
    set_state(op, KDP__COP_DONE, err ? "failed" : "done");
    if (err) {
        log_warn("%s: %s claim %s/%s (%s): %s", c->driver, what(op), op->ns, op->name, op->uid,
                 err);
    } else {
        log_info("%s: %s claim %s/%s (%s)", c->driver,
                 op->unbind      ? "unbind op done for"
                 : op->bind      ? "bind op done for"
                 : op->unprepare ? "unprepared"
                                 : "prepared",
                 op->ns, op->name, op->uid);
    }
    if (op->done) {
        op->done(op->ud, err, op->unprepare ? NULL : rec);
    }
    /* the rest once the op no longer counts (an op started from them finds
     * its room) */
    kdp__cop_bound_cb bound = op->bound;
    void *ud = op->ud;
    uint64_t tag = op->tag;
    bool bind = op->bind;
    bool unprepare = op->unprepare;
    char *uid = op->uid;
    op->uid = NULL;
    op_free(op);
    if (bound) {
        bound(ud, uid, tag, err);
    }
    if (!bind) {
        c->cfg.ended(c->cfg.ud, unprepare, err ? NULL : rec);
    }
    free(uid);
    kdp__timer_start(c->kick, 0); /* the next op on the claim, from the loop */
}

/* ---- the job ---- */

static void complete(kdp__pjob *j, bool timed_out)
{
    kdp__cop *op = j->owner;
    kdp__dra_claims *c = op->c;
    kdp__cj *cj = kdp__cj_of(j);
    c->running[op->slot] = NULL;
    op->job = NULL;
    if (timed_out) {
        /* fn goes on (its thread is left to it): the claim stays busy until
         * it returns, or it could record a claim unprepared meanwhile */
        kdp__cj_abandon(j);
        char msg[80];
        snprintf(msg, sizeof(msg), "the %s callback overran its deadline", what(op));
        finish(op, msg, NULL);
    } else if (j->result < 0) {
        finish(op, cj->err[0] ? cj->err : strerror(-j->result), NULL);
    } else {
        finish(op, NULL, cj->rec);
    }
}

static int free_slot(const kdp__dra_claims *c)
{
    for (unsigned i = 0; i < c->n_slots; i++) {
        if (!c->running[i]) {
            return (int)i;
        }
    }
    return -1;
}

/* WAITING -> RUNNING on slot i. */
static void run(kdp__cop *op, unsigned i)
{
    kdp__dra_claims *c = op->c;
    kdp__dra_rec *rec = op->rec;
    op->rec = NULL;
    kdp__pjob *j = kdp__cj_new(&c->slots[i], c->cfg.env, op->kind, rec, op, complete);
    int r = j ? kdp__pjob_submit(j, 0) : -ENOMEM;
    if (r < 0) {
        char msg[300];
        if (r == -EBUSY) {
            (void)kdp__pjob_busy_message(&c->slots[i], what(op), msg, sizeof(msg));
        } else {
            snprintf(msg, sizeof(msg), "cannot run the %s callback: %s", what(op), strerror(-r));
        }
        finish(op, msg, NULL);
        return;
    }
    set_state(op, KDP__COP_RUNNING, "a slot is free");
    op->slot = i;
    op->job = j;
    c->running[i] = op;
}

/* Whether rec may not be prepared: a device of it prepared, or being
 * prepared, for another claim (unless shared by design or admin access):
 * msg names both claims. */
static bool double_use(kdp__cop *op, const kdp__dra_rec *rec, char *msg, size_t len)
{
    kdp__dra_claims *c = op->c;
    char who[300];
    char dev[300];
    bool found = kdp__ckpt_conflict(c->cfg.env->ckpt, rec, who, dev, sizeof(who));
    for (kdp__link *l = c->ops.next; !found && l != &c->ops; l = l->next) {
        const kdp__cop *o = KDP__CONTAINER_OF(l, kdp__cop, link);
        const char *d = NULL;
        if (o->held && strcmp(o->uid, op->uid) != 0 && kdp__dra_rec_conflict(rec, o->held, &d)) {
            snprintf(who, sizeof(who), "%s/%s (%s, being prepared)", o->ns, o->name, o->uid);
            snprintf(dev, sizeof(dev), "%s", d);
            found = true;
        }
    }
    if (found) {
        snprintf(msg, len,
                 "device %.100s is prepared for claim %.300s already: claim %s/%s (%s) cannot "
                 "have it too (only shares of a device, with distinct share IDs, or admin access "
                 "can)",
                 dev, who, op->ns, op->name, op->uid);
    }
    return found;
}

/* -> WAITING with the job to run (a prepare: unless its devices are
 * another claim's). */
static void wait_slot(kdp__cop *op, kdp__cj_kind kind, kdp__dra_rec *rec, const char *why)
{
    char msg[900];
    if (kind == KDP__CJ_PREPARE && double_use(op, rec, msg, sizeof(msg))) {
        kdp__dra_rec_free(rec);
        finish(op, msg, NULL);
        return;
    }
    if (kind == KDP__CJ_PREPARE && !(op->held = kdp__dra_rec_dup(rec, false))) {
        kdp__dra_rec_free(rec);
        finish(op, "out of memory", NULL);
        return;
    }
    op->kind = kind;
    op->rec = rec;
    set_state(op, KDP__COP_WAITING, why);
    kdp__timer_start(op->c->kick, 0);
}

/* ---- starting ---- */

static void on_read(void *ud, int err, const char *why, kdp__dra_rec *rec)
{
    kdp__cop *op = ud;
    op->read_handle = NULL;
    char msg[400];
    if (err < 0) {
        finish(op, why ? why : strerror(-err), NULL);
    } else if (!op->c->cfg.check(op->c->cfg.ud, rec, msg, sizeof(msg))) {
        kdp__dra_rec_free(rec);
        finish(op, msg, NULL);
    } else {
        wait_slot(op, KDP__CJ_PREPARE, rec, "the claim is read");
    }
}

/* A prepare of a claim not recorded: read it. */
static void read_claim(kdp__cop *op)
{
    kdp__dra_claims *c = op->c;
    if (!c->cfg.read) {
        finish(op, "no API server configured: the claim cannot be read", NULL);
        return;
    }
    kdp_dra_claim_ref ref = {op->ns, op->name, op->uid};
    char why[400];
    set_state(op, KDP__COP_READING, "not recorded");
    if (c->cfg.read(c->cfg.ud, &ref, on_read, op, &op->read_handle, why, sizeof(why)) < 0) {
        op->read_handle = NULL;
        finish(op, why, NULL);
    }
}

/* A prepare of a claim recorded: of this boot, or of an earlier one. */
static void prepare_recorded(kdp__cop *op, kdp__dra_rec *rec)
{
    kdp__dra_claims *c = op->c;
    const char *boot = c->cfg.env->boot_id;
    if (!boot[0] || strcmp(rec->boot_id, boot) == 0) {
        wait_slot(op, KDP__CJ_RECORDED, rec, "recorded in this boot");
        return;
    }
    log_info("%s: claim %s/%s (%s) was prepared in an earlier boot (%s): preparing it again",
             c->driver, op->ns, op->name, op->uid, rec->boot_id[0] ? rec->boot_id : "unknown");
    kdp__dra_rec *again = kdp__dra_rec_dup(rec, false);
    kdp__dra_rec_free(rec);
    char msg[400];
    if (!again) {
        finish(op, "out of memory", NULL);
    } else if (!c->cfg.check(c->cfg.ud, again, msg, sizeof(msg))) {
        kdp__dra_rec_free(again);
        finish(op, msg, NULL);
    } else {
        wait_slot(op, KDP__CJ_PREPARE, again, "recorded in an earlier boot");
    }
}

/* QUEUED -> the next state. */
static void start(kdp__cop *op)
{
    kdp__dra_claims *c = op->c;
    if (kdp__abandoned_has(c->cfg.env->abandoned, op->uid)) {
        finish(op,
               "an earlier prepare or unprepare of this claim overran its deadline and is "
               "still running: ask again later",
               NULL);
        return;
    }
    if (op->bind) {
        kdp__dra_rec *given = op->rec;
        op->rec = NULL;
        wait_slot(op, op->unbind ? KDP__CJ_UNBIND : KDP__CJ_BIND, given,
                  op->unbind ? "its allocation ended" : "allocated with binding conditions");
        return;
    }
    kdp__dra_rec *rec = kdp__ckpt_get(c->cfg.env->ckpt, op->uid);
    if (op->unprepare && !rec) {
        finish(op, NULL, NULL); /* never prepared here, or unprepared already */
    } else if (op->unprepare) {
        c->cfg.forget_gone(c->cfg.ud, rec);
        wait_slot(op, KDP__CJ_UNPREPARE, rec, "recorded");
    } else if (rec) {
        prepare_recorded(op, rec);
    } else {
        read_claim(op);
    }
}

/* Another operation on op's claim came before it and is not done. */
static bool behind_another(const kdp__dra_claims *c, const kdp__cop *op)
{
    for (kdp__link *l = c->ops.next; l != &op->link; l = l->next) {
        const kdp__cop *o = KDP__CONTAINER_OF(l, kdp__cop, link);
        if (strcmp(o->uid, op->uid) == 0) {
            return true;
        }
    }
    return false;
}

/* The first operation in state st (QUEUED: one no other holds back). */
static kdp__cop *first_in(const kdp__dra_claims *c, kdp__cop_state st)
{
    for (kdp__link *l = c->ops.next; l != &c->ops; l = l->next) {
        kdp__cop *op = KDP__CONTAINER_OF(l, kdp__cop, link);
        /* an op freed has left the list (op_free): the analyzer loses that */
        // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
        if (op->state == st && (st != KDP__COP_QUEUED || !behind_another(c, op))) {
            return op;
        }
    }
    return NULL;
}

void kdp__dra_claims_kick(kdp__dra_claims *c)
{
    /* what can leave QUEUED, in arrival order (a start may finish ops: the
     * list is walked again each time) */
    kdp__cop *op;
    while ((op = first_in(c, KDP__COP_QUEUED))) {
        start(op);
    }
    /* the waiting ones onto free slots, in arrival order */
    int slot;
    while ((slot = free_slot(c)) >= 0 && (op = first_in(c, KDP__COP_WAITING))) {
        run(op, (unsigned)slot);
    }
}

static void on_kick(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra_claims_kick(ud);
}

/* ---- the API ---- */

int kdp__dra_claims_add(kdp__dra_claims *c, bool unprepare, const kdp_dra_claim_ref *ref,
                        kdp__cop_done_cb done, void *ud, kdp__cop **ret)
{
    if (c->n_ops >= KDP__DRA_MAX_OPS) {
        return -EAGAIN;
    }
    kdp__cop *op = calloc(1, sizeof(*op));
    if (!op) {
        return -ENOMEM;
    }
    kdp__link_init(&op->link);
    op->c = c;
    op->unprepare = unprepare;
    op->done = done;
    op->ud = ud;
    op->ns = strdup(ref->ns);
    op->name = strdup(ref->name);
    op->uid = strdup(ref->uid);
    kdp__list_append(&c->ops, &op->link);
    c->n_ops++;
    if (!op->ns || !op->name || !op->uid) {
        op_free(op);
        return -ENOMEM;
    }
    kdp__timer_start(c->kick, 0);
    *ret = op;
    return 0;
}

int kdp__dra_claims_add_bind(kdp__dra_claims *c, kdp__dra_rec *rec, uint64_t tag, bool unbind,
                             kdp__cop_bound_cb bound, void *ud)
{
    kdp_dra_claim_ref ref = {rec->ns, rec->name, rec->uid};
    kdp__cop *op = NULL;
    int r = kdp__dra_claims_add(c, false, &ref, NULL, ud, &op);
    if (r < 0) {
        kdp__dra_rec_free(rec);
        return r;
    }
    op->bind = true;
    op->unbind = unbind;
    op->bound = bound;
    op->tag = tag;
    op->rec = rec;
    return 0;
}

void kdp__dra_claims_detach(kdp__cop *op)
{
    op->done = NULL;
    op->bound = NULL;
}

size_t kdp__dra_claims_count(const kdp__dra_claims *c)
{
    return c->n_ops;
}

int kdp__dra_claims_init(kdp__dra_claims *c, kdp__loop *l, const char *driver,
                         const kdp__dra_claims_cfg *cfg)
{
    memset(c, 0, sizeof(*c));
    c->loop = l;
    c->driver = driver;
    c->cfg = *cfg;
    c->cfg.env = kdp__cj_env_ref(cfg->env);
    kdp__link_init(&c->ops);
    int r = kdp__timer_new(l, on_kick, c, &c->kick);
    unsigned n = cfg->slots ? cfg->slots : 1;
    n = n > KDP__DRA_MAX_SLOTS ? KDP__DRA_MAX_SLOTS : n;
    for (unsigned i = 0; r == 0 && i < n; i++) {
        r = kdp__jobs_init(&c->slots[i], l, cfg->timeout_ms, KDP_MAX_STUCK_CALLBACKS, driver);
        c->n_slots += r == 0;
    }
    return r;
}

bool kdp__dra_claims_done(kdp__dra_claims *c, unsigned wait_ms)
{
    bool left = false;
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &c->ops)
    {
        kdp__cop *op = KDP__CONTAINER_OF(l, kdp__cop, link);
        if (op->read_handle && c->cfg.cancel) {
            c->cfg.cancel(c->cfg.ud, op->read_handle);
        }
        op_free(op);
    }
    for (unsigned i = 0; i < c->n_slots; i++) {
        left |= kdp__jobs_done(&c->slots[i], wait_ms); /* no complete runs any more */
        c->running[i] = NULL;
    }
    c->n_slots = 0;
    kdp__timer_free(c->kick);
    c->kick = NULL;
    kdp__cj_env_unref(c->cfg.env);
    c->cfg.env = NULL;
    return left;
}
