/* SPDX-License-Identifier: MIT */
/*
 * prepare: the DRAPlugin service (v1 and v1beta1: the same messages, v1beta1
 * without share_id) and its pipeline. Each claim of a call is a claim op,
 * all of them under way at once, each answered in the call's map:
 *
 *   prepare:   in the checkpoint -> its record again (the CDI spec written
 *              again if it is missing: a reboot wiped /var/run/cdi);
 *              else the claim from the API server (UID checked, filtered to
 *              this driver and pool) -> every device in the table and
 *              healthy -> the prepare op (worker) -> the claim's CDI spec ->
 *              the checkpoint -> the answer.
 *   unprepare: not in the checkpoint -> done; else the unprepare op with
 *              the record -> the CDI spec removed -> dropped from the
 *              checkpoint.
 *
 * Ops on one claim UID run one after the other. A call is answered before
 * its deadline whatever is still under way (those claims get an error: the
 * kubelet asks again, and finds what finished meanwhile); ops go on alone.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "discovery/cdi.h"
#include "dra/abandoned.h"
#include "dra/claimrec.h"
#include "dra/dra_int.h"
#include "dra/prepared.h"
#include "dra_v1.pb-c.h"
#include "grpc/wire.h"
#include "plugin/jobs.h"

#define MAX_CLAIMS_PER_CALL 1024U
#define MAX_INFLIGHT        4096U
/* The kubelet's own bound on a call (it sends a grpc-timeout anyway). */
#define DEFAULT_CALL_US (45ULL * 1000000ULL)
#define MARGIN_MAX_US   (1000ULL * 1000ULL)

#define PFX "/k8s.io.kubelet.pkg.apis.dra."

typedef struct cop cop;

typedef struct pcall {
    kdp__link link; /* in d->calls */
    kdp__dra *d;
    kdp__call *call; /* NULL once answered or cancelled */
    bool unprepare;
    bool v1beta1;
    size_t n;
    size_t left;
    cop **ops;     /* ops[i] while attached */
    char **uids;   /* the claims, in the request's order */
    char **errors; /* the answers: an error, or */
    json_t **recs; /* the record (prepare) */
    bool *ok;      /* answered with success (else, without an error: out of memory) */
    kdp__timer *deadline;
} pcall;

struct cop {
    kdp__link link; /* in d->ops_inflight */
    kdp__dra *d;
    pcall *pc; /* NULL once detached */
    size_t idx;
    bool unprepare;
    bool started;
    char *ns, *name, *uid;
    void *api_handle;
};

/* ---- answering a call ---- */

static void pcall_free(pcall *pc)
{
    kdp__link_remove(&pc->link);
    for (size_t i = 0; i < pc->n; i++) {
        if (pc->ops[i]) {
            pc->ops[i]->pc = NULL;
        }
        free(pc->uids[i]);
        free(pc->errors[i]);
        json_decref(pc->recs[i]);
    }
    free(pc->ops);
    free(pc->uids);
    free(pc->errors);
    free(pc->recs);
    free(pc->ok);
    kdp__timer_free(pc->deadline);
    free(pc);
}

static void str_list(const json_t *a, size_t *ret_n, char ***ret)
{
    size_t n = json_array_size(a);
    char **v = calloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; v && i < n; i++) {
        v[i] = (char *)json_string_value(json_array_get(a, i));
    }
    *ret_n = v ? n : 0;
    *ret = v;
}

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse prep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry prep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse prep_one;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device pb_device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse unprep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
    unprep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse unprep_one;

#define NO_ANSWER "out of memory answering for the claim: ask again"

/* Fills one with rec's devices; if memory runs out, one->error is set
 * (what was filled is still freed by free_devices). */
