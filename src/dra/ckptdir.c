/* SPDX-License-Identifier: MIT */
/* ckptdir: the checkpoint's records on disk, a file per claim (see
 * ckptdir.h). */
#include "dra/ckptdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"
#include "dra/bootid.h"

/* A claim's file: at most twice what a record keeps. The old one-file
 * checkpoint held every claim. */
#define MAX_RECORD_FILE (2U * KDP__CKPT_MAX_CLAIM_BYTES + (64U << 10))
#define MAX_LEGACY_FILE (64U << 20)

/* The file's text into *ret (malloc'd) and its mtime. Returns 0, -ENOENT
 * (none), -EFBIG (over max), or another -errno: the file cannot be read
 * (not a corruption).
 * O_NONBLOCK and the regular-file check: a FIFO planted there never holds
 * the thread. */
static int read_text(const char *path, char **ret, int64_t *ret_mtime, size_t max)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
    if (fd < 0) {
        return -errno;
    }
    struct stat sb;
    int r = fstat(fd, &sb) < 0 ? -errno : 0;
    if (r == 0 && !S_ISREG(sb.st_mode)) {
        r = S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
    }
    if (r == 0 && (uint64_t)sb.st_size > max) {
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

/* A file that did not give its records (err, why): one that cannot be
 * read, or of a newer kdp, fails (the file left alone); a corrupt one is
 * set aside and what it held (what) forgotten. Returns 0 or -errno. */
static int not_read(const char *path, int err, const char *why, const char *what)
{
    if (err != -EBADMSG && err != -EFBIG) {
        log_error("checkpoint %s %s (%s): refusing to go on without %s; %s", path,
                  err == -EPROTO ? "is of a newer kdp" : "cannot be read", why, what,
                  err == -EPROTO ? "run the newer driver, or move the file away to forget it"
                                 : "fix the file's permissions or the disk");
        return err;
    }
    char aside[PATH_MAX];
    int a = set_aside(path, aside, sizeof(aside));
    if (a < 0) {
        log_error("checkpoint %s is corrupt (%s) and cannot be set aside (%s): move it away", path,
                  why, strerror(-a));
        return -EIO;
    }
    log_error("checkpoint %s is corrupt (%s): kept as %s; %s forgotten (the kubelet prepares "
              "again what it still needs)",
              path, err == -EFBIG ? "too large" : why, aside, what);
    return 0;
}

/* A file name of claims/: "<uid>.json", not hidden; the UID into uid. */
static bool record_name(const char *name, char *uid, size_t len)
{
    size_t n = strlen(name);
    if (name[0] == '.' || n <= 5 || n - 5 >= len || strcmp(name + n - 5, ".json") != 0) {
        return false;
    }
    memcpy(uid, name, n - 5);
    uid[n - 5] = '\0';
    return true;
}

/* One claim's file into set; a corrupt one set aside when aside_ok (else
 * its error). Returns 0 or -errno. */
static int read_one(const kdp__ckptdir *d, const char *name, const char *uid, kdp__ckpt_set *set,
                    bool aside_ok)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", d->claims, name);
    char *text = NULL;
    int64_t mtime = 0;
    int r = read_text(path, &text, &mtime, MAX_RECORD_FILE);
    if (r == -ENOENT) {
        return 0; /* removed meanwhile */
    }
    char why[256];
    kdp__dra_rec *rec = NULL;
    if (r == 0) {
        r = kdp__ckptset_record_parse(text, uid, &rec, why, sizeof(why));
    } else {
        snprintf(why, sizeof(why), "%s", strerror(-r));
    }
    free(text);
    if (r == 0) {
        return kdp__ckptset_put(set, rec);
    }
    if (!aside_ok) {
        return r; /* the next write sees to it */
    }
    char what[300];
    snprintf(what, sizeof(what), "claim %s", uid);
    return not_read(path, r, why, what);
}

int kdp__ckptdir_read(const kdp__ckptdir *d, kdp__ckpt_set *set, bool aside_ok)
{
    memset(set, 0, sizeof(*set));
    DIR *dir = opendir(d->claims);
    if (!dir) {
        int r = -errno;
        if (r == -ENOENT) {
            return 0;
        }
        log_error("checkpoint %s cannot be read: %s", d->claims, strerror(-r));
        return r;
    }
    int r = 0;
    struct dirent *e;
    while (r == 0 && (e = readdir(dir))) {
        char uid[256];
        if (record_name(e->d_name, uid, sizeof(uid))) {
            r = read_one(d, e->d_name, uid, set, aside_ok);
        }
    }
    closedir(dir);
    if (r < 0) {
        kdp__ckptset_clear(set);
    }
    return r;
}

