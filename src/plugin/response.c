/* SPDX-License-Identifier: MIT */
#include "plugin/response.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/validate.h"

#define ARRAY_MIN_CAP 4

static int bad_arg(const char *fn, const char *why)
{
    log_warn("%s: %s", fn, why);
    return -EINVAL;
}

/* Makes room for one more element after the n in arr. The capacity follows
 * from n (0, then 4, 8, 16...), so the builders need no capacity field. On
 * success *ret is the (possibly moved) array; on failure arr is unchanged. */
static int reserve_one(void *arr, size_t n, size_t elem, void **ret)
{
    *ret = arr;
    if (n != 0 && (n < ARRAY_MIN_CAP || (n & (n - 1)) != 0)) {
        return 0;
    }
    size_t cap = n == 0 ? ARRAY_MIN_CAP : n * 2;
    if (cap < n || cap > SIZE_MAX / elem) {
        return -ENOMEM;
    }
    void *v = realloc(arr, cap * elem);
    if (!v) {
        return -ENOMEM;
    }
    *ret = v;
    return 0;
}

void kdp__response_init(kdp_alloc_response *r, const kdp__devtab *tab, const char *const *ids,
                        const char *const *device_ids, size_t n_ids, const char *env_name)
{
    memset(r, 0, sizeof(*r));
    r->tab = tab;
    r->ids = ids;
    r->device_ids = device_ids ? device_ids : ids;
    r->n_ids = n_ids;
    r->env_name = env_name;
}

static void kv_free(kdp__kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kv[i].key);
        free(kv[i].value);
    }
    free(kv);
}

void kdp__response_done(kdp_alloc_response *r)
{
    if (!r) {
        return;
    }
    kv_free(r->envs, r->n_envs);
    kv_free(r->annotations, r->n_annotations);
    for (size_t i = 0; i < r->n_mounts; i++) {
        free(r->mounts[i].container_path);
        free(r->mounts[i].host_path);
    }
    free(r->mounts);
    for (size_t i = 0; i < r->n_devices; i++) {
        free(r->devices[i].container_path);
        free(r->devices[i].host_path);
        free(r->devices[i].permissions);
    }
    free(r->devices);
    for (size_t i = 0; i < r->n_cdi; i++) {
        free(r->cdi[i]);
    }
    free(r->cdi);
    memset(r, 0, sizeof(*r));
}

/* Sets key to value in a map builder, replacing an existing value. */
static int kv_set(kdp__kv **arr, size_t *n, const char *key, const char *value)
{
    char *v = strdup(value);
    if (!v) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*arr)[i].key, key) == 0) {
            free((*arr)[i].value);
            (*arr)[i].value = v;
            return 0;
        }
    }
    char *k = strdup(key);
    void *grown = NULL;
    if (!k || reserve_one(*arr, *n, sizeof(kdp__kv), &grown) < 0) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    *arr = grown;
    (*arr)[*n].key = k;
    (*arr)[*n].value = v;
    (*n)++;
    return 0;
}

KDP_EXPORT int kdp_response_add_env(kdp_alloc_response *r, const char *key, const char *value)
{
    const char *why = NULL;
    if (!r || !value) {
        return bad_arg(__func__, "response or value is NULL");
    }
    if (kdp__validate_env_key(key, &why) < 0) {
        return bad_arg(__func__, why);
    }
    return kv_set(&r->envs, &r->n_envs, key, value);
}

KDP_EXPORT int kdp_response_add_annotation(kdp_alloc_response *r, const char *key,
                                           const char *value)
{
    if (!r || !value) {
        return bad_arg(__func__, "response or value is NULL");
    }
    if (!key || !*key) {
        return bad_arg(__func__, "annotation key is empty");
    }
    return kv_set(&r->annotations, &r->n_annotations, key, value);
}

static int check_paths(const char *fn, const char *container_path, const char *host_path)
{
    const char *why = NULL;
    if (kdp__validate_abs_path(container_path, &why) < 0) {
        log_warn("%s: container_path: %s", fn, why);
        return -EINVAL;
    }
    if (kdp__validate_abs_path(host_path, &why) < 0) {
        log_warn("%s: host_path: %s", fn, why);
        return -EINVAL;
    }
    return 0;
}

/* A second mount or device node at one container path: the same one again
 * is harmless (1: nothing to add), another one is refused (-EEXIST), for the
 * runtime would fail the container or silently keep one of them. */
