/* SPDX-License-Identifier: MIT */
/* checkpoint: the prepared claims, kept (see checkpoint.h). */
#include "dra/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"
#include "dra/bootid.h"

#define MAX_FILE (64U << 20)

/* ---- the file ---- */

/* The file's text into *ret (malloc'd) and its mtime. Returns 0, -ENOENT
 * (none), or another -errno: the file cannot be read (not a corruption).
 * O_NONBLOCK and the regular-file check: a FIFO planted there never holds
 * the thread. */
static int read_text(const char *path, char **ret, int64_t *ret_mtime)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        return -errno;
    }
    struct stat sb;
    int r = fstat(fd, &sb) < 0 ? -errno : 0;
    if (r == 0 && !S_ISREG(sb.st_mode)) {
        r = S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
    }
    if (r == 0 && (uint64_t)sb.st_size > MAX_FILE) {
        r = -EFBIG;
    }
    char *buf = r == 0 ? malloc((size_t)sb.st_size + 1) : NULL;
    if (!buf) {
        close(fd);
        return r < 0 ? r : -ENOMEM;
    }
    size_t len = 0;
    while (r == 0 && len < (size_t)sb.st_size) {
        ssize_t n = read(fd, buf + len, (size_t)sb.st_size - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_mtime = (int64_t)sb.st_mtim.tv_sec;
    return 0;
}

/* Version 1 records carry no boot: this boot's if the file was written
 * since it began, else none (an earlier one). */
static void stamp_v1(kdp__ckpt_set *set, const char *boot_id, int64_t mtime)
{
    int64_t btime = kdp__bootid_btime();
    bool this_boot = boot_id[0] && btime > 0 && mtime >= btime;
    for (size_t i = 0; i < set->n; i++) {
        snprintf(set->recs[i]->boot_id, sizeof(set->recs[i]->boot_id), "%s",
                 this_boot ? boot_id : "");
    }
}

typedef enum { READ_OK, READ_NONE, READ_CORRUPT, READ_ERROR } read_result;

/* The file's claims into set; *was_v1 when it was of version 1 (stamped). */
static read_result read_claims(kdp__ckpt *c, kdp__ckpt_set *set, bool *was_v1, int *err, char *why,
                               size_t len)
{
    char *text = NULL;
    int64_t mtime = 0;
    memset(set, 0, sizeof(*set));
    *was_v1 = false;
    int r = read_text(c->path, &text, &mtime);
    if (r == -ENOENT) {
        return READ_NONE;
    }
    if (r < 0) {
        *err = r;
        snprintf(why, len, "%s", strerror(-r));
        return READ_ERROR;
    }
    int version = 0;
    r = kdp__ckptset_parse(text, set, &version, why, len);
    free(text);
    read_result rr = r == 0 ? READ_OK : r == -EBADMSG ? READ_CORRUPT : READ_ERROR;
    *err = r;
    if (rr == READ_OK && version == 1) {
        stamp_v1(set, c->boot_id, mtime);
        *was_v1 = true;
    }
    return rr;
}

/* path renamed to a name of its own, <path>.corrupt-<time>[.<n>] (link:
 * never over another). Returns 0 or -errno; aside gets the name. */
static int set_aside(const char *path, char *aside, size_t len)
{
    long long now = (long long)time(NULL);
    for (unsigned i = 0; i < 100; i++) {
        if (i == 0) {
            snprintf(aside, len, "%s.corrupt-%lld", path, now);
        } else {
            snprintf(aside, len, "%s.corrupt-%lld.%u", path, now, i);
        }
        if (link(path, aside) == 0) {
            return unlink(path) < 0 ? -errno : 0;
        }
        if (errno != EEXIST) {
            return -errno;
        }
    }
    return -EEXIST;
}

/* The file's identity (st_dev, st_ino, mtime, size), to see another
 * writer's change; false if it has none (no file). */
static bool stamp_of(const char *path, kdp__ckpt_stamp *st)
{
    struct stat sb;
    memset(st, 0, sizeof(*st));
    if (stat(path, &sb) < 0) {
        return false;
    }
    st->dev = (uint64_t)sb.st_dev;
    st->ino = (uint64_t)sb.st_ino;
    st->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    st->size = (int64_t)sb.st_size;
    return true;
}

/* Writes set (the writer lock and the file lock held): a temporary file
 * next to the file, fsync, rename over it, fsync of the directory. */
static int save(kdp__ckpt *c, const kdp__ckpt_set *set)
{
    char *text = kdp__ckptset_text(set);
    int r = text ? 0 : -ENOMEM;
    if (r == 0) {
        size_t len = strlen(text);
        r = len > MAX_FILE ? -EFBIG : kdp__replace_file(c->path, text, len, 0600);
    }
    free(text);
    if (r < 0) {
        log_error("cannot write the checkpoint %s: %s", c->path, strerror(-r));
    }
    return r;
}

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

/* The file as it is now, under the file lock (another instance sharing the
 * state directory may have written it): into set, a copy to change.
 * Returns 0 or -errno (logged). */
static int fresh_claims(kdp__ckpt *c, kdp__ckpt_set *set)
{
    char why[256];
    int err = 0;
    bool v1 = false;
    switch (read_claims(c, set, &v1, &err, why, sizeof(why))) {
    case READ_OK:
    case READ_NONE:
        return 0;
    case READ_ERROR:
        log_error("checkpoint %s cannot be read (%s): not changed", c->path, why);
        return err;
    case READ_CORRUPT:
        break;
    }
    char aside[PATH_MAX];
    int r = set_aside(c->path, aside, sizeof(aside));
    if (r < 0) {
        log_error("checkpoint %s is corrupt (%s) and cannot be set aside (%s): not changed",
                  c->path, why, strerror(-r));
        return -EIO;
    }
    log_error("checkpoint %s became corrupt (%s): kept as %s; writing the claims known here",
              c->path, why, aside);
    pthread_mutex_lock(&c->mu);
    r = kdp__ckptset_copy(set, &c->claims);
    pthread_mutex_unlock(&c->mu);
    return r;
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
    if (r == 0) {
        r = fresh_claims(c, &set);
    }
    if (r == 0) {
        r = change(&set, uid, arg);
    }
    int changed = r;
    if (r == 1) {
        r = save(c, &set);
    }
    if (r >= 0) {
        kdp__ckpt_stamp stamp;
        (void)stamp_of(c->path, &stamp);
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

static int change_put(kdp__ckpt_set *set, const char *uid, void *arg)
{
    (void)uid;
    kdp__dra_rec *copy = kdp__dra_rec_dup(arg, true);
    if (!copy) {
        return -ENOMEM;
    }
    int r = kdp__ckptset_put(set, copy);
    return r < 0 ? r : 1;
}

static int change_del(kdp__ckpt_set *set, const char *uid, void *arg)
{
    (void)arg;
    return kdp__ckptset_del(set, uid) ? 1 : 0;
}

static int change_rewrite(kdp__ckpt_set *set, const char *uid, void *arg)
{
    (void)set;
    (void)uid;
    (void)arg;
    return 1;
}

/* ---- open ---- */

static int load(kdp__ckpt *c, const char *dir)
{
    int r = kdp__mkdir_p(dir, 0700);
    if (r < 0) {
        log_error("cannot create the DRA state directory %s: %s", dir, strerror(-r));
        return r;
    }
    const char *why_dir = NULL;
    if (kdp__dir_trusted(dir, &why_dir) == -KDP__EUNTRUSTED) {
        log_error("the DRA state directory %s %s: whoever can write there can forge the "
                  "checkpoint; fix its owner and mode (kdp makes it 0700)",
                  dir, why_dir);
        return -EPERM;
    }
    c->dir = strdup(dir);
    if (!c->dir || asprintf(&c->path, "%s/%s", dir, KDP__CKPT_FILE) < 0) {
        c->path = NULL;
        return -ENOMEM;
    }
    if (asprintf(&c->lock_path, "%s/%s", dir, KDP__CKPT_LOCK) < 0) {
        c->lock_path = NULL;
        return -ENOMEM;
    }
    char why[256];
    int err = 0;
    bool v1 = false;
    switch (read_claims(c, &c->claims, &v1, &err, why, sizeof(why))) {
    case READ_OK:
    case READ_NONE:
        break;
    case READ_ERROR:
        if (err == -EPROTO) {
            log_error("checkpoint %s: %s (a downgrade?): refusing to start over it; run the "
                      "newer driver, or move the file away to forget its claims",
                      c->path, why);
        } else {
            log_error("checkpoint %s cannot be read (%s): refusing to start without its "
                      "claims; fix the file's permissions or the disk",
                      c->path, why);
        }
        return err;
    case READ_CORRUPT: {
        char aside[PATH_MAX];
        r = set_aside(c->path, aside, sizeof(aside));
        if (r < 0) {
            log_error("checkpoint %s is corrupt (%s) and cannot be set aside (%s): refusing to "
                      "start over it; move it away",
                      c->path, why, strerror(-r));
            return -EIO;
        }
        log_error("checkpoint %s is corrupt (%s): kept as %s; starting with no prepared "
                  "claims (the kubelet prepares again what it still needs)",
                  c->path, why, aside);
        break;
    }
    }
    (void)stamp_of(c->path, &c->seen);
    atomic_store(&c->count, c->claims.n);
    if (c->claims.n > 0) {
        log_info("checkpoint %s: %zu prepared claims", c->path, c->claims.n);
    }
    if (v1) {
        r = update(c, change_rewrite, NULL, NULL);
        if (r < 0) {
            return r;
        }
        log_info("checkpoint %s: written again in version %d (records with their boot)", c->path,
                 KDP__CKPT_VERSION);
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
    free(c->dir);
    free(c->path);
    free(c->lock_path);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    free(c);
}

/* ---- use ---- */

/* The memory's copy again if another writer changed the file (mu held). */
static void refresh(kdp__ckpt *c)
{
    kdp__ckpt_stamp now;
    bool there = stamp_of(c->path, &now);
    if (memcmp(&now, &c->seen, sizeof(now)) == 0) {
        return;
    }
    kdp__ckpt_set set = {0};
    char why[256];
    int err = 0;
    bool v1 = false;
    read_result rr = there ? read_claims(c, &set, &v1, &err, why, sizeof(why)) : READ_NONE;
    if (rr != READ_OK && rr != READ_NONE) {
        return; /* the next write sees to it; the memory's copy meanwhile */
    }
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
