/* SPDX-License-Identifier: MIT */
/*
 * ckptset: the checkpoint's claim records by UID (an array: a node has tens
 * of claims), and the checkpoint file's text for them: {"version": 2,
 * "checksum": "fnv1a64:<hex>", "claims": {UID: record}} (dra/recfile.h for
 * a record), the checksum over the claims (compact, keys sorted). Versions 1
 * and 2 are read.
 *
 * Pure; a set belongs to one thread at a time.
 */
#ifndef KDP_DRA_CKPTSET_H
#define KDP_DRA_CKPTSET_H

#include <stdbool.h>
#include <stddef.h>

#include "dra/claimrec.h"

#define KDP__CKPT_VERSION 2
/* A claim's own file (dra/ckptdir.h): {"version": 3, "checksum":
 * "fnv1a64:<hex>", "claim": record}. */
#define KDP__CKPT_RECORD_VERSION 3
/* The most claims recorded (a node prepares far fewer). */
#define KDP__CKPT_MAX_CLAIMS 65536U
/* The most bytes a claim's record keeps (kdp__dra_rec_bytes: what the API
 * allows a claim, 32 opaque configs of 10 KiB and its results, is about a
 * third of it), and all records together: a claim past either is refused
 * at prepare, so that what a restart loads fits the DaemonSet's memory. */
#define KDP__CKPT_MAX_CLAIM_BYTES (1U << 20)
#define KDP__CKPT_MAX_BYTES       (32U << 20)

typedef struct kdp__ckpt_set {
    kdp__dra_rec **recs;
    size_t n;
} kdp__ckpt_set;

void kdp__ckptset_clear(kdp__ckpt_set *s);
/* The index of uid's record, or -1. */
long kdp__ckptset_find(const kdp__ckpt_set *s, const char *uid);
/* Takes rec over (freed on failure); replaces the record of its UID.
 * Returns 0, -ENOSPC (KDP__CKPT_MAX_CLAIMS), -ENOMEM. */
int kdp__ckptset_put(kdp__ckpt_set *s, kdp__dra_rec *rec);
/* Whether uid was there (dropped). */
bool kdp__ckptset_del(kdp__ckpt_set *s, const char *uid);
/* A deep copy into to. Returns 0 or -ENOMEM (to empty). */
int kdp__ckptset_copy(kdp__ckpt_set *to, const kdp__ckpt_set *from);
/* A file's text into set (empty on failure) and *ret_version. Returns 0,
 * -EBADMSG (not a checkpoint: why), -EPROTO (a newer version: why),
 * -ENOMEM. */
int kdp__ckptset_parse(const char *text, kdp__ckpt_set *set, int *ret_version, char *why,
                       size_t len);
/* A claim's own file text (malloc'd), or NULL on -ENOMEM. */
char *kdp__ckptset_record_text(const kdp__dra_rec *r);
/* A claim's own file text into *ret; uid: the UID its name says. Returns
 * 0, -EBADMSG (not a record of that claim: why), -EPROTO (a newer version:
 * why), -ENOMEM. */
int kdp__ckptset_record_parse(const char *text, const char *uid, kdp__dra_rec **ret, char *why,
                              size_t len);
/* The bytes the records of s keep (kdp__dra_rec_bytes). */
size_t kdp__ckptset_bytes(const kdp__ckpt_set *s);
/* The FNV-1a 64 checksum of s as "fnv1a64:<16 hex>". */
void kdp__ckpt_checksum(const char *s, char out[32]);

#endif
