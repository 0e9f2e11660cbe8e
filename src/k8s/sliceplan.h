/* SPDX-License-Identifier: MIT */
/*
 * sliceplan: what a publish round of a node's ResourceSlices writes, from
 * what the API server has (the slices known, tombstones included) and the
 * devices wanted: which chunk of at most KDP__SR_MAX_DEVICES devices each
 * slice of the pool holds at a generation (devices, slice count, the Node
 * as controller owner), the chunks no slice holds, the slices that hold
 * none (to reuse or delete) and slices of ours in another pool (to
 * delete). slicerec decides from it.
 *
 * Pure: any thread.
 */
#ifndef KDP_K8S_SLICEPLAN_H
#define KDP_K8S_SLICEPLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp_dra.h"

#define KDP__SR_MAX_DEVICES 128U /* per slice (the API's limit) */
/* per slice when one of its devices has taints or consumes counters */
#define KDP__SR_MAX_DEVICES_TAINTED KDP_DRA_MAX_DEVICES_PER_SLICE_ADVANCED
/* counter sets per slice (a slice holds devices or counter sets) */
#define KDP__SR_MAX_SETS KDP_DRA_MAX_SETS_PER_SLICE
/* What the API server has: at most this many slices kept (tombstones
 * included; a pool of kdp has at most 128). */
#define KDP__SR_MAX_KNOWN 1024U

/* A slice as the API server has it. */
typedef struct kdp__sr_slice {
    char *name;
    char *rv_text;
    uint64_t rv; /* 0: not a decimal integer */
    bool gone;   /* deleted (a tombstone) */
    uint64_t gen;
    json_t *obj; /* as the API server has it (NULL for a tombstone) */
} kdp__sr_slice;

/* Forgets known[i]: frees it, closes the gap. */
void kdp__sr_forget(kdp__sr_slice *known, size_t *n, size_t i);
/* Forgets every one and frees the array. */
void kdp__sr_forget_all(kdp__sr_slice **known, size_t *n);

/* What is wanted (borrowed): the device chunks first, then the counter
 * set chunks. */
typedef struct kdp__sr_want {
    json_t *const *devs; /* v1 shape, sorted by name */
    size_t ndevs;
    const size_t *starts; /* chunk i < ndchunks is devs[starts[i] .. starts[i + 1]) */
    size_t ndchunks;
    json_t *const *sets; /* counter sets, sorted by name */
    size_t nsets;
    size_t nchunks;   /* ndchunks, then nsets / KDP__SR_MAX_SETS rounded up */
    const char *pool; /* the node's name */
    const char *node_uid;
    const char *version; /* resource.k8s.io's: how the server shows devices */
} kdp__sr_want;

typedef struct kdp__sr_plan {
    size_t count;                 /* slices the devices take */
    size_t missing;               /* chunks with no slice holding them */
    size_t first_missing;         /* the first of them */
    const kdp__sr_slice *spare;   /* a slice of the pool holding no chunk (the first by name) */
    size_t spares;                /* how many */
    const kdp__sr_slice *foreign; /* a slice of ours in another pool */
    uint64_t maxgen;              /* the highest generation there */
} kdp__sr_plan;

/* The plan at generation gen (0: the highest there). */
void kdp__sr_plan_make(const kdp__sr_slice *known, size_t n, const kdp__sr_want *w, uint64_t gen,
                       kdp__sr_plan *p);
/* How many slices n devices without taints take (at least 1). */
size_t kdp__sr_count(size_t n);
/* The chunks of devs, one per slice, in order: at most 128 devices each,
 * 64 when one of them has taints or consumes counters (the API's bound).
 * starts gets n / 64 + 2 entries at most, the last being n. Returns the
 * number of chunks (at least 1, an empty one for no device). */
size_t kdp__sr_chunks(json_t *const *devs, size_t n, size_t *starts);

/* A chunk: what one slice holds. */
typedef struct kdp__sr_chunkv {
    bool sets;            /* counter sets (sharedCounters), else devices */
    json_t *const *items; /* NULL when n is 0 */
    size_t n;
} kdp__sr_chunkv;
void kdp__sr_want_chunk(const kdp__sr_want *w, size_t i, kdp__sr_chunkv *ret);
/* Whether slice object obj holds chunk c at generation gen and count
 * (devices or counter sets, the Node as controller owner). */
bool kdp__sr_holds(const kdp__sr_want *w, json_t *obj, size_t c, uint64_t gen, size_t count);
/* Whether the answer obj to a write of chunk c (at gen, count) lacks what
 * was sent (the API server drops the fields of a feature gate that is off):
 * then true, and a line into why naming the fields and the gates. */
bool kdp__sr_dropped(const kdp__sr_want *w, json_t *obj, size_t c, uint64_t gen, size_t count,
                     char *why, size_t why_len);
/* Compares resourceVersions: the decimal value, 0 if it is not one. */
uint64_t kdp__sr_rv(const char *rv);
/* Quantities compared by value ("1Gi" == "1024Mi": the API server writes
 * them back in its canonical form), everything else as it is. */
bool kdp__sr_json_same(json_t *a, json_t *b);
/* Whether a slice object is in pool. */
bool kdp__sr_in_pool(json_t *obj, const char *pool);

#endif
