/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic: the directories to watch (inotify) for a resource's
 * hot-plug: above each pattern's first wildcard, and where USB and PCI
 * drivers put their nodes.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"
#include "util.h"

static size_t add_watch(char **dirs, unsigned *depths, size_t n, size_t max, const char *dir,
                        unsigned depth)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(dirs[i], dir) == 0) {
            depths[i] = depth > depths[i] ? depth : depths[i];
            return n;
        }
    }
    if (n >= max) {
        log_w("no hot-plug for %s: at most %zu watched directories per resource", dir, max);
        return n;
    }
    if (!(dirs[n] = strdup(dir))) {
        log_w("no hot-plug for %s: out of memory", dir);
        return n;
    }
    depths[n] = depth;
    return n + 1;
}

/* The directory above a pattern's first wildcard, and how deep below it
 * the matches are: "/dev/ttyUSB*" -> /dev, 0; "/dev/bus/usb/(any)/(any)"
 * -> /dev/bus/usb, 1; "/dev/net/tun" -> /dev/net, 0. */
static unsigned pattern_dir(const char *pattern, char *dir, size_t size)
{
    const char *wild = strpbrk(pattern, "*?[");
    const char *cut = wild ? wild : pattern + strlen(pattern);
    while (cut > pattern && *cut != '/') {
        cut--;
    }
    snprintf(dir, size, "%.*s", cut == pattern ? 1 : (int)(cut - pattern), pattern);
    unsigned depth = 0;
    for (const char *p = cut + 1; *p; p++) {
        depth += *p == '/';
    }
    return depth > 4 ? 4 : depth;
}

size_t gen_watch_dirs(const gen_resource *r, char **dirs, unsigned *depths, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_entries; i++) {
        const gen_entry *e = &r->entries[i];
        for (size_t j = 0; j < e->n_paths; j++) {
            char dir[PATH_MAX];
            unsigned depth = pattern_dir(e->paths[j], dir, sizeof(dir));
            n = add_watch(dirs, depths, n, max, dir, depth);
        }
        if (e->n_paths == 0 && e->usb.set) {
            /* usb: its nodes, in /dev/bus/usb/BBB, /dev and /dev/input
             * (not every subdirectory of /dev: /dev/shm and the like change
             * all the time) */
            n = add_watch(dirs, depths, n, max, "/dev", 0);
            n = add_watch(dirs, depths, n, max, "/dev/bus/usb", 1);
            n = add_watch(dirs, depths, n, max, "/dev/input", 0);
        }
        if (e->n_paths == 0 && e->pci.set) {
            /* pci: /dev/nvidiaN, DRM's /dev/dri, /dev/accel, VFIO's
             * /dev/vfio and /dev/vfio/devices (binding and unbinding in
             * sysfs is seen by the rescan interval) */
            n = add_watch(dirs, depths, n, max, "/dev", 0);
            n = add_watch(dirs, depths, n, max, "/dev/dri", 0);
            n = add_watch(dirs, depths, n, max, "/dev/accel", 0);
            n = add_watch(dirs, depths, n, max, "/dev/vfio", 1);
        }
    }
    for (size_t i = 0; i < r->n_shared; i++) {
        char dir[PATH_MAX];
        unsigned depth = pattern_dir(r->shared[i], dir, sizeof(dir));
        n = add_watch(dirs, depths, n, max, dir, depth);
    }
    return n;
}
