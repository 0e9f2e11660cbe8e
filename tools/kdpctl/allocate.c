/* SPDX-License-Identifier: MIT */
/* allocate: an AllocateRequest with one or more containers, and the
 * response as the container runtime would get it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "kdpctl.h"
#include "print.h"
#include "rpc.h"

typedef struct kv {
    const char *key;
    const char *value;
} kv;

static int by_key(const void *a, const void *b)
{
    const kv *x = a;
    const kv *y = b;
    return strcmp(x->key ? x->key : "", y->key ? y->key : "");
}

static kv *sort_pairs(kv *out, size_t n, size_t *ret_n)
{
    *ret_n = out ? n : 0;
    if (out) {
        qsort(out, n, sizeof(*out), by_key);
    }
    return out;
}

/* The env map as pairs sorted by key (NULL, 0 if empty or out of memory). */
static kv *envs_sorted(const V1beta1__ContainerAllocateResponse *r, size_t *ret_n)
{
    kv *out = r->n_envs ? calloc(r->n_envs, sizeof(*out)) : NULL;
    for (size_t i = 0; out && i < r->n_envs; i++) {
        out[i] = (kv){r->envs[i]->key, r->envs[i]->value};
    }
    return sort_pairs(out, r->n_envs, ret_n);
}

static kv *annotations_sorted(const V1beta1__ContainerAllocateResponse *r, size_t *ret_n)
{
    kv *out = r->n_annotations ? calloc(r->n_annotations, sizeof(*out)) : NULL;
    for (size_t i = 0; out && i < r->n_annotations; i++) {
        out[i] = (kv){r->annotations[i]->key, r->annotations[i]->value};
    }
    return sort_pairs(out, r->n_annotations, ret_n);
}

static void map_json(kc_json *j, const char *key, kv *s, size_t n)
{
    kc_json_obj(j, key);
    for (size_t i = 0; i < n; i++) {
        kc_json_str(j, s[i].key ? s[i].key : "", s[i].value ? s[i].value : "");
    }
    kc_json_end(j);
    free(s);
}

static void container_json(kc_json *j, const kc_strv *ids,
                           const V1beta1__ContainerAllocateResponse *r)
{
    size_t n;
    kc_json_obj(j, NULL);
    kc_json_arr(j, "ids");
    for (size_t i = 0; i < ids->n; i++) {
        kc_json_str(j, NULL, ids->v[i]);
    }
    kc_json_end(j);
    kv *s = envs_sorted(r, &n);
    map_json(j, "envs", s, n);
    kc_json_arr(j, "mounts");
    for (size_t i = 0; i < r->n_mounts; i++) {
        kc_json_obj(j, NULL);
        kc_json_str(j, "container_path", r->mounts[i]->container_path);
        kc_json_str(j, "host_path", r->mounts[i]->host_path);
        kc_json_bool(j, "read_only", r->mounts[i]->read_only);
        kc_json_end(j);
    }
    kc_json_end(j);
    kc_json_arr(j, "devices");
    for (size_t i = 0; i < r->n_devices; i++) {
        kc_json_obj(j, NULL);
        kc_json_str(j, "container_path", r->devices[i]->container_path);
        kc_json_str(j, "host_path", r->devices[i]->host_path);
        kc_json_str(j, "permissions", r->devices[i]->permissions);
        kc_json_end(j);
    }
    kc_json_end(j);
    s = annotations_sorted(r, &n);
    map_json(j, "annotations", s, n);
    kc_json_arr(j, "cdi_devices");
    for (size_t i = 0; i < r->n_cdi_devices; i++) {
        kc_json_str(j, NULL, r->cdi_devices[i]->name);
    }
    kc_json_end(j);
    kc_json_end(j);
}

static void map_rows(kc_table *t, const char *kind, kv *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        kc_buf b = {0};
        kc_buf_printf(&b, "%s=%s", s[i].key ? s[i].key : "", s[i].value ? s[i].value : "");
        kc_table_row(t, (const char *[]){kind, b.failed ? "?" : b.s});
        kc_buf_free(&b);
    }
    free(s);
}

static void path_rows(kc_table *t, const V1beta1__ContainerAllocateResponse *r)
{
    char line[8400];
    for (size_t i = 0; i < r->n_mounts; i++) {
        const V1beta1__Mount *m = r->mounts[i];
        snprintf(line, sizeof(line), "%s <- %s (%s)", m->container_path, m->host_path,
                 m->read_only ? "ro" : "rw");
        kc_table_row(t, (const char *[]){"mount", line});
    }
    for (size_t i = 0; i < r->n_devices; i++) {
        const V1beta1__DeviceSpec *d = r->devices[i];
        snprintf(line, sizeof(line), "%s <- %s (%s)", d->container_path, d->host_path,
                 d->permissions);
        kc_table_row(t, (const char *[]){"device", line});
    }
}