static int check_mount_path(const kdp_alloc_response *r, const char *container_path,
                            const char *host_path, bool read_only)
{
    for (size_t i = 0; i < r->n_mounts; i++) {
        const V1beta1__Mount *m = &r->mounts[i];
        if (strcmp(m->container_path, container_path) != 0) {
            continue;
        }
        if (strcmp(m->host_path, host_path) == 0 && m->read_only == read_only) {
            return 1;
        }
        log_warn("kdp_response_add_mount: container path %s is already mounted from %s: "
                 "refusing a second mount there (from %s)",
                 container_path, m->host_path, host_path);
        return -EEXIST;
    }
    return 0;
}

static int check_device_path(const kdp_alloc_response *r, const char *container_path,
                             const char *host_path, const char *permissions)
{
    for (size_t i = 0; i < r->n_devices; i++) {
        const V1beta1__DeviceSpec *d = &r->devices[i];
        if (strcmp(d->container_path, container_path) != 0) {
            continue;
        }
        if (strcmp(d->host_path, host_path) == 0 && strcmp(d->permissions, permissions) == 0) {
            return 1;
        }
        log_warn("kdp_response_add_device: container path %s already has the device %s: "
                 "refusing a second device node there (%s)",
                 container_path, d->host_path, host_path);
        return -EEXIST;
    }
    return 0;
}

KDP_EXPORT int kdp_response_add_mount(kdp_alloc_response *r, const char *container_path,
                                      const char *host_path, bool read_only)
{
    if (!r) {
        return bad_arg(__func__, "response is NULL");
    }
    int ret = check_paths(__func__, container_path, host_path);
    if (ret == 0) {
        ret = check_mount_path(r, container_path, host_path, read_only);
    }
    if (ret != 0) {
        return ret < 0 ? ret : 0;
    }
    V1beta1__Mount m = V1BETA1__MOUNT__INIT;
    m.container_path = strdup(container_path);
    m.host_path = strdup(host_path);
    m.read_only = read_only;
    void *grown = NULL;
    if (!m.container_path || !m.host_path ||
        reserve_one(r->mounts, r->n_mounts, sizeof(*r->mounts), &grown) < 0) {
        free(m.container_path);
        free(m.host_path);
        return -ENOMEM;
    }
    r->mounts = grown;
    r->mounts[r->n_mounts++] = m;
    return 0;
}

KDP_EXPORT int kdp_response_add_device(kdp_alloc_response *r, const char *container_path,
                                       const char *host_path, const char *permissions)
{
    const char *why = NULL;
    if (!r) {
        return bad_arg(__func__, "response is NULL");
    }
    if (!permissions) {
        permissions = "rw";
    }
    if (kdp__validate_permissions(permissions, &why) < 0) {
        return bad_arg(__func__, why);
    }
    int ret = check_paths(__func__, container_path, host_path);
    if (ret == 0) {
        ret = check_device_path(r, container_path, host_path, permissions);
    }
    if (ret != 0) {
        return ret < 0 ? ret : 0;
    }
    V1beta1__DeviceSpec d = V1BETA1__DEVICE_SPEC__INIT;
    d.container_path = strdup(container_path);
    d.host_path = strdup(host_path);
    d.permissions = strdup(permissions);
    void *grown = NULL;
    if (!d.container_path || !d.host_path || !d.permissions ||
        reserve_one(r->devices, r->n_devices, sizeof(*r->devices), &grown) < 0) {
        free(d.container_path);
        free(d.host_path);
        free(d.permissions);
        return -ENOMEM;
    }
    r->devices = grown;
    r->devices[r->n_devices++] = d;
    return 0;
}

KDP_EXPORT int kdp_response_add_cdi_device(kdp_alloc_response *r, const char *name)
{
    const char *why = NULL;
    if (!r) {
        return bad_arg(__func__, "response is NULL");
    }
    if (kdp__validate_cdi_name(name, &why) < 0) {
        return bad_arg(__func__, why);
    }
    char *s = strdup(name);
    void *grown = NULL;
    if (!s || reserve_one(r->cdi, r->n_cdi, sizeof(*r->cdi), &grown) < 0) {
        free(s);
        return -ENOMEM;
    }
    r->cdi = grown;
    r->cdi[r->n_cdi++] = s;
    return 0;
}

