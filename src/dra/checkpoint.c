/* SPDX-License-Identifier: MIT */
#include "dra/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

#define MAX_FILE (64U << 20)

void kdp__ckpt_checksum(const char *s, char out[32])
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    snprintf(out, 32, "fnv1a64:%016" PRIx64, h);
}

/* The file's text into *ret (malloc'd). Returns 0, -ENOENT (none), or
 * another -errno: the file cannot be read (not a corruption). */
static int read_text(const char *path, char **ret)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
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
    while (r == 0) {
        size_t room = (size_t)sb.st_size - len;
        if (room == 0) {
            break; /* a file grown meanwhile is not ours: renames replace it */
        }
        ssize_t n = read(fd, buf + len, room);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            r = -errno;
        } else if (n == 0) {
            break;
        } else {
            len += (size_t)n;
        }
    }
    close(fd);
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[len] = '\0';
    *ret = buf;
    return 0;
}

/* The claims of a file's text, or NULL with why set; *newer when the
 * version is above ours (a downgrade: not a corruption). */
static json_t *parse(const char *text, bool *newer, char *why, size_t why_len)
{
    *newer = false;
    json_error_t err;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        snprintf(why, why_len, "not JSON (line %d: %s)", err.line, err.text);
        return NULL;
    }
    json_t *ver = json_object_get(root, "version");
    json_t *sum = json_object_get(root, "checksum");
    json_t *claims = json_object_get(root, "claims");
    char *dump = NULL;
    char want[32];
    if (json_is_integer(ver) && json_integer_value(ver) > KDP__CKPT_VERSION) {
        *newer = true;
        snprintf(why, why_len, "version %lld, newer than this driver's %d",
                 (long long)json_integer_value(ver), KDP__CKPT_VERSION);
    } else if (!json_is_integer(ver) || json_integer_value(ver) != KDP__CKPT_VERSION) {
        snprintf(why, why_len, "version is not %d", KDP__CKPT_VERSION);
    } else if (!json_is_object(claims) || !json_is_string(sum)) {
        snprintf(why, why_len, "no \"claims\" object or \"checksum\"");
    } else if (!(dump = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS))) {
        snprintf(why, why_len, "out of memory");
    } else {
        kdp__ckpt_checksum(dump, want);
        if (strcmp(want, json_string_value(sum)) != 0) {
            snprintf(why, why_len, "checksum %.40s, the content's is %s", json_string_value(sum),
                     want);
        } else {
            json_incref(claims);
            free(dump);
            json_decref(root);
            return claims;
        }
    }
    free(dump);
    json_decref(root);
    return NULL;
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

typedef enum { READ_OK, READ_NONE, READ_CORRUPT, READ_ERROR } read_result;

/* The file's claims into *ret (READ_OK); READ_NONE: no file; READ_CORRUPT
 * (why); READ_ERROR: cannot be read or newer (why, *err). */
static read_result read_claims(const char *path, json_t **ret, int *err, char *why, size_t len)
{
    char *text = NULL;
    int r = read_text(path, &text);
    if (r == -ENOENT) {
        return READ_NONE;
    }
    if (r < 0) {
        *err = r;
        snprintf(why, len, "%s", strerror(-r));
        return READ_ERROR;
    }
    bool newer = false;
    *ret = parse(text, &newer, why, len);
    free(text);
    if (*ret) {
        return READ_OK;
    }
    *err = newer ? -EPROTO : -EBADMSG;
    return newer ? READ_ERROR : READ_CORRUPT;
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

static int load(kdp__ckpt *c, const char *dir);

int kdp__ckpt_open(const char *dir, kdp__ckpt **ret)
{
    kdp__ckpt *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->count, 0);
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->wmu, NULL);
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

