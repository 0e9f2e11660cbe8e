/* SPDX-License-Identifier: MIT */
/*
 * lockfile: one instance per socket. flock() on <dir>/<socket>.lock, taken
 * before anything else a start does; the kernel releases it when the
 * process dies, so a crash never leaves it stale. Checked by inode, so a
 * lock file removed and re-created (by a kubelet up to 1.24 emptying the
 * directory, or the directory re-created) is never trusted.
 */
#ifndef KDP_LOCKFILE_H
#define KDP_LOCKFILE_H

#include <stdbool.h>

typedef struct kdp__lockfile {
    char *path;
    char *name;           /* its file name in the directory */
    const char *resource; /* for log lines; borrowed */
    const char *socket;   /* the socket it guards, for log lines; borrowed */
    int fd;               /* -1: not held */
} kdp__lockfile;

/* <dir>/<socket_name>.lock. Returns 0 or -ENOMEM. */
int kdp__lockfile_init(kdp__lockfile *lf, const char *dir, const char *socket_name,
                       const char *socket_path, const char *resource);
void kdp__lockfile_done(kdp__lockfile *lf); /* releases it if held */
/* Takes the lock, or checks that the one held still guards the file on
 * disk. Returns 0, -EADDRINUSE (another process holds it: logged, naming
 * its pid) or -errno (the directory's problem: the caller says it). */
int kdp__lockfile_ensure(kdp__lockfile *lf);
/* The file was deleted (a directory event): take a fresh one, holding the
 * old until then. */
void kdp__lockfile_relock(kdp__lockfile *lf);
/* Unlinks the file and drops the lock. */
void kdp__lockfile_release(kdp__lockfile *lf);
bool kdp__lockfile_held(const kdp__lockfile *lf);
/* name (from a directory event) is the lock file's. */
bool kdp__lockfile_is(const kdp__lockfile *lf, const char *name);

#endif
