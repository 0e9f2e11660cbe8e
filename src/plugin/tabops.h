/* SPDX-License-Identifier: MIT */
/*
 * tabops: single changes to a device table, queued to be applied elsewhere
 * (the loop's copy of the table), and applied with an undo log so that a
 * batch whose result cannot be used is taken back at the cost of the batch.
 */
#ifndef KDP_TABOPS_H
#define KDP_TABOPS_H

#include <stdbool.h>
#include <stddef.h>

#include "kdp.h"
#include "plugin/devices.h"

typedef enum kdp__tabop_kind {
    KDP__TABOP_PUT,     /* add or replace dev */
    KDP__TABOP_REMOVE,  /* remove id */
    KDP__TABOP_HEALTH,  /* set id's health (the author's) */
    KDP__TABOP_VERDICT, /* set id's probe verdict (plugin/probe.h) */
} kdp__tabop_kind;

typedef struct kdp__tabop {
    kdp__tabop_kind kind;
    kdp__dev dev; /* PUT: owned (its id is the op's) */
    char *id;     /* REMOVE, HEALTH, VERDICT: owned */
    kdp_health health;
    bool bad; /* VERDICT */
} kdp__tabop;

/* Queued changes. Past KDP__TABOPS_MAX they are dropped and `lost` is set:
 * the reader then takes the whole table instead (a queue never holds more
 * than this many devices, however fast they change). */
#define KDP__TABOPS_MAX 4096
typedef struct kdp__tabops {
    kdp__tabop *v;
    size_t n;
    size_t cap;
    bool lost;
} kdp__tabops;

/* Frees every op; q is empty (and not lost) afterwards. */
void kdp__tabops_clear(kdp__tabops *q);
/* Appends op (taken: zeroed), unless q is lost, or full (then q becomes
 * lost), or out of memory (lost too): the op is freed then. */
void kdp__tabops_push(kdp__tabops *q, kdp__tabop *op);
/* A deep copy of op into dst. Returns 0 or -ENOMEM. */
int kdp__tabop_dup(kdp__tabop *dst, const kdp__tabop *op);
/* Frees what op holds. */
void kdp__tabop_free(kdp__tabop *op);

/* Applies q's ops to t in order, consuming them (q is left empty). No undo:
 * for replaying changes on a fresh table. Returns 0, or -ENOMEM (some ops
 * could not be applied; the rest were). */
int kdp__tabops_replay(kdp__devtab *t, kdp__tabops *q);

/* What one applied op did, for the log and for taking it back. */
typedef struct kdp__tabundo {
    kdp__tabop_kind kind;
    const char *id; /* the device's ID (valid until kdp__tabundo_free) */
    char *owned_id; /* REMOVE, HEALTH, VERDICT: the op's ID, kept for the log */
    bool did;       /* the op changed t */
    bool visible;   /* ... in what the kubelet sees (health, NUMA, presence) */
    bool had;       /* PUT, REMOVE: a device was there; it is in old */
    kdp__dev old;
    kdp_health old_health, new_health; /* what the kubelet sees, before and after */
    kdp_health old_author;             /* HEALTH: the author's health before */
    bool old_bad;                      /* VERDICT: the verdict before */
} kdp__tabundo;

/* Applies ops[0..n) to t, consuming them, filling undo[0..n). Returns 0, or
 * -ENOMEM after taking back what it had applied (t is as it was). */
int kdp__tabops_apply(kdp__devtab *t, kdp__tabop *ops, size_t n, kdp__tabundo *undo);
/* Takes back undo[0..n) (in reverse order): t is as it was before apply. */
void kdp__tabops_undo(kdp__devtab *t, kdp__tabundo *undo, size_t n);
/* Frees what undo[0..n) keeps (the replaced and removed devices). */
void kdp__tabundo_free(kdp__tabundo *undo, size_t n);

#endif
