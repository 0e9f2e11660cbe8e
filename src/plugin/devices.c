/* SPDX-License-Identifier: MIT */
#include "plugin/devices.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/validate.h"
#include "deviceplugin.pb-c.h"

#define DEVTAB_MIN_CAP 16

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

void kdp__devtab_init(kdp__devtab *t)
{
    t->devs = NULL;
    t->n = 0;
    t->cap = 0;
    t->lazy = false;
    t->unsorted = false;
    t->ids = NULL;
    t->ids_cap = 0;
}

void kdp__devtab_init_lazy(kdp__devtab *t)
{
    kdp__devtab_init(t);
    t->lazy = true;
}

void kdp__devtab_clear(kdp__devtab *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        dev_free(&t->devs[i]);
    }
    free(t->devs);
    free(t->ids);
    kdp__devtab_init(t);
}

static int dev_check(const kdp_device *d, const char **why)
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

/* Deep copy of a validated public device. */
static int dev_from_public(kdp__dev *dst, const kdp_device *d)
{
    kdp__dev n = {0};
    n.health = d->health;
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

static int dev_dup(kdp__dev *dst, const kdp__dev *s)
{
    kdp_device d = {
        .id = s->id,
        .health = s->health,
        .numa_nodes = s->numa,
        .n_numa_nodes = s->n_numa,
        .host_path = s->host_path,
        .container_path = s->container_path,
        .permissions = s->permissions,
        .data = s->data,
    };
    return dev_from_public(dst, &d);
}

static int devtab_reserve(kdp__devtab *t, size_t want)
{
    if (want <= t->cap) {
        return 0;
    }
    size_t cap = t->cap ? t->cap : DEVTAB_MIN_CAP;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / sizeof(kdp__dev)) {
            return -ENOMEM;
        }
        cap *= 2;
    }
    kdp__dev *v = realloc(t->devs, cap * sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    t->devs = v;
    t->cap = cap;
    return 0;
}

static int cmp_dev_id(const void *a, const void *b)
{
    return strcmp(((const kdp__dev *)a)->id, ((const kdp__dev *)b)->id);
}

/* A lazy table is sorted when first read: logically const, so the readers
 * taking a const table sort it here. Loop thread (or the one builder). */
const kdp__devtab *kdp__devtab_sorted(const kdp__devtab *ct)
{
    if (ct && ct->unsorted) {
        kdp__devtab *t = (kdp__devtab *)ct;
        qsort(t->devs, t->n, sizeof(kdp__dev), cmp_dev_id);
        t->unsorted = false;
    }
    return ct;
}

/* --- the ID set of lazy tables: open addressing over the IDs' strings --- */

static size_t id_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 29));
}

/* Where id is in the set, or the empty slot where it belongs. */
static size_t ids_slot(const kdp__devtab *t, const char *id)
{
    size_t mask = t->ids_cap - 1;
    size_t i = id_hash(id) & mask;
    while (t->ids[i] && strcmp(t->ids[i], id) != 0) {
        i = (i + 1) & mask;
    }
    return i;
}

/* Room for want IDs at a load of at most 1/2. */
static int ids_reserve(kdp__devtab *t, size_t want)
{
    if (want <= t->ids_cap / 2) {
        return 0;
    }
    size_t cap = t->ids_cap ? t->ids_cap : 64;
    while (cap / 2 < want) {
        if (cap > SIZE_MAX / 2 / sizeof(char *)) {
            return -ENOMEM;
        }
        cap *= 2;
    }
    const char **v = calloc(cap, sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    const char **old = t->ids;
    size_t old_cap = t->ids_cap;
    t->ids = v;
    t->ids_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i]) {
            t->ids[ids_slot(t, old[i])] = old[i];
        }
    }
    free(old);
    return 0;
}

