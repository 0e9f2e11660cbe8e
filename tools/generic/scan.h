/* SPDX-License-Identifier: MIT */
/* kdp-generic: one resource's devices, found from its configuration. */
#ifndef KDP_GENERIC_SCAN_H
#define KDP_GENERIC_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define GEN_MAX_DEVICES 4096U  /* physical devices per resource */
#define GEN_MAX_IDS     65536U /* device IDs per resource (devices x count) */
#define GEN_MAX_NUMA    8U

/* One physical device: a matched path, a group, or a USB device's nodes. */
typedef struct gen_dev {
    char *id;     /* also the CDI device name */
    char **paths; /* host paths, sorted, NULL-terminated */
    size_t n_paths;
    int64_t numa[GEN_MAX_NUMA];
    size_t n_numa;
} gen_dev;

/* One device ID the kubelet sees: dev's ID, or with count > 1 "<id>-<k>". */
typedef struct gen_exposed {
    char *id;
    size_t dev;
} gen_exposed;

typedef struct gen_scan {
    gen_dev *devs; /* sorted by id */
    size_t n;
    gen_exposed *ids; /* sorted by id (strcmp) */
    size_t n_ids;
} gen_scan;

/* Finds r's devices now, and the IDs for r->count. Returns 0, -E2BIG
 * (over the caps, logged), -ENOMEM. */
int gen_scan_run(const gen_resource *r, gen_scan *out);
void gen_scan_clear(gen_scan *s);
/* The device behind an exposed ID, or NULL. */
const gen_dev *gen_scan_lookup(const gen_scan *s, const char *id);
/* Every directory to watch for r's hot-plug: host paths (not under root)
 * with a depth each. Returns how many (at most max). */
size_t gen_watch_dirs(const gen_resource *r, char **dirs, unsigned *depths, size_t max);

#endif