KDP_EXPORT char *kdp_ids_join(const char *const *ids, size_t n, const char *sep)
{
    if (n > 0 && !ids) {
        return NULL;
    }
    sep = sep ? sep : ",";
    size_t sl = strlen(sep);
    size_t len = 1;
    for (size_t i = 0; i < n; i++) {
        if (!ids[i]) {
            return NULL;
        }
        size_t l = strlen(ids[i]) + sl;
        if (len > SIZE_MAX - l) {
            return NULL;
        }
        len += l;
    }
    char *s = malloc(len);
    if (!s) {
        return NULL;
    }
    char *p = s;
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            memcpy(p, sep, sl);
            p += sl;
        }
        size_t l = strlen(ids[i]);
        memcpy(p, ids[i], l);
        p += l;
    }
    *p = '\0';
    return s;
}

KDP_EXPORT int kdp_response_add_env_ids(kdp_alloc_response *r, const char *key, const char *sep)
{
    if (!r || (r->n_ids > 0 && !r->ids)) {
        return bad_arg(__func__, "response is NULL");
    }
    char *joined = kdp_ids_join(r->ids, r->n_ids, sep);
    if (!joined) {
        return -ENOMEM;
    }
    int ret = kdp_response_add_env(r, key, joined);
    free(joined);
    return ret;
}

KDP_EXPORT int kdp_response_add_defaults(kdp_alloc_response *r)
{
    if (!r || (r->n_ids > 0 && !r->ids)) {
        return bad_arg(__func__, "response is NULL");
    }
    /* two replicas of one device: the same node again, a no-op */
    for (size_t i = 0; i < r->n_ids; i++) {
        const kdp__dev *d = kdp__devtab_find(r->tab, r->device_ids[i]);
        if (!d || !d->host_path) {
            continue;
        }
        int ret = kdp_response_add_device(r, d->container_path ? d->container_path : d->host_path,
                                          d->host_path, d->permissions ? d->permissions : "rw");
        if (ret < 0) {
            return ret;
        }
    }
    return r->env_name ? kdp_response_add_env_ids(r, r->env_name, ",") : 0;
}

/* --- protobuf-c conversion --- */

/* Each map becomes one block: the pointer array, then the entries. */
static int envs_to_pb(const kdp_alloc_response *r, V1beta1__ContainerAllocateResponse *out)
{
    typedef V1beta1__ContainerAllocateResponse__EnvsEntry entry;
    static const entry init = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ENVS_ENTRY__INIT;
    size_t n = r->n_envs;
    if (n == 0) {
        return 0;
    }
    if (n > SIZE_MAX / (sizeof(entry *) + sizeof(entry))) {
        return -ENOMEM;
    }
    entry **ptrs = malloc(n * (sizeof(entry *) + sizeof(entry)));
    if (!ptrs) {
        return -ENOMEM;
    }
    entry *e = (entry *)(void *)(ptrs + n);
    for (size_t i = 0; i < n; i++) {
        e[i] = init;
        e[i].key = r->envs[i].key;
        e[i].value = r->envs[i].value;
        ptrs[i] = &e[i];
    }
    out->envs = ptrs;
    out->n_envs = n;
    return 0;
}

static int annotations_to_pb(const kdp_alloc_response *r, V1beta1__ContainerAllocateResponse *out)
{
    typedef V1beta1__ContainerAllocateResponse__AnnotationsEntry entry;
    static const entry init = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__ANNOTATIONS_ENTRY__INIT;
    size_t n = r->n_annotations;
    if (n == 0) {
        return 0;
    }
    if (n > SIZE_MAX / (sizeof(entry *) + sizeof(entry))) {
        return -ENOMEM;
    }
    entry **ptrs = malloc(n * (sizeof(entry *) + sizeof(entry)));
    if (!ptrs) {
        return -ENOMEM;
    }
    entry *e = (entry *)(void *)(ptrs + n);
    for (size_t i = 0; i < n; i++) {
        e[i] = init;
        e[i].key = r->annotations[i].key;
        e[i].value = r->annotations[i].value;
        ptrs[i] = &e[i];
    }
    out->annotations = ptrs;
    out->n_annotations = n;
    return 0;
}

static int cdi_to_pb(const kdp_alloc_response *r, V1beta1__ContainerAllocateResponse *out)
{
    static const V1beta1__CDIDevice init = V1BETA1__CDIDEVICE__INIT;
    size_t n = r->n_cdi;
    if (n == 0) {
        return 0;
    }
    if (n > SIZE_MAX / (sizeof(V1beta1__CDIDevice *) + sizeof(V1beta1__CDIDevice))) {
        return -ENOMEM;
    }
    V1beta1__CDIDevice **ptrs =
        malloc(n * (sizeof(V1beta1__CDIDevice *) + sizeof(V1beta1__CDIDevice)));
    if (!ptrs) {
        return -ENOMEM;
    }
    V1beta1__CDIDevice *c = (V1beta1__CDIDevice *)(void *)(ptrs + n);
    for (size_t i = 0; i < n; i++) {
        c[i] = init;
        c[i].name = r->cdi[i];
        ptrs[i] = &c[i];
    }
    out->cdi_devices = ptrs;
    out->n_cdi_devices = n;
    return 0;
}

