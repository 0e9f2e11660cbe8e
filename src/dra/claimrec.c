/* SPDX-License-Identifier: MIT */
#include "dra/claimrec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/cdi.h"
#include "dra/prepared.h"

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

int kdp__dra_claimview_init(kdp__dra_claimview *v, const json_t *rec)
{
    memset(v, 0, sizeof(*v));
    const json_t *devs = json_object_get(rec, "devices");
    if (!json_is_array(devs) || !str(rec, "uid") || !str(rec, "name") || !str(rec, "namespace")) {
        return -EINVAL;
    }
    size_t n = json_array_size(devs);
    size_t n_cfg = 0;
    for (size_t i = 0; i < n; i++) {
        n_cfg += json_array_size(json_object_get(json_array_get(devs, i), "configs"));
    }
    v->allocs = calloc(n ? n : 1, sizeof(*v->allocs));
    v->configs = calloc(n_cfg ? n_cfg : 1, sizeof(*v->configs));
    if (!v->allocs || !v->configs) {
        kdp__dra_claimview_done(v);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(devs, i);
        kdp_dra_alloc *a = &v->allocs[i];
        a->request = str(d, "request");
        a->device = str(d, "device");
        a->device_id = str(d, "device_id");
        a->share_id = str(d, "share_id");
        a->admin_access = json_is_true(json_object_get(d, "admin_access"));
        if (!a->request || !a->device) {
            kdp__dra_claimview_done(v);
            return -EINVAL;
        }
        const json_t *cfgs = json_object_get(d, "configs");
        a->configs = v->configs + k;
        for (size_t j = 0; j < json_array_size(cfgs); j++) {
            const char *c = json_string_value(json_array_get(cfgs, j));
            if (c) {
                v->configs[k++] = c;
                a->n_configs++;
            }
        }
    }
    v->claim.ref = (kdp_dra_claim_ref){str(rec, "namespace"), str(rec, "name"), str(rec, "uid")};
    v->claim.devices = v->allocs;
    v->claim.n_devices = n;
    return 0;
}

void kdp__dra_claimview_done(kdp__dra_claimview *v)
{
    free(v->allocs);
    free(v->configs);
    memset(v, 0, sizeof(*v));
}

