/* SPDX-License-Identifier: MIT */
/*
 * files: the file-system chores several modules share: a directory and its
 * parents, a whole write, a directory's fsync, and a file replaced
 * atomically (the CDI specs, the DRA checkpoint).
 *
 * Threading: none (plain system calls on the caller's thread).
 */
#ifndef KDP_BASE_FILES_H
#define KDP_BASE_FILES_H

#include <stddef.h>
#include <sys/types.h>

/* dir and its missing parents, each made with mode (existing ones are left
 * as they are). Returns 0, -ENAMETOOLONG (over PATH_MAX) or mkdir's -errno. */
int kdp__mkdir_p(const char *dir, mode_t mode);
/* All of buf to fd, through EINTR and short writes. Returns 0 or -errno
 * (-EIO for a write of 0 bytes). */
int kdp__write_all(int fd, const void *buf, size_t len);
/* fsync of a directory, so that a rename in it is durable. Returns 0 or
 * -errno. */
int kdp__sync_dir(const char *dir);
/* Replaces the file at path (absolute or relative, in an existing
 * directory) with buf: a temporary file ".<name>.tmp-XXXXXX" in the same
 * directory (hidden, so readers that skip dot files ignore it), mode, the
 * content, fsync, rename over path, fsync of the directory. A reader sees
 * the old file or the new one whole, and the new one survives a crash once
 * this returns 0. The temporary file is removed on failure. Returns 0,
 * -ENAMETOOLONG or -errno. */
int kdp__replace_file(const char *path, const void *buf, size_t len, mode_t mode);

/* Whether the open file fd (at path, for the log line) is one kdp may
 * write or trust in a directory other processes can write to (a hostPath
 * shared with pods): a regular file with one link, owned by this process's
 * user. A FIFO, a hard link planted to another file, or someone else's file
 * is refused with a warning naming path and what is wrong. Returns 0 or
 * -EPERM. */
int kdp__own_plain_file(int fd, const char *path);

/* What kdp__dir_trusted returns for a directory someone else can write
 * to: an errno of its own, so that callers say it apart from EACCES. */
#define KDP__EUNTRUSTED EKEYREJECTED

/* Whether the directory dir may hold what kdp writes and reads: a
 * directory (symbolic links followed), owned by this process's user or by
 * root, and writable by nobody else (no group or other write bit, unless
 * sticky, as /tmp: then no one renames or removes another's files). A
 * directory that another user can write to lets them plant or swap the
 * files kdp trusts. Returns 0, -ENOENT, -ENOTDIR or -KDP__EUNTRUSTED, with
 * what is wrong in *why (static; may be NULL) naming the owner or mode. */
int kdp__dir_trusted(const char *dir, const char **why);

#endif
