/* SPDX-License-Identifier: MIT */
/* edits: see edits.h. */
#include "dra/edits.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void kdp__dra_node_clear(kdp_cdi_node *n)
{
    free((char *)n->path);
    free((char *)n->host_path);
    free((char *)n->permissions);
    memset(n, 0, sizeof(*n));
}

void kdp__dra_edits_clear(kdp__dra_edits *e)
{
    for (size_t j = 0; j < e->n_nodes; j++) {
        kdp__dra_node_clear(&e->nodes[j]);
    }
    free(e->nodes);
    for (size_t j = 0; j < e->n_env; j++) {
        free(e->env[j]);
    }
    free(e->env);
    for (size_t j = 0; j < e->n_mounts; j++) {
        free((char *)e->mounts[j].host_path);
        free((char *)e->mounts[j].container_path);
    }
    free(e->mounts);
    memset(e, 0, sizeof(*e));
}

bool kdp__dra_edits_empty(const kdp__dra_edits *e)
{
    return e->n_nodes == 0 && e->n_env == 0 && e->n_mounts == 0;
}

/* Room for one more of a kind in *v (n of size each). */
static int grow(void **v, size_t n, size_t size)
{
    if (n >= KDP__DRA_EDITS_MAX) {
        return -E2BIG;
    }
    void *nv = realloc(*v, (n + 1) * size);
    if (!nv) {
        return -ENOMEM;
    }
    *v = nv;
    return 0;
}

/* NULL for NULL; else a copy, *bad set on -ENOMEM. */
static char *dup_or(const char *s, bool *bad)
{
    char *c = s ? strdup(s) : NULL;
    *bad |= s && !c;
    return c;
}

int kdp__dra_edits_add_node(kdp__dra_edits *e, const kdp_cdi_node *n)
{
    int r = grow((void **)&e->nodes, e->n_nodes, sizeof(*e->nodes));
    if (r < 0) {
        return r;
    }
    bool bad = false;
    kdp_cdi_node c = {dup_or(n->path, &bad), dup_or(n->host_path, &bad),
                      dup_or(n->permissions, &bad)};
    if (bad) {
        kdp__dra_node_clear(&c);
        return -ENOMEM;
    }
    e->nodes[e->n_nodes++] = c;
    return 0;
}

int kdp__dra_node_copy(kdp_cdi_node *to, const kdp_cdi_node *from)
{
    bool bad = false;
    *to = (kdp_cdi_node){dup_or(from->path, &bad), dup_or(from->host_path, &bad),
                         dup_or(from->permissions, &bad)};
    return bad ? -ENOMEM : 0;
}

int kdp__dra_edits_add_env(kdp__dra_edits *e, const char *kv)
{
    int r = grow((void **)&e->env, e->n_env, sizeof(*e->env));
    char *c = r == 0 ? strdup(kv) : NULL;
    if (r == 0 && !c) {
        r = -ENOMEM;
    }
    if (r == 0) {
        e->env[e->n_env++] = c;
    }
    return r;
}

int kdp__dra_edits_add_mount(kdp__dra_edits *e, const char *host_path, const char *container_path,
                             bool read_only)
{
    int r = grow((void **)&e->mounts, e->n_mounts, sizeof(*e->mounts));
    if (r < 0) {
        return r;
    }
    bool bad = false;
    kdp__cdi_mount m = {dup_or(host_path, &bad), dup_or(container_path, &bad), read_only};
    if (bad) {
        free((char *)m.host_path);
        free((char *)m.container_path);
        return -ENOMEM;
    }
    e->mounts[e->n_mounts++] = m;
    return 0;
}

int kdp__dra_edits_copy(kdp__dra_edits *to, const kdp__dra_edits *from)
{
    memset(to, 0, sizeof(*to));
    int r = 0;
    for (size_t j = 0; r == 0 && j < from->n_nodes; j++) {
        r = kdp__dra_edits_add_node(to, &from->nodes[j]);
    }
    for (size_t j = 0; r == 0 && j < from->n_env; j++) {
        r = kdp__dra_edits_add_env(to, from->env[j]);
    }
    for (size_t j = 0; r == 0 && j < from->n_mounts; j++) {
        const kdp__cdi_mount *m = &from->mounts[j];
        r = kdp__dra_edits_add_mount(to, m->host_path, m->container_path, m->read_only);
    }
    return r == -E2BIG ? -ENOMEM : r; /* from held no more than the bound */
}