static void fill_devices(pcall *pc, const json_t *rec, prep_one *one)
{
    const json_t *devs = json_object_get(rec, "devices");
    size_t n = json_array_size(devs);
    if (n == 0) {
        return;
    }
    pb_device *pd = calloc(n, sizeof(*pd));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    pb_device **pp = calloc(n, sizeof(*pp));
    if (!pd || !pp) {
        free(pd);
        free(pp);
        one->error = (char *)NO_ANSWER;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(devs, i);
        k8s__io__kubelet__pkg__apis__dra__v1__device__init(&pd[i]);
        pd[i].n_request_names = 1;
        // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
        pd[i].request_names = calloc(1, sizeof(char *));
        if (pd[i].request_names) {
            pd[i].request_names[0] = (char *)json_string_value(json_object_get(d, "request"));
        } else {
            pd[i].n_request_names = 0;
            one->error = (char *)NO_ANSWER;
        }
        pd[i].pool_name = pc->d->node;
        pd[i].device_name = (char *)json_string_value(json_object_get(d, "device"));
        str_list(json_object_get(d, "cdi_ids"), &pd[i].n_cdi_device_ids, &pd[i].cdi_device_ids);
        if (!pd[i].cdi_device_ids) {
            one->error = (char *)NO_ANSWER;
        }
        const char *share = json_string_value(json_object_get(d, "share_id"));
        if (share && !pc->v1beta1) {
            pd[i].share_id = (char *)share;
        }
        pp[i] = &pd[i];
    }
    one->n_devices = n;
    one->devices = pp;
}

static void free_devices(prep_one *one)
{
    for (size_t i = 0; i < one->n_devices; i++) {
        free(one->devices[i]->request_names);
        free(one->devices[i]->cdi_device_ids);
    }
    if (one->n_devices) {
        free(one->devices[0]); /* the array of structs */
    }
    free(one->devices);
}

static void reply_prepare(pcall *pc)
{
    size_t n = pc->n;
    prep_entry *es = calloc(n ? n : 1, sizeof(*es));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    prep_entry **ep = calloc(n ? n : 1, sizeof(*ep));
    prep_one *ones = calloc(n ? n : 1, sizeof(*ones));
    if (!es || !ep || !ones) {
        (void)kdp__call_finish(pc->call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
                &es[i]);
            k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(&ones[i]);
            es[i].key = pc->uids[i] ? pc->uids[i] : (char *)"";
            es[i].value = &ones[i];
            if (pc->errors[i]) {
                ones[i].error = pc->errors[i];
            } else if (!pc->ok[i] || !pc->recs[i]) {
                ones[i].error = (char *)NO_ANSWER; /* never "prepared, no devices" */
            } else {
                fill_devices(pc, pc->recs[i], &ones[i]);
            }
            ep[i] = &es[i];
        }
        prep_resp resp =
            K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
        resp.n_claims = n;
        resp.claims = ep;
        (void)kdp__call_reply_pb(pc->call, &resp.base);
        for (size_t i = 0; i < n; i++) {
            free_devices(&ones[i]);
        }
    }
    free(es);
    free(ep);
    free(ones);
}

static void reply_unprepare(pcall *pc)
{
    size_t n = pc->n;
    unprep_entry *es = calloc(n ? n : 1, sizeof(*es));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    unprep_entry **ep = calloc(n ? n : 1, sizeof(*ep));
    unprep_one *ones = calloc(n ? n : 1, sizeof(*ones));
    if (!es || !ep || !ones) {
        (void)kdp__call_finish(pc->call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
    } else {
        for (size_t i = 0; i < n; i++) {
            k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
                &es[i]);
            k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&ones[i]);
            es[i].key = pc->uids[i] ? pc->uids[i] : (char *)"";
            es[i].value = &ones[i];
            if (pc->errors[i]) {
                ones[i].error = pc->errors[i];
            } else if (!pc->ok[i]) {
                ones[i].error = (char *)NO_ANSWER; /* never a success by mistake */
            }
            ep[i] = &es[i];
        }
        unprep_resp resp =
            K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
        resp.n_claims = n;
        resp.claims = ep;
        (void)kdp__call_reply_pb(pc->call, &resp.base);
    }
    free(es);
    free(ep);
    free(ones);
}

static void pcall_reply(pcall *pc)
{
    if (!pc->call) {
        return;
    }
    if (pc->unprepare) {
        reply_unprepare(pc);
    } else {
        reply_prepare(pc);
    }
    pc->call = NULL;
    pcall_free(pc);
}