static int load(kdp__ckpt *c, const char *dir)
{
    int r = kdp__mkdir_p(dir, 0700);
    if (r < 0) {
        log_error("cannot create the DRA state directory %s: %s", dir, strerror(-r));
        return r;
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
    switch (read_claims(c->path, &c->claims, &err, why, sizeof(why))) {
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
    if (!c->claims) {
        c->claims = json_object();
    }
    if (!c->claims) {
        return -ENOMEM;
    }
    atomic_store(&c->count, json_object_size(c->claims));
    if (json_object_size(c->claims) > 0) {
        log_info("checkpoint %s: %zu prepared claims", c->path, json_object_size(c->claims));
    }
    return 0;
}

void kdp__ckpt_unref(kdp__ckpt *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) {
        return;
    }
    json_decref(c->claims);
    free(c->dir);
    free(c->path);
    free(c->lock_path);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    free(c);
}

/* The file's text for claims (malloc'd), or NULL. */
static char *file_text(json_t *claims)
{
    char *dump = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
    if (!dump) {
        return NULL;
    }
    char sum[32];
    kdp__ckpt_checksum(dump, sum);
    free(dump);
    json_t *root = json_pack("{s:i, s:s, s:O}", "version", KDP__CKPT_VERSION, "checksum", sum,
                             "claims", claims);
    char *text = root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(root);
    return text;
}

/* text into a temporary file next to path, fsync, rename over path, fsync
 * of the directory. */
static int replace(const char *path, const char *text)
{
    size_t len = strlen(text);
    return len > MAX_FILE ? -EFBIG : kdp__replace_file(path, text, len, 0600);
}

/* Writes claims (the writer lock and the file lock held). */
static int save(kdp__ckpt *c, json_t *claims)
{
    char *text = file_text(claims);
    int r = text ? replace(c->path, text) : -ENOMEM;
    free(text);
    if (r < 0) {
        log_error("cannot write the checkpoint %s: %s", c->path, strerror(-r));
    }
    return r;
}

/* The memory's copy becomes claims (its reference taken over: the caller
 * no longer touches it), as of stamp. Nothing in it is shared with another
 * thread: jansson's reference counts are not for sharing across threads. */
static void swap_in(kdp__ckpt *c, json_t *claims, const kdp__ckpt_stamp *stamp)
{
    pthread_mutex_lock(&c->mu);
    json_decref(c->claims);
    c->claims = claims;
    c->seen = *stamp;
    atomic_store(&c->count, json_object_size(claims));
    pthread_mutex_unlock(&c->mu);
}

/* The file as it is now, under the file lock (another instance sharing the
 * state directory may have written it): into *ret, a copy to change.
 * Returns 0 or -errno (logged). */
static int fresh_claims(kdp__ckpt *c, json_t **ret)
{
    char why[256];
    int err = 0;
    json_t *claims = NULL;
    switch (read_claims(c->path, &claims, &err, why, sizeof(why))) {
    case READ_OK:
        *ret = claims;
        return 0;
    case READ_NONE:
        *ret = json_object();
        return *ret ? 0 : -ENOMEM;
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
    *ret = json_deep_copy(c->claims);
    pthread_mutex_unlock(&c->mu);
    return *ret ? 0 : -ENOMEM;
}

/* A read-modify-write of the file: change(claims, uid, rec) on what the
 * file holds now, under the writer lock (this process) and an flock on the
 * lock file (other processes). change returns 1 (write), 0 (nothing to
 * write), -errno. The loop never waits for this: it takes mu only for the
 * swap. */
static int update(kdp__ckpt *c, int (*change)(json_t *claims, const char *uid, json_t *rec),
                  const char *uid, json_t *rec)
{
    pthread_mutex_lock(&c->wmu);
    int lfd = open(c->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    int r = lfd < 0 ? -errno : 0;
    while (r == 0 && flock(lfd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            r = -errno;
        }
    }
    if (r < 0) {
        log_error("cannot lock the checkpoint %s: %s", c->lock_path, strerror(-r));
    }
    json_t *claims = NULL;
    if (r == 0) {
        r = fresh_claims(c, &claims);
    }
    if (r == 0) {
        r = change(claims, uid, rec);
    }
    int changed = r;
    if (r == 1) {
        r = save(c, claims);
    }
    if (r >= 0) {
        kdp__ckpt_stamp stamp;
        (void)stamp_of(c->path, &stamp);
        swap_in(c, claims, &stamp);
        claims = NULL;
        r = changed;
    }
    json_decref(claims);
    if (lfd >= 0) {
        close(lfd); /* the flock goes with it */
    }
    pthread_mutex_unlock(&c->wmu);
    return r;
}

/* The memory's copy again if another writer changed the file (mu held). */
static void refresh(kdp__ckpt *c)
{
    kdp__ckpt_stamp now;
    bool there = stamp_of(c->path, &now);
    if (memcmp(&now, &c->seen, sizeof(now)) == 0) {
        return;
    }
    json_t *claims = NULL;
    char why[256];
    int err = 0;
    read_result rr = there ? read_claims(c->path, &claims, &err, why, sizeof(why)) : READ_NONE;
    if (rr == READ_NONE) {
        claims = json_object();
    } else if (rr != READ_OK) {
        return; /* the next write sees to it; the memory's copy meanwhile */
    }
    if (claims) {
        json_decref(c->claims);
        c->claims = claims;
        c->seen = now;
        atomic_store(&c->count, json_object_size(claims));
    }
}

json_t *kdp__ckpt_get(kdp__ckpt *c, const char *uid)
{
    pthread_mutex_lock(&c->mu);
    refresh(c);
    json_t *rec = json_deep_copy(json_object_get(c->claims, uid));
    pthread_mutex_unlock(&c->mu);
    return rec;
}

static int change_put(json_t *claims, const char *uid, json_t *rec)
{
    if (!json_object_get(claims, uid) && json_object_size(claims) >= KDP__CKPT_MAX_CLAIMS) {
        return -ENOSPC;
    }
    /* a copy: rec stays the caller's, on its thread */
    return json_object_set_new(claims, uid, json_deep_copy(rec)) == 0 ? 1 : -ENOMEM;
}

static int change_del(json_t *claims, const char *uid, json_t *rec)
{
    (void)rec;
    if (!json_object_get(claims, uid)) {
        return 0;
    }
    return json_object_del(claims, uid) == 0 ? 1 : -ENOMEM;
}

int kdp__ckpt_put(kdp__ckpt *c, const char *uid, json_t *rec)
{
    int r = update(c, change_put, uid, rec);
    return r < 0 ? r : 0;
}

int kdp__ckpt_del(kdp__ckpt *c, const char *uid)
{
    return update(c, change_del, uid, NULL);
}

size_t kdp__ckpt_count(kdp__ckpt *c)
{
    return atomic_load(&c->count);
}
