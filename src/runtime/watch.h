/* SPDX-License-Identifier: MIT */
/* watch: inotify on the device-plugin directory. Reports files created,
 * deleted or moved in or out by name, and the directory itself going away. */
#ifndef KDP_WATCH_H
#define KDP_WATCH_H

#include <stdint.h>

#include "runtime/loop.h"

typedef struct kdp__watch kdp__watch;

enum {
    KDP__WATCH_CREATED = 1, /* created or moved in */
    KDP__WATCH_DELETED = 2, /* deleted or moved out */
    KDP__WATCH_GONE = 3,    /* the directory itself was deleted or moved: the watch is dead */
};

/* name is the file name (NULL for KDP__WATCH_GONE), valid during the call. */
typedef void (*kdp__watch_fn)(int what, const char *name, void *ud);

/* Returns 0 or -errno (-ENOENT if dir does not exist). */
int kdp__watch_new(kdp__loop *l, const char *dir, kdp__watch_fn fn, void *ud, kdp__watch **ret);
/* NULL is fine. Safe from inside the callback. */
void kdp__watch_free(kdp__watch *w);

#endif
