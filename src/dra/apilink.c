/* SPDX-License-Identifier: MIT */
/* apilink: the DRA driver's API-server side (see apilink.h). */
#include "dra/apilink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/list.h"
#include "base/log.h"
#include "dra/ckptset.h"
#include "k8s/api.h"
#include "k8s/claims.h"
#include "k8s/informer.h"
#include "k8s/kconfig.h"

#define GROUP "resource.k8s.io"

struct kdp__dra_api {
    kdp__dra_api_cfg cfg;
    kdp__loop *loop;
    kdp__kconfig *kc;
    kdp__api *api;
    kdp__slices *slices;
    char version[16]; /* resource.k8s.io's, "" until discovered */
    kdp__link reqs;   /* claim reads in flight */
    bool published_logged;
    unsigned long said; /* the slices' failures said (kdp__sr_status.said) */
    /* the cluster's claims in view (kdp__dra_api_watch_claims), once the
     * version is known */
    bool want_claims;
    kdp__inf_cbs claim_cbs;
    kdp__inf *claims;
};

typedef struct creq {
    kdp__link link;
    kdp__dra_api *a;
    char *ns, *name, *uid;
    kdp__dra_api_claim_cb cb;
    void *ud;
    kdp__api_req *req;
} creq;

static const char *const wanted[] = {"v1", "v1beta2", "v1beta1", NULL};

static void watch_claims(kdp__dra_api *a);

/* ---- claims ---- */

static void creq_free(creq *r)
{
    kdp__link_remove(&r->link);
    free(r->ns);
    free(r->name);
    free(r->uid);
    free(r);
}

/* r's answer: the callback after r is gone. */
static void answer(creq *r, int err, const char *why, kdp__dra_rec *rec)
{
    kdp__dra_api_claim_cb cb = r->cb;
    void *ud = r->ud;
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", why ? why : err < 0 ? strerror(-err) : "");
    creq_free(r);
    cb(ud, err, err < 0 ? msg : NULL, rec);
}

static void on_claim(int err, const kdp__claim *c, const char *why, void *ud)
{
    creq *r = ud;
    kdp__dra_api *a = r->a;
    r->req = NULL;
    char msg[512];
    kdp__dra_rec *rec = NULL;
    size_t bytes = 0;
    if (err < 0 && err != -ENOENT && err != -ESTALE && err != -ENODATA) {
        a->cfg.error(a->cfg.ud, why); /* the API server's failure, not the claim's */
    } else if (err == 0 && c->n_devs == 0) {
        snprintf(msg, sizeof(msg),
                 "claim %s/%s has no device of driver %s in pool %s: it is allocated to another "
                 "driver or node",
                 r->ns, r->name, a->cfg.driver, a->cfg.node);
        err = -ENODEV;
        why = msg;
    } else if (err == 0) {
        err = kdp__dra_rec_from_claim(c, &rec);
        why = err < 0 ? "out of memory" : NULL;
        bytes = err == 0 ? kdp__dra_rec_bytes(rec) : 0;
    }
    if (bytes > KDP__CKPT_MAX_CLAIM_BYTES) {
        snprintf(msg, sizeof(msg),
                 "claim %s/%s: what kdp would keep of it (%zu bytes: its opaque configs and "
                 "results) is over the %u it keeps for a claim: refused",
                 r->ns, r->name, bytes, KDP__CKPT_MAX_CLAIM_BYTES);
        kdp__dra_rec_free(rec);
        rec = NULL;
        err = -EFBIG;
        why = msg;
    }
    if (err == 0) {
        a->cfg.error(a->cfg.ud, "");
    }
    answer(r, err, why, rec);
}

static int get_claim(creq *r)
{
    kdp__dra_api *a = r->a;
    return kdp__claim_get(a->api, a->version, a->cfg.driver, a->cfg.node, r->ns, r->name, r->uid,
                          on_claim, r, &r->req);
}

static void on_discovered(int err, const char *version, const char *why, void *ud)
{
    creq *r = ud;
    r->req = NULL;
    if (err < 0) {
        r->a->cfg.error(r->a->cfg.ud, why);
        answer(r, err, why, NULL);
        return;
    }
    snprintf(r->a->version, sizeof(r->a->version), "%s", version);
    watch_claims(r->a);
    err = get_claim(r);
    if (err < 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "cannot read claim %.100s/%.100s: %s", r->ns, r->name,
                 strerror(-err));
        answer(r, err, msg, NULL);
    }
}

int kdp__dra_api_get_claim(kdp__dra_api *a, const kdp_dra_claim_ref *ref, kdp__dra_api_claim_cb cb,
                           void *ud, void **ret, char *why, size_t why_len)
{
    creq *r = calloc(1, sizeof(*r));
    if (r) {
        kdp__link_init(&r->link);
        r->a = a;
        r->cb = cb;
        r->ud = ud;
        r->ns = strdup(ref->ns);
        r->name = strdup(ref->name);
        r->uid = strdup(ref->uid);
    }
    int err = r && r->ns && r->name && r->uid ? 0 : -ENOMEM;
    if (err == 0) {
        err = a->version[0] ? get_claim(r)
                            : kdp__api_discover(a->api, GROUP, wanted, on_discovered, r, &r->req);
    }
    if (err < 0) {
        snprintf(why, why_len, "cannot read claim %.100s/%.100s: %s", ref->ns, ref->name,
                 strerror(-err));
        if (r) {
            creq_free(r);
        }
        return err;
    }
    kdp__list_append(&a->reqs, &r->link);
    *ret = r;
    return 0;
}

void kdp__dra_api_cancel(kdp__dra_api *a, void *handle)
{
    (void)a;
    creq *r = handle;
    kdp__api_cancel(r->req);
    creq_free(r);
}

