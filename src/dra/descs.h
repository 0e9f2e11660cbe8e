/* SPDX-License-Identifier: MIT */
/*
 * descs: the plugin's devices as the ResourceSlices show them. At every
 * change of the plugin's table, the devices new to it (by kdp ID) are
 * described by the describe op, on the plugin's worker (kdp_dra_device:
 * name, attributes, capacities; without the op, the name from the ID);
 * the ones gone are dropped. Then the names are checked for duplicates
 * (both left out, logged), and `changed` says the described devices are
 * new. A describe that overruns its deadline or cannot be run is tried
 * again on a timer (backoff 1 s .. 60 s): a static table is never left
 * unpublished. A health change is not a new description; the author's
 * word that one changed (kdp__dra_descs_redescribe, any thread: an inbox
 * under a mutex, taken on a wakeup) describes that device again, the old
 * description published until the new one replaces it.
 *
 * Owns the descriptions (C, sorted by ID) and the published names (sorted
 * by name); knows the plugin only through its table (kdp__plugin_devices).
 * Loop thread, but for the inbox.
 */
#ifndef KDP_DRA_DESCS_H
#define KDP_DRA_DESCS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/backoff.h"
#include "dra/describe.h"
#include "k8s/slicebuild.h"
#include "kdp_dra.h"
#include "plugin/jobs.h"
#include "plugin/probe.h"
#include "runtime/loop.h"

/* A health check's reason, as the health stream carries it (1024 at most
 * there). */
#define KDP__DRA_WHY_MAX 256

typedef struct kdp__dra_desc {
    char *id;
    char name[64];              /* its name in the slices ("": left out) */
    int64_t unhealthy_since;    /* when it turned Unhealthy (Unix s; 0: healthy) */
    kdp__probe_note note;       /* what its last health check said */
    bool stale;                 /* to be described again */
    char why[KDP__DRA_WHY_MAX]; /* and why (valid UTF-8; "" for OK) */
    kdp_dra_device d;           /* as described (name, attributes, capacities) */
} kdp__dra_desc;

typedef struct kdp__dra_descs_cbs {
    /* The published devices changed (some came, went or were described). */
    void (*changed)(void *ud);
    void *ud;
} kdp__dra_descs_cbs;

typedef struct kdp__dra_descs {
    kdp__loop *loop;
    kdp_plugin *p;
    kdp__jobs *jobs;
    int (*describe)(kdp_plugin *p, const kdp_device *d, kdp_dra_device *out, void *ud);
    void *ud;
    const char *driver; /* for log lines; borrowed */
    kdp__dra_descs_cbs cbs;

    kdp__dra_desc *descs; /* sorted by ID */
    size_t n;
    size_t *pub; /* the published ones: indices into descs, sorted by name */
    size_t n_pub;

    bool describing; /* the describe job runs */
    bool again;      /* the table changed meanwhile */
    bool force;      /* tell `changed` even if nothing is new */
    kdp__timer *retry;
    kdp__backoff backoff;

    /* The redescribe inbox: any thread, under in_mu. */
    pthread_mutex_t in_mu;
    char **inbox; /* kdp IDs */
    size_t n_inbox;
    bool inbox_all; /* every device (asked for, or the inbox overflowed) */
    kdp__wakeup *wake;
} kdp__dra_descs;

/* The most IDs the inbox holds; past it, every device is described again. */
#define KDP__DRA_REDESCRIBE_MAX 1024

/* describe may be NULL. driver is borrowed. Returns 0 or -ENOMEM. */
int kdp__dra_descs_init(kdp__dra_descs *dv, kdp_plugin *p, kdp__jobs *jobs,
                        int (*describe)(kdp_plugin *, const kdp_device *, kdp_dra_device *, void *),
                        void *ud, const char *driver, const kdp__dra_descs_cbs *cbs);
void kdp__dra_descs_done(kdp__dra_descs *dv);
/* The plugin's table changed: describe what is new to it, drop what left
 * (force: tell `changed` even if nothing did). */
void kdp__dra_descs_update(kdp__dra_descs *dv, bool force);
/* The author says device id's description changed (NULL: every device's):
 * it is described again soon, from the loop. Any thread. Returns 0 or
 * -ENOMEM. */
int kdp__dra_descs_redescribe(kdp__dra_descs *dv, const char *id);
/* The kdp ID of the published device named name, or NULL. */
const char *kdp__dra_descs_id_of(const kdp__dra_descs *dv, const char *name);
/* The published name of kdp ID id, or NULL (not described or left out). */
const char *kdp__dra_descs_name_of(const kdp__dra_descs *dv, const char *id);
/* Notes the health of kdp ID id now (at now, Unix seconds): returns when it
 * turned Unhealthy (0 while it is healthy, or not described). */
int64_t kdp__dra_descs_health(kdp__dra_descs *dv, const char *id, bool unhealthy, int64_t now);
/* Notes what a health check said of kdp ID id (NULL: of every device):
 * returns true if that changed what a described device carries. */
bool kdp__dra_descs_note(kdp__dra_descs *dv, const char *id, kdp__probe_note note, const char *why);
/* The description of kdp ID id, or NULL. */
const kdp__dra_desc *kdp__dra_descs_find(const kdp__dra_descs *dv, const char *id);
/* How many devices are published. */
size_t kdp__dra_descs_count(const kdp__dra_descs *dv);

/* The published devices as k8s/slicebuild takes them (borrowing the
 * descriptions: valid until the next update or done). */
typedef struct kdp__dra_descs_view {
    kdp__slice_dev *devs;
    size_t n;
    kdp__slice_cap *caps; /* every device's */
} kdp__dra_descs_view;

/* Returns 0 or -ENOMEM. */
int kdp__dra_descs_view_init(const kdp__dra_descs *dv, kdp__dra_descs_view *v);
void kdp__dra_descs_view_done(kdp__dra_descs_view *v);

#endif
