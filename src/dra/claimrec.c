/* SPDX-License-Identifier: MIT */
/* claimrec: a claim as kdp keeps it (see claimrec.h). */
#include "dra/claimrec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/cdi.h"
#include "dra/prepared.h"
#include "k8s/sharecheck.h"

/* ---- memory ---- */

int kdp__dra_rec_set(char **member, const char *value)
{
    char *c = value ? strdup(value) : NULL;
    if (value && !c) {
        return -ENOMEM;
    }
    free(*member);
    *member = c;
    return 0;
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

static void answer_clear(kdp__dra_rdev *d)
{
    kdp__dra_edits_clear(&d->edits);
    strv_free(d->cdi_ids, d->n_cdi_ids);
    free(d->cdi_name);
    free(d->status);
    d->cdi_ids = NULL;
    d->cdi_name = d->status = NULL;
    d->n_cdi_ids = 0;
}

static void claim_answer_clear(kdp__dra_rec *r)
{
    kdp__dra_edits_clear(&r->claim_edits);
    free(r->claim_cdi_name);
    r->claim_cdi_name = NULL;
}

static void rdev_clear(kdp__dra_rdev *d)
{
    answer_clear(d);
    free(d->request);
    free(d->device);
    free(d->device_id);
    free(d->share_id);
    free(d->attrs);
    free(d->api_status);
    strv_free(d->bind, d->n_bind + d->n_bind_fail);
    kdp__share_quantities_free(d->consumed, d->n_consumed);
    free(d->cfg);
    kdp__dra_node_clear(&d->default_node);
}

void kdp__dra_rec_free(kdp__dra_rec *r)
{
    if (!r) {
        return;
    }
    for (size_t i = 0; r->devs && i < r->n_devs; i++) {
        rdev_clear(&r->devs[i]);
    }
    free(r->devs);
    claim_answer_clear(r);
    strv_free(r->configs, r->n_configs);
    free(r->ns);
    free(r->name);
    free(r->uid);
    free(r->pod_claim);
    free(r);
}

kdp__dra_rec *kdp__dra_rec_new(const char *ns, const char *name, const char *uid)
{
    kdp__dra_rec *r = calloc(1, sizeof(*r));
    if (!r || kdp__dra_rec_set(&r->ns, ns) < 0 || kdp__dra_rec_set(&r->name, name) < 0 ||
        kdp__dra_rec_set(&r->uid, uid) < 0) {
        kdp__dra_rec_free(r);
        return NULL;
    }
    return r;
}

int kdp__dra_rec_add_dev(kdp__dra_rec *r, const char *request, const char *device,
                         const char *share_id, bool admin_access, kdp__dra_rdev **ret)
{
    kdp__dra_rdev *v = realloc(r->devs, (r->n_devs + 1) * sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    r->devs = v;
    kdp__dra_rdev *d = &v[r->n_devs];
    memset(d, 0, sizeof(*d));
    r->n_devs++;
    d->admin_access = admin_access;
    if (kdp__dra_rec_set(&d->request, request) < 0 || kdp__dra_rec_set(&d->device, device) < 0 ||
        kdp__dra_rec_set(&d->share_id, share_id) < 0) {
        return -ENOMEM; /* the device stays, half-made: freed with r */
    }
    if (ret) {
        *ret = d;
    }
    return 0;
}

int kdp__dra_rec_set_consumed(kdp__dra_rdev *d, const kdp_dra_quantity *q, size_t n)
{
    kdp_dra_quantity *c = n ? kdp__share_quantities_dup(q, n) : NULL;
    if (n && !c) {
        return -ENOMEM;
    }
    kdp__share_quantities_free(d->consumed, d->n_consumed);
    d->consumed = c;
    d->n_consumed = n;
    return 0;
}

int kdp__dra_rec_add_config(kdp__dra_rec *r, size_t i, const char *text)
{
    size_t k = 0;
    while (k < r->n_configs && strcmp(r->configs[k], text) != 0) {
        k++;
    }
    if (k == r->n_configs) {
        char **v = realloc(r->configs, (r->n_configs + 1) * sizeof(*v));
        if (!v) {
            return -ENOMEM;
        }
        r->configs = v;
        if (!(v[k] = strdup(text))) {
            return -ENOMEM;
        }
        r->n_configs++;
    }
    kdp__dra_rdev *d = &r->devs[i];
    size_t *c = realloc(d->cfg, (d->n_cfg + 1) * sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    d->cfg = c;
    c[d->n_cfg++] = k;
    return 0;
}

static int strv_dup(char *const *v, size_t n, char ***ret)
{
    *ret = NULL;
    if (n == 0) {
        return 0;
    }
    char **o = calloc(n, sizeof(*o));
    if (!o) {
        return -ENOMEM;
    }
    *ret = o;
    for (size_t i = 0; i < n; i++) {
        if (!(o[i] = strdup(v[i]))) {
            return -ENOMEM;
        }
    }
    return 0;
}

static int answer_copy(kdp__dra_rdev *to, const kdp__dra_rdev *from)
{
    int r = kdp__dra_edits_copy(&to->edits, &from->edits);
    if (r == 0) {
        r = strv_dup(from->cdi_ids, from->n_cdi_ids, &to->cdi_ids);
        to->n_cdi_ids = to->cdi_ids ? from->n_cdi_ids : 0;
    }
    if (r == 0) {
        r = kdp__dra_rec_set(&to->cdi_name, from->cdi_name);
    }
    if (r == 0) {
        r = kdp__dra_rec_set(&to->status, from->status);
    }
    return r;
}

static int rdev_copy(kdp__dra_rdev *to, const kdp__dra_rdev *from, bool answer)
{
    memset(to, 0, sizeof(*to));
    to->admin_access = from->admin_access;
    int r = kdp__dra_rec_set(&to->request, from->request);
    if (r == 0) {
        r = kdp__dra_rec_set(&to->device, from->device);
    }
    if (r == 0) {
        r = kdp__dra_rec_set(&to->device_id, from->device_id);
    }
    if (r == 0) {
        r = kdp__dra_rec_set(&to->share_id, from->share_id);
    }
    if (r == 0) {
        r = kdp__dra_rec_set(&to->attrs, from->attrs);
    }
    if (r == 0) { /* a prepare again (no answer): what it wrote is the claim's now */
        r = kdp__dra_rec_set(&to->api_status,
                             from->api_status || answer ? from->api_status : from->status);
    }
    if (r == 0) {
        r = strv_dup(from->bind, from->n_bind + from->n_bind_fail, &to->bind);
        to->n_bind = to->bind ? from->n_bind : 0; /* a failure's NULLs freed too */
        to->n_bind_fail = to->bind ? from->n_bind_fail : 0;
    }
    if (r == 0) {
        r = kdp__dra_rec_set_consumed(to, from->consumed, from->n_consumed);
    }
    if (r == 0 && from->default_node.path) {
        r = kdp__dra_node_copy(&to->default_node, &from->default_node);
    }
    if (r == 0 && from->n_cfg) {
        to->cfg = malloc(from->n_cfg * sizeof(*to->cfg));
        r = to->cfg ? 0 : -ENOMEM;
        if (r == 0) {
            memcpy(to->cfg, from->cfg, from->n_cfg * sizeof(*to->cfg));
            to->n_cfg = from->n_cfg;
        }
    }
    if (r == 0 && answer) {
        r = answer_copy(to, from);
    }
    return r;
}

kdp__dra_rec *kdp__dra_rec_dup(const kdp__dra_rec *r, bool answer)
{
    kdp__dra_rec *c = kdp__dra_rec_new(r->ns, r->name, r->uid);
    int err = c ? 0 : -ENOMEM;
    if (err == 0) {
        memcpy(c->boot_id, r->boot_id, sizeof(c->boot_id));
        c->prepared = answer && r->prepared;
        c->md_gen = answer ? r->md_gen : 0;
        err = kdp__dra_rec_set(&c->pod_claim, r->pod_claim);
    }
    if (err == 0) {
        err = strv_dup(r->configs, r->n_configs, &c->configs);
        c->n_configs = c->configs ? r->n_configs : 0;
    }
    if (err == 0 && r->n_devs) {
        c->devs = calloc(r->n_devs, sizeof(*c->devs));
        err = c->devs ? 0 : -ENOMEM;
    }
    for (size_t i = 0; err == 0 && i < r->n_devs; i++) {
        c->n_devs++;
        err = rdev_copy(&c->devs[i], &r->devs[i], answer);
    }
    if (err == 0 && answer) {
        err = kdp__dra_edits_copy(&c->claim_edits, &r->claim_edits);
    }
    if (err == 0 && answer) {
        err = kdp__dra_rec_set(&c->claim_cdi_name, r->claim_cdi_name);
    }
    if (err < 0) {
        kdp__dra_rec_free(c);
        return NULL;
    }
    if (!answer) {
        c->boot_id[0] = '\0';
    }
    return c;
}

int kdp__dra_rec_from_claim(const kdp__claim *c, kdp__dra_rec **ret)
{
    kdp__dra_rec *r = kdp__dra_rec_new(c->ns, c->name, c->uid);
    int err = r ? kdp__dra_rec_set(&r->pod_claim, c->pod_claim) : -ENOMEM;
    for (size_t i = 0; err == 0 && i < c->n_devs; i++) {
        const kdp__claim_dev *cd = &c->devs[i];
        kdp__dra_rdev *d = NULL;
        err = kdp__dra_rec_add_dev(r, cd->request, cd->device, cd->share_id, cd->admin_access, &d);
        if (err == 0) {
            err = kdp__dra_rec_set_consumed(d, cd->consumed, cd->n_consumed);
        }
        if (err == 0) {
            err = kdp__dra_rec_set(&d->api_status, cd->status);
        }
        if (err == 0) {
            err = strv_dup(cd->bind, cd->n_bind + cd->n_bind_fail, &d->bind);
            d->n_bind = d->bind ? cd->n_bind : 0;
            d->n_bind_fail = d->bind ? cd->n_bind_fail : 0;
        }
        for (size_t j = 0; err == 0 && j < cd->n_configs; j++) {
            err = kdp__dra_rec_add_config(r, i, cd->configs[j]);
        }
    }
    if (err < 0) {
        kdp__dra_rec_free(r);
        return err;
    }
    *ret = r;
    return 0;
}

static size_t str_bytes(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static size_t strv_bytes(char *const *v, size_t n)
{
    size_t b = n * sizeof(char *);
    for (size_t i = 0; i < n; i++) {
        b += str_bytes(v[i]);
    }
    return b;
}

size_t kdp__dra_rec_bytes(const kdp__dra_rec *r)
{
    size_t b = sizeof(*r) + str_bytes(r->ns) + str_bytes(r->name) + str_bytes(r->uid) +
               strv_bytes(r->configs, r->n_configs) + kdp__dra_edits_bytes(&r->claim_edits) +
               str_bytes(r->claim_cdi_name) + str_bytes(r->pod_claim);
    for (size_t i = 0; i < r->n_devs; i++) {
        const kdp__dra_rdev *d = &r->devs[i];
        const kdp_cdi_node *dn = &d->default_node;
        b += sizeof(*d) + str_bytes(d->request) + str_bytes(d->device) + str_bytes(d->device_id) +
             str_bytes(d->share_id) + d->n_cfg * sizeof(size_t) + str_bytes(dn->path) +
             str_bytes(dn->host_path) + str_bytes(dn->permissions) +
             kdp__dra_edits_bytes(&d->edits) + strv_bytes(d->cdi_ids, d->n_cdi_ids) +
             str_bytes(d->cdi_name) + str_bytes(d->status) + str_bytes(d->attrs) +
             d->n_consumed * sizeof(*d->consumed);
        for (size_t j = 0; j < d->n_consumed; j++) {
            b += str_bytes(d->consumed[j].name) + str_bytes(d->consumed[j].value);
        }
    }
    return b;
}

bool kdp__dra_rec_conflict(const kdp__dra_rec *a, const kdp__dra_rec *b, const char **ret_device)
{
    for (size_t i = 0; i < a->n_devs; i++) {
        const kdp__dra_rdev *da = &a->devs[i];
        for (size_t j = 0; j < b->n_devs; j++) {
            const kdp__dra_rdev *db = &b->devs[j];
            if (strcmp(da->device, db->device) != 0 || da->admin_access || db->admin_access) {
                continue;
            }
            if (da->share_id && db->share_id && strcmp(da->share_id, db->share_id) != 0) {
                continue; /* two shares of a device shared by design */
            }
            if (ret_device) {
                *ret_device = da->device;
            }
            return true;
        }
    }
    return false;
}

/* ---- the author's view ---- */

int kdp__dra_claimview_init(kdp__dra_claimview *v, const kdp__dra_rec *r)
{
    memset(v, 0, sizeof(*v));
    size_t n_cfg = 0;
    for (size_t i = 0; i < r->n_devs; i++) {
        n_cfg += r->devs[i].n_cfg;
    }
    v->allocs = calloc(r->n_devs ? r->n_devs : 1, sizeof(*v->allocs));
    v->configs = calloc(n_cfg ? n_cfg : 1, sizeof(*v->configs));
    if (!v->allocs || !v->configs) {
        kdp__dra_claimview_done(v);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < r->n_devs; i++) {
        const kdp__dra_rdev *d = &r->devs[i];
        kdp_dra_alloc *a = &v->allocs[i];
        *a = (kdp_dra_alloc){.request = d->request,
                             .device = d->device,
                             .device_id = d->device_id,
                             .share_id = d->share_id,
                             .consumed = d->consumed,
                             .n_consumed = d->n_consumed,
                             .admin_access = d->admin_access,
                             .configs = v->configs + k,
                             .n_configs = d->n_cfg,
                             .binding_conditions = (const char *const *)d->bind,
                             .n_binding_conditions = d->n_bind,
                             .binding_failure_conditions =
                                 (const char *const *)(d->bind ? d->bind + d->n_bind : NULL),
                             .n_binding_failure_conditions = d->n_bind_fail};
        for (size_t j = 0; j < d->n_cfg; j++) {
            v->configs[k++] = d->cfg[j] < r->n_configs ? r->configs[d->cfg[j]] : "{}";
        }
    }
    v->claim.ref = (kdp_dra_claim_ref){r->ns, r->name, r->uid};
    v->claim.devices = v->allocs;
    v->claim.n_devices = r->n_devs;
    return 0;
}

void kdp__dra_claimview_done(kdp__dra_claimview *v)
{
    free(v->allocs);
    free(v->configs);
    memset(v, 0, sizeof(*v));
}

/* ---- the prepare's answer ---- */

/* Unique in the claim's spec: '_' is never in a device name (a DNS
 * label). */
static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

int kdp__dra_rec_cdi_name(const kdp__dra_rec *r, size_t i, char **ret)
{
    const kdp__dra_rdev *d = &r->devs[i];
    const char *share = d->share_id;
    for (size_t k = 0; k < i; k++) {
        const kdp__dra_rdev *o = &r->devs[k];
        if (strcmp(o->device, d->device) == 0 && same_str(o->share_id, share)) {
            return asprintf(ret, "%s-%s%s%s_%zu", r->uid, d->device, share ? "-" : "",
                            share ? share : "", i);
        }
    }
    return asprintf(ret, "%s-%s%s%s", r->uid, d->device, share ? "-" : "", share ? share : "");
}

static int push(char ***v, size_t *n, char *s)
{
    if (!s) {
        return -ENOMEM;
    }
    char **nv = realloc(*v, (*n + 1) * sizeof(*nv));
    if (!nv) {
        free(s);
        return -ENOMEM;
    }
    *v = nv;
    nv[(*n)++] = s;
    return 0;
}

int kdp__dra_rdev_add_cdi_id(kdp__dra_rdev *d, char *id)
{
    return push(&d->cdi_ids, &d->n_cdi_ids, id);
}

/* Device i's own device in kdp's spec and its CDI ID. */
static int add_spec_device(kdp__dra_rec *r, size_t i, const char *kind)
{
    kdp__dra_rdev *d = &r->devs[i];
    char *name = NULL;
    char *id = NULL;
    if (kdp__dra_rec_cdi_name(r, i, &name) < 0) {
        return -ENOMEM;
    }
    d->cdi_name = name;
    if (asprintf(&id, "%s=%s", kind, name) < 0) {
        return -ENOMEM;
    }
    return push(&d->cdi_ids, &d->n_cdi_ids, id);
}

static int merge_dev(kdp__dra_rec *r, size_t i, const kdp__dra_pdev *pd, const char *kind)
{
    kdp__dra_rdev *d = &r->devs[i];
    size_t n_ids = pd ? pd->n_cdi_ids : 0;
    bool use_default =
        (!pd || (kdp__dra_edits_empty(&pd->edits) && n_ids == 0)) && d->default_node.path;
    int err = use_default ? kdp__dra_edits_add_node(&d->edits, &d->default_node)
              : pd        ? kdp__dra_edits_copy(&d->edits, &pd->edits)
                          : 0;
    if (err == 0 && !kdp__dra_edits_empty(&d->edits)) {
        err = add_spec_device(r, i, kind);
    }
    for (size_t j = 0; err == 0 && j < n_ids; j++) {
        err = push(&d->cdi_ids, &d->n_cdi_ids, strdup(pd->cdi_ids[j]));
    }
    if (err == 0) {
        err = kdp__dra_rec_set(&d->status, pd && pd->status ? pd->status : d->api_status);
    }
    return err;
}

/* The whole claim's edits: a device of kdp's spec named after the claim's
 * UID, its CDI ID handed over with every device. */
static int merge_claim(kdp__dra_rec *r, const kdp__dra_edits *e, const char *kind)
{
    if (!e || kdp__dra_edits_empty(e)) {
        return 0;
    }
    char *id = NULL;
    int err = kdp__dra_edits_copy(&r->claim_edits, e);
    if (err == 0) {
        err = kdp__dra_rec_set(&r->claim_cdi_name, r->uid);
    }
    if (err == 0 && asprintf(&id, "%s=%s", kind, r->uid) < 0) {
        err = -ENOMEM;
    }
    for (size_t i = 0; err == 0 && i < r->n_devs; i++) {
        kdp__dra_rdev *d = &r->devs[i];
        err = push(&d->cdi_ids, &d->n_cdi_ids, strdup(id));
    }
    free(id);
    return err;
}

int kdp__dra_rec_merge(kdp__dra_rec *r, const kdp_dra_prepared *pr, const char *kind)
{
    int err = 0;
    for (size_t i = 0; i < r->n_devs; i++) {
        answer_clear(&r->devs[i]);
    }
    claim_answer_clear(r);
    for (size_t i = 0; err == 0 && i < r->n_devs; i++) {
        err = merge_dev(r, i, pr && i < pr->n ? &pr->devs[i] : NULL, kind);
    }
    if (err == 0) {
        err = merge_claim(r, pr ? &pr->claim : NULL, kind);
    }
    if (err < 0) {
        for (size_t i = 0; i < r->n_devs; i++) {
            answer_clear(&r->devs[i]);
        }
        claim_answer_clear(r);
    }
    r->prepared = err == 0;
    return err;
}

bool kdp__dra_rec_has_cdi(const kdp__dra_rec *r)
{
    for (size_t i = 0; i < r->n_devs; i++) {
        if (r->devs[i].cdi_name) {
            return true;
        }
    }
    return r->claim_cdi_name != NULL || r->md_gen > 0;
}

int kdp__dra_rec_write_cdi(const kdp__dra_rec *r, const char *dir, const char *file,
                           const char *kind, unsigned mode, const kdp__cdi_dev *extra,
                           size_t n_extra)
{
    kdp__cdi_dev *cd = calloc(r->n_devs + 1 + n_extra, sizeof(*cd));
    if (!cd) {
        return -ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < r->n_devs; i++) {
        const kdp__dra_rdev *d = &r->devs[i];
        if (d->cdi_name) {
            cd[m++] = kdp__dra_edits_cdi(&d->edits, d->cdi_name);
        }
    }
    if (r->claim_cdi_name) {
        cd[m++] = kdp__dra_edits_cdi(&r->claim_edits, r->claim_cdi_name);
    }
    for (size_t i = 0; i < n_extra; i++) {
        cd[m++] = extra[i];
    }
    int err = kdp__cdi_write_file(dir, file, kind, cd, m, mode);
    free(cd);
    return err;
}
