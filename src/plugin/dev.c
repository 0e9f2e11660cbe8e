/* SPDX-License-Identifier: MIT */
/* dev: one device of the table (see dev.h). */
#include "plugin/dev.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/validate.h"

static int fail(const char **why, const char *msg)
{
    if (why) {
        *why = msg;
    }
    return -EINVAL;
}

static void dev_free(kdp__dev *d)
{
    free(d->id);
    free(d->numa);
    free(d->host_path);
    free(d->container_path);
    free(d->permissions);
    memset(d, 0, sizeof(*d));
}

int kdp__dev_check(const kdp_device *d, const char **why)
{
    if (!d) {
        return fail(why, "device is NULL");
    }
    int r = kdp__validate_device_id(d->id, why);
    if (r < 0) {
        return r;
    }
    if (d->health != KDP_HEALTHY && d->health != KDP_UNHEALTHY) {
        return fail(why, "health is neither KDP_HEALTHY nor KDP_UNHEALTHY");
    }
    if (d->n_numa_nodes > 0 && !d->numa_nodes) {
        return fail(why, "numa_nodes is NULL but n_numa_nodes is not 0");
    }
    if (d->permissions) {
        r = kdp__validate_permissions(d->permissions, why);
        if (r < 0) {
            return r;
        }
    }
    if (d->host_path && kdp__validate_abs_path(d->host_path, NULL) < 0) {
        return fail(why, "host_path must be an absolute path (at most 4095 bytes, no control "
                         "characters)");
    }
    if (d->container_path && kdp__validate_abs_path(d->container_path, NULL) < 0) {
        return fail(why, "container_path must be an absolute path (at most 4095 bytes, no "
                         "control characters)");
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Copies the non-negative nodes of src, sorted and de-duplicated. */
static int numa_copy(kdp__dev *dst, const int64_t *src, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        k += src[i] >= 0;
    }
    dst->numa = NULL;
    dst->n_numa = 0;
    if (k == 0) {
        return 0;
    }
    int64_t *v = calloc(k, sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] >= 0) {
            v[k++] = src[i];
        }
    }
    qsort(v, k, sizeof(*v), cmp_i64);
    size_t u = 1;
    for (size_t i = 1; i < k; i++) {
        if (v[i] != v[u - 1]) {
            v[u++] = v[i];
        }
    }
    dst->numa = v;
    dst->n_numa = u;
    return 0;
}

static int strdup_opt(const char *s, char **ret)
{
    *ret = NULL;
    if (!s) {
        return 0;
    }
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

int kdp__dev_copy(kdp__dev *dst, const kdp_device *d)
{
    kdp__dev n = {0};
    n.health = d->health;
    n.author_health = d->health;
    n.data = d->data;
    int r = strdup_opt(d->id, &n.id);
    if (r == 0) {
        r = numa_copy(&n, d->numa_nodes, d->n_numa_nodes);
    }
    if (r == 0) {
        r = strdup_opt(d->host_path, &n.host_path);
    }
    if (r == 0) {
        r = strdup_opt(d->container_path, &n.container_path);
    }
    if (r == 0) {
        r = strdup_opt(d->permissions, &n.permissions);
    }
    if (r < 0) {
        dev_free(&n);
        return r;
    }
    *dst = n;
    return 0;
}

int kdp__dev_dup(kdp__dev *dst, const kdp__dev *s)
{
    kdp_device d = kdp__dev_view(s);
    int r = kdp__dev_copy(dst, &d);
    if (r == 0) {
        dst->author_health = s->author_health;
        dst->probe = s->probe;
    }
    return r;
}

int kdp__dev_from_public(kdp__dev *dst, const kdp_device *d, const char **why)
{
    int r = kdp__dev_check(d, why);
    return r < 0 ? r : kdp__dev_copy(dst, d);
}

void kdp__dev_free(kdp__dev *d)
{
    if (d) {
        dev_free(d);
    }
}

bool kdp__dev_same_for_kubelet(const kdp__dev *a, const kdp__dev *b)
{
    return a->health == b->health && a->n_numa == b->n_numa &&
           (a->n_numa == 0 || memcmp(a->numa, b->numa, a->n_numa * sizeof(*a->numa)) == 0);
}
