/* SPDX-License-Identifier: MIT */
#include "dra/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s", dir);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') {
            continue;
        }
        char ch = *p;
        *p = '\0';
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
            return -errno;
        }
        *p = ch;
        if (ch == '\0') {
            return 0;
        }
    }
}

/* The file's claims, or NULL with why set (*missing when there is none). */
static json_t *parse(const char *path, bool *missing, char *why, size_t why_len)
{
    *missing = false;
    json_error_t err;
    FILE *f = fopen(path, "re");
    if (!f) {
        *missing = errno == ENOENT;
        snprintf(why, why_len, "%s", strerror(errno));
        return NULL;
    }
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    fclose(f);
    if (!root) {
        snprintf(why, why_len, "not JSON (line %d: %s)", err.line, err.text);
        return NULL;
    }
    json_t *ver = json_object_get(root, "version");
    json_t *sum = json_object_get(root, "checksum");
    json_t *claims = json_object_get(root, "claims");
    char *dump = NULL;
    char want[32];
    if (!json_is_integer(ver) || json_integer_value(ver) != KDP__CKPT_VERSION) {
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

static int load(kdp__ckpt *c, const char *dir);

int kdp__ckpt_open(const char *dir, kdp__ckpt **ret)
{
    kdp__ckpt *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->mu, NULL);
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
    int r = mkdir_p(dir);
    if (r < 0) {
        log_error("cannot create the DRA state directory %s: %s", dir, strerror(-r));
        return r;
    }
    c->dir = strdup(dir);
    if (!c->dir || asprintf(&c->path, "%s/%s", dir, KDP__CKPT_FILE) < 0) {
        c->path = NULL;
        return -ENOMEM;
    }
    char why[256];
    bool missing = false;
    c->claims = parse(c->path, &missing, why, sizeof(why));
    if (!c->claims && !missing) {
        char aside[PATH_MAX];
        snprintf(aside, sizeof(aside), "%s.corrupt-%lld", c->path, (long long)time(NULL));
        if (rename(c->path, aside) < 0) {
            log_error("checkpoint %s cannot be read (%s) nor set aside (%s): refusing to start "
                      "over it; move it away",
                      c->path, why, strerror(errno));
            return -EIO;
        }
        log_error("checkpoint %s cannot be read (%s): kept as %s; starting with no prepared "
                  "claims (the kubelet prepares again what it still needs)",
                  c->path, why, aside);
    }
    if (!c->claims) {
        c->claims = json_object();
    }
    if (!c->claims) {
        return -ENOMEM;
    }
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
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EIO;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
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

/* text into a temporary file next to path, fsync, rename over path. */
static int replace(const char *path, const char *text)
{
    size_t len = strlen(text);
    if (len > MAX_FILE) {
        return -EFBIG;
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = fchmod(fd, 0600) < 0 ? -errno : write_all(fd, text, len);
    if (r == 0 && fsync(fd) < 0) {
        r = -errno;
    }
    if (close(fd) < 0 && r == 0) {
        r = -errno;
    }
    if (r == 0 && rename(tmp, path) < 0) {
        r = -errno;
    }
    if (r < 0) {
        (void)unlink(tmp);
    }
    return r;
}

static int sync_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return -errno;
    }
    int r = fsync(dfd) < 0 ? -errno : 0;
    close(dfd);
    return r;
}

/* Writes claims (the mutex held). */
static int save(kdp__ckpt *c, json_t *claims)
{
    char *text = file_text(claims);
    int r = text ? replace(c->path, text) : -ENOMEM;
    free(text);
    if (r == 0) {
        r = sync_dir(c->dir);
    }
    if (r < 0) {
        log_error("cannot write the checkpoint %s: %s", c->path, strerror(-r));
    }
    return r;
}

json_t *kdp__ckpt_get(kdp__ckpt *c, const char *uid)
{
    pthread_mutex_lock(&c->mu);
    json_t *rec = json_deep_copy(json_object_get(c->claims, uid));
    pthread_mutex_unlock(&c->mu);
    return rec;
}

int kdp__ckpt_put(kdp__ckpt *c, const char *uid, json_t *rec)
{
    pthread_mutex_lock(&c->mu);
    int r = -ENOMEM;
    json_t *next =
        json_object_size(c->claims) >= KDP__CKPT_MAX_CLAIMS ? NULL : json_copy(c->claims);
    if (json_object_size(c->claims) >= KDP__CKPT_MAX_CLAIMS) {
        r = -ENOSPC;
    }
    if (next && json_object_set(next, uid, rec) == 0) {
        r = save(c, next);
    }
    if (r == 0) {
        json_decref(c->claims);
        c->claims = next;
        next = NULL;
    }
    json_decref(next);
    pthread_mutex_unlock(&c->mu);
    return r;
}

int kdp__ckpt_del(kdp__ckpt *c, const char *uid)
{
    pthread_mutex_lock(&c->mu);
    int r = 0;
    if (json_object_get(c->claims, uid)) {
        json_t *next = json_copy(c->claims);
        r = next && json_object_del(next, uid) == 0 ? save(c, next) : -ENOMEM;
        if (r == 0) {
            json_decref(c->claims);
            c->claims = next;
            next = NULL;
            r = 1;
        }
        json_decref(next);
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

size_t kdp__ckpt_count(kdp__ckpt *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = json_object_size(c->claims);
    pthread_mutex_unlock(&c->mu);
    return n;
}
