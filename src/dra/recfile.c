/* SPDX-License-Identifier: MIT */
/* recfile: claim records as the checkpoint holds them (see recfile.h). */
#include "dra/recfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- to JSON ---- */

static int set_str(json_t *o, const char *key, const char *v)
{
    return v ? json_object_set_new(o, key, json_string(v)) : 0;
}

static json_t *strv_json(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *dev_json(const kdp__dra_rdev *d)
{
    json_t *cfg = json_array();
    json_t *o = json_pack("{s:s, s:s, s:b}", "request", d->request, "device", d->device,
                          "admin_access", d->admin_access);
    int bad = !cfg || !o;
    for (size_t i = 0; !bad && i < d->n_cfg; i++) {
        bad = json_array_append_new(cfg, json_integer((json_int_t)d->cfg[i])) < 0;
    }
    if (!bad) {
        bad = set_str(o, "device_id", d->device_id) < 0 ||
              set_str(o, "share_id", d->share_id) < 0 || set_str(o, "cdi_name", d->cdi_name) < 0 ||
              set_str(o, "status", d->status) < 0 || set_str(o, "attrs", d->attrs) < 0 ||
              json_object_set(o, "configs", cfg) < 0 || kdp__dra_edits_to_json(&d->edits, o) < 0 ||
              json_object_set_new(o, "cdi_ids", strv_json(d->cdi_ids, d->n_cdi_ids)) < 0 ||
              (d->n_bind + d->n_bind_fail &&
               (json_object_set_new(o, "binding_conditions", strv_json(d->bind, d->n_bind)) < 0 ||
                json_object_set_new(o, "binding_failure_conditions",
                                    strv_json(d->bind + d->n_bind, d->n_bind_fail)) < 0)) ||
              (d->default_node.path &&
               json_object_set_new(o, "default_node", kdp__dra_node_json(&d->default_node)) < 0);
    }
    if (!bad && d->n_consumed) {
        json_t *c = json_object();
        for (size_t i = 0; c && i < d->n_consumed; i++) {
            if (json_object_set_new(c, d->consumed[i].name, json_string(d->consumed[i].value)) <
                0) {
                json_decref(c);
                c = NULL;
            }
        }
        bad = json_object_set_new(o, "consumed", c) < 0;
    }
    json_decref(cfg);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The whole claim's edits, when it has some: {"cdi_name", "nodes", "env",
 * "mounts"}. */
static int claim_json(const kdp__dra_rec *r, json_t *o)
{
    if (!r->claim_cdi_name) {
        return 0;
    }
    json_t *c = json_pack("{s:s}", "cdi_name", r->claim_cdi_name);
    int bad = !c || kdp__dra_edits_to_json(&r->claim_edits, c) < 0;
    if (!bad) {
        return json_object_set_new(o, "claim", c) < 0 ? -ENOMEM : 0;
    }
    json_decref(c);
    return -ENOMEM;
}

/* A config as JSON: its text parsed (the API's parameters are JSON), or
 * the text as a string if it is not. */
static json_t *config_json(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    return v ? v : json_pack("{s:s}", "kdp_text", text);
}

json_t *kdp__recfile_to_json(const kdp__dra_rec *r)
{
    json_t *cfgs = json_array();
    json_t *devs = json_array();
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:b}", "namespace", r->ns, "name", r->name, "uid",
                          r->uid, "boot_id", r->boot_id, "prepared", r->prepared);
    int bad = !cfgs || !devs || !o;
    for (size_t i = 0; !bad && i < r->n_configs; i++) {
        bad = json_array_append_new(cfgs, config_json(r->configs[i])) < 0;
    }
    for (size_t i = 0; !bad && i < r->n_devs; i++) {
        bad = json_array_append_new(devs, dev_json(&r->devs[i])) < 0;
    }
    if (!bad) {
        bad = json_object_set(o, "configs", cfgs) < 0 || json_object_set(o, "devices", devs) < 0 ||
              claim_json(r, o) < 0 || set_str(o, "pod_claim", r->pod_claim) < 0 ||
              (r->md_gen &&
               json_object_set_new(o, "md_gen", json_integer((json_int_t)r->md_gen)) < 0);
    }
    json_decref(cfgs);
    json_decref(devs);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- from JSON ---- */

typedef struct reader {
    char *why;
    size_t len;
    int err;
} reader;

static void bad(reader *rd, const char *field)
{
    if (rd->err == 0) {
        rd->err = -EINVAL;
        snprintf(rd->why, rd->len, "a claim record's %s is missing or not what it should be",
                 field);
    }
}

static const char *str(reader *rd, const json_t *o, const char *key, bool required)
{
    const json_t *v = json_object_get(o, key);
    if (!v && !required) {
        return NULL;
    }
    if (!json_is_string(v)) {
        bad(rd, key);
        return NULL;
    }
    return json_string_value(v);
}

static void oom(reader *rd, int r)
{
    if (r < 0 && rd->err == 0) {
        rd->err = r;
        snprintf(rd->why, rd->len, "out of memory");
    }
}

