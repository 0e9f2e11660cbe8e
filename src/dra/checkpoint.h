/* SPDX-License-Identifier: MIT */
/*
 * checkpoint: the claims a DRA driver has prepared, by claim UID, kept as
 * C records (dra/claimrec.h) and on disk, a file per claim
 * (dra/ckptdir.h: <state dir>/claims/<UID>.json, a checksum each, each
 * opaque config once per claim, each record with the boot it was prepared
 * in), so that a change writes one claim and a restart reads one file at a
 * time. Every change is written before it counts (atomic, fsync'd). A
 * record is refused past KDP__CKPT_MAX_CLAIM_BYTES, and past
 * KDP__CKPT_MAX_BYTES for all of them (dra/ckptset.h), so that what a
 * restart loads fits the driver's memory. The one checkpoint.json of kdp
 * before is imported (ckptdir.h).
 *
 * Instances sharing the state directory (a rolling update) stay
 * consistent: every put and delete is a read-modify-write under an flock
 * on <dir>/checkpoint.lock, and a get reads the files again when another
 * writer changed them (the claims directory's or the old file's stamp).
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

#include "dra/ckptdir.h"
#include "dra/ckptset.h"
#include "dra/claimrec.h"

#define KDP__CKPT_LOCK "checkpoint.lock"

typedef struct kdp__ckpt {
    atomic_uint refs;
    kdp__ckptdir files;
    char *lock_path;
    char boot_id[KDP__DRA_BOOT_ID_LEN]; /* this boot's ("": not known) */
    pthread_mutex_t wmu;                /* one writer at a time */
    pthread_mutex_t mu;                 /* claims, seen */
    kdp__ckpt_set claims;               /* as of seen */
    kdp__ckpt_stamp seen;
    atomic_size_t count;
} kdp__ckpt;

/* Opens the checkpoint in dir (created if missing, mode 0700, and trusted:
 * kdp__dir_trusted), importing a checkpoint.json of kdp before and loading
 * the claims' files; one reference. boot_id: this boot's (copied; "" if
 * not known). Returns 0 (a corrupt file set aside counts: logged), or
 * -errno (logged): the directory cannot be made or is not trusted
 * (-EPERM), a file cannot be read, -EPROTO a newer version, -EIO a corrupt
 * file cannot be set aside. */
int kdp__ckpt_open(const char *dir, const char *boot_id, kdp__ckpt **ret);
kdp__ckpt *kdp__ckpt_ref(kdp__ckpt *c);
/* Drops a reference (the last frees it). NULL is fine. */
void kdp__ckpt_unref(kdp__ckpt *c);
/* A copy of uid's record (kdp__dra_rec_free it), or NULL (none, or out of
 * memory). */
kdp__dra_rec *kdp__ckpt_get(kdp__ckpt *c, const char *uid);
/* Records a copy of rec under rec->uid and writes its file (worker
 * thread: it syncs). Returns 0 or -errno (the record is not kept then;
 * -EFBIG: over KDP__CKPT_MAX_CLAIM_BYTES; -ENOSPC: KDP__CKPT_MAX_CLAIMS or
 * KDP__CKPT_MAX_BYTES in all). */
int kdp__ckpt_put(kdp__ckpt *c, const kdp__dra_rec *rec);
/* Drops uid and removes its file. Returns 1 (dropped), 0 (none), -errno
 * (the record stays). */
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
/* The shares (devices with a share ID) the claims recorded hold, as last
 * read or written. */
size_t kdp__ckpt_count_shares(kdp__ckpt *c);

#endif
