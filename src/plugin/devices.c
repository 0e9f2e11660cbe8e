/* SPDX-License-Identifier: MIT */
#include "plugin/devices.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "deviceplugin.pb-c.h"

#define DEVTAB_MIN_CAP 16

void kdp__devtab_init(kdp__devtab *t)
{
    t->devs = NULL;
    t->n = 0;
    t->cap = 0;
    t->idx = NULL;
    t->idx_cap = 0;
}

void kdp__devtab_clear(kdp__devtab *t)
{
    if (!t) {
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        kdp__dev_free(&t->devs[i]);
    }
    free(t->devs);
    free(t->idx);
    kdp__devtab_init(t);
}

static int devtab_reserve(kdp__devtab *t, size_t want)
{
    if (want <= t->cap) {
        return 0;
    }
    if (want > KDP__DEVTAB_MAX) {
        return -ENOMEM;
    }
    size_t cap = t->cap ? t->cap : DEVTAB_MIN_CAP;
    while (cap < want) {
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

/* --- the index: open addressing (linear probing) over the IDs' strings --- */

static size_t id_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 29));
}

/* Where id is in the index, or the empty slot where it belongs. */
static size_t idx_slot(const kdp__devtab *t, const char *id)
{
    size_t mask = t->idx_cap - 1;
    size_t i = id_hash(id) & mask;
    while (t->idx[i] && strcmp(t->devs[t->idx[i] - 1].id, id) != 0) {
        i = (i + 1) & mask;
    }
    return i;
}

/* Room for want devices at a load of at most 1/2. */
static int idx_reserve(kdp__devtab *t, size_t want)
{
    if (want <= t->idx_cap / 2) {
        return 0;
    }
    if (want > KDP__DEVTAB_MAX) {
        return -ENOMEM;
    }
    size_t cap = t->idx_cap ? t->idx_cap : 64;
    while (cap / 2 < want) {
        cap *= 2;
    }
    uint32_t *v = calloc(cap, sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    free(t->idx);
    t->idx = v;
    t->idx_cap = cap;
    for (size_t k = 0; k < t->n; k++) {
        t->idx[idx_slot(t, t->devs[k].id)] = (uint32_t)(k + 1);
    }
    return 0;
}

/* Empties slot i, moving later entries of its probe run back (no
 * tombstones: lookups stay short however many removals there were). */
static void idx_delete(kdp__devtab *t, size_t i)
{
    size_t mask = t->idx_cap - 1;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!t->idx[j]) {
            break;
        }
        size_t home = id_hash(t->devs[t->idx[j] - 1].id) & mask;
        /* j's entry may move to i unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            t->idx[i] = t->idx[j];
            i = j;
        }
    }
    t->idx[i] = 0;
}

/* Where id is in devs, or -1. */
static ptrdiff_t devtab_pos(const kdp__devtab *t, const char *id)
{
    if (t->n == 0 || !t->idx) {
        return -1;
    }
    uint32_t v = t->idx[idx_slot(t, id)];
    return v ? (ptrdiff_t)v - 1 : -1;
}

/* Appends nd (taken) to t: the caller checked its ID is not there. */
static int devtab_append(kdp__devtab *t, kdp__dev *nd)
{
    int r = devtab_reserve(t, t->n + 1);
    if (r == 0) {
        r = idx_reserve(t, t->n + 1);
    }
    if (r < 0) {
        return r;
    }
    t->devs[t->n] = *nd;
    t->idx[idx_slot(t, nd->id)] = (uint32_t)(t->n + 1);
    t->n++;
    memset(nd, 0, sizeof(*nd));
    return 0;
}

int kdp__devtab_add(kdp__devtab *t, const kdp_device *d, const char **why)
{
    if (!t) {
        if (why) {
            *why = "device list is NULL";
        }
        return -EINVAL;
    }
    int r = kdp__dev_check(d, why);
    if (r < 0) {
        return r;
    }
    if (devtab_pos(t, d->id) >= 0) {
        if (why) {
            *why = "duplicate device ID";
        }
        return -EEXIST;
    }
    kdp__dev nd;
    r = kdp__dev_copy(&nd, d);
    if (r == 0) {
        r = devtab_append(t, &nd);
        kdp__dev_free(&nd); /* nothing left after a successful append */
    }
    return r;
}

int kdp__devtab_put(kdp__devtab *t, kdp__dev *nd, kdp__dev *old)
{
    ptrdiff_t at = devtab_pos(t, nd->id);
    if (at < 0) {
        memset(old, 0, sizeof(*old));
        return devtab_append(t, nd);
    }
    /* the index keeps pointing at the position: the ID is the same */
    *old = t->devs[at];
    t->devs[at] = *nd;
    memset(nd, 0, sizeof(*nd));
    return 1;
}

int kdp__devtab_take(kdp__devtab *t, const char *id, kdp__dev *out)
{
    ptrdiff_t at = id ? devtab_pos(t, id) : -1;
    if (at < 0) {
        return -ENOENT;
    }
    idx_delete(t, idx_slot(t, id));
    *out = t->devs[at];
    size_t last = t->n - 1;
    if ((size_t)at != last) {
        /* the last device fills the hole; its index entry follows it */
        t->devs[at] = t->devs[last];
        t->idx[idx_slot(t, t->devs[at].id)] = (uint32_t)(at + 1);
    }
    t->n--;
    return 0;
}

int kdp__devtab_remove(kdp__devtab *t, const char *id)
{
    kdp__dev gone;
    int r = kdp__devtab_take(t, id, &gone);
    if (r == 0) {
        kdp__dev_free(&gone);
    }
    return r;
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
        if (why) {
            *why = "device array is NULL";
        }
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) { /* a bad device is the answer, before a duplicate */
        int r = kdp__dev_check(&devs[i], why);
        if (r < 0) {
            return r;
        }
    }
    kdp__devtab tmp;
    kdp__devtab_init(&tmp);
    int r = devtab_reserve(&tmp, n);
    if (r == 0) {
        r = idx_reserve(&tmp, n);
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = kdp__devtab_add(&tmp, &devs[i], why);
    }
    if (r < 0) {
        kdp__devtab_clear(&tmp);
        return r;
    }
    kdp__devtab_move(t, &tmp);
    return 0;
}