int kdp__ckptdir_write(const kdp__ckptdir *d, const kdp__dra_rec *rec)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s.json", d->claims, rec->uid);
    char *text = kdp__ckptset_record_text(rec);
    int r = !text ? -ENOMEM : w < 0 || (size_t)w >= sizeof(path) ? -ENAMETOOLONG : 0;
    if (r == 0) {
        r = kdp__replace_file(path, text, strlen(text), 0600);
    }
    free(text);
    if (r < 0) {
        log_error("cannot write the checkpoint %s: %s", path, strerror(-r));
    }
    return r;
}

int kdp__ckptdir_remove(const kdp__ckptdir *d, const char *uid)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s.json", d->claims, uid);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    if (unlink(path) < 0) {
        int r = -errno;
        if (r == -ENOENT) {
            return 0;
        }
        log_error("cannot remove %s from the checkpoint: %s", path, strerror(-r));
        return r;
    }
    int r = kdp__sync_dir(d->claims);
    return r < 0 ? r : 1;
}

void kdp__ckptdir_stamp(const kdp__ckptdir *d, kdp__ckpt_stamp *st)
{
    struct stat sb;
    memset(st, 0, sizeof(*st));
    if (stat(d->claims, &sb) == 0) {
        st->dev = (uint64_t)sb.st_dev;
        st->ino = (uint64_t)sb.st_ino;
        st->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    }
    if (stat(d->legacy, &sb) == 0) {
        st->legacy_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec + 1;
    }
}

/* The old file's records, or a corrupt file set aside (0, set empty). */
static int read_legacy(const kdp__ckptdir *d, kdp__ckpt_set *set, int *version, bool aside_ok)
{
    char *text = NULL;
    int64_t mtime = 0;
    memset(set, 0, sizeof(*set));
    int r = read_text(d->legacy, &text, &mtime, MAX_LEGACY_FILE);
    if (r == -ENOENT) {
        return 0;
    }
    char why[256];
    if (r == 0) {
        r = kdp__ckptset_parse(text, set, version, why, sizeof(why));
    } else {
        snprintf(why, sizeof(why), "%s", strerror(-r));
    }
    free(text);
    if (r == 0 && *version == 1) {
        stamp_v1(set, d->boot_id, mtime);
    }
    if (!aside_ok && r < 0) {
        kdp__ckptset_clear(set);
        return r; /* the next write sees to it */
    }
    return r == 0 ? 0 : not_read(d->legacy, r, why, "its claims");
}

int kdp__ckptdir_read_legacy(const kdp__ckptdir *d, kdp__ckpt_set *set)
{
    int version = 0;
    return read_legacy(d, set, &version, false);
}

int kdp__ckptdir_import(const kdp__ckptdir *d)
{
    kdp__ckpt_set set;
    int version = 0;
    int r = read_legacy(d, &set, &version, true);
    for (size_t i = 0; r == 0 && i < set.n; i++) {
        r = kdp__ckptdir_write(d, set.recs[i]);
    }
    size_t n = set.n;
    kdp__ckptset_clear(&set);
    if (r < 0 || n == 0) {
        if (r == 0 && unlink(d->legacy) == 0) {
            (void)kdp__sync_dir(d->dir); /* an empty one */
        }
        return r;
    }
    if (unlink(d->legacy) < 0 && errno != ENOENT) {
        r = -errno;
        log_error("cannot remove %s once imported: %s", d->legacy, strerror(-r));
        return r;
    }
    (void)kdp__sync_dir(d->dir);
    log_info("checkpoint %s (version %d): %zu claims moved to %s, a file each", d->legacy, version,
             n, d->claims);
    return (int)n;
}

int kdp__ckptdir_init(kdp__ckptdir *d, const char *dir, const char *boot_id)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->boot_id, sizeof(d->boot_id), "%s", boot_id ? boot_id : "");
    if (asprintf(&d->claims, "%s/" KDP__CKPT_CLAIMS, dir) < 0) {
        d->claims = NULL;
        return -ENOMEM;
    }
    if (asprintf(&d->legacy, "%s/" KDP__CKPT_FILE, dir) < 0) {
        d->legacy = NULL;
        return -ENOMEM;
    }
    d->dir = strdup(dir);
    if (!d->dir) {
        return -ENOMEM;
    }
    int r = kdp__mkdir_p(dir, 0700);
    const char *why = NULL;
    if (r == 0 && kdp__dir_trusted(dir, &why) == -KDP__EUNTRUSTED) {
        log_error("the DRA state directory %s %s: whoever can write there can forge the "
                  "checkpoint; fix its owner and mode (kdp makes it 0700)",
                  dir, why);
        return -EPERM; /* nothing made in it */
    }
    r = r == 0 ? kdp__mkdir_p(d->claims, 0700) : r;
    if (r < 0) {
        log_error("cannot create the DRA state directory %s: %s", d->claims, strerror(-r));
    }
    return r;
}

void kdp__ckptdir_done(kdp__ckptdir *d)
{
    free(d->dir);
    free(d->claims);
    free(d->legacy);
    memset(d, 0, sizeof(*d));
}