/* Claim i's answer (err: an error message; else rec for a prepare). */
static void pcall_answer(pcall *pc, size_t i, const char *err, const json_t *rec)
{
    if (pc->errors[i] || pc->recs[i] || pc->ok[i]) {
        return;
    }
    if (err) {
        pc->errors[i] = strdup(err); /* NULL: answered NO_ANSWER */
    } else if (rec) {
        pc->recs[i] = json_deep_copy(rec);
        pc->ok[i] = pc->recs[i] != NULL;
    } else {
        pc->ok[i] = pc->unprepare; /* a prepare always has a record */
    }
    pc->ops[i] = NULL;
    if (--pc->left == 0) {
        pcall_reply(pc);
    }
}

static void on_deadline(kdp__timer *t, void *ud)
{
    (void)t;
    pcall *pc = ud;
    log_warn("%s: %s: the call's deadline is near: answering with %zu of %zu claims still "
             "under way (the kubelet asks again)",
             pc->d->driver, pc->unprepare ? "NodeUnprepareResources" : "NodePrepareResources",
             pc->left, pc->n);
    for (size_t i = 0; i < pc->n; i++) {
        if (pc->ops[i]) {
            pc->ops[i]->pc = NULL;
            pc->ops[i] = NULL;
            pc->errors[i] = strdup("not done before the call's deadline: the driver goes on "
                                   "with it; ask again");
        }
    }
    pc->left = 0;
    pcall_reply(pc);
}

static void on_call_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    pcall *pc = ud;
    pc->call = NULL;
    pcall_free(pc);
}

/* ---- claim ops ---- */

static void op_start(cop *op);

static void op_free(cop *op)
{
    kdp__link_remove(&op->link);
    if (op->api_handle && op->d->api) {
        kdp__dra_api_cancel(op->d->api, op->api_handle);
    }
    free(op->ns);
    free(op->name);
    free(op->uid);
    free(op);
}

/* The op is done: its answer, then the next op on the same claim. */
static void op_done(cop *op, const char *err, const json_t *rec)
{
    kdp__dra *d = op->d;
    if (err) {
        log_warn("%s: %s claim %s/%s (%s): %s", d->driver, op->unprepare ? "unprepare" : "prepare",
                 op->ns, op->name, op->uid, err);
    } else {
        log_info("%s: %s claim %s/%s (%s)", d->driver, op->unprepare ? "unprepared" : "prepared",
                 op->ns, op->name, op->uid);
    }
    if (op->pc) {
        pcall_answer(op->pc, op->idx, err, rec);
    }
    kdp_dra_status *st = kdp__dra_status_lock(d);
    st->prepared = kdp__ckpt_count(d->ckpt);
    kdp__dra_status_unlock(d);
    op_free(op);
    kdp__timer_start(d->kick_timer, 0); /* the next op on the claim, from the loop */
}

/* Another op on op's claim is under way. */
static bool uid_busy(kdp__dra *d, const cop *op)
{
    for (kdp__link *l = d->ops_inflight.next; l != &d->ops_inflight; l = l->next) {
        const cop *o = KDP__CONTAINER_OF(l, cop, link);
        if (o != op && o->started && strcmp(o->uid, op->uid) == 0) {
            return true;
        }
    }
    return false;
}

/* Starts every op whose claim has none under way, in arrival order (an
 * op that ends at once frees itself and arms the kick timer for the ops
 * behind it). */
static void kick(kdp__dra *d)
{
    size_t n = 0;
    kdp__link *l;
    kdp__list_for_each(l, &d->ops_inflight)
    {
        n++;
    }
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    cop **todo = calloc(n ? n : 1, sizeof(*todo));
    if (!todo) {
        log_error("%s: out of memory starting claims: trying again in 1 s", d->driver);
        kdp__timer_start(d->kick_timer, 1000000);
        return;
    }
    size_t m = 0;
    kdp__list_for_each(l, &d->ops_inflight)
    {
        cop *op = KDP__CONTAINER_OF(l, cop, link);
        if (!op->started && !uid_busy(d, op)) {
            op->started = true; /* the next one on its claim waits */
            todo[m++] = op;
        }
    }
    for (size_t i = 0; i < m; i++) {
        op_start(todo[i]); /* may free todo[i], never another */
    }
    free(todo);
}

