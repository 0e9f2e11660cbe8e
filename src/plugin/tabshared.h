/* SPDX-License-Identifier: MIT */
/*
 * tabshared: the device table other threads set, the `shared` half of a
 * plugin's device table (plugin/table.h owns it and is the loop's half).
 *
 * The latest table set (kdp_plugin_set_devices, a list's result) or changed
 * (kdp_plugin_set_device, _remove_device, _set_health, a probe's verdict),
 * under a mutex, with a version, the size of its ListAndWatch message (kept
 * up to date change by change, so that a change over KDP_MAX_LIST_MESSAGE is
 * refused at once) and the count of devices the probe holds Unhealthy. A
 * whole table replaces it; a single change is applied to it and queued
 * (`pending`, plugin/tabops.h) for the loop, which takes the queue, or a
 * copy of the whole table when the queue is of no use (kdp__tabshared_take).
 * While a list runs, the single changes are also kept (`since_list`) and
 * replayed on its result, which was read before them.
 *
 * The probe's state of a device follows its ID: a replacement, or a device
 * of a new whole table that the table had, keeps it; only a removal drops
 * it.
 *
 * Threading: any thread, but kdp__tabshared_take, _listing, _list_result
 * and the probe calls (the loop thread); every change signals `wake`.
 * replicas, probe_stats and wake are set once, before the context runs.
 */
#ifndef KDP_TABSHARED_H
#define KDP_TABSHARED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kdp.h"
#include "plugin/devices.h"
#include "plugin/probe.h"
#include "plugin/tabops.h"
#include "runtime/loop.h"

typedef struct kdp__tabshared {
    const char *resource;          /* borrowed */
    unsigned replicas;             /* kdp_config.replicas (plugin/replicas.h) */
    kdp__probe_stats *probe_stats; /* health checks (NULL: none, no probe state is carried
                                      over); held_unhealthy is kept here */
    kdp__wakeup *wake;             /* the loop's, signalled after a change (borrowed) */

    pthread_mutex_t mu; /* guards everything below */
    kdp__devtab devs;
    size_t bytes; /* their ListAndWatch message's size */
    uint64_t ver;
    kdp__tabops pending;                 /* changes the loop has not taken */
    size_t probe_bad;                    /* devices the probe holds Unhealthy */
    kdp__tabops since_list;              /* changes made while a list runs */
    bool listing;                        /* a list runs: changes go to since_list too */
    _Atomic uint64_t rejected_logged_us; /* a set call's -EMSGSIZE line */
} kdp__tabshared;

void kdp__tabshared_init(kdp__tabshared *s, const char *resource);
void kdp__tabshared_done(kdp__tabshared *s);

/* kdp_plugin_set_devices, kdp_plugin_set_device, kdp_plugin_remove_device,
 * kdp_plugin_set_health: any thread, same returns. A replica ID stands for
 * its device. */
int kdp__tabshared_set(kdp__tabshared *s, const kdp_device *devs, size_t n);
int kdp__tabshared_put(kdp__tabshared *s, const kdp_device *d);
int kdp__tabshared_remove(kdp__tabshared *s, const char *id);
int kdp__tabshared_set_health(kdp__tabshared *s, const char *id, kdp_health health);
/* kdp_plugin_get_health, kdp_plugin_get_device_data, kdp_plugin_get_devices:
 * any thread, same returns (the latest table set). */
int kdp__tabshared_get_health(kdp__tabshared *s, const char *id, kdp_health *ret);
int kdp__tabshared_get_data(kdp__tabshared *s, const char *id, void **ret);
int kdp__tabshared_get_devices(kdp__tabshared *s, kdp_device **ret, size_t *ret_n);

/* Health checks (loop thread): counts answer a into device id's state (a
 * device's own ID) under c; a verdict that turns is queued as a single
 * change (KDP__TABOP_VERDICT). *ret gets the state after. Returns the
 * kdp__probe_turn, or -ENOENT (no such device any more), -ENOMEM. */
int kdp__tabshared_probe_result(kdp__tabshared *s, const char *id, kdp__probe_answer a,
                                const kdp__probe_cfg *c, kdp__devprobe *ret);
/* The same answer for every device at once (probing went down). Returns
 * how many verdicts turned Unhealthy. */
size_t kdp__tabshared_probe_all(kdp__tabshared *s, kdp__probe_answer a, const kdp__probe_cfg *c);

/* A list begins (on) or ended without a result (off): the single changes
 * made meanwhile are kept for its result, or dropped. Loop thread. */
void kdp__tabshared_listing(kdp__tabshared *s, bool on);
/* A list's result (d: taken), with the changes made while it ran replayed
 * on top, becomes the table. Returns true when more changes were made than
 * are kept (KDP__TABOPS_MAX; logged): list again. Loop thread. */
bool kdp__tabshared_list_result(kdp__tabshared *s, kdp__devtab *d);

enum { KDP__TOOK_NOTHING = 0, KDP__TOOK_WHOLE = 1, KDP__TOOK_OPS = 2 };
/* The loop takes what is newer than *ver (its version; updated): the
 * whole table, copied into ret_whole (when stale, the loop's table is not
 * *ver's base, or the queue was lost), else the queued changes, handed over
 * in ret_ops (O(1)). Returns KDP__TOOK_*, or -ENOMEM (the copy failed:
 * nothing taken). Loop thread. */
int kdp__tabshared_take(kdp__tabshared *s, uint64_t *ver, bool stale, kdp__devtab *ret_whole,
                        kdp__tabops *ret_ops);

#endif