static void read_node(reader *rd, const json_t *o, const char *key, kdp_cdi_node *n)
{
    int r = kdp__dra_node_from_json(o, n);
    if (r == -EINVAL) {
        bad(rd, key);
    }
    oom(rd, r == -EINVAL ? 0 : r);
}

/* nodes, env and mounts of o into e. */
static void read_edits(reader *rd, const json_t *o, kdp__dra_edits *e)
{
    const char *field = NULL;
    int r = kdp__dra_edits_from_json(o, e, &field);
    if (r == -EINVAL) {
        bad(rd, field);
    }
    oom(rd, r == -EINVAL ? 0 : r);
}

static void read_strv(reader *rd, const json_t *a, const char *key, char ***v, size_t *n)
{
    if (a && !json_is_array(a)) {
        bad(rd, key);
        return;
    }
    size_t m = json_array_size(a);
    if (m == 0) {
        return;
    }
    *v = calloc(m, sizeof(**v));
    oom(rd, *v ? 0 : -ENOMEM);
    for (size_t i = 0; *v && rd->err == 0 && i < m; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s) {
            bad(rd, key);
            break;
        }
        (*n)++;
        oom(rd, kdp__dra_rec_set(&(*v)[i], s));
    }
}

/* A device's binding conditions then its failure conditions, at most 4
 * of each (the API's bound). */
static void read_binding(reader *rd, const json_t *o, kdp__dra_rdev *d)
{
    const json_t *c = json_object_get(o, "binding_conditions");
    const json_t *f = json_object_get(o, "binding_failure_conditions");
    if (rd->err || (!c && !f)) {
        return;
    }
    if (json_array_size(c) > 4 || json_array_size(f) > 4) {
        bad(rd, "devices[].binding_conditions");
        return;
    }
    char **v = NULL;
    size_t n = 0;
    read_strv(rd, c, "devices[].binding_conditions", &v, &n);
    char **w = NULL;
    size_t m = 0;
    read_strv(rd, f, "devices[].binding_failure_conditions", &w, &m);
    char **all = rd->err == 0 && n + m ? calloc(n + m, sizeof(*all)) : NULL;
    oom(rd, n + m && !all ? -ENOMEM : 0);
    for (size_t i = 0; i < n + m; i++) {
        char *x = i < n ? v[i] : w[i - n];
        if (all) {
            all[i] = x;
        } else {
            free(x);
        }
    }
    free(v);
    free(w);
    if (all) {
        d->bind = all;
        d->n_bind = n;
        d->n_bind_fail = m;
    }
}

/* Device configs: indices (version 2) or texts (version 1). */
static void read_configs(reader *rd, kdp__dra_rec *r, size_t i, const json_t *a, int version)
{
    size_t k;
    const json_t *c;
    json_array_foreach(a, k, c)
    {
        if (rd->err) {
            return;
        }
        if (version >= 2) {
            json_int_t x = json_integer_value(c);
            if (!json_is_integer(c) || x < 0 || (size_t)x >= r->n_configs) {
                bad(rd, "devices[].configs");
                return;
            }
            kdp__dra_rdev *d = &r->devs[i];
            size_t *v = realloc(d->cfg, (d->n_cfg + 1) * sizeof(*v));
            oom(rd, v ? 0 : -ENOMEM);
            if (v) {
                d->cfg = v;
                v[d->n_cfg++] = (size_t)x;
            }
        } else if (!json_is_string(c)) {
            bad(rd, "devices[].configs");
        } else {
            oom(rd, kdp__dra_rec_add_config(r, i, json_string_value(c)));
        }
    }
}

/* "consumed": {name: quantity} (a share's; absent otherwise). */
static void read_consumed(reader *rd, kdp__dra_rdev *d, const json_t *c)
{
    if (!c || rd->err) {
        return;
    }
    size_t n = json_object_size(c);
    if (!json_is_object(c) || n > KDP__CLAIM_MAX_CONSUMED) {
        bad(rd, "devices[].consumed");
        return;
    }
    kdp_dra_quantity *q = calloc(n ? n : 1, sizeof(*q));
    oom(rd, q ? 0 : -ENOMEM);
    size_t k = 0;
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)c, name, v)
    {
        if (!q || !json_is_string(v)) {
            bad(rd, "devices[].consumed");
            break;
        }
        q[k++] = (kdp_dra_quantity){name, json_string_value(v)};
    }
    if (rd->err == 0) {
        oom(rd, kdp__dra_rec_set_consumed(d, q, k));
    }
    free(q);
}