/* The index of id in t, or the index where it belongs (*found false). */
static size_t devtab_slot(const kdp__devtab *t, const char *id, bool *found)
{
    *found = false;
    t = kdp__devtab_sorted(t);
    /* Lists usually come in order: appending is the common case. */
    if (t->n > 0 && strcmp(id, t->devs[t->n - 1].id) > 0) {
        return t->n;
    }
    size_t lo = 0;
    size_t hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(id, t->devs[mid].id);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

/* A lazy table's add: O(1) (amortised), whatever the order of the IDs. */
static int lazy_add(kdp__devtab *t, const kdp_device *d, const char **why)
{
    int r = ids_reserve(t, t->n + 1);
    if (r < 0) {
        return r;
    }
    size_t slot = ids_slot(t, d->id);
    if (t->ids[slot]) {
        if (why) {
            *why = "duplicate device ID";
        }
        return -EEXIST;
    }
    r = devtab_reserve(t, t->n + 1);
    if (r < 0) {
        return r;
    }
    kdp__dev nd;
    r = dev_from_public(&nd, d);
    if (r < 0) {
        return r;
    }
    if (t->n > 0 && !t->unsorted && strcmp(nd.id, t->devs[t->n - 1].id) < 0) {
        t->unsorted = true;
    }
    t->devs[t->n++] = nd;
    t->ids[slot] = nd.id;
    return 0;
}

int kdp__devtab_add(kdp__devtab *t, const kdp_device *d, const char **why)
{
    if (!t) {
        return fail(why, "device list is NULL");
    }
    int r = dev_check(d, why);
    if (r < 0) {
        return r;
    }
    if (t->lazy) {
        return lazy_add(t, d, why);
    }
    bool found;
    size_t i = devtab_slot(t, d->id, &found);
    if (found) {
        if (why) {
            *why = "duplicate device ID";
        }
        return -EEXIST;
    }
    r = devtab_reserve(t, t->n + 1);
    if (r < 0) {
        return r;
    }
    kdp__dev nd;
    r = dev_from_public(&nd, d);
    if (r < 0) {
        return r;
    }
    memmove(&t->devs[i + 1], &t->devs[i], (t->n - i) * sizeof(kdp__dev));
    t->devs[i] = nd;
    t->n++;
    return 0;
}

KDP_EXPORT int kdp_device_list_add(kdp_device_list *list, const kdp_device *d)
{
    if (!list) {
        return -EINVAL;
    }
    const char *why = NULL;
    int r = kdp__devtab_add(&list->tab, d, &why);
    if (r == -EINVAL || r == -EEXIST) {
        log_warn("kdp_device_list_add: device \"%.255s\": %s", d && d->id ? d->id : "(null)", why);
    }
    return r;
}

int kdp__devtab_from_array(kdp__devtab *t, const kdp_device *devs, size_t n, const char **why)
{
    if (!t || (n > 0 && !devs)) {
        return fail(why, "device array is NULL");
    }
    for (size_t i = 0; i < n; i++) {
        int r = dev_check(&devs[i], why);
        if (r < 0) {
            return r;
        }
    }
    kdp__devtab tmp;
    kdp__devtab_init(&tmp);
    int r = devtab_reserve(&tmp, n);
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = dev_from_public(&tmp.devs[i], &devs[i]);
        tmp.n += r == 0;
    }
    if (r < 0) {
        goto fail;
    }
    /* Sorting once keeps a large array O(n log n), not one insertion each. */
    if (tmp.n > 1) {
        qsort(tmp.devs, tmp.n, sizeof(kdp__dev), cmp_dev_id);
    }
    for (size_t i = 1; i < tmp.n; i++) {
        if (strcmp(tmp.devs[i - 1].id, tmp.devs[i].id) == 0) {
            if (why) {
                *why = "duplicate device ID";
            }
            r = -EEXIST;
            goto fail;
        }
    }
    kdp__devtab_move(t, &tmp);
    return 0;
fail:
    kdp__devtab_clear(&tmp);
    return r;
}

int kdp__devtab_copy(kdp__devtab *dst, const kdp__devtab *src)
{
    if (!dst || !src) {
        return -EINVAL;
    }
    src = kdp__devtab_sorted(src);
    kdp__devtab tmp;
    kdp__devtab_init(&tmp);
    int r = devtab_reserve(&tmp, src->n);
    for (size_t i = 0; r == 0 && i < src->n; i++) {
        r = dev_dup(&tmp.devs[i], &src->devs[i]);
        tmp.n += r == 0;
    }
    if (r < 0) {
        kdp__devtab_clear(&tmp);
        return r;
    }
    kdp__devtab_move(dst, &tmp);
    return 0;
}

void kdp__devtab_move(kdp__devtab *dst, kdp__devtab *src)
{
    if (dst == src) {
        return;
    }
    (void)kdp__devtab_sorted(src);
    free(src->ids); /* dst is a plain (sorted, not lazy) table */
    src->ids = NULL;
    src->ids_cap = 0;
    src->lazy = false;
    kdp__devtab_clear(dst);
    *dst = *src;
    kdp__devtab_init(src);
}

