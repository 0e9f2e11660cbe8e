/* SPDX-License-Identifier: MIT */
/* devices_encode: a device table as the ListAndWatch message, in one
 * allocation, and its exact size without encoding it (the 4 MiB check).
 * With replicas > 1 each device is sent as that many entries "<id>-<k>"
 * (the scheme of plugin/replicas.h), each with the device's health and
 * topology. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "plugin/devices.h"

/* Where each array of the message lives in one allocation. */
typedef struct enc_layout {
    size_t reps;  /* entries per device: 1, or the replicas */
    size_t n_msg; /* entries in the message */
    size_t n_topo;
    size_t n_nodes;
    size_t off_dev_ptrs;
    size_t off_topo;
    size_t off_nodes;
    size_t off_node_ptrs;
    size_t off_ids; /* the replica IDs' strings (reps > 1) */
    size_t ids_bytes;
    size_t total;
} enc_layout;

/* Appends count elements of size elem to the layout, aligned. */
static int layout_add(size_t *total, size_t count, size_t elem, size_t *ret_off)
{
    const size_t align = _Alignof(max_align_t);
    size_t off = *total;
    size_t bytes;
    if (off > SIZE_MAX - align) {
        return -ENOMEM;
    }
    off = (off + align - 1) & ~(align - 1);
    if (__builtin_mul_overflow(count, elem, &bytes) || __builtin_add_overflow(off, bytes, total)) {
        return -ENOMEM;
    }
    *ret_off = off;
    return 0;
}

static int enc_plan(const kdp__devtab *t, unsigned replicas, enc_layout *l)
{
    memset(l, 0, sizeof(*l));
    l->reps = replicas > 1 ? replicas : 1;
    /* the replicas of a device share its TopologyInfo */
    size_t id_room = l->reps > 1 ? 1 + kdp__digits(l->reps - 1) + 1 : 0; /* "-<k>" and the NUL */
    for (size_t i = 0; i < t->n; i++) {
        if (t->devs[i].n_numa > 0) {
            l->n_topo++;
            if (__builtin_add_overflow(l->n_nodes, t->devs[i].n_numa, &l->n_nodes)) {
                return -ENOMEM;
            }
        }
        size_t bytes;
        if (l->reps > 1 &&
            (__builtin_mul_overflow(strlen(t->devs[i].id) + id_room, l->reps, &bytes) ||
             __builtin_add_overflow(l->ids_bytes, bytes, &l->ids_bytes))) {
            return -ENOMEM;
        }
    }
    if (__builtin_mul_overflow(t->n, l->reps, &l->n_msg)) {
        return -ENOMEM;
    }
    size_t off_devs;
    if (layout_add(&l->total, l->n_msg, sizeof(V1beta1__Device), &off_devs) < 0 ||
        layout_add(&l->total, l->n_msg, sizeof(V1beta1__Device *), &l->off_dev_ptrs) < 0 ||
        layout_add(&l->total, l->n_topo, sizeof(V1beta1__TopologyInfo), &l->off_topo) < 0 ||
        layout_add(&l->total, l->n_nodes, sizeof(V1beta1__NUMANode), &l->off_nodes) < 0 ||
        layout_add(&l->total, l->n_nodes, sizeof(V1beta1__NUMANode *), &l->off_node_ptrs) < 0 ||
        layout_add(&l->total, l->ids_bytes, 1, &l->off_ids) < 0) {
        return -ENOMEM;
    }
    assert(off_devs == 0);
    return 0;
}

/* Fills the message's structs in arena (laid out by l); returns the device
 * pointer array. The strings point into t. */
