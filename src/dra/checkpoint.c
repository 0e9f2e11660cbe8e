/* SPDX-License-Identifier: MIT */
/* checkpoint: the prepared claims, kept (see checkpoint.h). */
#include "dra/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"

/* The memory's copy becomes set (taken over), as of stamp. */
static void swap_in(kdp__ckpt *c, kdp__ckpt_set *set, const kdp__ckpt_stamp *stamp)
{
    pthread_mutex_lock(&c->mu);
    kdp__ckptset_clear(&c->claims);
    c->claims = *set;
    memset(set, 0, sizeof(*set));
    c->seen = *stamp;
    atomic_store(&c->count, c->claims.n);
    pthread_mutex_unlock(&c->mu);
}

/* The claims as they are now, under the file lock (another instance
 * sharing the state directory may have written them; an old kdp's
 * checkpoint.json imported): into set, a copy to change. Returns 0 or
 * -errno (logged). */
static int fresh_claims(kdp__ckpt *c, kdp__ckpt_set *set, kdp__ckpt_stamp *stamp)
{
    kdp__ckpt_stamp now;
    kdp__ckptdir_stamp(&c->files, &now);
    if (now.legacy_ns) {
        int r = kdp__ckptdir_import(&c->files);
        if (r < 0) {
            return r;
        }
        kdp__ckptdir_stamp(&c->files, &now);
    }
    pthread_mutex_lock(&c->mu);
    bool same = memcmp(&now, &c->seen, sizeof(now)) == 0;
    int r = same ? kdp__ckptset_copy(set, &c->claims) : 0;
    pthread_mutex_unlock(&c->mu);
    *stamp = now;
    return same ? r : kdp__ckptdir_read(&c->files, set, true);
}

/* The change of uid on disk: its file written, or removed once gone from
 * set. */
static int persist(kdp__ckpt *c, const kdp__ckpt_set *set, const char *uid)
{
    long i = kdp__ckptset_find(set, uid);
    if (i >= 0 && set->recs) { /* found: recs is there (said for the analyzer) */
        return kdp__ckptdir_write(&c->files, set->recs[i]);
    }
    return kdp__ckptdir_remove(&c->files, uid) < 0 ? -EIO : 0;
}

typedef int (*change_fn)(kdp__ckpt_set *set, const char *uid, void *arg);

/* A read-modify-write of the file: change(set, uid, arg) on what the file
 * holds now, under the writer lock (this process) and an flock on the lock
 * file (other processes). change returns 1 (write), 0 (nothing to write),
 * -errno. The loop never waits for this: it takes mu only for the swap. */
