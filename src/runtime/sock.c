/* SPDX-License-Identifier: MIT */
#include "runtime/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
    size_t len = strlen(path);
    if (len == 0) {
        return -EINVAL;
    }
    if (len >= sizeof(sa->sun_path)) {
        return -ENAMETOOLONG;
    }
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, len + 1);
    return 0;
}

/* A hidden name next to path for the socket before it listens: "<dir>/.<name>.
 * <pid>.<n>", n a counter of the process (watchers skip names starting with
 * '.'; it stays the socket's address, which `ss -xl` shows), or
 * -ENAMETOOLONG. Unique to this call: two threads, or two processes with
 * one pid in different pid namespaces, never share one (a bind there is
 * refused, and the next n tried). */
static int temp_path(const char *path, unsigned n, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path + 1) : 0;
    int w = snprintf(out, cap, "%.*s.%s.%ld.%u", dir, path, path + dir, (long)getpid(), n);
    return w < 0 || (size_t)w >= cap ? -ENAMETOOLONG : 0;
}

/* Moves the socket file tmp to path unless path exists (-EADDRINUSE, as a
 * bind there would). */
static int move_no_replace(const char *tmp, const char *path)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) {
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS) {
        return errno == EEXIST ? -EADDRINUSE : -errno;
    }
    /* a filesystem without RENAME_NOREPLACE: link() does not replace either */
    if (link(tmp, path) < 0) {
        return errno == EEXIST ? -EADDRINUSE : -errno;
    }
    unlink(tmp);
    return 0;
}

static int bind_at(int fd, const char *path)
{
    struct sockaddr_un sa;
    int r = fill_addr(&sa, path);
    if (r == 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = -errno;
    }
    return r;
}

int kdp__sock_listen(const char *path, int backlog, int *ret_fd, ino_t *ret_ino)
{
    struct sockaddr_un sa;
    int r = fill_addr(&sa, path);
    if (r < 0) {
        return r;
    }
    /* The socket listens before its file has its name: a peer that sees the
     * file appear (the kubelet's inotify watch) never finds nobody there. */
    static _Atomic unsigned seq;
    char tmp[sizeof(sa.sun_path)];
    bool moved = temp_path(path, UINT_MAX, tmp, sizeof(tmp)) == 0; /* the longest one fits */
    if (moved && access(path, F_OK) == 0) {
        return -EADDRINUSE; /* as bind() says; nothing made */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    const char *at = moved ? tmp : path;
    /* Linux creates the socket file with the socket inode's mode (less the
     * umask): set it first, so the file is owner-only from the moment it
     * exists, without touching the process-wide umask. */
    if (fchmod(fd, 0600) < 0) {
        r = -errno;
        goto fail;
    }
    r = -EADDRINUSE;
    for (int tries = 0; moved && r == -EADDRINUSE && tries < 16; tries++) {
        (void)temp_path(path, atomic_fetch_add(&seq, 1), tmp, sizeof(tmp));
        r = bind_at(fd, tmp); /* a name taken (a leftover, another call): the next one */
    }
    if (!moved) {
        r = bind_at(fd, path);
    }
    if (r < 0) {
        goto fail;
    }
    struct stat st;
    if (stat(at, &st) < 0 || listen(fd, backlog) < 0) {
        r = -errno;
        goto fail_unlink;
    }
    if (moved && (r = move_no_replace(tmp, path)) < 0) {
        goto fail_unlink;
    }
    *ret_fd = fd;
    if (ret_ino) {
        *ret_ino = st.st_ino;
    }
    return 0;
fail_unlink:
    unlink(at);
fail:
    close(fd);
    return r;
}

int kdp__sock_connect(const char *path, int *ret_fd)
{
    struct sockaddr_un sa;
    int r = fill_addr(&sa, path);
    if (r < 0) {
        return r;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        r = -errno;
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

int kdp__sock_unlink_if_ours(const char *path, ino_t ino)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        return -errno;
    }
    if (!S_ISSOCK(st.st_mode) || st.st_ino != ino) {
        return -ESTALE;
    }
    return unlink(path) < 0 ? -errno : 0;
}
