/* SPDX-License-Identifier: MIT */
#include "runtime/sock.h"

#include <errno.h>
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

int kdp__sock_listen(const char *path, int backlog, int *ret_fd, ino_t *ret_ino)
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
    /* Linux creates the socket file with the socket inode's mode (less the
     * umask): set it first, so the file is owner-only from the moment it
     * exists, without touching the process-wide umask. */
    if (fchmod(fd, 0600) < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = -errno;
        goto fail;
    }
    struct stat st;
    if (stat(path, &st) < 0) {
        r = -errno;
        goto fail_unlink;
    }
    if (listen(fd, backlog) < 0) {
        r = -errno;
        goto fail_unlink;
    }
    *ret_fd = fd;
    if (ret_ino) {
        *ret_ino = st.st_ino;
    }
    return 0;
fail_unlink:
    unlink(path);
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
