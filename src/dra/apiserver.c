/* SPDX-License-Identifier: MIT */
/*
 * apiserver: the DRA driver's API-server side, over src/k8s: the
 * configuration loaded at enable (kubeconfig or in-cluster), the claims
 * read at prepare (k8s/claims: resource.k8s.io's version found by
 * discovery once, the UID checked, filtered to this driver and this node's
 * pool, turned into a claim record), and the node's slices (k8s/slices)
 * from the described devices, created when the plugin first serves and
 * left in place at the end (a restarted driver takes them over).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/list.h"
#include "base/log.h"
#include "dra/dra_int.h"
#include "k8s/api.h"
#include "k8s/claims.h"
#include "k8s/kconfig.h"
#include "k8s/slices.h"

#define GROUP "resource.k8s.io"

struct kdp__dra_api {
    kdp__dra *d;
    kdp__kconfig *kc;
    kdp__api *api;
    kdp__slices *slices;
    char version[16]; /* resource.k8s.io's, "" until discovered */
    kdp__link reqs;   /* claim reads in flight */
    bool publish_wanted;
    bool published_logged;
    char last_error[256];
};

typedef struct creq {
    kdp__link link;
    kdp__dra_api *a;
    char *ns, *name, *uid;
    kdp__dra_claim_cb cb;
    void *ud;
    kdp__api_req *req;
} creq;

static const char *const wanted[] = {"v1", "v1beta2", "v1beta1", NULL};

/* ---- claims ---- */

static void creq_free(creq *r)
{
    kdp__link_remove(&r->link);
    free(r->ns);
    free(r->name);
    free(r->uid);
    free(r);
}

static void set_api_error(kdp__dra_api *a, const char *why)
{
    kdp_dra_status *st = kdp__dra_status_lock(a->d);
    snprintf(st->api_error, sizeof(st->api_error), "%s", why ? why : "");
    kdp__dra_status_unlock(a->d);
}

/* The claim as a record (dra/claimrec.h) without the prepare's answer. */
static json_t *to_rec(const kdp__claim *c)
{
    json_t *devs = json_array();
    for (size_t i = 0; devs && i < c->n_devs; i++) {
        const kdp__claim_dev *cd = &c->devs[i];
        json_t *cfgs = json_array();
        for (size_t j = 0; cfgs && j < cd->n_configs; j++) {
            json_array_append_new(cfgs, json_string(cd->configs[j]));
        }
        json_t *o = cfgs ? json_pack("{s:s, s:s, s:b, s:o}", "request", cd->request, "device",
                                     cd->device, "admin_access", cd->admin_access, "configs", cfgs)
                         : NULL;
        if (o && cd->share_id) {
            json_object_set_new(o, "share_id", json_string(cd->share_id));
        }
        if (!o || json_array_append_new(devs, o) < 0) {
            json_decref(devs);
            return NULL;
        }
    }
    return devs ? json_pack("{s:s, s:s, s:s, s:o}", "namespace", c->ns, "name", c->name, "uid",
                            c->uid, "devices", devs)
                : NULL;
}

static void on_claim(int err, const kdp__claim *c, const char *why, void *ud)
{
    creq *r = ud;
    kdp__dra_api *a = r->a;
    r->req = NULL;
    kdp__dra_claim_cb cb = r->cb;
    void *cb_ud = r->ud;
    char msg[512];
    json_t *rec = NULL;
    if (err == 0) {
        rec = to_rec(c);
        err = rec ? 0 : -ENOMEM;
        why = rec ? NULL : "out of memory";
    }
    if (err == 0 && json_array_size(json_object_get(rec, "devices")) == 0) {
        snprintf(msg, sizeof(msg),
                 "claim %s/%s has no device of driver %s in pool %s: it is allocated to another "
                 "driver or node",
                 r->ns, r->name, a->d->driver, a->d->node);
        json_decref(rec);
        rec = NULL;
        err = -ENODEV;
        why = msg;
    } else if (err < 0 && err != -ENOENT && err != -ESTALE && err != -ENODATA) {
        set_api_error(a, why); /* the API server's failure, not the claim's */
    } else if (err == 0) {
        set_api_error(a, NULL);
    }
    creq_free(r);
    cb(cb_ud, err, why, rec);
}

