/* SPDX-License-Identifier: MIT */
/*
 * checkpoint: the claims a DRA driver has prepared, by claim UID, in one
 * JSON file (jansson) that survives restarts: {"version": 1, "checksum":
 * "fnv1a64:<hex>", "claims": {UID: record}}. The checksum covers the
 * claims (compact, keys sorted). Every change is written before it counts:
 * a temporary file, fsync, rename over the file, fsync of the directory. A
 * file that does not parse (bad JSON, an older version, a checksum that does
 * not match) is renamed aside (<file>.corrupt-<time>[.<n>], never over
 * another) and logged, and the driver starts with no claims: never silently
 * dropped. A file that cannot be read (EACCES, EIO ...) or has a newer
 * version (a downgrade) is no corruption: open fails, the file untouched.
 *
 * Instances sharing the state directory (a rolling update) stay
 * consistent: every put and delete is a read-modify-write of the file under
 * an flock on <dir>/checkpoint.lock, and a get reads the file again when
 * another writer changed it (its inode, mtime or size differ).
 *
 * Thread-safe: the loop reads (mu, held only for a copy or a re-read, never
 * across a write), the worker's jobs write (wmu, one at a time, then mu for
 * the swap); counted references, so that a job left running past the
 * driver's end keeps it.
 */
#ifndef KDP_DRA_CHECKPOINT_H
#define KDP_DRA_CHECKPOINT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KDP__CKPT_VERSION 1
#define KDP__CKPT_FILE    "checkpoint.json"
#define KDP__CKPT_LOCK    "checkpoint.lock"
/* The most claims recorded (a node prepares far fewer). */
#define KDP__CKPT_MAX_CLAIMS 65536U

typedef struct kdp__ckpt_stamp {
    uint64_t dev, ino;
    int64_t mtime_ns, size;
} kdp__ckpt_stamp;

typedef struct kdp__ckpt {
    atomic_uint refs;
    char *dir;
    char *path;
    char *lock_path;
    pthread_mutex_t wmu; /* one writer at a time */
    pthread_mutex_t mu;  /* claims, seen */
    json_t *claims;      /* an object: UID -> record, as of seen */
    kdp__ckpt_stamp seen;
    atomic_size_t count;
} kdp__ckpt;

/* Opens <dir>/checkpoint.json (dir created if missing, mode 0700), loading
 * it if there; one reference. Returns 0 (a corrupt file set aside counts:
 * logged), or -errno (logged): the directory cannot be made, the file
 * cannot be read, -EPROTO its version is newer, -EIO a corrupt file cannot
 * be set aside. */
int kdp__ckpt_open(const char *dir, kdp__ckpt **ret);
kdp__ckpt *kdp__ckpt_ref(kdp__ckpt *c);
/* Drops a reference (the last frees it). NULL is fine. */
void kdp__ckpt_unref(kdp__ckpt *c);
/* A copy of uid's record (json_decref it), or NULL. */
json_t *kdp__ckpt_get(kdp__ckpt *c, const char *uid);
/* Records a copy of rec for uid and writes the file (worker
 * thread: it syncs). Returns 0 or -errno (the record is not kept then). */
int kdp__ckpt_put(kdp__ckpt *c, const char *uid, json_t *rec);
/* Drops uid and writes the file. Returns 1 (dropped), 0 (none), -errno (the
 * record stays). */
int kdp__ckpt_del(kdp__ckpt *c, const char *uid);
/* The claims recorded, as last read or written (an atomic). */
size_t kdp__ckpt_count(kdp__ckpt *c);
/* The FNV-1a 64 checksum of s as "fnv1a64:<16 hex>". */
void kdp__ckpt_checksum(const char *s, char out[32]);

#endif
