/* SPDX-License-Identifier: MIT */
/*
 * checkpoint: the claims a DRA driver has prepared, by claim UID, kept as
 * C records (dra/claimrec.h) and in one JSON file that survives restarts:
 * {"version": 2, "checksum": "fnv1a64:<hex>", "claims": {UID: record}}
 * (dra/recfile.h: each opaque config once per claim; each record with the
 * boot it was prepared in). The checksum covers the claims (compact, keys
 * sorted). Every change is written before it counts: a temporary file,
 * fsync, rename over the file, fsync of the directory. A file that does not
 * parse (bad JSON, a checksum that does not match, a record that is not
 * one) is renamed aside (<file>.corrupt-<time>[.<n>], never over another)
 * and logged, and the driver starts with no claims: never silently dropped.
 * A file that cannot be read (EACCES, EIO ...) or has a newer version (a
 * downgrade) is no corruption: open fails, the file untouched.
 *
 * Version 1 files (of kdp before records carried a boot ID) are read and
 * written again as version 2 at open: their records take this boot's ID
 * when the file was written since this boot began (its mtime after the
 * boot time), else none (an earlier boot: prepared again when asked).
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

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dra/ckptset.h"
#include "dra/claimrec.h"

#define KDP__CKPT_FILE "checkpoint.json"
#define KDP__CKPT_LOCK "checkpoint.lock"

typedef struct kdp__ckpt_stamp {
    uint64_t dev, ino;
    int64_t mtime_ns, size;
} kdp__ckpt_stamp;

typedef struct kdp__ckpt {
    atomic_uint refs;
    char *dir;
    char *path;
    char *lock_path;
    char boot_id[KDP__DRA_BOOT_ID_LEN]; /* this boot's ("": not known) */
    pthread_mutex_t wmu;                /* one writer at a time */
    pthread_mutex_t mu;                 /* claims, seen */
    kdp__ckpt_set claims;               /* as of seen */
    kdp__ckpt_stamp seen;
    atomic_size_t count;
} kdp__ckpt;

/* Opens <dir>/checkpoint.json (dir created if missing, mode 0700), loading
 * it if there (a version 1 file upgraded); one reference. boot_id: this
 * boot's (copied; "" if not known). Returns 0 (a corrupt file set aside
 * counts: logged), or -errno (logged): the directory cannot be made, the
 * file cannot be read, -EPROTO its version is newer, -EIO a corrupt file
 * cannot be set aside. */
int kdp__ckpt_open(const char *dir, const char *boot_id, kdp__ckpt **ret);
kdp__ckpt *kdp__ckpt_ref(kdp__ckpt *c);
/* Drops a reference (the last frees it). NULL is fine. */
void kdp__ckpt_unref(kdp__ckpt *c);
/* A copy of uid's record (kdp__dra_rec_free it), or NULL (none, or out of
 * memory). */
kdp__dra_rec *kdp__ckpt_get(kdp__ckpt *c, const char *uid);
/* Records a copy of rec under rec->uid and writes the file (worker thread:
 * it syncs). Returns 0 or -errno (the record is not kept then; -ENOSPC:
 * KDP__CKPT_MAX_CLAIMS). */
int kdp__ckpt_put(kdp__ckpt *c, const kdp__dra_rec *rec);
/* Drops uid and writes the file. Returns 1 (dropped), 0 (none), -errno (the
 * record stays). */
int kdp__ckpt_del(kdp__ckpt *c, const char *uid);
/* A read-modify-write of uid's record: fn changes it (returns 1: write
 * the file; 0: nothing changed; -errno), under the writer lock, so that
 * a claim unprepared meanwhile is never brought back. On a write, *ret
 * (if ret) gets a copy of the record (kdp__dra_rec_free it). Any thread
 * but the loop (it syncs). Returns 0, -ENOENT (no such record), fn's
 * error, or -errno of the write. */
int kdp__ckpt_modify(kdp__ckpt *c, const char *uid, int (*fn)(kdp__dra_rec *rec, void *ud),
                     void *ud, kdp__dra_rec **ret);
/* A claim recorded, other than rec's, that rec may not be prepared beside
 * (kdp__dra_rec_conflict): "ns/name (uid)" into who and the device into
 * dev (len bytes each); false if none. */
bool kdp__ckpt_conflict(kdp__ckpt *c, const kdp__dra_rec *rec, char *who, char *dev, size_t len);
/* The claims recorded, as last read or written (an atomic). */
size_t kdp__ckpt_count(kdp__ckpt *c);

#endif