static void read_dev(reader *rd, kdp__dra_rec *r, const json_t *o, int version)
{
    kdp__dra_rdev *d = NULL;
    const char *req = str(rd, o, "request", true);
    const char *dev = str(rd, o, "device", true);
    if (rd->err) {
        return;
    }
    oom(rd, kdp__dra_rec_add_dev(r, req, dev, str(rd, o, "share_id", false),
                                 json_is_true(json_object_get(o, "admin_access")), &d));
    if (rd->err) {
        return;
    }
    oom(rd, kdp__dra_rec_set(&d->device_id, str(rd, o, "device_id", false)));
    oom(rd, kdp__dra_rec_set(&d->cdi_name, str(rd, o, "cdi_name", false)));
    oom(rd, kdp__dra_rec_set(&d->status, str(rd, o, "status", false)));
    oom(rd, kdp__dra_rec_set(&d->attrs, str(rd, o, "attrs", false)));
    read_consumed(rd, d, json_object_get(o, "consumed"));
    const json_t *def = json_object_get(o, "default_node");
    if (json_is_object(def) && rd->err == 0) {
        read_node(rd, def, "default_node", &d->default_node);
    }
    read_configs(rd, r, r->n_devs - 1, json_object_get(o, "configs"), version);
    if (rd->err == 0) {
        read_edits(rd, o, &d->edits);
    }
    read_strv(rd, json_object_get(o, "cdi_ids"), "cdi_ids", &d->cdi_ids, &d->n_cdi_ids);
    read_binding(rd, o, d);
    /* version 1 kept no name for a spec device of before it was kept */
    if (rd->err == 0 && !d->cdi_name && !kdp__dra_edits_empty(&d->edits)) {
        oom(rd, kdp__dra_rec_cdi_name(r, r->n_devs - 1, &d->cdi_name) < 0 ? -ENOMEM : 0);
    }
}

/* Version 2's list of the claim's configs, each as JSON (back to text). */
static void read_claim_configs(reader *rd, kdp__dra_rec *r, const json_t *a)
{
    size_t k;
    const json_t *c;
    json_array_foreach(a, k, c)
    {
        const json_t *t = json_object_get(c, "kdp_text");
        char *text = json_is_string(t) && json_object_size(c) == 1
                         ? strdup(json_string_value(t))
                         : json_dumps(c, JSON_COMPACT | JSON_ENCODE_ANY);
        // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
        char **v = text ? realloc(r->configs, (r->n_configs + 1) * sizeof(*v)) : NULL;
        oom(rd, v ? 0 : -ENOMEM);
        if (!v) {
            free(text);
            return;
        }
        r->configs = v;
        v[r->n_configs++] = text;
    }
}

/* The device metadata's: the pod's claim name (checked as a DNS label
 * where it names a directory) and the files' generation. */
static void read_metadata(reader *rd, kdp__dra_rec *r, const json_t *o)
{
    const char *pc = str(rd, o, "pod_claim", false);
    const json_t *gen = json_object_get(o, "md_gen");
    if (pc && strlen(pc) > 253) { /* checked as a DNS label where it is used */
        bad(rd, "pod_claim");
    } else if (gen && (!json_is_integer(gen) || json_integer_value(gen) < 0)) {
        bad(rd, "md_gen");
    } else {
        r->md_gen = gen ? (uint64_t)json_integer_value(gen) : 0;
        oom(rd, kdp__dra_rec_set(&r->pod_claim, pc));
    }
}

int kdp__recfile_from_json(const json_t *o, int version, kdp__dra_rec **ret, char *why,
                           size_t why_len)
{
    if (why_len) {
        why[0] = '\0';
    }
    reader rd = {why, why_len, 0};
    const char *ns = str(&rd, o, "namespace", true);
    const char *name = str(&rd, o, "name", true);
    const char *uid = str(&rd, o, "uid", true);
    const json_t *devs = json_object_get(o, "devices");
    if (rd.err == 0 && !json_is_array(devs)) {
        bad(&rd, "devices");
    }
    if (rd.err) {
        return rd.err;
    }
    kdp__dra_rec *r = kdp__dra_rec_new(ns, name, uid);
    oom(&rd, r ? 0 : -ENOMEM);
    if (r && version >= 2) {
        const char *boot = str(&rd, o, "boot_id", false);
        snprintf(r->boot_id, sizeof(r->boot_id), "%s", boot ? boot : "");
        r->prepared = json_is_true(json_object_get(o, "prepared"));
        read_claim_configs(&rd, r, json_object_get(o, "configs"));
    } else if (r) {
        r->prepared = true; /* version 1 recorded prepared claims only */
    }
    size_t i;
    const json_t *d;
    json_array_foreach(devs, i, d)
    {
        if (rd.err == 0) {
            read_dev(&rd, r, d, version);
        }
    }
    const json_t *claim = json_object_get(o, "claim");
    if (claim && rd.err == 0) {
        const char *cn = json_is_object(claim) ? str(&rd, claim, "cdi_name", true) : NULL;
        if (!cn) {
            bad(&rd, "claim");
        } else {
            oom(&rd, kdp__dra_rec_set(&r->claim_cdi_name, cn));
            read_edits(&rd, claim, &r->claim_edits);
        }
    }
    if (rd.err == 0) {
        read_metadata(&rd, r, o);
    }
    if (rd.err) {
        kdp__dra_rec_free(r);
        return rd.err;
    }
    *ret = r;
    return 0;
}
