/* SPDX-License-Identifier: MIT */
/* claimsvc: the DRAPlugin service (see claimsvc.h). */
#include "dra/claimsvc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "dra_v1.pb-c.h"
#include "grpc/wire.h"
#include "k8s/claims.h"

/* The kubelet's own bound on a call (it sends a grpc-timeout anyway). */
#define DEFAULT_CALL_US (45ULL * 1000000ULL)
#define MARGIN_MAX_US   (1000ULL * 1000ULL)
#define NO_ANSWER       "out of memory answering for the claim: ask again"
#define PFX             "/k8s.io.kubelet.pkg.apis.dra."

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest prep_req;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse prep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry prep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse prep_one;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device pb_device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse unprep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry
    unprep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse unprep_one;

typedef struct pcall pcall;

/* One claim of a call. */
typedef struct slot {
    pcall *pc;
    char *uid;
    kdp__cop *op;      /* while under way */
    char *error;       /* the answer: an error, or */
    kdp__dra_rec *rec; /* the prepared record (prepare) */
    bool ok;           /* answered with success */
    bool answered;
} slot;

struct pcall {
    kdp__link link; /* in s->calls */
    kdp__dra_claimsvc *s;
    kdp__call *call; /* NULL once answered or cancelled */
    bool unprepare;
    bool v1beta1;
    size_t n;
    size_t left;
    slot *slots;
    kdp__timer *deadline;
    uint64_t start_us;
};

const double kdp__dra_svc_bounds[KDP__DRA_SVC_BOUNDS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 45};

const char *kdp__dra_uid_problem(const char *uid)
{
    size_t n = strlen(uid);
    if (n == 0) {
        return "the claim has no UID";
    }
    if (n > KDP__CLAIM_UID_MAX || uid[0] == '.') {
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

static void pcall_free(pcall *pc)
{
    kdp__link_remove(&pc->link);
    for (size_t i = 0; i < pc->n; i++) {
        if (pc->slots[i].op) {
            kdp__dra_claims_detach(pc->slots[i].op);
        }
        free(pc->slots[i].uid);
        free(pc->slots[i].error);
        kdp__dra_rec_free(pc->slots[i].rec);
    }
    free(pc->slots);
    kdp__timer_free(pc->deadline);
    free(pc);
}

/* ---- the answers ---- */

/* Fills one with rec's devices; if memory runs out, one->error is set
 * (what was filled is still freed by free_devices). */
static void fill_devices(const pcall *pc, const kdp__dra_rec *rec, prep_one *one)
{
    size_t n = rec->n_devs;
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
        const kdp__dra_rdev *d = &rec->devs[i];
        k8s__io__kubelet__pkg__apis__dra__v1__device__init(&pd[i]);
        pd[i].n_request_names = 1;
        pd[i].request_names = (char **)&d->request;
        pd[i].pool_name = (char *)pc->s->pool;
        pd[i].device_name = d->device;
        pd[i].n_cdi_device_ids = d->n_cdi_ids;
        pd[i].cdi_device_ids = d->cdi_ids;
        if (d->share_id && !pc->v1beta1) {
            pd[i].share_id = d->share_id;
        }
        pp[i] = &pd[i];
    }
    one->n_devices = n;
    one->devices = pp;
}

static void free_devices(prep_one *one)
{
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
            const slot *sl = &pc->slots[i];
            k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
                &es[i]);
            k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(&ones[i]);
            es[i].key = sl->uid ? sl->uid : (char *)"";
            es[i].value = &ones[i];
            if (sl->error) {
                ones[i].error = sl->error;
            } else if (!sl->ok || !sl->rec) {
                ones[i].error = (char *)NO_ANSWER; /* never "prepared, no devices" */
            } else {
                fill_devices(pc, sl->rec, &ones[i]);
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
            const slot *sl = &pc->slots[i];
            k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
                &es[i]);
            k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&ones[i]);
            es[i].key = sl->uid ? sl->uid : (char *)"";
            es[i].value = &ones[i];
            if (sl->error) {
                ones[i].error = sl->error;
            } else if (!sl->ok) {
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

/* The call and its claims' outcomes, counted. */
static void count(const pcall *pc)
{
    kdp__dra_svc_stats *st = &pc->s->stats;
    int op = pc->unprepare;
    double s = (double)(kdp__now_us() - pc->start_us) / 1e6;
    size_t b = 0;
    while (b < KDP__DRA_SVC_BOUNDS && s > kdp__dra_svc_bounds[b]) {
        b++;
    }
    st->calls[op]++;
    st->buckets[op][b]++;
    st->seconds[op] += s;
    for (size_t i = 0; i < pc->n; i++) {
        if (pc->slots[i].ok) {
            st->claims_ok[op]++;
        } else {
            st->claims_failed[op]++;
        }
    }
}

static void pcall_reply(pcall *pc)
{
    if (pc->call) {
        count(pc);
        if (pc->unprepare) {
            reply_unprepare(pc);
        } else {
            reply_prepare(pc);
        }
        pc->call = NULL;
    }
    pcall_free(pc);
}

/* A claim's answer (err: an error; else rec for a prepare). */
static void on_op_done(void *ud, const char *err, const kdp__dra_rec *rec)
{
    slot *sl = ud;
    pcall *pc = sl->pc;
    sl->op = NULL;
    if (sl->answered) {
        return;
    }
    sl->answered = true;
    if (err) {
        sl->error = strdup(err); /* NULL: answered NO_ANSWER */
    } else if (rec) {
        sl->rec = kdp__dra_rec_dup(rec, true);
        sl->ok = sl->rec != NULL;
    } else {
        sl->ok = pc->unprepare; /* a prepare always has a record */
    }
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
             pc->s->driver, pc->unprepare ? "NodeUnprepareResources" : "NodePrepareResources",
             pc->left, pc->n);
    for (size_t i = 0; i < pc->n; i++) {
        slot *sl = &pc->slots[i];
        if (!sl->answered) {
            sl->answered = true;
            sl->error = strdup("not done before the call's deadline: the driver goes on "
                               "with it; ask again");
        }
    }
    pc->left = 0;
    pcall_reply(pc); /* detaches the ops still under way */
}