static int get_claim(creq *r)
{
    kdp__dra *d = r->a->d;
    return kdp__claim_get(r->a->api, r->a->version, d->driver, d->node, r->ns, r->name, r->uid,
                          on_claim, r, &r->req);
}

static void on_discovered(int err, const char *version, const char *why, void *ud)
{
    creq *r = ud;
    r->req = NULL;
    if (err < 0) {
        set_api_error(r->a, why);
        kdp__dra_claim_cb cb = r->cb;
        void *cb_ud = r->ud;
        char msg[400];
        snprintf(msg, sizeof(msg), "%s", why ? why : strerror(-err));
        creq_free(r);
        cb(cb_ud, err, msg, NULL);
        return;
    }
    snprintf(r->a->version, sizeof(r->a->version), "%s", version);
    err = get_claim(r);
    if (err < 0) {
        kdp__dra_claim_cb cb = r->cb;
        void *cb_ud = r->ud;
        char msg[300];
        snprintf(msg, sizeof(msg), "cannot read claim %.100s/%.100s: %s", r->ns, r->name,
                 strerror(-err));
        creq_free(r);
        cb(cb_ud, err, msg, NULL);
    }
}

int kdp__dra_api_get_claim(kdp__dra_api *a, const kdp_dra_claim_ref *ref, kdp__dra_claim_cb cb,
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

/* ---- slices ---- */

static void on_slices_status(const kdp__slices_status *ss, void *ud)
{
    kdp__dra_api *a = ud;
    kdp__dra *d = a->d;
    kdp_dra_status *st = kdp__dra_status_lock(d);
    st->published = ss->published;
    st->pool_generation = ss->generation;
    st->slices = ss->slices;
    st->devices = ss->devices;
    snprintf(st->api_error, sizeof(st->api_error), "%s", ss->error);
    kdp__dra_status_unlock(d);
    if (ss->published && !a->published_logged) {
        log_info("%s: slices published: %zu devices in %zu slices of pool %s (generation %llu, "
                 "resource.k8s.io/%s)",
                 d->driver, ss->devices, ss->slices, d->node, (unsigned long long)ss->generation,
                 ss->version);
    }
    if (ss->error[0] && strcmp(ss->error, a->last_error) != 0) {
        log_error("%s: cannot publish the slices: %s", d->driver, ss->error);
    }
    a->published_logged = ss->published;
    snprintf(a->last_error, sizeof(a->last_error), "%s", ss->error);
}

static int attr_from(const char *name, json_t *v, kdp_dra_attr *out)
{
    json_t *x;
    *out = (kdp_dra_attr){.name = name};
    if ((x = json_object_get(v, "int"))) {
        out->type = KDP_DRA_ATTR_INT;
        out->int_value = json_integer_value(x);
    } else if ((x = json_object_get(v, "bool"))) {
        out->type = KDP_DRA_ATTR_BOOL;
        out->bool_value = json_is_true(x);
    } else if ((x = json_object_get(v, "string"))) {
        out->type = KDP_DRA_ATTR_STRING;
        out->string_value = json_string_value(x);
    } else if ((x = json_object_get(v, "version"))) {
        out->type = KDP_DRA_ATTR_VERSION;
        out->string_value = json_string_value(x);
    } else {
        return -EINVAL;
    }
    return 0;
}

/* One described device (v: {attributes, capacity}) into sd, its
 * attributes and capacities appended at attrs, cn and cv. */
static void fill_dev(const char *name, json_t *v, kdp__slice_dev *sd, kdp_dra_attr *attrs,
                     const char **cn, const char **cv)
{
    *sd = (kdp__slice_dev){.name = name, .attrs = attrs, .cap_names = cn, .cap_values = cv};
    const char *an;
    json_t *av;
    json_object_foreach(json_object_get(v, "attributes"), an, av)
    {
        if (attr_from(an, av, &attrs[sd->n_attrs]) == 0) {
            sd->n_attrs++;
        }
    }
    json_object_foreach(json_object_get(v, "capacity"), an, av)
    {
        cn[sd->n_caps] = an;
        cv[sd->n_caps] = json_string_value(json_object_get(av, "value"));
        if (cv[sd->n_caps]) {
            sd->n_caps++;
        }
    }
}

static void publish(kdp__dra_api *a)
{
    json_t *devices = json_object_get(a->d->described, "devices");
    size_t n = json_object_size(devices);
    size_t n_attrs = 0;
    size_t n_caps = 0;
    const char *name;
    json_t *v;
    json_object_foreach(devices, name, v)
    {
        n_attrs += json_object_size(json_object_get(v, "attributes"));
        n_caps += json_object_size(json_object_get(v, "capacity"));
    }
    kdp__slice_dev *sd = calloc(n ? n : 1, sizeof(*sd));
    kdp_dra_attr *attrs = calloc(n_attrs ? n_attrs : 1, sizeof(*attrs));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    const char **cn = calloc(n_caps ? n_caps : 1, sizeof(*cn));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    const char **cv = calloc(n_caps ? n_caps : 1, sizeof(*cv));
    if (!sd || !attrs || !cn || !cv) {
        log_error("%s: out of memory publishing the slices", a->d->driver);
    } else {
        size_t i = 0;
        size_t ka = 0;
        size_t kc = 0;
        json_object_foreach(devices, name, v)
        {
            fill_dev(name, v, &sd[i], attrs + ka, cn + kc, cv + kc);
            ka += sd[i].n_attrs;
            kc += sd[i].n_caps;
            i++;
        }
        int r = kdp__slices_set(a->slices, sd, n);
        if (r < 0) {
            log_error("%s: cannot publish %zu devices: %s", a->d->driver, n, strerror(-r));
        }
    }
    free(sd);
    free(attrs);
    free(cn);
    free(cv);
}

void kdp__dra_api_publish(kdp__dra_api *a)
{
    if (!a->slices) {
        a->publish_wanted = true;
        return;
    }
    publish(a);
}

void kdp__dra_api_serving(kdp__dra_api *a, bool on)
{
    if (!on || a->slices) {
        return;
    }
    kdp__dra *d = a->d;
    int r = kdp__slices_new(a->api, d->driver, d->node, NULL, d->resync_ms, on_slices_status, a,
                            &a->slices);
    if (r < 0) {
        log_error("%s: cannot start publishing the slices: %s", d->driver, strerror(-r));
        return;
    }
    log_info("%s: publishing the slices of pool %s to %s (%s)", d->driver, d->node,
             kdp__api_server(a->api), kdp__api_source(a->api));
    if (a->publish_wanted) {
        a->publish_wanted = false;
        publish(a);
    }
}

/* ---- life ---- */

int kdp__dra_api_new(kdp__dra *d, const char *kubeconfig, kdp__dra_api **ret)
{
    kdp__dra_api *a = calloc(1, sizeof(*a));
    if (!a) {
        return -ENOMEM;
    }
    a->d = d;
    kdp__link_init(&a->reqs);
    char why[512] = "";
    int r = kdp__kconfig_load(kubeconfig, &a->kc, why, sizeof(why));
    if (r < 0) {
        if (r == -ENOENT) {
            log_error("%s: no API server configuration: %s (set kdp_dra_config.kubeconfig or "
                      "$KUBECONFIG to a kubeconfig file, or run in a pod with a service "
                      "account)",
                      d->driver, why);
        } else {
            log_error("%s: cannot load the API server configuration: %s", d->driver, why);
        }
        free(a);
        return r;
    }
    r = kdp__api_new(d->loop, a->kc, &a->api);
    if (r < 0) {
        log_error("%s: cannot make the API client: %s", d->driver, strerror(-r));
        kdp__kconfig_free(a->kc);
        free(a);
        return r;
    }
    log_info("%s: API server %s (%s)", d->driver, kdp__api_server(a->api), kdp__api_source(a->api));
    *ret = a;
    return 0;
}

void kdp__dra_api_free(kdp__dra_api *a)
{
    if (!a) {
        return;
    }
    kdp__slices_free(a->slices);
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
