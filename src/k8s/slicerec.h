/* SPDX-License-Identifier: MIT */
/*
 * slicerec: the decisions of publishing a node's ResourceSlices, without
 * I/O and without a clock (the time is a parameter, as ngtcp2 takes it):
 * what should be (the devices, in chunks of at most 128 per slice, 64
 * when one of them has taints or consumes counters; the counter sets, at
 * most 8 per slice, in slices of their own) against
 * what the API server has (the last list, then every watch event and every
 * write's answer since), and the next call to make. slices.c drives it on
 * the loop: it tells it every event (kdp__sr_*), asks kdp__sr_next() and
 * makes the call it returns, or arms a timer for the time it returns.
 *
 * What the API server has is kept per slice name with the highest
 * resourceVersion seen for it, deletions included (a tombstone): so a
 * create's answer that arrives after the watch's DELETED event of the same
 * slice (a slice deleted within milliseconds of its creation) cannot bring
 * it back, and no order of create, delete, list and watch events leaves the
 * pool short until a re-list. resourceVersions are compared as the decimal
 * integers the API server gives (KEP-5504 made that a guarantee); one that
 * is not is taken in arrival order. Events at or below the last list's
 * resourceVersion are already in it and ignored.
 *
 * The calls, one at a time besides the watch: discovery (v1, else
 * v1beta2, else v1beta1), the Node (its UID for the owner reference), the
 * list, then the writes of a publish round: slices of another pool or past
 * the count deleted first, then each chunk into its slice (updated) or a
 * new one (created), all at one pool generation above every generation
 * seen. A write whose answer lacks fields that were sent (the API server
 * drops the fields of a feature gate that is off) is a failure, logged
 * once with the fields, retried with backoff. A 409 lists again (backoff 20 ms .. 5 s), any other
 * failure retries with backoff (100 ms .. 30 s); a watch that ends is resumed from its last
 * resourceVersion, one that fails (410 Gone included) lists again; a list
 * every resync_ms is the backstop.
 *
 * Pure (loop thread, or a test): only base/ and jansson.
 */
#ifndef KDP_K8S_SLICEREC_H
#define KDP_K8S_SLICEREC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/backoff.h"
#include "base/k8snames.h"
#include "k8s/sliceplan.h"

#define KDP__SR_MIN_BACKOFF_MS 100U
#define KDP__SR_MAX_BACKOFF_MS 30000U
/* After a 409: sooner, the server answers. */
#define KDP__SR_MIN_CONFLICT_MS 20U
#define KDP__SR_MAX_CONFLICT_MS 5000U
/* A watch that lasted this long works: its backoff resets. */
#define KDP__SR_WATCH_OK_MS 5000U

typedef enum kdp__sr_kind {
    KDP__SR_NONE = 0, /* nothing now: ask again at at_us (0: after an event) */
    KDP__SR_DISCOVER, /* which resource.k8s.io version */
    KDP__SR_GET_NODE, /* the Node's UID */
    KDP__SR_LIST,     /* the node's slices of the driver */
    KDP__SR_WATCH,    /* a watch from watch_rv (not a call: the others go on) */
    KDP__SR_CREATE,   /* chunk as a new slice */
    KDP__SR_UPDATE,   /* chunk into slice name at rv */
    KDP__SR_DELETE,   /* slice name */
} kdp__sr_kind;

typedef struct kdp__sr_action {
    kdp__sr_kind kind;
    size_t chunk;        /* CREATE, UPDATE: devices [chunk*128, ...) */
    size_t count;        /* CREATE, UPDATE: the pool's slice count */
    uint64_t generation; /* CREATE, UPDATE: the pool's generation */
    const char *name;    /* UPDATE, DELETE (valid until the next event) */
    const char *rv;      /* UPDATE: resourceVersion; WATCH: from where */
    uint64_t at_us;      /* NONE */
} kdp__sr_action;

/* What the pool is, as published. */
#define KDP__SR_NFAIL 7

typedef struct kdp__sr_status {
    bool published;      /* the API server has the devices last set */
    uint64_t generation; /* the pool's */
    size_t slices;
    size_t devices;
    size_t counter_sets;
    char version[16]; /* the resource.k8s.io version ("" before discovery) */
    char error[256];  /* the last failure, "" once published */
    int err;          /* its -errno (0: none) */
    /* Failures said: one more each time a failure of a new kind (step and
     * errno, whatever its wording) is logged, for the owner's own line. */
    unsigned long said;
    unsigned long writes, lists, conflicts;
    unsigned long failures[KDP__SR_NFAIL]; /* by kind: kdp__sr_fail_names */
} kdp__sr_status;

