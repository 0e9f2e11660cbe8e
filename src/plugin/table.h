/* SPDX-License-Identifier: MIT */
/*
 * table: a plugin's device table, from the threads that set it to the
 * message every ListAndWatch stream is sent, and the list op's runs.
 *
 * Two tables: `shared` (plugin/tabshared.h, a part the table owns), the
 * latest set from any thread (kdp_plugin_set_*, a finished list), under a
 * mutex with a version; and `tab`, what the kubelet has been told, owned by
 * the loop thread, with its encoded message. On a wakeup the loop brings
 * `tab` up to `shared` and, when what the kubelet sees changed and the
 * message fits in KDP_MAX_LIST_MESSAGE, encodes it once and calls `changed`
 * (the served services push it). A table over the limit is never taken: the
 * kubelet keeps the last one that fit.
 *
 * Whole tables (kdp_plugin_set_devices, a list's result) are copied. Single
 * changes (kdp_plugin_set_device, _remove_device, _set_health) cost O(1):
 * each is applied to `shared` and queued there; the loop applies the queue
 * to `tab` (undone if the result would not fit) and sends one message for
 * all of them. A queue that grows past KDP__TABOPS_MAX, or a table the loop
 * refused, falls back to a whole copy.
 *
 * The list op's runs are the lister's (plugin/lister.h), which the table
 * owns: at each start (kdp__table_list_for_start), on kdp_plugin_rescan(),
 * every rescan interval while serving, and again with backoff after a
 * failure; each result becomes the shared table.
 *
 * With replicas (plugin/replicas.h) both tables hold physical devices; only
 * the message expands them. The setters and readers take a replica ID too.
 *
 * Health checks (plugin/probe.h): each device keeps its author's health and
 * the probe's state apart (devices.h); the health the kubelet sees, and the
 * readers return, is Unhealthy when either says so. A verdict change is a
 * single change (KDP__TABOP_VERDICT) like a kdp_plugin_set_health; a device
 * replaced by ID keeps its probe state, and so does a device of a whole new
 * table (set_devices, a list's result) that the table had: the state follows
 * the ID, and only a removal drops it.
 */
#ifndef KDP_TABLE_H
#define KDP_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kdp.h"
#include "plugin/devices.h"
#include "plugin/jobs.h"
#include "plugin/lister.h"
#include "plugin/probe.h"
#include "plugin/pstats.h"
#include "plugin/status.h"
#include "plugin/tabops.h"
#include "plugin/tabshared.h"
#include "runtime/loop.h"

typedef struct kdp__table_cbs {
    /* The message the kubelet is served changed (loop thread). */
    void (*changed)(void *ud);
    /* The start's list is done, whatever its outcome (loop thread). */
    void (*start_listed)(void *ud);
    void *ud;
} kdp__table_cbs;

typedef struct kdp__table {
    const char *resource; /* borrowed */
    kdp__status *status;  /* borrowed */
    kdp__pstats *stats;   /* health transitions counted (NULL: none); set once, before the
                             context runs */
    kdp__table_cbs cbs;
    kdp__tabshared shared; /* any thread: the table set (its replicas, probe_stats) */
    kdp__wakeup *wake;     /* signalled from any thread: the loop takes `shared` */

    /* loop thread */
    kdp__devtab tab;
    uint64_t tab_ver;
    uint8_t *msg; /* tab as a ListAndWatchResponse; NULL until first needed */
    size_t msg_len;
    size_t rejected_n, rejected_bytes; /* the newest table refused; 0 = none */
    uint64_t rejected_logged_us;
    bool tab_stale; /* tab is not tab_ver's base: take the whole table */
    kdp__lister lister;
} kdp__table;

int kdp__table_init(kdp__table *t, kdp__loop *l, const char *resource, kdp__status *status,
                    kdp__jobs *jobs, kdp_plugin *owner, kdp_list_fn list_fn, void *list_ud,
                    unsigned rescan_ms, const kdp__table_cbs *cbs);
/* Frees what the table has on the loop (its wakeup, the lister's timer):
 * before the loop goes. */
void kdp__table_release_loop(kdp__table *t);
/* Frees the rest. */
void kdp__table_done(kdp__table *t);

/* kdp_plugin_rescan: any thread. The setters and readers of the devices
 * are the shared half's (kdp__tabshared_*(&t->shared, ...)). */
void kdp__table_rescan(kdp__table *t);

/* Loop thread. The start's list: 1 if there is no list op (the table is
 * taken at once), 0 if the job runs (start_listed follows), or -errno if it
 * could not be started (logged; its retry is armed when serving begins). */
int kdp__table_list_for_start(kdp__table *t);
/* Serving begins or ends: rescans (the interval, a failed list's retry)
 * run only while serving. */
void kdp__table_serving(kdp__table *t, bool on);
/* The message to send a new ListAndWatch stream (the table's, encoded now
 * if it never was: an empty list before any is set). NULL on ENOMEM. */
const uint8_t *kdp__table_message(kdp__table *t, size_t *ret_len);
/* What the kubelet has been told (for the ID checks of calls). */
static inline const kdp__devtab *kdp__table_told(const kdp__table *t)
{
    return &t->tab;
}

#endif