static void container_text(kc_buf *out, size_t idx, const kc_strv *ids,
                           const V1beta1__ContainerAllocateResponse *r)
{
    kc_buf_printf(out, "container %zu:", idx + 1);
    for (size_t i = 0; i < ids->n; i++) {
        kc_buf_puts(out, i ? ", " : " ");
        kc_buf_safe(out, ids->v[i]);
    }
    kc_buf_puts(out, ids->n ? "\n" : " (no devices)\n");
    kc_table t;
    kc_table_init(&t, 2);
    size_t n;
    kv *s = envs_sorted(r, &n);
    map_rows(&t, "env", s, n);
    path_rows(&t, r);
    s = annotations_sorted(r, &n);
    map_rows(&t, "annotation", s, n);
    for (size_t i = 0; i < r->n_cdi_devices; i++) {
        kc_table_row(&t, (const char *[]){"cdi", r->cdi_devices[i]->name});
    }
    if (t.nrows == 0) {
        kc_buf_puts(out, "  (an empty response: nothing for this container)\n");
    }
    kc_table_render(&t, out, "  ");
    kc_table_free(&t);
}

static int print_response(const kc_opts *o, const kc_strv *ctrs, size_t n_ctrs,
                          const V1beta1__AllocateResponse *m)
{
    kc_json j;
    kc_buf out = {0};
    if (o->json) {
        kc_json_begin(&j);
        kc_json_arr(&j, "containers");
    }
    for (size_t i = 0; i < m->n_container_responses; i++) {
        static const kc_strv none = {0};
        const kc_strv *ids = i < n_ctrs ? &ctrs[i] : &none;
        if (o->json) {
            container_json(&j, ids, m->container_responses[i]);
        } else {
            container_text(&out, i, ids, m->container_responses[i]);
        }
    }
    if (o->json) {
        kc_json_emit(&j);
    } else {
        (void)kc_buf_write(&out, stdout);
        kc_buf_free(&out);
    }
    if (m->n_container_responses == n_ctrs) {
        return KC_EXIT_OK;
    }
    char msg[200];
    snprintf(msg, sizeof(msg), "%zu container responses to %zu container requests",
             m->n_container_responses, n_ctrs);
    kc_print_error(o->json, o->cmd, NULL, 0, msg,
                   "the kubelet needs exactly one response per container "
                   "(\"no containers return in allocation response\")");
    return KC_EXIT_FAIL;
}

static int allocate_call(const kc_opts *o, const char *path, kc_strv *ctrs, size_t n)
{
    V1beta1__ContainerAllocateRequest *reqs = calloc(n, sizeof(*reqs));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    V1beta1__ContainerAllocateRequest **ptrs = calloc(n, sizeof(*ptrs));
    if (!reqs || !ptrs) {
        free(reqs);
        free(ptrs);
        return kc_fail_errno(o, "request", -ENOMEM);
    }
    for (size_t i = 0; i < n; i++) {
        reqs[i] = (V1beta1__ContainerAllocateRequest)V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        reqs[i].devices_ids = ctrs[i].v;
        reqs[i].n_devices_ids = ctrs[i].n;
        ptrs[i] = &reqs[i];
    }
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    req.container_requests = ptrs;
    req.n_container_requests = n;
    kc_reply rep;
    int e = kc_call_plugin(o, path, KC_METHOD_ALLOCATE, &req.base, &rep);
    free(reqs);
    free(ptrs);
    if (e != KC_EXIT_OK) {
        return e;
    }
    V1beta1__AllocateResponse *m = v1beta1__allocate_response__unpack(NULL, rep.len, rep.resp);
    kc_reply_free(&rep);
    if (!m) {
        return kc_fail_decode(o, "AllocateResponse");
    }
    e = print_response(o, ctrs, n, m);
    v1beta1__allocate_response__free_unpacked(m, NULL);
    return e;
}

/* The containers: one per --container, else one with every positional ID. */
static int containers_from(const kc_opts *o, kc_strv **ret, size_t *ret_n)
{
    size_t n = o->containers.n ? o->containers.n : 1;
    kc_strv *c = calloc(n, sizeof(*c));
    int r = c ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < o->containers.n; i++) {
        r = kc_split_ids(o->containers.v[i], &c[i]);
    }
    for (size_t i = 1; r == 0 && !o->containers.n && i < o->pos.n; i++) {
        kc_strv part;
        r = kc_split_ids(o->pos.v[i], &part);
        for (size_t k = 0; r == 0 && k < part.n; k++) {
            r = kc_strv_add(&c[0], part.v[k]);
        }
        kc_strv_free(&part);
    }
    if (r < 0 && c) {
        for (size_t i = 0; i < n; i++) {
            kc_strv_free(&c[i]);
        }
        free(c);
        return r;
    }
    *ret = c;
    *ret_n = n;
    return r;
}

int kc_cmd_allocate(const kc_opts *o)
{
    if (o->containers.n && o->pos.n > 1) {
        fprintf(stderr, "kdpctl allocate: give the IDs either after SOCK (one container) or "
                        "with --container (one per flag), not both\n");
        return KC_EXIT_USAGE;
    }
    if (!o->containers.n && o->pos.n < 2) {
        fprintf(stderr, "kdpctl allocate: no device IDs: kdpctl allocate SOCK ID... or "
                        "--container ID,ID\n");
        return KC_EXIT_USAGE;
    }
    kc_strv *ctrs = NULL;
    size_t n = 0;
    char *path = kc_socket_path(o, o->pos.v[0]);
    int e = path && containers_from(o, &ctrs, &n) == 0 ? allocate_call(o, path, ctrs, n)
                                                       : kc_fail_errno(o, "arguments", -ENOMEM);
    for (size_t i = 0; i < n; i++) {
        kc_strv_free(&ctrs[i]);
    }
    free(ctrs);
    free(path);
    return e;
}