static int update(kdp__ckpt *c, change_fn change, const char *uid, void *arg)
{
    pthread_mutex_lock(&c->wmu);
    int lfd = open(c->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (lfd >= 0 && kdp__own_plain_file(lfd, c->lock_path) < 0) {
        /* not a file of ours (a FIFO, a planted hard link): replaced; a
         * lock on it would guard nothing */
        close(lfd);
        (void)unlink(c->lock_path);
        lfd = open(c->lock_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                   0600);
    }
    int r = lfd < 0 ? -errno : 0;
    while (r == 0 && flock(lfd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            r = -errno;
        }
    }
    if (r < 0) {
        log_error("cannot lock the checkpoint %s: %s", c->lock_path, strerror(-r));
    }
    kdp__ckpt_set set = {0};
    kdp__ckpt_stamp stamp;
    if (r == 0) {
        r = fresh_claims(c, &set, &stamp);
    }
    if (r == 0) {
        r = change(&set, uid, arg);
    }
    int changed = r;
    if (r == 1) {
        r = persist(c, &set, uid);
        kdp__ckptdir_stamp(&c->files, &stamp);
    }
    if (r >= 0) {
        swap_in(c, &set, &stamp);
        r = changed;
    }
    kdp__ckptset_clear(&set);
    if (lfd >= 0) {
        close(lfd); /* the flock goes with it */
    }
    pthread_mutex_unlock(&c->wmu);
    return r;
}

/* The bounds on what is kept: rec's own, and all of set's with rec in
 * place of uid's record. Returns 0, -EFBIG or -ENOSPC (logged). */
static int bounded(const kdp__ckpt_set *set, const char *uid, const kdp__dra_rec *rec)
{
    size_t mine = kdp__dra_rec_bytes(rec);
    if (mine > KDP__CKPT_MAX_CLAIM_BYTES) {
        log_error("claim %s/%s (%s): its record would keep %zu bytes, more than the %u kdp keeps "
                  "for a claim: refused",
                  rec->ns, rec->name, rec->uid, mine, KDP__CKPT_MAX_CLAIM_BYTES);
        return -EFBIG;
    }
    long i = kdp__ckptset_find(set, uid);
    size_t all = kdp__ckptset_bytes(set) - (i >= 0 ? kdp__dra_rec_bytes(set->recs[i]) : 0) + mine;
    if (all > KDP__CKPT_MAX_BYTES) {
        log_error("claim %s/%s (%s): the checkpoint would keep %zu bytes of claims, more than "
                  "its %u: refused",
                  rec->ns, rec->name, rec->uid, all, KDP__CKPT_MAX_BYTES);
        return -ENOSPC;
    }
    return 0;
}

static int change_put(kdp__ckpt_set *set, const char *uid, void *arg)
{
    int r = bounded(set, uid, arg);
    kdp__dra_rec *copy = r == 0 ? kdp__dra_rec_dup(arg, true) : NULL;
    if (r < 0 || !copy) {
        return r < 0 ? r : -ENOMEM;
    }
    r = kdp__ckptset_put(set, copy);
    return r < 0 ? r : 1;
}

static int change_del(kdp__ckpt_set *set, const char *uid, void *arg)
{
    (void)arg;
    return kdp__ckptset_del(set, uid) ? 1 : 0;
}

static int change_none(kdp__ckpt_set *set, const char *uid, void *arg)
{
    (void)set;
    (void)uid;
    (void)arg;
    return 0;
}

/* ---- open ---- */

static int load(kdp__ckpt *c, const char *dir)
{
    int r = kdp__ckptdir_init(&c->files, dir, c->boot_id);
    if (r < 0) {
        return r;
    }
    if (asprintf(&c->lock_path, "%s/%s", dir, KDP__CKPT_LOCK) < 0) {
        c->lock_path = NULL;
        return -ENOMEM;
    }
    r = update(c, change_none, NULL, NULL); /* imports an old file, under the lock */
    if (r < 0) {
        return r;
    }
    if (c->claims.n > 0) {
        log_info("checkpoint %s: %zu prepared claims", c->files.claims, c->claims.n);
    }
    return 0;
}

int kdp__ckpt_open(const char *dir, const char *boot_id, kdp__ckpt **ret)
{
    kdp__ckpt *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->count, 0);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->wmu, NULL);
    snprintf(c->boot_id, sizeof(c->boot_id), "%s", boot_id ? boot_id : "");
    int r = load(c, dir);
    if (r < 0) {
        kdp__ckpt_unref(c);
        return r;
    }
    *ret = c;
    return 0;
}

kdp__ckpt *kdp__ckpt_ref(kdp__ckpt *c)
{
    atomic_fetch_add(&c->refs, 1);
    return c;
}

void kdp__ckpt_unref(kdp__ckpt *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) {
        return;
    }
    kdp__ckptset_clear(&c->claims);
    kdp__ckptdir_done(&c->files);
    free(c->lock_path);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    free(c);
}

/* ---- use ---- */

/* The memory's copy again if another writer changed the files (mu held;
 * the next write imports an old kdp's file). */
