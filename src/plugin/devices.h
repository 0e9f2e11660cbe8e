/* SPDX-License-Identifier: MIT */
/*
 * devices: kdp's device table. A table is a set of devices (plugin/dev.h) found by ID in
 * O(1), so that comparing two tables ignores the order they were given in,
 * one device changes at the cost of one device, and a ListAndWatch message
 * is encoded once per change and shared by every open stream.
 */
#ifndef KDP_DEVICES_H
#define KDP_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp.h"
#include "plugin/dev.h"

/* At most this many devices in one table (positions are kept as 32 bits). */
#define KDP__DEVTAB_MAX ((size_t)UINT32_MAX / 4)

/* A table: the devices in an array in no particular order, found by ID
 * through a hash index (open addressing over the array's positions), so that
 * a lookup, an add, a replacement and a removal cost O(1) however large the
 * table. Readers that show a table sort a view of it (kdp__devtab_sorted). */
typedef struct kdp__devtab {
    kdp__dev *devs;
    size_t n;
    size_t cap;
    uint32_t *idx;  /* position + 1 of each device; 0 = empty slot */
    size_t idx_cap; /* a power of two, at most half full */
} kdp__devtab;

/* The public builder handed to kdp_list_fn is a table. */
struct kdp_device_list {
    kdp__devtab tab;
};

/* Decimal digits of v (replica suffixes). */
static inline size_t kdp__digits(size_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

void kdp__devtab_init(kdp__devtab *t);
/* Frees every device; the table is empty and reusable afterwards. */
void kdp__devtab_clear(kdp__devtab *t);
/* Validates d (id, permissions, paths) and adds a deep copy. O(1) amortised.
 * Returns 0, -EINVAL (bad field; *why names it if why != NULL), -EEXIST
 * (duplicate id), -ENOMEM. */
int kdp__devtab_add(kdp__devtab *t, const kdp_device *d, const char **why);
/* Adds *nd (taken: zeroed on success), or replaces the device with its ID,
 * which is moved to *old (zeroed if there was none). Returns 0 (added), 1
 * (replaced) or -ENOMEM (nothing changed, *nd still the caller's). */
int kdp__devtab_put(kdp__devtab *t, kdp__dev *nd, kdp__dev *old);
/* Moves the device with this ID out of t into *out. Returns 0 or -ENOENT. */
int kdp__devtab_take(kdp__devtab *t, const char *id, kdp__dev *out);
/* Removes (and frees) the device with this ID. Returns 0 or -ENOENT. */
int kdp__devtab_remove(kdp__devtab *t, const char *id);
/* Builds a table from an array (all or nothing): on success t's old content
 * (t initialised) is replaced, on failure t is unchanged. Same returns as
 * kdp__devtab_add. */
int kdp__devtab_from_array(kdp__devtab *t, const kdp_device *devs, size_t n, const char **why);
/* Deep copy; dst must be initialised (its old content is freed). */
int kdp__devtab_copy(kdp__devtab *dst, const kdp__devtab *src);
/* Moves src's content into dst (dst's old content freed; src left empty). */
void kdp__devtab_move(kdp__devtab *dst, kdp__devtab *src);
/* Same devices with the same health and NUMA nodes (what the kubelet sees;
 * host paths are not compared). Order-insensitive. O(n). */
bool kdp__devtab_same_for_kubelet(const kdp__devtab *a, const kdp__devtab *b);
const kdp__dev *kdp__devtab_find(const kdp__devtab *t, const char *id);
/* The same, to change in place what the index does not depend on (not the
 * ID). */
kdp__dev *kdp__devtab_find_mut(kdp__devtab *t, const char *id);
/* Sets the author's health (the kubelet sees it unless the probe holds the
 * device Unhealthy). Returns 1 if the author's health changed, 0 if it was
 * already so, -ENOENT, -EINVAL. */
int kdp__devtab_set_health(kdp__devtab *t, const char *id, kdp_health health);
/* Sets the probe's verdict (bad: Unhealthy). Returns 1 if it changed, 0 if
 * it was already so, -ENOENT, -EINVAL. */
int kdp__devtab_set_verdict(kdp__devtab *t, const char *id, bool bad);
size_t kdp__devtab_count_healthy(const kdp__devtab *t);
/* A copy of t in the public form, sorted by ID, in ONE allocation (the
 * devices, then their NUMA nodes, then their strings): *ret is freed with
 * free(); NULL with *ret_n 0 for an empty table. Returns 0 or -ENOMEM. */
int kdp__devtab_export(const kdp__devtab *t, kdp_device **ret, size_t *ret_n);
/* The devices of t sorted by ID, as pointers into t (valid until t
 * changes), in an array freed with free(); NULL for an empty table. Returns
 * 0 or -ENOMEM. O(n log n). */
int kdp__devtab_sorted(const kdp__devtab *t, const kdp__dev ***ret);

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
/* One device's share of that size (the message is their sum). */
size_t kdp__dev_encoded_size(const kdp__dev *d, unsigned replicas);

/* What changed between two tables, for log lines and kdpctl: cb gets each
 * device that was added (old NULL), removed (new NULL) or whose health or
 * NUMA nodes changed (both set), in ID order. Returns 0 or -ENOMEM (no
 * call made). */
typedef void (*kdp__devtab_diff_fn)(const kdp__dev *old_dev, const kdp__dev *new_dev, void *ud);
int kdp__devtab_diff(const kdp__devtab *a, const kdp__devtab *b, kdp__devtab_diff_fn cb, void *ud);

#endif