static void on_kick(kdp__timer *t, void *ud)
{
    (void)t;
    kick(ud);
}

/* ---- the jobs ---- */

typedef struct pjob {
    cop *op; /* read on the loop only (complete) */
    kdp_plugin *p;
    kdp_dra_ops ops;
    void *ud;
    bool unprepare;
    bool recorded; /* the record came from the checkpoint */
    json_t *rec;
    kdp__ckpt *ckpt;
    kdp__abandoned *abandoned;
    char *uid;
    atomic_bool listed; /* in abandoned: the deadline passed, fn runs on */
    char *cdi_dir;
    char *kind;
    char file[300];
    char err[600];
} pjob;

static void pjob_cleanup(kdp__pjob *j)
{
    pjob *pj = j->data;
    if (pj) {
        if (atomic_load(&pj->listed)) {
            /* the abandoned callback returned: its claim is free again */
            log_info("claim %s: the %s callback that overran its deadline returned (%s)", pj->uid,
                     pj->unprepare ? "unprepare" : "prepare", j->result < 0 ? pj->err : "done");
            kdp__abandoned_del(pj->abandoned, pj->uid);
        }
        kdp__abandoned_unref(pj->abandoned);
        free(pj->uid);
        json_decref(pj->rec);
        kdp__ckpt_unref(pj->ckpt);
        free(pj->cdi_dir);
        free(pj->kind);
        free(pj);
        j->data = NULL;
    }
}