/* Same health and NUMA nodes (the id is compared by the callers). */
static bool dev_same_state(const kdp__dev *a, const kdp__dev *b)
{
    return a->health == b->health && a->n_numa == b->n_numa &&
           (a->n_numa == 0 || memcmp(a->numa, b->numa, a->n_numa * sizeof(*a->numa)) == 0);
}

bool kdp__devtab_same_for_kubelet(const kdp__devtab *a, const kdp__devtab *b)
{
    a = kdp__devtab_sorted(a);
    b = kdp__devtab_sorted(b);
    if (a->n != b->n) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->devs[i].id, b->devs[i].id) != 0 ||
            !dev_same_state(&a->devs[i], &b->devs[i])) {
            return false;
        }
    }
    return true;
}

const kdp__dev *kdp__devtab_find(const kdp__devtab *t, const char *id)
{
    if (!t || !id) {
        return NULL;
    }
    bool found;
    size_t i = devtab_slot(t, id, &found);
    return found ? &t->devs[i] : NULL;
}

int kdp__devtab_set_health(kdp__devtab *t, const char *id, kdp_health health)
{
    if (!t || !id || (health != KDP_HEALTHY && health != KDP_UNHEALTHY)) {
        return -EINVAL;
    }
    bool found;
    size_t i = devtab_slot(t, id, &found);
    if (!found) {
        return -ENOENT;
    }
    if (t->devs[i].health == health) {
        return 0;
    }
    t->devs[i].health = health;
    return 1;
}

size_t kdp__devtab_count_healthy(const kdp__devtab *t)
{
    size_t n = 0;
    for (size_t i = 0; t && i < t->n; i++) {
        n += t->devs[i].health == KDP_HEALTHY;
    }
    return n;
}

void kdp__devtab_diff(const kdp__devtab *a, const kdp__devtab *b, kdp__devtab_diff_fn cb, void *ud)
{
    a = kdp__devtab_sorted(a);
    b = kdp__devtab_sorted(b);
    size_t na = a ? a->n : 0;
    size_t nb = b ? b->n : 0;
    size_t i = 0;
    size_t j = 0;
    while (cb && (i < na || j < nb)) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(a->devs[i].id, b->devs[j].id);
        if (c < 0) {
            cb(&a->devs[i++], NULL, ud);
        } else if (c > 0) {
            cb(NULL, &b->devs[j++], ud);
        } else {
            if (!dev_same_state(&a->devs[i], &b->devs[j])) {
                cb(&a->devs[i], &b->devs[j], ud);
            }
            i++;
            j++;
        }
    }
}

static size_t str_size(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Copies s to *pos (advanced), or NULL for NULL. */
static const char *put_str(char **pos, const char *s)
{
    if (!s) {
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *out = memcpy(*pos, s, n);
    *pos += n;
    return out;
}

int kdp__devtab_export(const kdp__devtab *ct, kdp_device **ret, size_t *ret_n)
{
    const kdp__devtab *t = kdp__devtab_sorted(ct);
    *ret = NULL;
    *ret_n = 0;
    if (t->n == 0) {
        return 0;
    }
    size_t n_numa = 0;
    size_t strings = 0;
    for (size_t i = 0; i < t->n; i++) {
        const kdp__dev *d = &t->devs[i];
        n_numa += d->n_numa;
        strings += str_size(d->id) + str_size(d->host_path) + str_size(d->container_path) +
                   str_size(d->permissions);
    }
    _Static_assert(sizeof(kdp_device) % _Alignof(int64_t) == 0, "the NUMA nodes follow aligned");
    size_t numa_off = t->n * sizeof(kdp_device);
    size_t str_off = numa_off + n_numa * sizeof(int64_t);
    char *block = malloc(str_off + strings);
    if (!block) {
        return -ENOMEM;
    }
    kdp_device *out = (kdp_device *)(void *)block;
    int64_t *numa = (int64_t *)(void *)(block + numa_off);
    char *pos = block + str_off;
    for (size_t i = 0; i < t->n; i++) {
        const kdp__dev *d = &t->devs[i];
        kdp_device *o = &out[i];
        o->id = put_str(&pos, d->id);
        o->health = d->health;
        o->numa_nodes = d->n_numa ? numa : NULL;
        o->n_numa_nodes = d->n_numa;
        if (d->n_numa) {
            memcpy(numa, d->numa, d->n_numa * sizeof(int64_t));
            numa += d->n_numa;
        }
        o->host_path = put_str(&pos, d->host_path);
        o->container_path = put_str(&pos, d->container_path);
        o->permissions = put_str(&pos, d->permissions);
        o->data = d->data;
    }
    *ret = out;
    *ret_n = t->n;
    return 0;
}
