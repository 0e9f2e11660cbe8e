/* SPDX-License-Identifier: MIT */
/*
 * pdir: the device-plugin directory as a plugin sees it: an inotify watch
 * on it while the plugin serves (its events go to the lifecycle), a watch
 * on its parent while it is missing (so that the start is retried the
 * moment it is back), and what is wrong with it, said once and then only
 * when it changes.
 */
#ifndef KDP_PDIR_H
#define KDP_PDIR_H

#include <stdbool.h>

#include "plugin/status.h"
#include "runtime/loop.h"
#include "runtime/watch.h"

typedef struct kdp__pdir_cbs {
    /* An event in the directory (KDP__WATCH_*; name NULL for GONE, after
     * which the watch is gone: the next kdp__pdir_watch makes a new one). */
    void (*event)(void *ud, int what, const char *name);
    /* The directory is back after kdp__pdir_await found it missing. */
    void (*back)(void *ud);
    void *ud;
} kdp__pdir_cbs;

typedef struct kdp__pdir {
    kdp__loop *loop;
    const char *path;     /* borrowed */
    const char *resource; /* borrowed */
    kdp__status *status;  /* borrowed */
    kdp__pdir_cbs cbs;
    kdp__watch *watch;
    kdp__watch *parent_watch;
    int error; /* the problem last said: 0 = none */
} kdp__pdir;

void kdp__pdir_init(kdp__pdir *d, kdp__loop *l, const char *path, const char *resource,
                    kdp__status *status, const kdp__pdir_cbs *cbs);
void kdp__pdir_done(kdp__pdir *d);
/* Watches the directory if not yet (a failure is logged: restarts are then
 * noticed only from the stream and Register). */
void kdp__pdir_watch(kdp__pdir *d);
void kdp__pdir_unwatch(kdp__pdir *d);
/* If the directory is missing, watch its parent until it is back. */
void kdp__pdir_await(kdp__pdir *d);
void kdp__pdir_stop_awaiting(kdp__pdir *d);
/* An operation in the directory failed with err: if the directory is the
 * reason (missing, not a directory, not writable), say it (once per
 * problem) and return true. */
bool kdp__pdir_report(kdp__pdir *d, int err);
/* The directory worked: say so if it had a problem. */
void kdp__pdir_ok(kdp__pdir *d);

#endif
