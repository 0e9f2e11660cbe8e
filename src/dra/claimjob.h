/* SPDX-License-Identifier: MIT */
/*
 * claimjob: what a claim operation does on a worker thread, as one
 * pipeline per kind:
 *   PREPARE    the record (claim read, checked) -> the author's prepare
 *              op -> the answer merged into the record, this boot noted
 *              -> the device metadata files (if on) -> the claim's CDI
 *              spec -> the checkpoint; past the prepare op, a failure
 *              rolls it back with the unprepare op.
 *   RECORDED   a record of this boot: its CDI spec and metadata files
 *              written again if they are gone (a CDI directory wiped while
 *              the node ran).
 *   UNPREPARE  the record -> the author's unprepare op -> the CDI spec
 *              and the metadata files removed -> dropped from the
 *              checkpoint.
 *   BIND       the record (a claim allocated devices with binding
 *              conditions) -> the author's bind op; nothing recorded.
 *   UNBIND     the record (that allocation, ended) -> the unbind op.
 * A claim prepared in an earlier boot is a PREPARE again (the caller gives
 * the record without its answer).
 *
 * The environment (the author's ops, directories, the checkpoint) is
 * shared by a driver's jobs and counted: a job left running past its
 * deadline, or past the driver's end, keeps what it uses.
 */
#ifndef KDP_DRA_CLAIMJOB_H
#define KDP_DRA_CLAIMJOB_H

#include <stdatomic.h>
#include <stdbool.h>

#include "dra/abandoned.h"
#include "dra/checkpoint.h"
#include "dra/claimrec.h"
#include "dra/metadata.h"
#include "kdp_dra.h"
#include "plugin/jobs.h"

typedef enum kdp__cj_kind {
    KDP__CJ_PREPARE = 0,
    KDP__CJ_RECORDED,
    KDP__CJ_UNPREPARE,
    KDP__CJ_BIND,
    KDP__CJ_UNBIND,
} kdp__cj_kind;

typedef struct kdp__cj_env {
    atomic_uint refs;
    kdp_plugin *p;
    kdp_dra_ops ops;
    void *ud;
    char *driver;
    char *cdi_dir;
    unsigned cdi_mode; /* the specs' (0644; the owner sets it before any job) */
    char *cdi_kind;    /* "k8s.<driver>/claim" */
    char boot_id[KDP__DRA_BOOT_ID_LEN];
    kdp__ckpt *ckpt;
    kdp__abandoned *abandoned;
    /* the device metadata (kdp__cj_env_set_metadata; md.dir NULL: none
     * written or removed) and whether new prepares write it */
    kdp__dra_md md;
    bool metadata;
    char *md_dir;
    char *md_pool;
} kdp__cj_env;

/* One reference; strings copied, ckpt and abandoned referenced. NULL on
 * -ENOMEM. */
kdp__cj_env *kdp__cj_env_new(kdp_plugin *p, const kdp_dra_ops *ops, void *ud, const char *driver,
                             const char *cdi_dir, const char *cdi_kind, const char *boot_id,
                             kdp__ckpt *ckpt, kdp__abandoned *abandoned);
kdp__cj_env *kdp__cj_env_ref(kdp__cj_env *e);
/* Where the claims' device metadata lives (dir; copied) and the pool's
 * name; on: prepares write it (off: only a record's metadata of an earlier
 * run is kept up and removed). Before any job. Returns 0 or -ENOMEM. */
int kdp__cj_env_set_metadata(kdp__cj_env *e, const char *dir, const char *pool, bool on);
/* NULL is fine. */
void kdp__cj_env_unref(kdp__cj_env *e);

/* What a job holds; read by complete (loop thread) once fn returned. */
typedef struct kdp__cj {
    kdp__cj_kind kind;
    kdp__cj_env *env;
    kdp__dra_rec *rec; /* in: the claim; out (PREPARE): as recorded */
    char *uid;
    char file[300];        /* the claim's CDI spec, in env->cdi_dir */
    char err[600];         /* why it failed ("" if it did not) */
    atomic_bool abandoned; /* listed in env->abandoned: its deadline passed */
} kdp__cj;

/* A job of kind on rec (taken over, freed with the job), for owner: its
 * complete runs on the loop (kdp__pjob's). NULL on -ENOMEM (rec freed). */
kdp__pjob *kdp__cj_new(kdp__jobs *js, kdp__cj_env *env, kdp__cj_kind kind, kdp__dra_rec *rec,
                       void *owner, void (*complete)(kdp__pjob *j, bool timed_out));
/* The job's kdp__cj. */
kdp__cj *kdp__cj_of(kdp__pjob *j);
/* Its deadline passed and its callback runs on: the claim stays busy until
 * it returns (env->abandoned). Loop thread, from complete. */
void kdp__cj_abandon(kdp__pjob *j);

#endif
