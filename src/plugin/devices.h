/* SPDX-License-Identifier: MIT */
/*
 * devices: kdp's device table. A table is a set of devices kept sorted by ID,
 * so that comparing two tables ignores the order they were given in, lookups
 * are binary searches, and a ListAndWatch message is encoded once per change
 * and shared by every open stream.
 */
#ifndef KDP_DEVICES_H
#define KDP_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp.h"

typedef struct kdp__dev {
    char *id;
    kdp_health health;
    int64_t *numa; /* sorted, de-duplicated, only >= 0 */
    size_t n_numa;
    char *host_path;      /* NULL if none */
    char *container_path; /* NULL = same as host_path */
    char *permissions;    /* NULL = "rw" */
    void *data;           /* the author's (kdp_device.data): never read here */
} kdp__dev;

typedef struct kdp__devtab {
    kdp__dev *devs; /* sorted by id (strcmp); see kdp__devtab_init_lazy */
    size_t n;
    size_t cap;
    /* Lazy tables only (the list handed to a kdp_list_fn): adds append and
     * duplicates are found through a hash set of the IDs (ids, ids_cap);
     * unsorted says the array is out of order until the table is sorted,
     * which every other call does first (move and copy hand out sorted,
     * non-lazy tables). */
    bool lazy;
    bool unsorted;
    const char **ids;
    size_t ids_cap;
} kdp__devtab;

/* The public builder handed to kdp_list_fn is a table. */
struct kdp_device_list {
    kdp__devtab tab;
};

void kdp__devtab_init(kdp__devtab *t);
/* Like init, for a table built by many adds in any order (a device list):
 * each add is O(1) instead of an insertion in place, the table is sorted
 * once, when first read or moved. */
void kdp__devtab_init_lazy(kdp__devtab *t);
/* Frees every device; the table is empty and reusable afterwards. */
void kdp__devtab_clear(kdp__devtab *t);
/* Validates d (id, permissions, paths) and adds a deep copy. Keeps the table
 * sorted (insertion in place), so a table is always ready for lookups; a
 * lazy table appends instead.
 * Returns 0, -EINVAL (bad field; *why names it if why != NULL), -EEXIST
 * (duplicate id), -ENOMEM. */
int kdp__devtab_add(kdp__devtab *t, const kdp_device *d, const char **why);
/* Builds a table from an array (all or nothing): on success t's old content
 * (t initialised) is replaced, on failure t is unchanged. Same returns as
 * kdp__devtab_add. */
int kdp__devtab_from_array(kdp__devtab *t, const kdp_device *devs, size_t n, const char **why);
/* Deep copy; dst must be initialised (its old content is freed). */
int kdp__devtab_copy(kdp__devtab *dst, const kdp__devtab *src);
/* Moves src's content into dst (dst's old content freed; src left empty). */
void kdp__devtab_move(kdp__devtab *dst, kdp__devtab *src);
/* Same devices with the same health and NUMA nodes (what the kubelet sees;
 * host paths are not compared). Order-insensitive by construction. */
bool kdp__devtab_same_for_kubelet(const kdp__devtab *a, const kdp__devtab *b);
const kdp__dev *kdp__devtab_find(const kdp__devtab *t, const char *id);
/* Returns 1 if the health changed, 0 if it was already so, -ENOENT. */
int kdp__devtab_set_health(kdp__devtab *t, const char *id, kdp_health health);
size_t kdp__devtab_count_healthy(const kdp__devtab *t);
/* A copy of t in the public form, sorted by ID, in ONE allocation (the
 * devices, then their NUMA nodes, then their strings): *ret is freed with
 * free(); NULL with *ret_n 0 for an empty table. Returns 0 or -ENOMEM. */
int kdp__devtab_export(const kdp__devtab *t, kdp_device **ret, size_t *ret_n);

/* t, sorted by ID if it was a lazy table not read yet (the readers below do
 * it themselves). Loop thread, or the table's one builder. */
const kdp__devtab *kdp__devtab_sorted(const kdp__devtab *t);

/* devices_encode.c: packs the table as a v1beta1 ListAndWatchResponse ("Healthy"/"Unhealthy";
 * a device without NUMA nodes gets no topology). *ret_buf is malloc'ed.
 * Returns 0 or -ENOMEM. */
int kdp__devtab_encode(const kdp__devtab *t, uint8_t **ret_buf, size_t *ret_len);
/* The same with each device sent as `replicas` entries "<id>-0" ...
 * "<id>-<replicas-1>" (plugin/replicas.h), each with its device's health and
 * topology; replicas 0 or 1 = kdp__devtab_encode. */
int kdp__devtab_encode_replicas(const kdp__devtab *t, unsigned replicas, uint8_t **ret_buf,
                                size_t *ret_len);

/* The size kdp__devtab_encode() would give, without encoding: O(n), no
 * allocation. */
size_t kdp__devtab_encoded_size(const kdp__devtab *t);
/* The size kdp__devtab_encode_replicas() would give: O(n) whatever the
 * replicas, no allocation. */
size_t kdp__devtab_encoded_size_replicas(const kdp__devtab *t, unsigned replicas);

/* What changed between two tables, for log lines and kdpctl: cb gets each
 * device that was added (old NULL), removed (new NULL) or whose health or
 * NUMA nodes changed (both set), in ID order. */
typedef void (*kdp__devtab_diff_fn)(const kdp__dev *old_dev, const kdp__dev *new_dev, void *ud);
void kdp__devtab_diff(const kdp__devtab *a, const kdp__devtab *b, kdp__devtab_diff_fn cb, void *ud);

#endif
