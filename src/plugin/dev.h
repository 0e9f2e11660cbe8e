/* SPDX-License-Identifier: MIT */
/*
 * dev: one device of kdp's device table (plugin/devices.h): its checks, its
 * deep copy from the public struct (the NUMA nodes normalised), its health
 * overlay and what the kubelet sees of it. The table keeps these by value
 * and finds them by ID.
 */
#ifndef KDP_DEV_H
#define KDP_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp.h"

/* A device's health check state (plugin/probe.h): consecutive failures
 * and successes of the probe op, and its verdict. Kept with the device in
 * the plugin's table, so that it follows the device's ID: a device new to
 * the table starts with zero counts and a Healthy verdict, a removed one
 * drops it, a replaced one (same ID) keeps it. */
typedef struct kdp__devprobe {
    uint32_t fails; /* consecutive failures (saturating) */
    uint32_t oks;   /* consecutive successes (saturating) */
    bool bad;       /* the verdict: the probe holds the device Unhealthy */
} kdp__devprobe;

typedef struct kdp__dev {
    char *id;
    /* What the kubelet sees (and the public calls read): Unhealthy when the
     * author says so OR the probe's verdict is Unhealthy (the overlay: see
     * kdp__dev_effective). Only kdp__dev_apply_overlay changes it (through
     * the table's setters, plugin/devices.h). */
    kdp_health health;
    kdp_health author_health; /* the author's own (list op, set_devices, set_device, set_health) */
    kdp__devprobe probe;
    int64_t *numa; /* sorted, de-duplicated, only >= 0 */
    size_t n_numa;
    char *host_path;      /* NULL if none */
    char *container_path; /* NULL = same as host_path */
    char *permissions;    /* NULL = "rw" */
    void *data;           /* the author's (kdp_device.data): never read here */
} kdp__dev;

/* Checks a public device: id, health, NUMA array, permissions, paths.
 * Returns 0 or -EINVAL with *why (if why != NULL) naming the bad field. */
int kdp__dev_check(const kdp_device *d, const char **why);
/* Deep copy of d, already checked, into dst: the negative NUMA nodes
 * dropped, the rest sorted and de-duplicated. Returns 0 or -ENOMEM (dst
 * untouched). */
int kdp__dev_copy(kdp__dev *dst, const kdp_device *d);
/* kdp__dev_check, then kdp__dev_copy. Returns 0, -EINVAL (*why names the
 * bad field, as kdp__devtab_add), -ENOMEM. */
int kdp__dev_from_public(kdp__dev *dst, const kdp_device *d, const char **why);
/* d seen as the public struct (its strings and nodes borrowed from d). */
static inline kdp_device kdp__dev_view(const kdp__dev *d)
{
    return (kdp_device){.id = d->id,
                        .health = d->health,
                        .numa_nodes = d->numa,
                        .n_numa_nodes = d->n_numa,
                        .host_path = d->host_path,
                        .container_path = d->container_path,
                        .permissions = d->permissions,
                        .data = d->data};
}
/* The health the kubelet is told: the author's, or Unhealthy while the
 * probe holds the device so. */
static inline kdp_health kdp__dev_effective(kdp_health author_health, bool probe_bad)
{
    return author_health == KDP_UNHEALTHY || probe_bad ? KDP_UNHEALTHY : KDP_HEALTHY;
}
/* Sets d's health to what its author's health and verdict make it. */
static inline void kdp__dev_apply_overlay(kdp__dev *d)
{
    d->health = kdp__dev_effective(d->author_health, d->probe.bad);
}
/* A deep copy of s (already valid; its health check state too). Returns 0
 * or -ENOMEM. */
int kdp__dev_dup(kdp__dev *dst, const kdp__dev *s);
/* Frees what d holds and zeroes it (d itself is the caller's); NULL ok. */
void kdp__dev_free(kdp__dev *d);
/* Same health and NUMA nodes: what the kubelet sees of one device (the IDs
 * are the caller's to compare). */
bool kdp__dev_same_for_kubelet(const kdp__dev *a, const kdp__dev *b);

#endif
