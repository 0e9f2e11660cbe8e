/* SPDX-License-Identifier: MIT */
/* claimstatus: a driver's entries in a claim's status.devices (see
 * claimstatus.h). */
#include "k8s/claimstatus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "k8s/claimbind.h"

static bool ours(const json_t *d, const char *driver, const char *pool)
{
    const char *dr = json_string_value(json_object_get(d, "driver"));
    const char *po = json_string_value(json_object_get(d, "pool"));
    return dr && po && strcmp(dr, driver) == 0 && strcmp(po, pool) == 0;
}

/* The entry of e in old (same device and share), or NULL. */
static const json_t *same_in(const json_t *old, const char *driver, const char *pool,
                             const kdp__cstat_entry *e)
{
    return kdp__claim_status_entry(old, driver, pool, e->device, e->share_id, false);
}

/* Conditions whose type and status are as before keep their time. */
static void keep_times(json_t *entry, const json_t *before)
{
    size_t i;
    size_t j;
    json_t *c;
    const json_t *b;
    json_array_foreach(json_object_get(entry, "conditions"), i, c)
    {
        json_array_foreach(json_object_get(before, "conditions"), j, b)
        {
            if (json_equal(json_object_get(c, "type"), json_object_get(b, "type")) &&
                json_equal(json_object_get(c, "status"), json_object_get(b, "status")) &&
                json_object_get(b, "lastTransitionTime")) {
                json_object_set(c, "lastTransitionTime", json_object_get(b, "lastTransitionTime"));
            }
        }
    }
}

static json_t *entry_json(const json_t *old, const char *driver, const char *pool,
                          const kdp__cstat_entry *e, int *err)
{
    json_t *o = e->fields ? json_loads(e->fields, 0, NULL) : json_object();
    if (!json_is_object(o)) {
        json_decref(o);
        *err = -EINVAL;
        return NULL;
    }
    if (json_object_set_new(o, "driver", json_string(driver)) < 0 ||
        json_object_set_new(o, "pool", json_string(pool)) < 0 ||
        json_object_set_new(o, "device", json_string(e->device)) < 0 ||
        (e->share_id && json_object_set_new(o, "shareID", json_string(e->share_id)) < 0)) {
        json_decref(o);
        *err = -ENOMEM;
        return NULL;
    }
    const json_t *before = same_in(old, driver, pool, e);
    if (before) {
        keep_times(o, before);
    }
    return o;
}

json_t *kdp__cstat_merge(const json_t *claim, const char *driver, const char *pool,
                         const kdp__cstat_entry *e, size_t n, bool *changed, int *err)
{
    const json_t *old = json_object_get(json_object_get(claim, "status"), "devices");
    json_t *out = json_array();
    *err = out ? 0 : -ENOMEM;
    size_t i;
    const json_t *d;
    json_array_foreach(old, i, d)
    {
        if (!*err && !ours(d, driver, pool) && json_array_append(out, (json_t *)d) < 0) {
            *err = -ENOMEM;
        }
    }
    for (size_t k = 0; !*err && k < n; k++) {
        const json_t *before = e[k].keep ? same_in(old, driver, pool, &e[k]) : NULL;
        if (e[k].keep) {
            if (before && json_array_append(out, (json_t *)before) < 0) {
                *err = -ENOMEM;
            }
            continue;
        }
        json_t *o = entry_json(old, driver, pool, &e[k], err);
        if (o && json_array_append_new(out, o) < 0) {
            *err = -ENOMEM;
        }
    }
    if (*err) {
        json_decref(out);
        return NULL;
    }
    /* the same entries in another order is a change too: the list is ours */
    *changed = !(old ? json_equal(old, out) : json_array_size(out) == 0);
    return out;
}

/* ---- the writer ---- */

struct kdp__cstat_req {
    kdp__api *a;
    char path[512];
    char *uid, *driver, *pool;
    kdp__cstat_entry *e;
    size_t n;
    unsigned conflicts;
    kdp__api_req *call;
    kdp__cstat_done_cb done;
    void *ud;
};

static void req_free(kdp__cstat_req *r)
{
    for (size_t i = 0; r->e && i < r->n; i++) {
        free((char *)r->e[i].device);
        free((char *)r->e[i].share_id);
        free((char *)r->e[i].fields);
    }
    free(r->e);
    free(r->uid);
    free(r->driver);
    free(r->pool);
    free(r);
}

static void finish(kdp__cstat_req *r, int err, const char *why)
{
    r->call = NULL;
    r->done(err, why, r->ud);
    req_free(r);
}

