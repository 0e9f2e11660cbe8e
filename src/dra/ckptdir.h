/* SPDX-License-Identifier: MIT */
/*
 * ckptdir: the checkpoint's records on disk, one file per claim:
 * <state dir>/claims/<UID>.json (dra/ckptset.h's record text: version 3, a
 * checksum, the record), so that a change writes one claim's file, not
 * every claim's, and a load reads one file at a time. Each write is atomic
 * (a temporary file, fsync, rename, fsync of the directory); a file that
 * does not parse is renamed aside (<file>.corrupt-<time>[.<n>], never over
 * another) and logged, its claim forgotten (the kubelet prepares again what
 * it still needs); a file that cannot be read, or of a newer version (a
 * downgrade), fails the read, the file untouched.
 *
 * The one file of kdp before (<state dir>/checkpoint.json, versions 1 and
 * 2: every claim in it) is imported: its records written as files of their
 * own, then the file removed; at open, and again whenever it is there (an
 * instance of the old kdp sharing the directory in a rolling update writes
 * it). Version 1 records take this boot's ID if the file was written since
 * the boot began, else none.
 *
 * The caller serializes (dra/checkpoint.h: a mutex and an flock). No
 * state but the paths.
 */
#ifndef KDP_DRA_CKPTDIR_H
#define KDP_DRA_CKPTDIR_H

#include <stdbool.h>
#include <stdint.h>

#include "dra/ckptset.h"

#define KDP__CKPT_FILE   "checkpoint.json" /* kdp before per-claim files */
#define KDP__CKPT_CLAIMS "claims"

/* What the files are now, to see another writer's change. */
typedef struct kdp__ckpt_stamp {
    uint64_t dev, ino;
    int64_t mtime_ns;
    int64_t legacy_ns; /* checkpoint.json's mtime (0: none) */
} kdp__ckpt_stamp;

typedef struct kdp__ckptdir {
    char *dir;    /* the state directory */
    char *claims; /* <dir>/claims */
    char *legacy; /* <dir>/checkpoint.json */
    char boot_id[KDP__DRA_BOOT_ID_LEN];
} kdp__ckptdir;

/* Paths for dir (made if missing, 0700; refused if others may write there:
 * nothing made in it then); boot_id copied. Returns 0, -EPERM (dir not
 * trusted), -ENOMEM or mkdir's -errno (logged). */
int kdp__ckptdir_init(kdp__ckptdir *d, const char *dir, const char *boot_id);
void kdp__ckptdir_done(kdp__ckptdir *d);
/* Every claim's record into set (empty on failure). A corrupt file is set
 * aside when aside_ok (the lock held: nobody writes meanwhile), else its
 * error is returned. Returns 0, or -errno (logged when aside_ok): a file
 * that cannot be read, -EPROTO a newer version, -EBADMSG or -EFBIG a
 * corrupt one (not aside_ok), -EIO one that cannot be set aside. */
int kdp__ckptdir_read(const kdp__ckptdir *d, kdp__ckpt_set *set, bool aside_ok);
/* r's file written. Returns 0 or -errno (logged). */
int kdp__ckptdir_write(const kdp__ckptdir *d, const kdp__dra_rec *r);
/* uid's file removed. Returns 1 (removed), 0 (none), -errno (logged). */
int kdp__ckptdir_remove(const kdp__ckptdir *d, const char *uid);
/* The stamp of the files now. */
void kdp__ckptdir_stamp(const kdp__ckptdir *d, kdp__ckpt_stamp *st);
/* checkpoint.json's records, if it is there, read only (nothing written,
 * nothing set aside). Returns 0 (set empty if none) or -errno. */
int kdp__ckptdir_read_legacy(const kdp__ckptdir *d, kdp__ckpt_set *set);
/* checkpoint.json imported, if there. Returns the records imported (0:
 * none, or a corrupt file set aside), or -errno (logged; the file kept). */
int kdp__ckptdir_import(const kdp__ckptdir *d);

#endif