static V1beta1__Device **enc_fill(const kdp__devtab *t, const enc_layout *l, char *arena)
{
    static const V1beta1__Device dev_init = V1BETA1__DEVICE__INIT;
    static const V1beta1__TopologyInfo topo_init = V1BETA1__TOPOLOGY_INFO__INIT;
    static const V1beta1__NUMANode node_init = V1BETA1__NUMANODE__INIT;
    V1beta1__Device *devs = (V1beta1__Device *)(void *)arena;
    V1beta1__Device **dev_ptrs = (V1beta1__Device **)(void *)(arena + l->off_dev_ptrs);
    V1beta1__TopologyInfo *topo = (V1beta1__TopologyInfo *)(void *)(arena + l->off_topo);
    V1beta1__NUMANode *nodes = (V1beta1__NUMANode *)(void *)(arena + l->off_nodes);
    V1beta1__NUMANode **node_ptrs = (V1beta1__NUMANode **)(void *)(arena + l->off_node_ptrs);
    char *ids = arena + l->off_ids;
    const char *ids_end = ids + l->ids_bytes;

    size_t o = 0;
    for (size_t i = 0; i < t->n; i++) {
        const kdp__dev *d = &t->devs[i];
        V1beta1__TopologyInfo *pt = NULL;
        if (d->n_numa > 0) {
            pt = topo++;
            *pt = topo_init;
            pt->n_nodes = d->n_numa;
            pt->nodes = node_ptrs;
            for (size_t k = 0; k < d->n_numa; k++) {
                *nodes = node_init;
                nodes->id = d->numa[k];
                *node_ptrs++ = nodes++;
            }
        }
        for (size_t r = 0; r < l->reps; r++, o++) {
            V1beta1__Device *pd = &devs[o];
            *pd = dev_init;
            pd->id = d->id;
            if (l->reps > 1) {
                int n = snprintf(ids, (size_t)(ids_end - ids), "%s-%zu", d->id, r);
                assert(n > 0 && ids + n < ids_end); /* room counted by enc_plan */
                pd->id = ids;
                ids += n + 1;
            }
            pd->health = d->health == KDP_HEALTHY ? (char *)"Healthy" : (char *)"Unhealthy";
            pd->topology = pt;
            dev_ptrs[o] = pd;
        }
    }
    return dev_ptrs;
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* A length-delimited field: tag, length, content. */
static size_t field_size(size_t len)
{
    return 1 + varint_size(len) + len;
}

size_t kdp__devtab_encoded_size(const kdp__devtab *t)
{
    return kdp__devtab_encoded_size_replicas(t, 1);
}

/* A Device's fields but its ID: health and topology. */
static size_t dev_rest_size(const kdp__dev *d)
{
    size_t rest =
        field_size(d->health == KDP_HEALTHY ? sizeof("Healthy") - 1 : sizeof("Unhealthy") - 1);
    if (d->n_numa > 0) {
        size_t topo = 0;
        for (size_t k = 0; k < d->n_numa; k++) {
            /* proto3: a zero ID is left out, leaving an empty NUMANode */
            size_t node = d->numa[k] ? 1 + varint_size((uint64_t)d->numa[k]) : 0;
            topo += field_size(node);
        }
        rest += field_size(topo);
    }
    return rest;
}

size_t kdp__dev_encoded_size(const kdp__dev *d, unsigned replicas)
{
    size_t reps = replicas > 1 ? replicas : 1;
    size_t id_len = strlen(d->id);
    size_t rest = dev_rest_size(d);
    if (reps == 1) {
        return field_size(field_size(id_len) + rest);
    }
    /* the replicas "<id>-<k>" by the number of digits of k: O(1) per device
     * whatever the count */
    size_t total = 0;
    for (size_t lo = 0, dig = 1; lo < reps; lo = lo ? lo * 10 : 10, dig++) {
        size_t hi = lo ? lo * 10 : 10;
        size_t count = (hi < reps ? hi : reps) - lo;
        total += count * field_size(field_size(id_len + 1 + dig) + rest);
    }
    return total;
}

size_t kdp__devtab_encoded_size_replicas(const kdp__devtab *t, unsigned replicas)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        total += kdp__dev_encoded_size(&t->devs[i], replicas);
    }
    return total;
}

int kdp__devtab_encode(const kdp__devtab *t, uint8_t **ret_buf, size_t *ret_len)
{
    return kdp__devtab_encode_replicas(t, 1, ret_buf, ret_len);
}

int kdp__devtab_encode_replicas(const kdp__devtab *t, unsigned replicas, uint8_t **ret_buf,
                                size_t *ret_len)
{
    if (!t || !ret_buf || !ret_len) {
        return -EINVAL;
    }
    enc_layout l;
    int r = enc_plan(t, replicas, &l);
    if (r < 0) {
        return r;
    }
    char *arena = malloc(l.total ? l.total : 1);
    if (!arena) {
        return -ENOMEM;
    }
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    resp.n_devices = l.n_msg;
    resp.devices = l.n_msg ? enc_fill(t, &l, arena) : NULL;
    size_t len = v1beta1__list_and_watch_response__get_packed_size(&resp);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        free(arena);
        return -ENOMEM;
    }
    size_t packed = v1beta1__list_and_watch_response__pack(&resp, buf);
    assert(packed == len);
    (void)packed;
    free(arena);
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}
