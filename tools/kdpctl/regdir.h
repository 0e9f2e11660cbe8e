/* SPDX-License-Identifier: MIT */
/*
 * regdir: a plugins_registry directory as the kubelet's plugin watcher sees
 * it, for both of kdpctl's watchers (watcher.c: device plugins;
 * dra_kubelet.c: DRA drivers). The directory is created if missing (0750),
 * watched (kdp's inotify watch), then walked in name order; names starting
 * with '.' and anything that is not a socket (lstat: a link to one is not)
 * are passed over. Only the directory itself is watched, not its
 * subdirectories. A socket created between the watch and the walk is found
 * twice. Loop thread only.
 */
#ifndef KDPCTL_REGDIR_H
#define KDPCTL_REGDIR_H

#include <stddef.h>

#include "runtime/loop.h"

typedef struct kc_regdir kc_regdir;

/* path is DIR/name, valid during the call. */
typedef struct kc_regdir_ops {
    /* A socket, found by the walk (source "walk") or created or moved in
     * ("inotify"). */
    void (*found)(const char *name, const char *path, const char *source, void *ud);
    /* A name deleted or moved out (whatever it was). */
    void (*gone)(const char *name, const char *path, void *ud);
    /* The directory itself was deleted or moved: no longer watched. */
    void (*dir_gone)(void *ud);
} kc_regdir_ops;

/* Creates dir if needed, watches it and walks it: ops->found for each
 * socket there, at most walk_max names read (0 = all). ops is copied.
 * Returns 0, or -errno with nothing kept. */
int kc_regdir_start(kdp__loop *l, const char *dir, size_t walk_max, const kc_regdir_ops *ops,
                    void *ud, kc_regdir **ret);
/* Stops watching. NULL is fine. */
void kc_regdir_free(kc_regdir *d);

#endif
