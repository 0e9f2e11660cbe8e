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

/* A pci entry's device: its PCI identity. */
typedef struct gen_pci_id {
    char *address;   /* "0000:00:06.0" */
    char *driver;    /* NULL: none */
    char *pcie_root; /* "pci0000:00"; NULL: none */
    uint16_t vendor;
    uint16_t device;
    uint32_t class_code;
} gen_pci_id;

/* One physical device: a matched path, a group, a USB or PCI device's
 * nodes. */
typedef struct gen_dev {
    char *id;     /* also the CDI device name */
    char **paths; /* host paths, sorted, NULL-terminated */
    size_t n_paths;
    int64_t numa[GEN_MAX_NUMA];
    size_t n_numa;
    gen_pci_id pci; /* address NULL unless from a pci entry */
    size_t entry;   /* the index of the entry it comes from */
} gen_dev;

/* The physical devices. The kubelet sees each as r->count IDs: with count
 * > 1 the library's replicas (kdp_config.replicas) make them "<id>-<k>". */
typedef struct gen_scan {
    gen_dev *devs; /* sorted by id */
    size_t n;
    size_t n_ids; /* the IDs the kubelet sees: n x count */
    /* sharedNodes: their matches, sorted, NULL-terminated (NULL if the
     * resource has none), and the first pattern that matched nothing
     * (NULL: all there): every device is unhealthy while one is missing */
    char **shared;
    size_t n_shared;
    char *shared_missing;
} gen_scan;

/* Finds r's devices now. Returns 0, -E2BIG (devices x count over
 * GEN_MAX_IDS, logged), -ENOMEM. */
int gen_scan_run(const gen_resource *r, gen_scan *out);
void gen_scan_clear(gen_scan *s);
/* The device of that (physical) ID, or NULL. */
const gen_dev *gen_scan_lookup(const gen_scan *s, const char *id);
/* A deep copy of src into dst. Returns 0 or -ENOMEM (dst empty). */
int gen_dev_copy(gen_dev *dst, const gen_dev *src);
void gen_dev_clear(gen_dev *d);
/* Health checks with nodeExists (docs/generic.md): the devices of old (the
 * previous scan) that s (a fresh one) lacks are added to s, copied, so
 * that a device whose nodes vanish stays listed and its probe turns it
 * Unhealthy (after unhealthyAfter rounds) rather than the device leaving
 * at once. Within the caps (else left out, logged). Returns 0 or
 * -ENOMEM. */
int gen_scan_keep_missing(const gen_resource *r, gen_scan *s, const gen_scan *old);
/* Every directory to watch for r's hot-plug: host paths (not under root)
 * with a depth each. Returns how many (at most max). */
size_t gen_watch_dirs(const gen_resource *r, char **dirs, unsigned *depths, size_t max);

#endif