/* ---- claim status ---- */

int kdp__dra_api_write_status(kdp__dra_api *a, const kdp_dra_claim_ref *ref,
                              const kdp__cstat_entry *e, size_t n, kdp__cstat_done_cb done,
                              void *ud, kdp__cstat_req **ret)
{
    /* the version the reads or the slices found; v1 (1.34+) before either */
    return kdp__cstat_write(a->api, a->version[0] ? a->version : "v1", ref->ns, ref->name, ref->uid,
                            a->cfg.driver, a->cfg.node, e, n, done, ud, ret);
}

/* ---- the cluster's claims ---- */

/* The claims' informer, once the version is known. */
static void watch_claims(kdp__dra_api *a)
{
    if (!a->want_claims || a->claims || !a->version[0]) {
        return;
    }
    char path[128];
    snprintf(path, sizeof(path), "/apis/" GROUP "/%s/resourceclaims", a->version);
    int r = kdp__inf_new(a->api, path, &a->claim_cbs, &a->claims);
    if (r < 0) {
        log_error("%s: cannot watch the cluster's ResourceClaims: %s", a->cfg.driver, strerror(-r));
    }
}

int kdp__dra_api_watch_claims(kdp__dra_api *a, const kdp__inf_cbs *cbs)
{
    if (a->want_claims || !cbs || !cbs->event) {
        return -EINVAL;
    }
    a->want_claims = true;
    a->claim_cbs = *cbs;
    watch_claims(a);
    return 0;
}

/* ---- slices ---- */

static void on_slices_status(const kdp__slices_status *ss, void *ud)
{
    kdp__dra_api *a = ud;
    if (ss->published && !a->published_logged) {
        log_info("%s: slices published: %zu devices in %zu slices of pool %s (generation %llu, "
                 "resource.k8s.io/%s)",
                 a->cfg.driver, ss->devices, ss->slices, a->cfg.node,
                 (unsigned long long)ss->generation, ss->version);
    }
    if (ss->error[0] && ss->said != a->said) { /* a new kind of failure, not a new wording */
        log_error("%s: cannot publish the slices: %s", a->cfg.driver, ss->error);
    }
    a->published_logged = ss->published;
    a->said = ss->said;
    if (!a->version[0] && ss->version[0]) {
        snprintf(a->version, sizeof(a->version), "%s", ss->version); /* discovery's answer */
        watch_claims(a);
    }
    a->cfg.status(a->cfg.ud, ss);
}

void kdp__dra_api_publish(kdp__dra_api *a, const kdp__slice_dev *devs, size_t n,
                          const kdp_dra_counter_set *sets, size_t n_sets)
{
    if (!a->slices) {
        return; /* the driver sets them again when it starts */
    }
    int r = kdp__slices_set(a->slices, devs, n, sets, n_sets);
    if (r < 0) {
        log_error("%s: cannot publish %zu devices: %s", a->cfg.driver, n, strerror(-r));
    }
}

void kdp__dra_api_start(kdp__dra_api *a)
{
    if (a->slices) {
        return;
    }
    int r = kdp__slices_new(a->api, a->cfg.driver, a->cfg.node, NULL, a->cfg.resync_ms,
                            on_slices_status, a, &a->slices);
    if (r < 0) {
        log_error("%s: cannot start publishing the slices: %s", a->cfg.driver, strerror(-r));
        return;
    }
    log_info("%s: publishing the slices of pool %s to %s (%s)", a->cfg.driver, a->cfg.node,
             kdp__api_server(a->api), kdp__api_source(a->api));
}

/* ---- life ---- */

int kdp__dra_api_new(kdp__loop *l, const kdp__dra_api_cfg *cfg, kdp__dra_api **ret)
{
    kdp__dra_api *a = calloc(1, sizeof(*a));
    if (!a) {
        return -ENOMEM;
    }
    a->cfg = *cfg;
    a->loop = l;
    kdp__link_init(&a->reqs);
    char why[512] = "";
    int r = kdp__kconfig_load(cfg->kubeconfig, &a->kc, why, sizeof(why));
    if (r < 0) {
        if (r == -ENOENT) {
            log_error("%s: %s (kdp_dra_config.kubeconfig names a file too)", cfg->driver, why);
        } else {
            log_error("%s: cannot load the API server configuration: %s", cfg->driver, why);
        }
        free(a);
        return r;
    }
    r = kdp__api_new(l, a->kc, &a->api);
    if (r < 0) {
        log_error("%s: cannot make the API client: %s", cfg->driver, strerror(-r));
        kdp__kconfig_free(a->kc);
        free(a);
        return r;
    }
    log_info("%s: API server %s (%s)", cfg->driver, kdp__api_server(a->api),
             kdp__api_source(a->api));
    *ret = a;
    return 0;
}

void kdp__dra_api_free(kdp__dra_api *a)
{
    if (!a) {
        return;
    }
    kdp__slices_free(a->slices);
    kdp__inf_free(a->claims);
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &a->reqs)
    {
        creq *r = KDP__CONTAINER_OF(l, creq, link);
        kdp__api_cancel(r->req);
        creq_free(r);
    }
    kdp__api_free(a->api);
    kdp__kconfig_free(a->kc);
    free(a);
}

bool kdp__dra_api_get_stats(const kdp__dra_api *a, kdp__slices_status *slices, kdp__api_stats *api)
{
    if (!a) {
        return false;
    }
    if (slices) {
        kdp__slices_get_status(a->slices, slices);
    }
    if (api) {
        kdp__api_get_stats(a->api, api);
    }
    return true;
}