static void on_get(int err, long code, json_t *obj, const char *why, void *ud);

static void on_put(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    (void)obj;
    kdp__cstat_req *r = ud;
    r->call = NULL;
    if (err == -ESTALE && ++r->conflicts <= KDP__CSTAT_MAX_CONFLICTS) {
        err = kdp__api_call_bounded(r->a, "GET", r->path, NULL, KDP__API_BOUND_OBJECT, on_get, r,
                                    &r->call);
        if (err == 0) {
            return;
        }
        why = "cannot read the claim again after a conflict";
    }
    finish(r, err, err ? why : NULL);
}

static void on_get(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kdp__cstat_req *r = ud;
    r->call = NULL;
    if (err < 0) {
        finish(r, err, why);
        return;
    }
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    if (!uid || strcmp(uid, r->uid) != 0) {
        finish(r, -ESTALE, "the claim of that name is another one now (its UID changed)");
        return;
    }
    bool changed = false;
    int merr = 0;
    json_t *devs = kdp__cstat_merge(obj, r->driver, r->pool, r->e, r->n, &changed, &merr);
    if (!devs || !changed) {
        json_decref(devs);
        finish(r, merr, merr ? "the status is not a JSON object, or out of memory" : NULL);
        return;
    }
    json_t *body = json_deep_copy(obj);
    json_t *st = body ? json_object_get(body, "status") : NULL;
    if (body && !st) {
        st = json_object();
        json_object_set_new(body, "status", st);
    }
    int r2 = -ENOMEM;
    if (st && json_array_size(devs)) {
        r2 = json_object_set(st, "devices", devs);
    } else if (st) {
        (void)json_object_del(st, "devices"); /* none left: the field goes */
        r2 = 0;
    }
    json_decref(devs);
    char put[sizeof(r->path) + 8];
    snprintf(put, sizeof(put), "%s/status", r->path);
    err = r2 < 0 ? -ENOMEM
                 : kdp__api_call_bounded(r->a, "PUT", put, body, KDP__API_BOUND_OBJECT, on_put, r,
                                         &r->call);
    json_decref(body);
    if (err < 0) {
        finish(r, err, "cannot write the claim's status");
    }
}

int kdp__cstat_write(kdp__api *a, const char *version, const char *ns, const char *name,
                     const char *uid, const char *driver, const char *pool,
                     const kdp__cstat_entry *e, size_t n, kdp__cstat_done_cb done, void *ud,
                     kdp__cstat_req **ret)
{
    if (!a || !version || !uid || !driver || !pool || !done || (n && !e) ||
        n > KDP__CSTAT_MAX_ENTRIES || kdp__k8snames_dns_label(ns, NULL) < 0 ||
        kdp__k8snames_dns_subdomain(name, NULL) < 0 || kdp__k8snames_dns_label(version, NULL) < 0) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!e[i].device) {
            return -EINVAL;
        }
    }
    kdp__cstat_req *r = calloc(1, sizeof(*r));
    if (!r) {
        return -ENOMEM;
    }
    r->a = a;
    r->done = done;
    r->ud = ud;
    snprintf(r->path, sizeof(r->path), "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims/%s",
             version, ns, name);
    r->uid = strdup(uid);
    r->driver = strdup(driver);
    r->pool = strdup(pool);
    r->e = calloc(n ? n : 1, sizeof(*r->e));
    bool oom = !r->uid || !r->driver || !r->pool || !r->e;
    for (size_t i = 0; !oom && i < n; r->n = ++i) {
        r->e[i].device = strdup(e[i].device);
        r->e[i].share_id = e[i].share_id ? strdup(e[i].share_id) : NULL;
        r->e[i].fields = e[i].fields ? strdup(e[i].fields) : NULL;
        r->e[i].keep = e[i].keep;
        oom = !r->e[i].device || (e[i].share_id && !r->e[i].share_id) ||
              (e[i].fields && !r->e[i].fields);
    }
    int err = oom ? -ENOMEM
                  : kdp__api_call_bounded(a, "GET", r->path, NULL, KDP__API_BOUND_OBJECT, on_get, r,
                                          &r->call);
    if (err < 0) {
        req_free(r);
        return err;
    }
    if (ret) {
        *ret = r;
    }
    return 0;
}

void kdp__cstat_cancel(kdp__cstat_req *r)
{
    if (r) {
        kdp__api_cancel(r->call);
        req_free(r);
    }
}