static void fail(pjob *pj, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(pjob *pj, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(pj->err, sizeof(pj->err), fmt, ap);
    va_end(ap);
}

/* A recorded claim: its CDI spec again if it is gone. */
static void fn_recorded(kdp__pjob *j)
{
    pjob *pj = j->data;
    j->result = 0;
    if (kdp__dra_rec_has_cdi(pj->rec) && !kdp__cdi_file_exists(pj->cdi_dir, pj->file)) {
        int r = kdp__dra_rec_write_cdi(pj->rec, pj->cdi_dir, pj->file, pj->kind);
        if (r < 0) {
            fail(pj, "cannot write the claim's CDI spec %s again: %s", pj->file, strerror(-r));
            j->result = r;
        } else {
            log_info("claim %s: its CDI spec %s/%s was gone (the CDI directory wiped): written "
                     "again",
                     json_string_value(json_object_get(pj->rec, "uid")), pj->cdi_dir, pj->file);
        }
    }
}

/* The prepare op succeeded but its result cannot be kept (the CDI spec or
 * the checkpoint could not be written): the unprepare op undoes it, so that
 * the kubelet's next try starts clean. */
static void roll_back(kdp__pjob *j, pjob *pj)
{
    const char *uid = json_string_value(json_object_get(pj->rec, "uid"));
    kdp__dra_claimview v;
    int r = pj->ops.unprepare ? kdp__dra_claimview_init(&v, pj->rec) : 0;
    if (r == 0 && pj->ops.unprepare) {
        j->has_msg = false;
        r = kdp__pjob_checked(j, pj->ops.unprepare(pj->p, &v.claim, pj->ud));
        kdp__dra_claimview_done(&v);
    }
    if (r < 0) {
        log_error("claim %s: rolling back its prepare, the unprepare callback failed too: %s",
                  uid ? uid : "?", j->has_msg ? j->msg : strerror(-r));
    } else {
        log_warn("claim %s: its prepare rolled back (unprepare op called): %s", uid ? uid : "?",
                 pj->err);
    }
}

static void fn_prepare(kdp__pjob *j)
{
    pjob *pj = j->data;
    kdp__dra_claimview v;
    kdp_dra_prepared pr = {0};
    int r = kdp__dra_claimview_init(&v, pj->rec);
    if (r == 0) {
        r = kdp__dra_prepared_init(&pr, v.claim.n_devices);
    }
    bool prepared = false;
    if (r == 0 && pj->ops.prepare) {
        r = kdp__pjob_checked(j, pj->ops.prepare(pj->p, &v.claim, &pr, pj->ud));
        if (r < 0) {
            fail(pj, "the prepare callback failed: %.400s", j->has_msg ? j->msg : strerror(-r));
        }
        prepared = r == 0;
    }
    kdp__dra_claimview_done(&v);
    if (r == 0) {
        r = kdp__dra_rec_merge(pj->rec, &pr, pj->kind);
    }
    kdp__dra_prepared_done(&pr);
    if (r == 0 && kdp__dra_rec_has_cdi(pj->rec)) {
        r = kdp__dra_rec_write_cdi(pj->rec, pj->cdi_dir, pj->file, pj->kind);
        if (r < 0) {
            fail(pj, "cannot write the claim's CDI spec %s: %s", pj->file, strerror(-r));
            (void)kdp__cdi_remove_file(pj->cdi_dir, pj->file);
        }
    }
    if (r >= 0) {
        r = kdp__ckpt_put(pj->ckpt, json_string_value(json_object_get(pj->rec, "uid")), pj->rec);
        if (r < 0) {
            fail(pj, "cannot record the claim in the checkpoint: %s", strerror(-r));
            (void)kdp__cdi_remove_file(pj->cdi_dir, pj->file);
        }
    }
    if (r < 0 && !pj->err[0]) {
        fail(pj, "%s", strerror(-r));
    }
    if (r < 0 && prepared) {
        roll_back(j, pj);
    }
    j->result = r < 0 ? r : 0;
}

static void fn_unprepare(kdp__pjob *j)
{
    pjob *pj = j->data;
    kdp__dra_claimview v;
    int r = kdp__dra_claimview_init(&v, pj->rec);
    if (r == 0 && pj->ops.unprepare) {
        r = kdp__pjob_checked(j, pj->ops.unprepare(pj->p, &v.claim, pj->ud));
        if (r < 0) {
            fail(pj, "the unprepare callback failed: %.400s", j->has_msg ? j->msg : strerror(-r));
        }
    }
    kdp__dra_claimview_done(&v);
    if (r == 0) {
        r = kdp__cdi_remove_file(pj->cdi_dir, pj->file);
        if (r < 0) {
            fail(pj, "cannot remove the claim's CDI spec %s: %s", pj->file, strerror(-r));
        }
    }
    if (r >= 0) {
        r = kdp__ckpt_del(pj->ckpt, json_string_value(json_object_get(pj->rec, "uid")));
        if (r < 0) {
            fail(pj, "cannot drop the claim from the checkpoint: %s", strerror(-r));
        }
    }
    if (r < 0 && !pj->err[0]) {
        fail(pj, "%s", strerror(-r));
    }
    j->result = r < 0 ? r : 0;
}

static void complete(kdp__pjob *j, bool timed_out)
{
    pjob *pj = j->data;
    cop *op = pj->op;
    if (timed_out) {
        /* fn goes on (its thread is left to it): the claim stays busy until
         * it returns, or it could record a claim unprepared meanwhile */
        if (kdp__abandoned_add(pj->abandoned, pj->uid) == 0) {
            atomic_store(&pj->listed, true);
        }
        op_done(op,
                pj->unprepare ? "the unprepare callback overran its deadline"
                              : "the prepare callback overran its deadline",
                NULL);
    } else if (j->result < 0) {
        op_done(op, pj->err[0] ? pj->err : strerror(-j->result), NULL);
    } else {
        op_done(op, NULL, pj->rec);
    }
}

static void run_job(cop *op, json_t *rec, bool recorded)
{
    kdp__dra *d = op->d;
    pjob *pj = calloc(1, sizeof(*pj));
    const char *what = op->unprepare ? "unprepare" : "prepare";
    kdp__pjob *j = pj ? kdp__pjob_new(kdp__plugin_jobs(d->p), what, d) : NULL;
    if (pj) {
        pj->cdi_dir = strdup(d->cdi_dir);
        pj->kind = strdup(d->cdi_kind);
        pj->uid = strdup(op->uid);
        snprintf(pj->file, sizeof(pj->file), "k8s.%s-claim_%s.json", d->driver, op->uid);
    }
    if (!j || !pj->cdi_dir || !pj->kind || !pj->uid) {
        if (pj) {
            free(pj->cdi_dir);
            free(pj->kind);
            free(pj->uid);
            free(pj);
        }
        if (j) {
            j->base.free(&j->base); /* never submitted; no data, so no cleanup */
        }
        json_decref(rec);
        op_done(op, "out of memory", NULL);
        return;
    }
    pj->op = op;
    pj->p = d->p;
    pj->ops = d->ops;
    pj->ud = d->ud;
    pj->unprepare = op->unprepare;
    pj->recorded = recorded;
    pj->rec = rec;
    pj->ckpt = kdp__ckpt_ref(d->ckpt);
    pj->abandoned = kdp__abandoned_ref(d->abandoned);
    j->data = pj;
    j->fn = op->unprepare ? fn_unprepare : recorded ? fn_recorded : fn_prepare;
    j->complete = complete;
    j->cleanup = pjob_cleanup;
    int r = kdp__pjob_submit(j, 0);
    if (r < 0) {
        char msg[300];
        if (r == -EBUSY) {
            (void)kdp__pjob_busy_message(kdp__plugin_jobs(d->p), what, msg, sizeof(msg));
        } else {
            snprintf(msg, sizeof(msg), "cannot run the %s callback: %s", what, strerror(-r));
        }
        op_done(op, msg, NULL);
    }
}

/* Every device of rec must be in the table, and healthy: its kdp ID and
 * default node are added. Returns false with msg set otherwise. */
static bool check_devices(kdp__dra *d, json_t *rec, char *msg, size_t len)
{
    json_t *devs = json_object_get(rec, "devices");
    if (json_array_size(devs) == 0) {
        snprintf(msg, len, "the claim has no device of driver %s on node %s", d->driver, d->node);
        return false;
    }
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *jd = json_array_get(devs, i);
        const char *name = json_string_value(json_object_get(jd, "device"));
        const kdp__dev *dev = name ? kdp__dra_device_by_name(d, name) : NULL;
        if (!dev) {
            snprintf(msg, len, "device %.100s is not among the driver's devices on node %s",
                     name ? name : "(none)", d->node);
            return false;
        }
        if (dev->health != KDP_HEALTHY) {
            snprintf(msg, len, "device %.100s (%.100s) is unhealthy", name, dev->id);
            return false;
        }
        json_object_set_new(jd, "device_id", json_string(dev->id));
        if (dev->host_path) {
            const char *path = dev->container_path ? dev->container_path : dev->host_path;
            json_t *node = json_pack("{s:s, s:s}", "path", path, "host_path", dev->host_path);
            if (node && dev->permissions) {
                json_object_set_new(node, "permissions", json_string(dev->permissions));
            }
            json_object_set_new(jd, "default_node", node);
        }
    }
    return true;
}

