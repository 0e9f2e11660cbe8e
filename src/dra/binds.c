/* SPDX-License-Identifier: MIT */
/* binds: claims waiting for their binding conditions (see binds.h). */
#include "dra/binds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "dra/devstatus.h"
#include "k8s/claimbind.h"
#include "k8s/claims.h"

int kdp__dra_binds_init(kdp__dra_binds *b, const kdp__dra_binds_cfg *cfg)
{
    memset(b, 0, sizeof(*b));
    b->cfg = *cfg;
    return -pthread_mutex_init(&b->mu, NULL);
}

static void bind_clear(kdp__dra_bind *e)
{
    free(e->uid);
    free(e->sig);
    kdp__dra_rec_free(e->rec);
    kdp__dra_rec_free(e->view);
}

void kdp__dra_binds_done(kdp__dra_binds *b)
{
    for (size_t i = 0; i < b->n; i++) {
        bind_clear(&b->v[i]);
    }
    free(b->v);
    b->v = NULL;
    b->n = 0;
    pthread_mutex_destroy(&b->mu);
}

/* Under mu. */
static kdp__dra_bind *find(kdp__dra_binds *b, const char *uid)
{
    for (size_t i = 0; i < b->n; i++) {
        if (strcmp(b->v[i].uid, uid) == 0) {
            return &b->v[i];
        }
    }
    return NULL;
}

/* Under mu. */
static void drop(kdp__dra_binds *b, kdp__dra_bind *e)
{
    bind_clear(e);
    *e = b->v[--b->n];
}

/* The allocation: its time (allocationTimestamp) and devices, as one
 * string (a new allocation of the same claim is another string). NULL on
 * -ENOMEM. */
static char *signature(json_t *obj, const kdp__claim *c)
{
    const char *at = json_string_value(json_object_get(
        json_object_get(json_object_get(obj, "status"), "allocation"), "allocationTimestamp"));
    size_t len = (at ? strlen(at) : 0) + 2;
    for (size_t i = 0; i < c->n_devs; i++) {
        const kdp__claim_dev *d = &c->devs[i];
        len += strlen(d->device) + (d->share_id ? strlen(d->share_id) : 0) + 2;
    }
    char *s = malloc(len);
    if (!s) {
        return NULL;
    }
    size_t n = (size_t)snprintf(s, len, "%s;", at ? at : "");
    for (size_t i = 0; i < c->n_devs; i++) {
        const kdp__claim_dev *d = &c->devs[i];
        n += (size_t)snprintf(s + n, len - n, "%s/%s;", d->device, d->share_id ? d->share_id : "");
    }
    return s;
}

/* Whether the claim's devices with binding conditions are all met (1),
 * one failed (-1), or some pending (0); *any: it has such devices. */
static int claim_state(json_t *obj, const char *driver, const kdp__claim *c, bool *any)
{
    int st = 1;
    *any = false;
    for (size_t i = 0; i < c->n_devs; i++) {
        if (c->devs[i].n_bind == 0) {
            continue;
        }
        *any = true;
        const kdp__claim_dev *d = &c->devs[i];
        int s = kdp__claim_binding_state(obj, driver, d->pool, d->device, d->bind, d->n_bind,
                                         d->n_bind_fail);
        st = s < 0 ? -1 : st < 0 ? st : s == 0 ? 0 : st;
    }
    return st;
}

/* The bind op's claim: the devices with binding conditions only. */
static kdp__dra_rec *bind_view(const kdp__claim *c)
{
    kdp__claim v = *c;
    v.devs = calloc(c->n_devs ? c->n_devs : 1, sizeof(*v.devs));
    if (!v.devs) {
        return NULL;
    }
    v.n_devs = 0;
    for (size_t i = 0; i < c->n_devs; i++) {
        if (c->devs[i].n_bind) {
            v.devs[v.n_devs++] = c->devs[i]; /* borrowed */
        }
    }
    kdp__dra_rec *r = NULL;
    int err = kdp__dra_rec_from_claim(&v, &r);
    free(v.devs);
    return err < 0 ? NULL : r;
}

/* Starts e's bind op. Under mu. Returns what cfg.start returned. */
static int start_op(kdp__dra_binds *b, kdp__dra_bind *e)
{
    kdp__dra_rec *copy = kdp__dra_rec_dup(e->view, true);
    int r = copy ? b->cfg.start(b->cfg.ud, copy, e->seq, false) : -ENOMEM;
    if (r == 0) {
        e->to_start = false;
        log_info("%s: claim %s/%s (%s) waits for its binding conditions: bind op started",
                 b->cfg.driver, e->rec->ns, e->rec->name, e->uid);
    } else if (r != -EAGAIN) {
        log_error("%s: claim %s/%s waits for binding conditions: cannot start the bind op: %s "
                  "(tried again when an operation ends)",
                  b->cfg.driver, e->rec->ns, e->rec->name, strerror(-r));
    }
    return r;
}