static void refresh(kdp__ckpt *c)
{
    kdp__ckpt_stamp now;
    kdp__ckptdir_stamp(&c->files, &now);
    if (memcmp(&now, &c->seen, sizeof(now)) == 0) {
        return;
    }
    kdp__ckpt_set set = {0};
    kdp__ckpt_set old = {0};
    if (kdp__ckptdir_read(&c->files, &set, false) < 0 ||
        (now.legacy_ns && kdp__ckptdir_read_legacy(&c->files, &old) < 0)) {
        kdp__ckptset_clear(&set);
        return; /* the next write sees to it; the memory's copy meanwhile */
    }
    /* an old kdp's claims, until the next write imports them */
    for (size_t i = 0; i < old.n; i++) {
        if (kdp__ckptset_find(&set, old.recs[i]->uid) < 0) {
            (void)kdp__ckptset_put(&set, old.recs[i]); /* taken over, or freed */
            old.recs[i] = NULL;
        }
    }
    for (size_t i = 0; i < old.n; i++) {
        kdp__dra_rec_free(old.recs[i]);
    }
    free(old.recs);
    kdp__ckptset_clear(&c->claims);
    c->claims = set;
    c->seen = now;
    atomic_store(&c->count, set.n);
}

kdp__dra_rec *kdp__ckpt_get(kdp__ckpt *c, const char *uid)
{
    pthread_mutex_lock(&c->mu);
    refresh(c);
    long i = kdp__ckptset_find(&c->claims, uid);
    kdp__dra_rec *r = i >= 0 ? kdp__dra_rec_dup(c->claims.recs[i], true) : NULL;
    pthread_mutex_unlock(&c->mu);
    return r;
}

bool kdp__ckpt_conflict(kdp__ckpt *c, const kdp__dra_rec *rec, char *who, char *dev, size_t len)
{
    bool found = false;
    pthread_mutex_lock(&c->mu);
    refresh(c);
    for (size_t i = 0; i < c->claims.n && !found; i++) {
        const kdp__dra_rec *r = c->claims.recs[i];
        const char *d = NULL;
        if (strcmp(r->uid, rec->uid) != 0 && kdp__dra_rec_conflict(rec, r, &d)) {
            snprintf(who, len, "%s/%s (%s)", r->ns, r->name, r->uid);
            snprintf(dev, len, "%s", d);
            found = true;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return found;
}

int kdp__ckpt_put(kdp__ckpt *c, const kdp__dra_rec *rec)
{
    int r = update(c, change_put, rec->uid, (void *)rec);
    return r < 0 ? r : 0;
}

int kdp__ckpt_del(kdp__ckpt *c, const char *uid)
{
    return update(c, change_del, uid, NULL);
}

/* kdp__ckpt_modify's change: fn on the record, a copy kept for the caller. */
typedef struct modify_ctx {
    int (*fn)(kdp__dra_rec *rec, void *ud);
    void *ud;
    kdp__dra_rec *copy;
} modify_ctx;

static int change_modify(kdp__ckpt_set *set, const char *uid, void *arg)
{
    modify_ctx *modifying = arg;
    long i = kdp__ckptset_find(set, uid);
    if (i < 0 || !set->recs) {
        return -ENOENT;
    }
    int r = modifying->fn(set->recs[i], modifying->ud);
    if (r == 1) {
        r = bounded(set, uid, set->recs[i]) < 0 ? -EFBIG : 1;
    }
    if (r == 1) {
        modifying->copy = kdp__dra_rec_dup(set->recs[i], true);
        r = modifying->copy ? 1 : -ENOMEM;
    }
    return r;
}

int kdp__ckpt_modify(kdp__ckpt *c, const char *uid, int (*fn)(kdp__dra_rec *rec, void *ud),
                     void *ud, kdp__dra_rec **ret)
{
    modify_ctx ctx = {fn, ud, NULL};
    int r = update(c, change_modify, uid, &ctx);
    if (r == 1 && ret) {
        *ret = ctx.copy;
    } else {
        kdp__dra_rec_free(ctx.copy);
    }
    return r < 0 ? r : 0;
}

size_t kdp__ckpt_count(kdp__ckpt *c)
{
    return atomic_load(&c->count);
}

size_t kdp__ckpt_count_shares(kdp__ckpt *c)
{
    size_t n = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->claims.n; i++) {
        const kdp__dra_rec *r = c->claims.recs[i];
        for (size_t j = 0; j < r->n_devs; j++) {
            n += r->devs[j].share_id != NULL;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}