static size_t str_bytes(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

size_t kdp__dra_edits_bytes(const kdp__dra_edits *e)
{
    size_t b = e->n_nodes * sizeof(*e->nodes) + e->n_env * sizeof(*e->env) +
               e->n_mounts * sizeof(*e->mounts);
    for (size_t j = 0; j < e->n_nodes; j++) {
        b += str_bytes(e->nodes[j].path) + str_bytes(e->nodes[j].host_path) +
             str_bytes(e->nodes[j].permissions);
    }
    for (size_t j = 0; j < e->n_env; j++) {
        b += str_bytes(e->env[j]);
    }
    for (size_t j = 0; j < e->n_mounts; j++) {
        b += str_bytes(e->mounts[j].host_path) + str_bytes(e->mounts[j].container_path);
    }
    return b;
}

/* ---- JSON ---- */

static int set_str(json_t *o, const char *key, const char *v)
{
    return v ? json_object_set_new(o, key, json_string(v)) : 0;
}

json_t *kdp__dra_node_json(const kdp_cdi_node *n)
{
    json_t *o = json_pack("{s:s}", "path", n->path);
    if (o && (set_str(o, "host_path", n->host_path) < 0 ||
              set_str(o, "permissions", n->permissions) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* o as a node, its strings borrowed: false without a path, or with a field
 * that is not a string. */
static bool node_of(const json_t *o, kdp_cdi_node *n)
{
    const json_t *h = json_object_get(o, "host_path");
    const json_t *m = json_object_get(o, "permissions");
    *n = (kdp_cdi_node){json_string_value(json_object_get(o, "path")), json_string_value(h),
                        json_string_value(m)};
    return n->path && (!h || n->host_path) && (!m || n->permissions);
}

int kdp__dra_node_from_json(const json_t *o, kdp_cdi_node *n)
{
    kdp_cdi_node c;
    memset(n, 0, sizeof(*n));
    if (!node_of(o, &c)) {
        return -EINVAL;
    }
    int r = kdp__dra_node_copy(n, &c);
    if (r < 0) {
        kdp__dra_node_clear(n);
    }
    return r;
}

int kdp__dra_edits_to_json(const kdp__dra_edits *e, json_t *o)
{
    json_t *nodes = json_array();
    json_t *env = json_array();
    json_t *mounts = e->n_mounts ? json_array() : NULL;
    int bad = !nodes || !env || (e->n_mounts && !mounts);
    for (size_t j = 0; !bad && j < e->n_nodes; j++) {
        bad = json_array_append_new(nodes, kdp__dra_node_json(&e->nodes[j])) < 0;
    }
    for (size_t j = 0; !bad && j < e->n_env; j++) {
        bad = json_array_append_new(env, json_string(e->env[j])) < 0;
    }
    for (size_t j = 0; !bad && j < e->n_mounts; j++) {
        const kdp__cdi_mount *m = &e->mounts[j];
        bad = json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "host_path", m->host_path,
                                                      "container_path", m->container_path,
                                                      "read_only", m->read_only)) < 0;
    }
    if (!bad) {
        bad = json_object_set(o, "nodes", nodes) < 0 || json_object_set(o, "env", env) < 0 ||
              (mounts && json_object_set(o, "mounts", mounts) < 0);
    }
    json_decref(nodes);
    json_decref(env);
    json_decref(mounts);
    return bad ? -ENOMEM : 0;
}

/* One item of a list in a record, added to e: 0, -EINVAL (not one), or the
 * add's -E2BIG or -ENOMEM. */
typedef int (*add_json_fn)(kdp__dra_edits *e, const json_t *v);

static int add_node_json(kdp__dra_edits *e, const json_t *v)
{
    kdp_cdi_node n;
    return node_of(v, &n) ? kdp__dra_edits_add_node(e, &n) : -EINVAL;
}

static int add_env_json(kdp__dra_edits *e, const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? kdp__dra_edits_add_env(e, s) : -EINVAL;
}

static int add_mount_json(kdp__dra_edits *e, const json_t *v)
{
    const char *h = json_string_value(json_object_get(v, "host_path"));
    const char *c = json_string_value(json_object_get(v, "container_path"));
    bool ro = json_is_true(json_object_get(v, "read_only"));
    return h && c ? kdp__dra_edits_add_mount(e, h, c, ro) : -EINVAL;
}

/* o's list key (missing: none) into e, each item through add; *field is
 * key when it fails. */
static int read_list(const json_t *o, const char *key, add_json_fn add, kdp__dra_edits *e,
                     const char **field)
{
    const json_t *a = json_object_get(o, key);
    int r = a && !json_is_array(a) ? -EINVAL : 0;
    size_t k;
    const json_t *v;
    json_array_foreach(a, k, v)
    {
        r = r < 0 ? r : add(e, v);
    }
    if (r < 0) {
        *field = key;
    }
    return r;
}

int kdp__dra_edits_from_json(const json_t *o, kdp__dra_edits *e, const char **field)
{
    memset(e, 0, sizeof(*e));
    int r = read_list(o, "nodes", add_node_json, e, field);
    if (r == 0) {
        r = read_list(o, "env", add_env_json, e, field);
    }
    if (r == 0) {
        r = read_list(o, "mounts", add_mount_json, e, field);
    }
    if (r == -E2BIG) {
        r = -EINVAL; /* more than kdp writes: not a record of its */
    }
    if (r < 0) {
        kdp__dra_edits_clear(e);
    }
    return r;
}

kdp__cdi_dev kdp__dra_edits_cdi(const kdp__dra_edits *e, const char *name)
{
    return (kdp__cdi_dev){.name = name,
                          .nodes = e->nodes,
                          .n_nodes = e->n_nodes,
                          .env = (const char *const *)e->env,
                          .n_env = e->n_env,
                          .mounts = e->mounts,
                          .n_mounts = e->n_mounts};
}