/* The bind ops that could not start, started now if they can. Under mu. */
static void retry_ops(kdp__dra_binds *b)
{
    for (size_t i = 0; i < b->n; i++) {
        if (b->v[i].to_start && start_op(b, &b->v[i]) < 0) {
            return; /* no room yet (or no memory): the next end tries again */
        }
    }
}

/* e's allocation ended (why): the unbind op, unless its bind op never
 * started; then dropped. Under mu. */
static void end_alloc(kdp__dra_binds *b, kdp__dra_bind *e, const char *why)
{
    if (b->cfg.unbind && !e->to_start) {
        kdp__dra_rec *copy = kdp__dra_rec_dup(e->view, true);
        int r = copy ? b->cfg.start(b->cfg.ud, copy, e->seq, true) : -ENOMEM;
        if (r < 0) {
            log_error("%s: claim %s/%s (%s) %s: cannot start the unbind op (its devices may "
                      "stay attached): %s",
                      b->cfg.driver, e->rec->ns, e->rec->name, e->uid, why, strerror(-r));
        } else {
            log_info("%s: claim %s/%s (%s) %s: unbind op started", b->cfg.driver, e->rec->ns,
                     e->rec->name, e->uid, why);
        }
    }
    drop(b, e);
}

/* A new allocation: tracked; the bind op if it is pending. Under mu. */
static void track(kdp__dra_binds *b, const kdp__claim *c, char *sig, int state)
{
    kdp__dra_rec *rec = NULL;
    if (b->n >= KDP__DRA_MAX_BINDS) {
        if (!b->full_said) {
            log_error("%s: claim %s/%s waits for binding conditions, but %u such claims are "
                      "tracked already: left alone",
                      b->cfg.driver, c->ns, c->name, KDP__DRA_MAX_BINDS);
        }
        b->full_said = true;
        free(sig);
        return;
    }
    kdp__dra_bind *v = realloc(b->v, (b->n + 1) * sizeof(*v));
    if (v) {
        b->v = v;
    }
    kdp__dra_rec *view = v ? bind_view(c) : NULL;
    if (!v || !view || kdp__dra_rec_from_claim(c, &rec) < 0) {
        free(sig);
        kdp__dra_rec_free(view);
        log_error("%s: claim %s/%s: out of memory tracking its binding", b->cfg.driver, c->ns,
                  c->name);
        return;
    }
    for (size_t i = 0; i < rec->n_devs; i++) { /* the claim's own entries */
        (void)kdp__dra_rec_set(&rec->devs[i].status, rec->devs[i].api_status);
    }
    kdp__dra_bind *e = &v[b->n++];
    *e = (kdp__dra_bind){.uid = strdup(c->uid),
                         .sig = sig,
                         .seq = ++b->seq,
                         .rec = rec,
                         .view = view,
                         .to_start = state == 0, /* met or failed already need nothing */
                         .seen = true};
    if (!e->uid) {
        drop(b, e);
    } else if (e->to_start) {
        (void)start_op(b, e);
    }
}

void kdp__dra_binds_event(kdp__dra_binds *b, const char *type, json_t *obj)
{
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    if (!uid) {
        return;
    }
    kdp__claim *c = NULL;
    char why[300];
    bool any = false;
    int state = 0;
    bool gone = strcmp(type, "DELETED") == 0 ||
                kdp__claim_parse(obj, b->cfg.driver, b->cfg.pool, NULL, &c, why, sizeof(why)) < 0;
    if (!gone) {
        state = claim_state(obj, b->cfg.driver, c, &any);
    }
    char *sig = !gone && any ? signature(obj, c) : NULL;
    pthread_mutex_lock(&b->mu);
    kdp__dra_bind *e = find(b, uid);
    if (e && (!sig || strcmp(e->sig, sig) != 0)) {
        end_alloc(b, e,
                  gone  ? "is gone or no longer allocated here"
                  : sig ? "was allocated anew"
                        : "no longer holds devices with binding conditions");
        e = NULL;
    }
    if (e) {
        e->seen = true;
        e->to_start &= state == 0; /* met or failed meanwhile: no bind op wanted */
        free(sig);
    } else if (sig) {
        track(b, c, sig, state);
    }
    retry_ops(b);
    pthread_mutex_unlock(&b->mu);
    kdp__claim_free(c);
}