/* The kinds of failure counted: "discovery", "node", "list", "write",
 * "conflict", "watch" (one that ended with an error), "start". */
extern const char *const kdp__sr_fail_names[KDP__SR_NFAIL];

typedef struct kdp__sr {
    char driver[KDP__K8S_DRIVER_NAME_MAX + 1];
    char node[KDP__K8S_DNS_SUBDOMAIN_MAX + 1];
    char node_uid[128];
    uint64_t resync_us;

    /* what should be: devices in the v1 shape, sorted by name, and their
     * chunks (kdp__sr_chunks); counter sets, sorted by name, in chunks of
     * KDP__SR_MAX_SETS after them */
    json_t **devs;
    size_t ndevs;
    size_t *starts;
    size_t ndchunks;
    json_t **sets;
    size_t nsets;
    size_t nchunks;
    bool started;      /* devices were set: publish */
    uint64_t want_ver; /* bumped when they change */

    /* what the API server has */
    kdp__sr_slice *known;
    size_t nknown;
    uint64_t list_rv;  /* the last list's (0: none, or not decimal) */
    uint64_t floor_rv; /* the last list's or a write answered since: none below */
    bool need_list;
    bool watching;
    bool watch_wanted; /* a watch should run (after the first list) */
    char watch_rv[64];
    uint64_t watch_since_us; /* when the watch began */
    uint64_t watch_at_us;    /* start the watch again then */

    /* the call in flight */
    kdp__sr_kind inflight;
    char inflight_name[KDP__K8S_DNS_SUBDOMAIN_MAX + 1];
    kdp__sr_action inflight_a; /* a CREATE's or UPDATE's chunk, count, generation */
    uint64_t inflight_ver;     /* want_ver when it was made */
    uint64_t round_gen;        /* > 0 while a round writes */
    uint64_t retry_at_us;
    uint64_t resync_at_us;
    kdp__backoff bo, conflict_bo, watch_bo;
    bool failing;

    kdp__sr_status st;
} kdp__sr;

/* For driver's pool on node; node_uid NULL: read from the API server;
 * resync_ms 0 = 10 minutes; seed for the backoffs' jitter (0: the clock).
 * Returns 0, -EINVAL (a bad name, logged), -ENOMEM. */
int kdp__sr_init(kdp__sr *s, const char *driver, const char *node, const char *node_uid,
                 unsigned resync_ms, uint32_t seed);
void kdp__sr_done(kdp__sr *s);

/* The next call to make (or when to ask again). Call it after every event
 * until it answers NONE; a call it returns is under way once returned (the
 * next event about it is its answer), except WATCH, which is under way
 * until kdp__sr_watch_ended. */
kdp__sr_action kdp__sr_next(kdp__sr *s, uint64_t now_us);
/* The call returned by next could not be started (-errno): as a failure. */
void kdp__sr_not_started(kdp__sr *s, kdp__sr_kind kind, int err, uint64_t now_us);

/* The devices to publish, v1 shape, sorted by name, unique, and the
 * pool's counter sets, sorted by name, unique (the arrays and their
 * references are taken over, freed at once if they are the last set;
 * sets may be NULL when nsets is 0). Returns 1 if they differ from the
 * last set (a new round then), 0 if they do not, -ENOMEM (the last set
 * stays). */
int kdp__sr_set_devices(kdp__sr *s, json_t **devs, size_t n, json_t **sets, size_t nsets);

/* The answers. err: 0 or the -errno of k8s/api.h; why: a line for the log
 * (NULL when err is 0). */
void kdp__sr_discovered(kdp__sr *s, int err, const char *version, const char *why, uint64_t now_us);
void kdp__sr_node(kdp__sr *s, int err, json_t *node, const char *why, uint64_t now_us);
void kdp__sr_listed(kdp__sr *s, int err, json_t *list, const char *why, uint64_t now_us);
/* A write's answer: obj the slice (create, update) or NULL. */
void kdp__sr_written(kdp__sr *s, int err, json_t *obj, const char *why, uint64_t now_us);
/* A watch event: type "ADDED", "MODIFIED", "DELETED", "BOOKMARK". */
void kdp__sr_watch_event(kdp__sr *s, const char *type, json_t *obj, uint64_t now_us);
/* The watch ended: err 0 (the server closed it: resume), else a gap. */
void kdp__sr_watch_ended(kdp__sr *s, int err, const char *why, uint64_t now_us);

/* What chunk i of the pool holds now. */
void kdp__sr_chunk(const kdp__sr *s, size_t i, kdp__sr_chunkv *ret);
/* (kdp__sr_rv, which compares resourceVersions, is in sliceplan.h.) */

#endif