int kdp__devtab_copy(kdp__devtab *dst, const kdp__devtab *src)
{
    if (!dst || !src) {
        return -EINVAL;
    }
    kdp__devtab tmp;
    kdp__devtab_init(&tmp);
    int r = devtab_reserve(&tmp, src->n);
    if (r == 0 && src->idx_cap) {
        /* same positions: the index is copied as it is */
        tmp.idx = malloc(src->idx_cap * sizeof(*tmp.idx));
        r = tmp.idx ? 0 : -ENOMEM;
        if (r == 0) {
            memcpy(tmp.idx, src->idx, src->idx_cap * sizeof(*tmp.idx));
            tmp.idx_cap = src->idx_cap;
        }
    }
    for (size_t i = 0; r == 0 && i < src->n; i++) {
        r = kdp__dev_dup(&tmp.devs[i], &src->devs[i]);
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
    kdp__devtab_clear(dst);
    *dst = *src;
    kdp__devtab_init(src);
}

bool kdp__devtab_same_for_kubelet(const kdp__devtab *a, const kdp__devtab *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        const kdp__dev *o = kdp__devtab_find(b, a->devs[i].id);
        if (!o || !kdp__dev_same_for_kubelet(&a->devs[i], o)) {
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
    ptrdiff_t at = devtab_pos(t, id);
    return at >= 0 ? &t->devs[at] : NULL;
}

kdp__dev *kdp__devtab_find_mut(kdp__devtab *t, const char *id)
{
    if (!t || !id) {
        return NULL;
    }
    ptrdiff_t at = devtab_pos(t, id);
    return at >= 0 ? &t->devs[at] : NULL;
}

int kdp__devtab_set_health(kdp__devtab *t, const char *id, kdp_health health)
{
    if (!t || !id || (health != KDP_HEALTHY && health != KDP_UNHEALTHY)) {
        return -EINVAL;
    }
    ptrdiff_t at = devtab_pos(t, id);
    if (at < 0) {
        return -ENOENT;
    }
    kdp__dev *d = &t->devs[at];
    if (d->author_health == health) {
        return 0;
    }
    d->author_health = health;
    kdp__dev_apply_overlay(d);
    return 1;
}

int kdp__devtab_set_verdict(kdp__devtab *t, const char *id, bool bad)
{
    if (!t || !id) {
        return -EINVAL;
    }
    ptrdiff_t at = devtab_pos(t, id);
    if (at < 0) {
        return -ENOENT;
    }
    kdp__dev *d = &t->devs[at];
    if (d->probe.bad == bad) {
        return 0;
    }
    d->probe.bad = bad;
    kdp__dev_apply_overlay(d);
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

static int cmp_dev_ptr(const void *a, const void *b)
{
    return strcmp((*(const kdp__dev *const *)a)->id, (*(const kdp__dev *const *)b)->id);
}

int kdp__devtab_sorted(const kdp__devtab *t, const kdp__dev ***ret)
{
    *ret = NULL;
    if (!t || t->n == 0) {
        return 0;
    }
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    const kdp__dev **v = malloc(t->n * sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->n; i++) {
        v[i] = &t->devs[i];
    }
    qsort(v, t->n, sizeof(*v), cmp_dev_ptr); // NOLINT(bugprone-sizeof-expression): pointers
    *ret = v;
    return 0;
}

typedef struct diff_pair {
    const kdp__dev *old_dev;
    const kdp__dev *new_dev;
} diff_pair;

static int cmp_pair(const void *a, const void *b)
{
    const diff_pair *x = a;
    const diff_pair *y = b;
    return strcmp(x->old_dev ? x->old_dev->id : x->new_dev->id,
                  y->old_dev ? y->old_dev->id : y->new_dev->id);
}

int kdp__devtab_diff(const kdp__devtab *a, const kdp__devtab *b, kdp__devtab_diff_fn cb, void *ud)
{
    static const kdp__devtab empty;
    a = a ? a : &empty;
    b = b ? b : &empty;
    size_t na = a->n;
    size_t nb = b->n;
    if (!cb || na + nb == 0) {
        return 0;
    }
    diff_pair *v = malloc((na + nb) * sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < na; i++) {
        const kdp__dev *o = kdp__devtab_find(b, a->devs[i].id);
        if (!o || !kdp__dev_same_for_kubelet(&a->devs[i], o)) {
            v[k++] = (diff_pair){&a->devs[i], o};
        }
    }
    for (size_t i = 0; i < nb; i++) {
        // NOLINTNEXTLINE(clang-analyzer-core.NullDereference): nb > 0 means b->devs is set
        if (!kdp__devtab_find(a, b->devs[i].id)) {
            v[k++] = (diff_pair){NULL, &b->devs[i]};
        }
    }
    qsort(v, k, sizeof(*v), cmp_pair);
    for (size_t i = 0; i < k; i++) {
        cb(v[i].old_dev, v[i].new_dev, ud);
    }
    free(v);
    return 0;
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

int kdp__devtab_export(const kdp__devtab *t, kdp_device **ret, size_t *ret_n)
{
    *ret = NULL;
    *ret_n = 0;
    if (t->n == 0) {
        return 0;
    }
    const kdp__dev **sorted;
    if (kdp__devtab_sorted(t, &sorted) < 0) {
        return -ENOMEM;
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
        free(sorted);
        return -ENOMEM;
    }
    kdp_device *out = (kdp_device *)(void *)block;
    int64_t *numa = (int64_t *)(void *)(block + numa_off);
    char *pos = block + str_off;
    for (size_t i = 0; i < t->n; i++) {
        const kdp__dev *d = sorted[i];
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
    free(sorted);
    *ret = out;
    *ret_n = t->n;
    return 0;
}
