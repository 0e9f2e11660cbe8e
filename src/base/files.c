/* SPDX-License-Identifier: MIT */
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"

int kdp__mkdir_p(const char *dir, mode_t mode)
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
        char c = *p;
        *p = '\0';
        if (mkdir(path, mode) < 0 && errno != EEXIST) {
            return -errno;
        }
        *p = c;
        if (c == '\0') {
            return 0;
        }
    }
}

int kdp__write_all(int fd, const void *buf, size_t len)
{
    const char *b = buf;
    while (len > 0) {
        ssize_t n = write(fd, b, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EIO;
        }
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

int kdp__sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

int kdp__replace_file(const char *path, const void *buf, size_t len, mode_t mode)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int dir_len = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    if (slash == path) {
        dir_len = 1; /* "/name": the root */
    }
    char tmp[PATH_MAX];
    char dirbuf[PATH_MAX];
    int w = snprintf(tmp, sizeof(tmp), "%.*s/.%s.tmp-XXXXXX", dir_len, dir, name);
    int wd = snprintf(dirbuf, sizeof(dirbuf), "%.*s", dir_len, dir);
    if (w < 0 || (size_t)w >= sizeof(tmp) || wd < 0 || (size_t)wd >= sizeof(dirbuf) || !*name) {
        return -ENAMETOOLONG;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = fchmod(fd, mode) < 0 ? -errno : kdp__write_all(fd, buf, len);
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
        return r;
    }
    return kdp__sync_dir(dirbuf);
}

int kdp__dir_trusted(const char *dir, const char **why)
{
    static __thread char text[160];
    struct stat st;
    if (stat(dir, &st) < 0) {
        int r = -errno;
        if (why) {
            *why = r == -ENOENT ? "does not exist" : "cannot be read";
        }
        return r;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (why) {
            *why = "is not a directory";
        }
        return -ENOTDIR;
    }
    const char *what = NULL;
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(text, sizeof(text), "belongs to user %u, not to this process's user (%u) or root",
                 (unsigned)st.st_uid, (unsigned)geteuid());
        what = text;
    } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)) {
        snprintf(text, sizeof(text),
                 "is writable by %s (mode 0%o): others could plant files kdp trusts there "
                 "(chmod go-w)",
                 (st.st_mode & S_IWOTH) ? "every user" : "its group",
                 (unsigned)(st.st_mode & 07777));
        what = text;
    }
    if (what && why) {
        *why = what;
    }
    return what ? -KDP__EUNTRUSTED : 0;
}

int kdp__own_plain_file(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int r = -errno;
        log_warn("%s: cannot stat it: %s", path, strerror(-r));
        return r;
    }
    const char *why = !S_ISREG(st.st_mode)     ? "is not a regular file"
                      : st.st_nlink != 1       ? "has another hard link (planted?)"
                      : st.st_uid != geteuid() ? "belongs to another user"
                                               : NULL;
    if (why) {
        log_warn("%s %s: not used (remove it if it is not yours)", path, why);
        return -EPERM;
    }
    return 0;
}
