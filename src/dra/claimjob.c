/* SPDX-License-Identifier: MIT */
/* claimjob: a claim operation on a worker thread (see claimjob.h). */
#include "dra/claimjob.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "base/log.h"
#include "discovery/cdi.h"
#include "dra/prepared.h"

/* ---- the environment ---- */

kdp__cj_env *kdp__cj_env_new(kdp_plugin *p, const kdp_dra_ops *ops, void *ud, const char *driver,
                             const char *cdi_dir, const char *cdi_kind, const char *boot_id,
                             kdp__ckpt *ckpt, kdp__abandoned *abandoned)
{
    kdp__cj_env *e = calloc(1, sizeof(*e));
    if (!e) {
        return NULL;
    }
    atomic_init(&e->refs, 1);
    e->p = p;
    e->ops = *ops;
    e->ud = ud;
    e->driver = strdup(driver);
    e->cdi_dir = strdup(cdi_dir);
    e->cdi_mode = 0644;
    e->cdi_kind = strdup(cdi_kind);
    snprintf(e->boot_id, sizeof(e->boot_id), "%s", boot_id);
    e->ckpt = kdp__ckpt_ref(ckpt);
    e->abandoned = kdp__abandoned_ref(abandoned);
    if (!e->driver || !e->cdi_dir || !e->cdi_kind) {
        kdp__cj_env_unref(e);
        return NULL;
    }
    return e;
}

int kdp__cj_env_set_metadata(kdp__cj_env *e, const char *dir, const char *pool, bool on)
{
    free(e->md_dir);
    free(e->md_pool);
    e->md_dir = strdup(dir);
    e->md_pool = strdup(pool);
    if (!e->md_dir || !e->md_pool) {
        return -ENOMEM;
    }
    e->md = (kdp__dra_md){e->md_dir, e->driver, e->md_pool};
    e->metadata = on;
    return 0;
}

kdp__cj_env *kdp__cj_env_ref(kdp__cj_env *e)
{
    atomic_fetch_add(&e->refs, 1);
    return e;
}

void kdp__cj_env_unref(kdp__cj_env *e)
{
    if (!e || atomic_fetch_sub(&e->refs, 1) != 1) {
        return;
    }
    free(e->driver);
    free(e->cdi_dir);
    free(e->cdi_kind);
    free(e->md_dir);
    free(e->md_pool);
    kdp__ckpt_unref(e->ckpt);
    kdp__abandoned_unref(e->abandoned);
    free(e);
}

/* ---- the pipelines ---- */