/* The claim from the API server. */
static void on_claim(void *ud, int err, const char *why, json_t *rec)
{
    cop *op = ud;
    op->api_handle = NULL;
    char msg[400];
    if (err < 0) {
        op_done(op, why ? why : strerror(-err), NULL);
    } else if (!check_devices(op->d, rec, msg, sizeof(msg))) {
        json_decref(rec);
        op_done(op, msg, NULL);
    } else {
        run_job(op, rec, false);
    }
}

/* A recorded device no longer in the table has no kdp ID for the
 * unprepare op (kdp_dra_alloc.device_id NULL). */
static void forget_gone(kdp__dra *d, json_t *rec)
{
    json_t *devs = json_object_get(rec, "devices");
    for (size_t i = 0; i < json_array_size(devs); i++) {
        json_t *jd = json_array_get(devs, i);
        const char *id = json_string_value(json_object_get(jd, "device_id"));
        if (id && !kdp__devtab_find(kdp__plugin_devices(d->p), id)) {
            json_object_del(jd, "device_id");
        }
    }
}

static void op_start(cop *op)
{
    kdp__dra *d = op->d;
    op->started = true;
    if (kdp__abandoned_has(d->abandoned, op->uid)) {
        op_done(op,
                "an earlier prepare or unprepare of this claim overran its deadline and is "
                "still running: ask again later",
                NULL);
        return;
    }
    json_t *rec = kdp__ckpt_get(d->ckpt, op->uid);
    if (op->unprepare) {
        if (!rec) {
            op_done(op, NULL, NULL); /* never prepared here, or unprepared already */
            return;
        }
        forget_gone(d, rec);
        run_job(op, rec, true);
        return;
    }
    if (rec) {
        run_job(op, rec, true);
        return;
    }
    if (!d->api) {
        op_done(op, "no API server configured: the claim cannot be read", NULL);
        return;
    }
    kdp_dra_claim_ref ref = {op->ns, op->name, op->uid};
    char why[400];
    if (kdp__dra_api_get_claim(d->api, &ref, on_claim, op, &op->api_handle, why, sizeof(why)) < 0) {
        op_done(op, why, NULL);
    }
}

