/* SPDX-License-Identifier: MIT */
#include "plugin/lockfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"

int kdp__lockfile_init(kdp__lockfile *lf, const char *dir, const char *socket_name,
                       const char *socket_path, const char *resource)
{
    lf->fd = -1;
    lf->resource = resource;
    lf->socket = socket_path;
    lf->path = NULL;
    lf->name = NULL;
    size_t n = strlen(dir);
    bool slash = n > 0 && dir[n - 1] == '/';
    if (asprintf(&lf->name, "%s.lock", socket_name) < 0) {
        lf->name = NULL;
        return -ENOMEM;
    }
    if (asprintf(&lf->path, "%s%s%s", dir, slash ? "" : "/", lf->name) < 0) {
        lf->path = NULL;
        return -ENOMEM;
    }
    return 0;
}

void kdp__lockfile_done(kdp__lockfile *lf)
{
    kdp__lockfile_release(lf);
    free(lf->path);
    free(lf->name);
    lf->path = NULL;
    lf->name = NULL;
}

bool kdp__lockfile_held(const kdp__lockfile *lf)
{
    return lf->fd >= 0;
}

bool kdp__lockfile_is(const kdp__lockfile *lf, const char *name)
{
    return name && lf->name && strcmp(name, lf->name) == 0;
}

/* flock failed with errno e: -EADDRINUSE (another instance holds it:
 * logged with its pid) or -e. Closes fd. */
static int held_elsewhere(const kdp__lockfile *lf, int fd, int e)
{
    char pid[32] = "";
    ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    pid[strcspn(pid, "\n")] = '\0';
    close(fd);
    if (e != EWOULDBLOCK) {
        return -e;
    }
    log_error("%s: another instance (pid %s) already serves %s: refusing to start "
              "(lock %s is held)",
              lf->resource, *pid ? pid : "?", lf->socket, lf->path);
    return -EADDRINUSE;
}

/* The lock file's directory: one nobody else can write to. */
static int dir_trusted(const kdp__lockfile *lf)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", lf->path);
    char *slash = strrchr(dir, '/');
    if (!slash) {
        return 0; /* relative to the working directory: the author's choice */
    }
    slash[slash == dir] = '\0';
    int r = kdp__dir_trusted(dir, NULL);
    return r == -KDP__EUNTRUSTED ? r : 0;
}

static int take(kdp__lockfile *lf)
{
    int tr = dir_trusted(lf);
    if (tr < 0) {
        return tr;
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = open(lf->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
        if (fd < 0) {
            return -errno;
        }
        if (kdp__own_plain_file(fd, lf->path) < 0) {
            /* a FIFO, a hard link to another file, someone else's: its
             * name goes (the file it links to stays untouched), ours comes */
            close(fd);
            if (unlink(lf->path) < 0 && errno != ENOENT) {
                return -errno;
            }
            continue;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            return held_elsewhere(lf, fd, errno);
        }
        struct stat a;
        struct stat b;
        if (fstat(fd, &a) == 0 && stat(lf->path, &b) == 0 && a.st_ino == b.st_ino) {
            char pid[32];
            int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
            if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
                log_warn("%s: cannot write pid to %s", lf->resource, lf->path);
            }
            lf->fd = fd;
            return 0;
        }
        close(fd); /* replaced between open and flock: again */
    }
    return -EAGAIN;
}

int kdp__lockfile_ensure(kdp__lockfile *lf)
{
    if (lf->fd >= 0) {
        struct stat held;
        struct stat now;
        if (fstat(lf->fd, &held) == 0 && stat(lf->path, &now) == 0 && held.st_ino == now.st_ino &&
            held.st_dev == now.st_dev) {
            return 0;
        }
        close(lf->fd); /* a lock on a file that is gone guards nothing */
        lf->fd = -1;
    }
    return take(lf);
}

void kdp__lockfile_relock(kdp__lockfile *lf)
{
    if (lf->fd < 0) {
        return;
    }
    struct stat st;
    struct stat ours;
    if (stat(lf->path, &st) == 0) {
        if (fstat(lf->fd, &ours) == 0 && ours.st_ino != st.st_ino) {
            log_error("%s: the lock file %s was deleted and re-created by someone else: "
                      "another instance may be starting on the same socket",
                      lf->resource, lf->path);
        }
        return;
    }
    int old = lf->fd;
    lf->fd = -1;
    int r = take(lf);
    close(old);
    if (r < 0) {
        log_error("%s: the lock file %s was deleted and cannot be taken again: %s", lf->resource,
                  lf->path, strerror(-r));
    } else {
        log_info("%s: the lock file %s was deleted: locked again", lf->resource, lf->path);
    }
}

void kdp__lockfile_release(kdp__lockfile *lf)
{
    if (lf->fd < 0) {
        return;
    }
    (void)unlink(lf->path);
    close(lf->fd);
    lf->fd = -1;
}