static void fail(kdp__cj *cj, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(kdp__cj *cj, const char *fmt, ...)
{
    if (cj->err[0]) {
        return; /* the first reason stays */
    }
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(cj->err, sizeof(cj->err), fmt, ap);
    va_end(ap);
}

/* The author's op through j's checks (a positive return is a mistake:
 * logged, taken as its negative), its message on failure. */
static const char *const kind_names[] = {"prepare", "prepare", "unprepare", "bind", "unbind"};

static int author(kdp__pjob *j, kdp__cj *cj, kdp__cj_kind kind, kdp_dra_prepared *pr)
{
    kdp__cj_env *e = cj->env;
    kdp__dra_claimview v;
    int r = kdp__dra_claimview_init(&v, cj->rec);
    if (r < 0) {
        fail(cj, "out of memory");
        return r;
    }
    j->has_msg = false;
    if (kind == KDP__CJ_UNPREPARE) {
        r = e->ops.unprepare ? kdp__pjob_checked(j, e->ops.unprepare(e->p, &v.claim, e->ud)) : 0;
    } else if (kind == KDP__CJ_BIND) {
        r = e->ops.bind ? kdp__pjob_checked(j, e->ops.bind(e->p, &v.claim, e->ud)) : 0;
    } else if (kind == KDP__CJ_UNBIND) {
        r = e->ops.unbind ? kdp__pjob_checked(j, e->ops.unbind(e->p, &v.claim, e->ud)) : 0;
    } else {
        r = e->ops.prepare ? kdp__pjob_checked(j, e->ops.prepare(e->p, &v.claim, pr, e->ud)) : 0;
    }
    kdp__dra_claimview_done(&v);
    if (r < 0) {
        fail(cj, "the %s callback failed: %.400s", kind_names[kind],
             j->has_msg ? j->msg : strerror(-r));
    }
    return r;
}

/* The prepare op succeeded but its result cannot be kept (the CDI spec or
 * the checkpoint could not be written): the unprepare op undoes it, so that
 * the kubelet's next try starts clean. */
static void roll_back(kdp__pjob *j, kdp__cj *cj)
{
    char why[sizeof(cj->err)];
    memcpy(why, cj->err, sizeof(why));
    cj->err[0] = '\0';
    int r = author(j, cj, KDP__CJ_UNPREPARE, NULL);
    if (r < 0) {
        log_error("claim %s: rolling back its prepare, the unprepare callback failed too: %s",
                  cj->uid, cj->err);
    } else {
        log_warn("claim %s: its prepare rolled back (unprepare op called): %s", cj->uid, why);
    }
    memcpy(cj->err, why, sizeof(why));
}

/* The claim's CDI spec as the record says (none: removed), its device
 * metadata's mounts in it. */
static int write_cdi(kdp__cj *cj)
{
    kdp__cj_env *e = cj->env;
    kdp__dra_md_cdi md;
    int r = kdp__dra_md_cdi_init(&md, &e->md, cj->rec);
    if (r == 0) {
        r = kdp__dra_rec_has_cdi(cj->rec)
                ? kdp__dra_rec_write_cdi(cj->rec, e->cdi_dir, cj->file, e->cdi_kind, e->cdi_mode,
                                         md.devs, md.n)
                : kdp__cdi_remove_file(e->cdi_dir, cj->file);
    }
    kdp__dra_md_cdi_done(&md);
    const char *why = NULL;
    if (r == -KDP__EUNTRUSTED && kdp__dir_trusted(e->cdi_dir, &why) == -KDP__EUNTRUSTED) {
        fail(cj, "cannot write the claim's CDI spec %s: the CDI directory %s %s", cj->file,
             e->cdi_dir, why);
    } else if (r < 0) {
        fail(cj, "cannot write the claim's CDI spec %s: %s", cj->file, strerror(-r));
    }
    return r;
}

/* The claim's device metadata files (first: generation 1 and their CDI
 * IDs given to the devices). */
static int write_metadata(kdp__cj *cj, bool first)
{
    kdp__cj_env *e = cj->env;
    int r = 0;
    if (first) {
        cj->rec->md_gen = 1;
        r = kdp__dra_md_add_ids(cj->rec, e->cdi_kind);
        if (r < 0) {
            fail(cj, "out of memory recording the claim");
            return r;
        }
    }
    char why[400];
    r = kdp__dra_md_write(&e->md, cj->rec, why, sizeof(why));
    if (r < 0) {
        fail(cj, "%s", why);
    }
    return r;
}

/* claim read and checked -> prepare op -> record -> CDI spec -> checkpoint */
static int prepare(kdp__pjob *j, kdp__cj *cj)
{
    kdp__cj_env *e = cj->env;
    kdp_dra_prepared pr = {0};
    int r = kdp__dra_prepared_init(&pr, cj->rec->n_devs);
    if (r < 0) {
        fail(cj, "out of memory");
        return r;
    }
    r = author(j, cj, KDP__CJ_PREPARE, &pr);
    bool prepared = r == 0;
    if (r == 0) {
        r = kdp__dra_rec_merge(cj->rec, &pr, e->cdi_kind);
        if (r < 0) {
            fail(cj, "out of memory recording the claim");
        }
        snprintf(cj->rec->boot_id, sizeof(cj->rec->boot_id), "%s", e->boot_id);
    }
    kdp__dra_prepared_done(&pr);
    if (r == 0 && e->metadata && e->md.dir) {
        r = write_metadata(cj, true);
    }
    if (r == 0 && (r = write_cdi(cj)) >= 0) {
        r = kdp__ckpt_put(e->ckpt, cj->rec);
        if (r == -EFBIG || r == -ENOSPC) {
            if (r == -EFBIG) {
                fail(cj,
                     "cannot record the claim in the checkpoint: its record is over the %u "
                     "MiB kdp keeps for a claim",
                     KDP__CKPT_MAX_CLAIM_BYTES >> 20);
            } else {
                fail(cj,
                     "cannot record the claim in the checkpoint: the checkpoint holds its %u "
                     "MiB of claims",
                     KDP__CKPT_MAX_BYTES >> 20);
            }
        } else if (r < 0) {
            fail(cj, "cannot record the claim in the checkpoint: %s", strerror(-r));
        }
    }
    if (r < 0 && prepared) {
        (void)kdp__cdi_remove_file(e->cdi_dir, cj->file);
        (void)kdp__dra_md_remove(&e->md, cj->rec);
        roll_back(j, cj);
    }
    return r < 0 ? r : 0;
}

/* A recorded claim of this boot: its CDI spec and metadata files again if
 * they are gone. */
static int recorded(kdp__cj *cj)
{
    kdp__cj_env *e = cj->env;
    if (cj->rec->md_gen && e->md.dir && !kdp__dra_md_present(&e->md, cj->rec)) {
        int r = write_metadata(cj, false);
        if (r < 0) {
            return r;
        }
        log_info("claim %s: its device metadata in %s was gone: written again", cj->uid, e->md.dir);
    }
    if (!kdp__dra_rec_has_cdi(cj->rec) || kdp__cdi_file_exists(e->cdi_dir, cj->file)) {
        return 0;
    }
    int r = write_cdi(cj);
    if (r >= 0) {
        log_info("claim %s: its CDI spec %s/%s was gone (the CDI directory wiped): written "
                 "again",
                 cj->uid, e->cdi_dir, cj->file);
    }
    return r < 0 ? r : 0;
}

/* The record's metadata off, its CDI IDs with it (an unprepare that fails
 * after this leaves a record whose prepare hands out no ID of a device the
 * spec no longer has). */
static int metadata_off(kdp__dra_rec *rec, void *ud)
{
    (void)ud;
    bool had = rec->md_gen != 0;
    rec->md_gen = 0;
    char mark[KDP__CLAIM_UID_MAX + 16];
    snprintf(mark, sizeof(mark), "=%s_metadata_", rec->uid);
    for (size_t i = 0; i < rec->n_devs; i++) {
        kdp__dra_rdev *d = &rec->devs[i];
        size_t k = 0;
        for (size_t j = 0; j < d->n_cdi_ids; j++) {
            if (strstr(d->cdi_ids[j], mark)) {
                free(d->cdi_ids[j]);
                had = true;
            } else {
                d->cdi_ids[k++] = d->cdi_ids[j];
            }
        }
        d->n_cdi_ids = k;
    }
    return had ? 1 : 0;
}

/* record -> unprepare op -> CDI spec removed -> dropped from the checkpoint */
static int unprepare(kdp__pjob *j, kdp__cj *cj)
{
    kdp__cj_env *e = cj->env;
    int r = author(j, cj, KDP__CJ_UNPREPARE, NULL);
    if (r == 0) {
        r = kdp__cdi_remove_file(e->cdi_dir, cj->file);
        if (r < 0) {
            fail(cj, "cannot remove the claim's CDI spec %s: %s", cj->file, strerror(-r));
        }
    }
    if (r >= 0 && cj->rec->md_gen) {
        /* the record's files off first, so that a status written meanwhile
         * (kdp_plugin_set_dra_device_status) no longer writes them */
        r = kdp__ckpt_modify(e->ckpt, cj->uid, metadata_off, NULL, NULL);
        r = r == -ENOENT ? 0 : r;
        if (r < 0) {
            fail(cj, "cannot record the claim's device metadata gone: %s", strerror(-r));
        }
    }
    if (r >= 0) {
        r = kdp__dra_md_remove(&e->md, cj->rec);
        if (r < 0) {
            fail(cj, "cannot remove the claim's device metadata in %s: %s", e->md.dir,
                 strerror(-r));
        }
    }
    if (r >= 0) {
        r = kdp__ckpt_del(e->ckpt, cj->uid);
        if (r < 0) {
            fail(cj, "cannot drop the claim from the checkpoint: %s", strerror(-r));
        }
    }
    return r < 0 ? r : 0;
}

static void fn(kdp__pjob *j)
{
    kdp__cj *cj = j->data;
    int r = 0;
    switch (cj->kind) {
    case KDP__CJ_PREPARE:
        r = prepare(j, cj);
        break;
    case KDP__CJ_RECORDED:
        r = recorded(cj);
        break;
    case KDP__CJ_UNPREPARE:
        r = unprepare(j, cj);
        break;
    case KDP__CJ_BIND:
    case KDP__CJ_UNBIND:
        r = author(j, cj, cj->kind, NULL);
        break;
    }
    if (r < 0) {
        fail(cj, "%s", strerror(-r));
    }
    j->result = r;
}

/* ---- the job ---- */

static void cleanup(kdp__pjob *j)
{
    kdp__cj *cj = j->data;
    if (!cj) {
        return;
    }
    if (atomic_load(&cj->abandoned)) {
        /* the abandoned callback returned: its claim is free again */
        log_info("claim %s: the %s callback that overran its deadline returned (%s)", cj->uid,
                 kind_names[cj->kind], j->result < 0 ? cj->err : "done");
        kdp__abandoned_del(cj->env->abandoned, cj->uid);
    }
    kdp__dra_rec_free(cj->rec);
    kdp__cj_env_unref(cj->env);
    free(cj->uid);
    free(cj);
    j->data = NULL;
}

kdp__pjob *kdp__cj_new(kdp__jobs *js, kdp__cj_env *env, kdp__cj_kind kind, kdp__dra_rec *rec,
                       void *owner, void (*complete)(kdp__pjob *j, bool timed_out))
{
    kdp__cj *cj = calloc(1, sizeof(*cj));
    kdp__pjob *j = cj ? kdp__pjob_new(js, kind_names[kind], owner) : NULL;
    if (cj) {
        cj->uid = strdup(rec->uid);
    }
    if (!j || !cj->uid) {
        if (cj) {
            free(cj->uid);
        }
        free(cj);
        if (j) {
            j->base.free(&j->base); /* never submitted, no data */
        }
        kdp__dra_rec_free(rec);
        return NULL;
    }
    cj->kind = kind;
    cj->env = kdp__cj_env_ref(env);
    cj->rec = rec;
    atomic_init(&cj->abandoned, false);
    snprintf(cj->file, sizeof(cj->file), "k8s.%s-claim_%s.json", env->driver, rec->uid);
    j->data = cj;
    j->fn = fn;
    j->complete = complete;
    j->cleanup = cleanup;
    return j;
}

kdp__cj *kdp__cj_of(kdp__pjob *j)
{
    return j->data;
}

void kdp__cj_abandon(kdp__pjob *j)
{
    kdp__cj *cj = j->data;
    if (kdp__abandoned_add(cj->env->abandoned, cj->uid) == 0) {
        atomic_store(&cj->abandoned, true);
    }
}