/* ---- the handlers ---- */

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest prep_req;

static size_t count_inflight(const kdp__dra *d)
{
    size_t n = 0;
    for (kdp__link *l = d->ops_inflight.next; l != &d->ops_inflight && n < MAX_INFLIGHT;
         l = l->next) {
        n++;
    }
    return n;
}

static pcall *pcall_new(kdp__dra *d, kdp__call *call, size_t n, bool unprepare)
{
    pcall *pc = calloc(1, sizeof(*pc));
    if (!pc) {
        return NULL;
    }
    kdp__link_init(&pc->link);
    pc->d = d;
    pc->call = call;
    pc->unprepare = unprepare;
    pc->v1beta1 = strstr(kdp__call_path(call), ".v1beta1.") != NULL;
    size_t m = n ? n : 1;
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    pc->ops = calloc(m, sizeof(*pc->ops));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    pc->uids = calloc(m, sizeof(*pc->uids));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    pc->errors = calloc(m, sizeof(*pc->errors));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    pc->recs = calloc(m, sizeof(*pc->recs));
    pc->ok = calloc(m, sizeof(*pc->ok));
    if (!pc->ops || !pc->uids || !pc->errors || !pc->recs || !pc->ok ||
        kdp__timer_new(d->loop, on_deadline, pc, &pc->deadline) < 0) {
        pcall_free(pc); /* n 0: the arrays hold nothing */
        return NULL;
    }
    pc->n = n;
    pc->left = n;
    kdp__list_append(&d->calls, &pc->link);
    return pc;
}

/* Claim i of the call: an op, or an error answered at once. */
/* A claim UID kdp takes: what the API server gives (an RFC 4122 UUID), or
 * at least 1-128 of [A-Za-z0-9._-] not starting with '.': it names the
 * claim's CDI spec file and its checkpoint record, so "../x" must never get
 * that far. Returns NULL, or what is wrong. */
static const char *uid_problem(const char *uid)
{
    size_t n = strlen(uid);
    if (n == 0) {
        return "the claim has no UID";
    }
    if (n > 128 || uid[0] == '.') {
        return "the claim's UID is not a Kubernetes UID";
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)uid[i];
        if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_') {
            return "the claim's UID is not a Kubernetes UID";
        }
    }
    return NULL;
}

static void add_op(pcall *pc, size_t i, const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *c)
{
    kdp__dra *d = pc->d;
    const char *uid = c->uid ? c->uid : "";
    const char *bad = uid_problem(uid);
    pc->uids[i] = strdup(uid);
    cop *op = !bad && pc->uids[i] ? calloc(1, sizeof(*op)) : NULL;
    if (op) {
        kdp__link_init(&op->link);
        op->d = d;
        op->pc = pc;
        op->idx = i;
        op->unprepare = pc->unprepare;
        op->ns = strdup(c->namespace_ ? c->namespace_ : "");
        op->name = strdup(c->name ? c->name : "");
        op->uid = strdup(uid);
        if (!op->ns || !op->name || !op->uid) {
            op_free(op);
            op = NULL;
        }
    }
    if (op) {
        pc->ops[i] = op;
        kdp__list_append(&d->ops_inflight, &op->link);
        return;
    }
    if (!pc->uids[i]) {
        pc->uids[i] = strdup("");
    }
    if (bad) {
        log_warn("%s: %s: claim %.100s/%.100s refused", d->driver, bad,
                 c->namespace_ ? c->namespace_ : "", c->name ? c->name : "");
    }
    pc->errors[i] = strdup(bad ? bad : "out of memory");
    pc->left--;
}