void kdp__dra_binds_sync_begin(kdp__dra_binds *b)
{
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->n; i++) {
        b->v[i].seen = false;
    }
    pthread_mutex_unlock(&b->mu);
}

void kdp__dra_binds_sync_end(kdp__dra_binds *b)
{
    pthread_mutex_lock(&b->mu);
    for (size_t i = b->n; i-- > 0;) {
        if (!b->v[i].seen) {
            end_alloc(b, &b->v[i], "went while the watch was down");
        }
    }
    pthread_mutex_unlock(&b->mu);
}

void kdp__dra_binds_ended(kdp__dra_binds *b, const char *uid, uint64_t seq, const char *why)
{
    pthread_mutex_lock(&b->mu);
    kdp__dra_bind *e = why ? find(b, uid) : NULL;
    if (e && e->seq != seq) {
        e = NULL; /* allocated anew meanwhile: not this allocation's failure */
    }
    kdp__dra_rec *w = NULL;
    for (size_t i = 0; e && i < e->rec->n_devs; i++) {
        kdp__dra_rdev *d = &e->rec->devs[i];
        if (d->n_bind_fail == 0) {
            continue;
        }
        kdp_dra_condition cond = {
            .type = d->bind[d->n_bind], .status = "True", .reason = "BindFailed", .message = why};
        kdp_dra_device_status st = {.conditions = &cond, .n_conditions = 1};
        char *json = NULL;
        char bad[300];
        if (kdp__dra_devstatus_json(&st, (int64_t)time(NULL), &json, bad, sizeof(bad)) == 0) {
            (void)kdp__dra_rec_set(&d->status, json);
        }
        free(json);
    }
    if (e) {
        w = kdp__dra_rec_dup(e->rec, true);
        log_warn("%s: claim %s/%s (%s): its bind op failed: its binding failure conditions set "
                 "(the scheduler then frees the allocation): %s",
                 b->cfg.driver, e->rec->ns, e->rec->name, uid, why);
    }
    retry_ops(b);
    pthread_mutex_unlock(&b->mu);
    if (w) {
        b->cfg.write(b->cfg.ud, w);
    }
}

int kdp__dra_binds_set_status(kdp__dra_binds *b, const char *uid, const char *device,
                              const char *share_id, const char *status, kdp__dra_rec **ret)
{
    pthread_mutex_lock(&b->mu);
    kdp__dra_bind *e = find(b, uid);
    int r = e ? -ENODEV : -ENOENT;
    for (size_t i = 0; e && i < e->rec->n_devs; i++) {
        kdp__dra_rdev *d = &e->rec->devs[i];
        bool share = d->share_id ? share_id && strcmp(d->share_id, share_id) == 0 : !share_id;
        if (strcmp(d->device, device) == 0 && share) {
            r = kdp__dra_rec_set(&d->status, status);
            *ret = r == 0 ? kdp__dra_rec_dup(e->rec, true) : NULL;
            r = r == 0 && !*ret ? -ENOMEM : r;
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    return r;
}

void kdp__dra_binds_retry(kdp__dra_binds *b)
{
    pthread_mutex_lock(&b->mu);
    retry_ops(b);
    pthread_mutex_unlock(&b->mu);
}

void kdp__dra_binds_fill(kdp__dra_binds *b, kdp__dra_rec *rec)
{
    pthread_mutex_lock(&b->mu);
    kdp__dra_bind *e = find(b, rec->uid);
    for (size_t i = 0; e && i < rec->n_devs; i++) {
        kdp__dra_rdev *d = &rec->devs[i];
        for (size_t k = 0; k < e->rec->n_devs; k++) {
            const kdp__dra_rdev *t = &e->rec->devs[k];
            bool share =
                d->share_id ? t->share_id && strcmp(d->share_id, t->share_id) == 0 : !t->share_id;
            if (t->status && t->n_bind && strcmp(t->device, d->device) == 0 && share) {
                (void)kdp__dra_rec_set(&d->api_status, t->status);
            }
        }
    }
    pthread_mutex_unlock(&b->mu);
}

size_t kdp__dra_binds_count(kdp__dra_binds *b)
{
    pthread_mutex_lock(&b->mu);
    size_t n = b->n;
    pthread_mutex_unlock(&b->mu);
    return n;
}