/* Mounts and device specs are already messages: only pointer arrays. */
static int specs_to_pb(const kdp_alloc_response *r, V1beta1__ContainerAllocateResponse *out)
{
    if (r->n_mounts > 0) {
        // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
        out->mounts = calloc(r->n_mounts, sizeof(*out->mounts));
        if (!out->mounts) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < r->n_mounts; i++) {
            out->mounts[i] = (V1beta1__Mount *)&r->mounts[i];
        }
        out->n_mounts = r->n_mounts;
    }
    if (r->n_devices > 0) {
        // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
        out->devices = calloc(r->n_devices, sizeof(*out->devices));
        if (!out->devices) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < r->n_devices; i++) {
            out->devices[i] = (V1beta1__DeviceSpec *)&r->devices[i];
        }
        out->n_devices = r->n_devices;
    }
    return 0;
}

int kdp__response_to_pb(const kdp_alloc_response *r, V1beta1__ContainerAllocateResponse *out)
{
    if (!r || !out) {
        return -EINVAL;
    }
    int ret = envs_to_pb(r, out);
    if (ret == 0) {
        ret = annotations_to_pb(r, out);
    }
    if (ret == 0) {
        ret = cdi_to_pb(r, out);
    }
    if (ret == 0) {
        ret = specs_to_pb(r, out);
    }
    if (ret < 0) {
        kdp__response_pb_done(out);
    }
    return ret;
}

void kdp__response_pb_done(V1beta1__ContainerAllocateResponse *out)
{
    if (!out) {
        return;
    }
    free(out->envs);
    free(out->annotations);
    free(out->mounts);
    free(out->devices);
    free(out->cdi_devices);
    out->envs = NULL;
    out->n_envs = 0;
    out->annotations = NULL;
    out->n_annotations = 0;
    out->mounts = NULL;
    out->n_mounts = 0;
    out->devices = NULL;
    out->n_devices = 0;
    out->cdi_devices = NULL;
    out->n_cdi_devices = 0;
}

/* --- preferred-allocation answers --- */

void kdp__id_list_init(kdp_id_list *l)
{
    l->ids = NULL;
    l->n = 0;
    l->cap = 0;
}

void kdp__id_list_done(kdp_id_list *l)
{
    if (!l) {
        return;
    }
    for (size_t i = 0; i < l->n; i++) {
        free(l->ids[i]);
    }
    free(l->ids);
    kdp__id_list_init(l);
}

KDP_EXPORT int kdp_id_list_add(kdp_id_list *l, const char *id)
{
    const char *why = NULL;
    if (!l) {
        return bad_arg(__func__, "list is NULL");
    }
    if (kdp__validate_device_id(id, &why) < 0) {
        return bad_arg(__func__, why);
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : ARRAY_MIN_CAP;
        if (cap < l->cap || cap > SIZE_MAX / sizeof(*l->ids)) {
            return -ENOMEM;
        }
        char **v = realloc(l->ids, cap * sizeof(*v));
        if (!v) {
            return -ENOMEM;
        }
        l->ids = v;
        l->cap = cap;
    }
    char *s = strdup(id);
    if (!s) {
        return -ENOMEM;
    }
    l->ids[l->n++] = s;
    return 0;
}

char *kdp__default_env_name(const char *resource_name)
{
    static const char prefix[] = "KDP_DEVICES_";
    if (!resource_name) {
        return NULL;
    }
    size_t n = strlen(resource_name);
    if (n > SIZE_MAX - sizeof(prefix)) {
        return NULL;
    }
    char *s = malloc(sizeof(prefix) + n);
    if (!s) {
        return NULL;
    }
    memcpy(s, prefix, sizeof(prefix) - 1);
    char *p = s + sizeof(prefix) - 1;
    for (size_t i = 0; i < n; i++) {
        char c = resource_name[i];
        if (c >= 'a' && c <= 'z') {
            c = (char)(c - 'a' + 'A');
        } else if (!(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9')) {
            c = '_';
        }
        p[i] = c;
    }
    p[n] = '\0';
    return s;
}