/* The answer is due before the call's deadline (or the kubelet's 45 s),
 * with a margin. */
static void arm_deadline(pcall *pc, kdp__call *call)
{
    uint64_t now = kdp__now_us();
    uint64_t end = kdp__call_deadline(call);
    if (!end || end <= now) {
        end = now + DEFAULT_CALL_US;
    }
    uint64_t margin = (end - now) / 10 < MARGIN_MAX_US ? (end - now) / 10 : MARGIN_MAX_US;
    kdp__timer_start_at(pc->deadline, end - margin);
}

/* Claims are decoded with the v1 messages: v1beta1's are the same on the
 * wire. */
static void handle(kdp__call *call, const uint8_t *msg, size_t len, kdp__dra *d, bool unprepare)
{
    prep_req *req = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(
        NULL, len, msg);
    if (!req) {
        (void)kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT, "cannot decode the request");
        return;
    }
    const char *vers =
        strstr(kdp__call_path(call), ".v1beta1.") ? "v1beta1.DRAPlugin" : "v1.DRAPlugin";
    kdp_dra_status *st = kdp__dra_status_lock(d);
    snprintf(st->version, sizeof(st->version), "%s", vers);
    kdp__dra_status_unlock(d);
    size_t n = req->n_claims;
    pcall *pc = NULL;
    if (n > MAX_CLAIMS_PER_CALL || count_inflight(d) + n > MAX_INFLIGHT) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED,
                               "too many claims at once for this driver");
    } else if (!(pc = pcall_new(d, call, n, unprepare))) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (!pc) {
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(req,
                                                                                            NULL);
        return;
    }
    kdp__call_set_cancel(call, on_call_cancel, pc);
    arm_deadline(pc, call);
    for (size_t i = 0; i < n; i++) {
        add_op(pc, i, req->claims[i]);
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(req, NULL);
    if (pc->left == 0) {
        pcall_reply(pc);
        return;
    }
    kick(d); /* may answer, and end the call */
}

static void h_prepare(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    handle(call, msg, len, ud, false);
}

static void h_unprepare(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    handle(call, msg, len, ud, true);
}

size_t kdp__dra_prepare_methods(kdp__dra *d, kdp__method *out, size_t cap)
{
    const kdp__method m[] = {
        {PFX "v1.DRAPlugin/NodePrepareResources", KDP__UNARY, h_prepare, d, NULL},
        {PFX "v1.DRAPlugin/NodeUnprepareResources", KDP__UNARY, h_unprepare, d, NULL},
        {PFX "v1beta1.DRAPlugin/NodePrepareResources", KDP__UNARY, h_prepare, d, NULL},
        {PFX "v1beta1.DRAPlugin/NodeUnprepareResources", KDP__UNARY, h_unprepare, d, NULL},
    };
    size_t n = sizeof(m) / sizeof(m[0]);
    if (n > cap) {
        return 0;
    }
    memcpy(out, m, sizeof(m));
    return n;
}

int kdp__dra_prepare_init(kdp__dra *d)
{
    kdp__link_init(&d->ops_inflight);
    kdp__link_init(&d->calls);
    d->abandoned = kdp__abandoned_new();
    if (!d->abandoned) {
        return -ENOMEM;
    }
    return kdp__timer_new(d->loop, on_kick, d, &d->kick_timer);
}

void kdp__dra_prepare_done(kdp__dra *d)
{
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &d->calls)
    {
        pcall *pc = KDP__CONTAINER_OF(l, pcall, link);
        pc->call = NULL; /* its server is gone: the call is over */
        pcall_free(pc);
    }
    kdp__list_for_each_safe(l, tmp, &d->ops_inflight)
    {
        cop *op = KDP__CONTAINER_OF(l, cop, link);
        op->pc = NULL;
        op_free(op);
    }
    kdp__timer_free(d->kick_timer);
    d->kick_timer = NULL;
    kdp__abandoned_unref(d->abandoned);
    d->abandoned = NULL;
}