static json_t *node_json(const kdp_cdi_node *nd)
{
    json_t *o = json_pack("{s:s}", "path", nd->path);
    if (o && nd->host_path) {
        json_object_set_new(o, "host_path", json_string(nd->host_path));
    }
    if (o && nd->permissions) {
        json_object_set_new(o, "permissions", json_string(nd->permissions));
    }
    return o;
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

/* The CDI device name of devs[i]: <uid>-<device>, or <uid>-<device>_<i>
 * for a device named again in the claim (shared, admin access): the names
 * are unique in the claim's spec, '_' never being in a device name (a DNS
 * label). Returns what asprintf returns. */
static int cdi_name(const json_t *devs, size_t i, const char *uid, char **ret)
{
    const char *dev = str(json_array_get(devs, i), "device");
    for (size_t k = 0; k < i; k++) {
        const char *other = str(json_array_get(devs, k), "device");
        if (other && dev && strcmp(other, dev) == 0) {
            return asprintf(ret, "%s-%s_%zu", uid, dev, i);
        }
    }
    return asprintf(ret, "%s-%s", uid, dev);
}

static int merge_dev(json_t *d, const kdp__dra_pdev *pd, const char *kind, const char *name)
{
    json_t *nodes = json_array();
    json_t *env = strv_json(pd ? pd->env : NULL, pd ? pd->n_env : 0);
    json_t *ids = json_array();
    int bad = !nodes || !env || !ids;
    for (size_t j = 0; !bad && pd && j < pd->n_nodes; j++) {
        bad = json_array_append_new(nodes, node_json(&pd->nodes[j])) < 0;
    }
    size_t n_user = pd ? pd->n_cdi_ids : 0;
    const json_t *def = json_object_get(d, "default_node");
    if (!bad && json_array_size(nodes) == 0 && json_array_size(env) == 0 && n_user == 0 &&
        json_is_object(def)) {
        bad = json_array_append(nodes, (json_t *)def) < 0;
    }
    if (!bad && (json_array_size(nodes) || json_array_size(env))) {
        char *id = NULL;
        bad = asprintf(&id, "%s=%s", kind, name) < 0;
        if (!bad) {
            bad = json_array_append_new(ids, json_string(id)) < 0 ||
                  json_object_set_new(d, "cdi_name", json_string(name)) < 0;
            free(id);
        }
    }
    for (size_t j = 0; !bad && j < n_user; j++) {
        bad = json_array_append_new(ids, json_string(pd->cdi_ids[j])) < 0;
    }
    if (!bad) {
        bad = json_object_set(d, "nodes", nodes) < 0 || json_object_set(d, "env", env) < 0 ||
              json_object_set(d, "cdi_ids", ids) < 0;
    }
    json_decref(nodes);
    json_decref(env);
    json_decref(ids);
    return bad ? -ENOMEM : 0;
}

int kdp__dra_rec_merge(json_t *rec, const kdp_dra_prepared *pr, const char *kind)
{
    json_t *devs = json_object_get(rec, "devices");
    const char *uid = str(rec, "uid");
    for (size_t i = 0; i < json_array_size(devs); i++) {
        const kdp__dra_pdev *pd = pr && i < pr->n ? &pr->devs[i] : NULL;
        char *name = NULL;
        int r = cdi_name(devs, i, uid, &name) < 0 ? -ENOMEM : 0;
        if (r == 0) {
            r = merge_dev(json_array_get(devs, i), pd, kind, name);
            free(name);
        }
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

bool kdp__dra_rec_has_cdi(const json_t *rec)
{
    const json_t *devs = json_object_get(rec, "devices");
    for (size_t i = 0; i < json_array_size(devs); i++) {
        const json_t *d = json_array_get(devs, i);
        if (json_array_size(json_object_get(d, "nodes")) ||
            json_array_size(json_object_get(d, "env"))) {
            return true;
        }
    }
    return false;
}

int kdp__dra_rec_write_cdi(const json_t *rec, const char *dir, const char *file, const char *kind)
{
    const json_t *devs = json_object_get(rec, "devices");
    size_t n = json_array_size(devs);
    size_t n_nodes = 0;
    size_t n_env = 0;
    for (size_t i = 0; i < n; i++) {
        n_nodes += json_array_size(json_object_get(json_array_get(devs, i), "nodes"));
        n_env += json_array_size(json_object_get(json_array_get(devs, i), "env"));
    }
    kdp__cdi_dev *cd = calloc(n ? n : 1, sizeof(*cd));
    kdp_cdi_node *nodes = calloc(n_nodes ? n_nodes : 1, sizeof(*nodes));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    const char **env = calloc(n_env ? n_env : 1, sizeof(*env));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    char **names = calloc(n ? n : 1, sizeof(*names));
    int r = cd && nodes && env && names ? 0 : -ENOMEM;
    size_t m = 0;
    size_t kn = 0;
    size_t ke = 0;
    const char *uid = str(rec, "uid");
    for (size_t i = 0; r == 0 && i < n; i++) {
        const json_t *d = json_array_get(devs, i);
        const json_t *jn = json_object_get(d, "nodes");
        const json_t *je = json_object_get(d, "env");
        if (!json_array_size(jn) && !json_array_size(je)) {
            continue;
        }
        const char *name = str(d, "cdi_name"); /* none in records of before it was kept */
        if ((name ? asprintf(&names[m], "%s", name) : cdi_name(devs, i, uid, &names[m])) < 0) {
            names[m] = NULL;
            r = -ENOMEM;
            break;
        }
        cd[m] = (kdp__cdi_dev){.name = names[m], .nodes = nodes + kn, .env = env + ke};
        for (size_t j = 0; j < json_array_size(jn); j++) {
            const json_t *o = json_array_get(jn, j);
            nodes[kn++] =
                (kdp_cdi_node){str(o, "path"), str(o, "host_path"), str(o, "permissions")};
            cd[m].n_nodes++;
        }
        for (size_t j = 0; j < json_array_size(je); j++) {
            env[ke++] = json_string_value(json_array_get(je, j));
            cd[m].n_env++;
        }
        m++;
    }
    if (r == 0) {
        r = kdp__cdi_write_file(dir, file, kind, cd, m);
    }
    for (size_t i = 0; names && i < n; i++) {
        free(names[i]);
    }
    free(names);
    free(cd);
    free(nodes);
    free(env);
    return r;
}