static void on_call_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    pcall *pc = ud;
    pc->call = NULL;
    pcall_free(pc);
}

/* ---- the handlers ---- */

static pcall *pcall_new(kdp__dra_claimsvc *s, kdp__call *call, size_t n, bool unprepare)
{
    pcall *pc = calloc(1, sizeof(*pc));
    if (!pc) {
        return NULL;
    }
    kdp__link_init(&pc->link);
    pc->s = s;
    pc->call = call;
    pc->unprepare = unprepare;
    pc->start_us = kdp__now_us();
    pc->v1beta1 = strstr(kdp__call_path(call), ".v1beta1.") != NULL;
    pc->slots = calloc(n ? n : 1, sizeof(*pc->slots));
    if (!pc->slots || kdp__timer_new(s->loop, on_deadline, pc, &pc->deadline) < 0) {
        pcall_free(pc); /* n 0: nothing in the slots */
        return NULL;
    }
    pc->n = n;
    pc->left = n;
    for (size_t i = 0; i < n; i++) {
        pc->slots[i].pc = pc;
    }
    kdp__list_append(&s->calls, &pc->link);
    return pc;
}

/* Claim i of the call: an operation, or an error answered at once. */
static void add_op(pcall *pc, size_t i, const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *c)
{
    slot *sl = &pc->slots[i];
    const char *uid = c->uid ? c->uid : "";
    const char *bad = kdp__dra_uid_problem(uid);
    sl->uid = strdup(uid);
    kdp_dra_claim_ref ref = {c->namespace_ ? c->namespace_ : "", c->name ? c->name : "", uid};
    int r = bad ? -EINVAL : !sl->uid ? -ENOMEM : 0;
    if (r == 0) {
        r = kdp__dra_claims_add(pc->s->claims, pc->unprepare, &ref, on_op_done, sl, &sl->op);
    }
    if (r == 0) {
        return;
    }
    if (bad) {
        log_warn("%s: %s: claim %.100s/%.100s refused", pc->s->driver, bad, ref.ns, ref.name);
    }
    sl->op = NULL;
    sl->answered = true;
    sl->error = strdup(bad            ? bad
                       : r == -EAGAIN ? "too many claims under way in this driver: ask again"
                                      : "out of memory");
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
static void handle(kdp__call *call, const uint8_t *msg, size_t len, kdp__dra_claimsvc *s,
                   bool unprepare)
{
    prep_req *req = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(
        NULL, len, msg);
    if (!req) {
        (void)kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT, "cannot decode the request");
        return;
    }
    s->called(s->ud,
              strstr(kdp__call_path(call), ".v1beta1.") ? "v1beta1.DRAPlugin" : "v1.DRAPlugin");
    size_t n = req->n_claims;
    pcall *pc = NULL;
    if (n > KDP__DRA_MAX_CLAIMS_PER_CALL) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED,
                               "too many claims in one call for this driver");
    } else if (!(pc = pcall_new(s, call, n, unprepare))) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (pc) {
        kdp__call_set_cancel(call, on_call_cancel, pc);
        arm_deadline(pc, call);
        for (size_t i = 0; i < n; i++) {
            add_op(pc, i, req->claims[i]);
        }
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(req, NULL);
    if (pc && pc->left == 0) {
        pcall_reply(pc);
    } else if (pc) {
        kdp__dra_claims_kick(s->claims); /* may answer, and end the call */
    }
}

static void h_prepare(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    handle(call, msg, len, ud, false);
}

static void h_unprepare(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    handle(call, msg, len, ud, true);
}

size_t kdp__dra_claimsvc_methods(kdp__dra_claimsvc *s, kdp__method *out, size_t cap)
{
    const kdp__method m[] = {
        {PFX "v1.DRAPlugin/NodePrepareResources", KDP__UNARY, h_prepare, s, NULL},
        {PFX "v1.DRAPlugin/NodeUnprepareResources", KDP__UNARY, h_unprepare, s, NULL},
        {PFX "v1beta1.DRAPlugin/NodePrepareResources", KDP__UNARY, h_prepare, s, NULL},
        {PFX "v1beta1.DRAPlugin/NodeUnprepareResources", KDP__UNARY, h_unprepare, s, NULL},
    };
    size_t n = sizeof(m) / sizeof(m[0]);
    if (n > cap) {
        return 0;
    }
    memcpy(out, m, sizeof(m));
    return n;
}

void kdp__dra_claimsvc_init(kdp__dra_claimsvc *s, kdp__loop *l, kdp__dra_claims *claims,
                            const char *driver, const char *pool,
                            void (*called)(void *ud, const char *version), void *ud)
{
    memset(s, 0, sizeof(*s));
    s->loop = l;
    s->claims = claims;
    s->driver = driver;
    s->pool = pool;
    s->called = called;
    s->ud = ud;
    kdp__link_init(&s->calls);
}

void kdp__dra_claimsvc_done(kdp__dra_claimsvc *s)
{
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &s->calls)
    {
        pcall *pc = KDP__CONTAINER_OF(l, pcall, link);
        pc->call = NULL; /* its server is gone: the call is over */
        pcall_free(pc);
    }
}
