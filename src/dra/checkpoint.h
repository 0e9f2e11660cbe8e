/* SPDX-License-Identifier: MIT */
/*
 * checkpoint: the claims a DRA driver has prepared, by claim UID, in one
 * JSON file (jansson) that survives restarts: {"version": 1, "checksum":
 * "fnv1a64:<hex>", "claims": {UID: record}}. The checksum covers the
 * claims (compact, keys sorted). Every change is written before it counts:
 * a temporary file, fsync, rename over the file, fsync of the directory. A
 * file that cannot be read back (bad JSON, another version, a checksum that
 * does not match) is renamed aside (<file>.corrupt-<time>) and logged, and
 * the driver starts with no claims: never silently dropped.
 *
 * Thread-safe (a mutex): the loop reads, the worker's jobs write; counted
 * references, so that a job left running past the driver's end keeps it.
 */
#ifndef KDP_DRA_CHECKPOINT_H
#define KDP_DRA_CHECKPOINT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define KDP__CKPT_VERSION 1
#define KDP__CKPT_FILE    "checkpoint.json"
/* The most claims recorded (a node prepares far fewer). */
#define KDP__CKPT_MAX_CLAIMS 65536U

typedef struct kdp__ckpt {
    atomic_uint refs;
    char *dir;
    char *path;
    pthread_mutex_t mu;
    json_t *claims; /* an object: UID -> record */
} kdp__ckpt;

/* Opens <dir>/checkpoint.json (dir created if missing, mode 0700), loading
 * it if there; one reference. Returns 0 (a corrupt file set aside counts:
 * logged), or -errno (the directory cannot be made, a corrupt file cannot
 * be set aside; logged). */
int kdp__ckpt_open(const char *dir, kdp__ckpt **ret);
kdp__ckpt *kdp__ckpt_ref(kdp__ckpt *c);
/* Drops a reference (the last frees it). NULL is fine. */
void kdp__ckpt_unref(kdp__ckpt *c);
/* A copy of uid's record (json_decref it), or NULL. */
json_t *kdp__ckpt_get(kdp__ckpt *c, const char *uid);
/* Records rec (a reference is taken) for uid and writes the file. Returns 0
 * or -errno (the record is not kept then). */
int kdp__ckpt_put(kdp__ckpt *c, const char *uid, json_t *rec);
/* Drops uid and writes the file. Returns 1 (dropped), 0 (none), -errno (the
 * record stays). */
int kdp__ckpt_del(kdp__ckpt *c, const char *uid);
size_t kdp__ckpt_count(kdp__ckpt *c);
/* The FNV-1a 64 checksum of s as "fnv1a64:<16 hex>". */
void kdp__ckpt_checksum(const char *s, char out[32]);

#endif
