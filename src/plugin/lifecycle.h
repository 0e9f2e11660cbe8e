/* SPDX-License-Identifier: MIT */
/*
 * lifecycle: a plugin's state machine. lock -> refresh -> list -> serve ->
 * register, and back again on a restart; stop. It drives the parts a
 * plugin is made of (the lock file, the device table, the directory, the
 * served services, the registration strategy) through their interfaces and
 * knows none of their insides. Loop thread only (the state is also read,
 * atomically, by kdp_plugin_get_status).
 *
 * Every state change goes through one function that checks it against the
 * table of allowed transitions and logs "resource: FROM -> TO (why)" at
 * debug level (plugin/lcstate.h). What cannot happen at once waits as explicit pending state:
 * the lifecycle job running (refresh, the start's list, destroy) and what
 * to do once it is done (restart or stop).
 */
#ifndef KDP_LIFECYCLE_H
#define KDP_LIFECYCLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/backoff.h"
#include "grpc/server.h"
#include "kdp.h"
#include "plugin/handover.h"
#include "plugin/jobs.h"
#include "plugin/lcstate.h"
#include "plugin/lockfile.h"
#include "plugin/pdir.h"
#include "plugin/prober.h"
#include "plugin/pstats.h"
#include "plugin/reg.h"
#include "plugin/restarts.h"
#include "plugin/status.h"
#include "plugin/svc.h"
#include "plugin/table.h"
#include "runtime/loop.h"

#define KDP__LC_MAX_SVCS 3

typedef struct kdp__lifecycle_cfg {
    kdp__loop *loop;
    const char *resource;    /* borrowed, as every pointer here */
    const char *socket_path; /* the socket the services are served on */
    const char *socket_name;
    kdp_plugin *owner; /* handed to refresh and destroy */
    const kdp_ops *ops;
    void *ud;
    kdp__jobs *jobs;
    kdp__table *table;
    kdp__prober *prober; /* health checks: rounds run while serving */
    kdp__lockfile *lock;
    kdp__pdir *dir;
    kdp__reg *reg;
    /* No socket of our own (the registration strategy "none"): no lock
     * file, no directory watch, no server; the services are told that
     * serving begins and ends all the same. */
    bool no_socket;
    kdp__svc *svcs[KDP__LC_MAX_SVCS];
    size_t n_svcs;
    /* A service that stands alone (a DRA driver): told serving once the
     * table runs (its first list done) and not serving at the stop only;
     * the device-plugin side's restarts, and a device-plugin directory or
     * socket that cannot be served yet, never touch it. With it, the table
     * and the probes run from the first list to the stop. NULL: none. */
    kdp__svc *ext;
    kdp__handover *handover; /* an instance among several: the newest one stays */
    kdp__status *status;
    kdp__pstats *stats; /* registrations counted (NULL: none) */
    /* The plugin stopped, cleanly (0) or on a fatal error (-errno). */
    void (*stopped)(void *ud, int err);
    void *stopped_ud;
} kdp__lifecycle_cfg;

typedef enum kdp__lc_job {
    KDP__LC_JOB_NONE = 0,
    KDP__LC_JOB_REFRESH,
    KDP__LC_JOB_LIST,
    KDP__LC_JOB_DESTROY,
} kdp__lc_job;

typedef enum kdp__lc_pending {
    KDP__LC_PENDING_NONE = 0,
    KDP__LC_PENDING_RESTART,
    KDP__LC_PENDING_STOP,
} kdp__lc_pending;

typedef struct kdp__lifecycle {
    kdp__lifecycle_cfg cfg;
    _Atomic kdp__lc_state state;
    kdp__lc_job job;         /* the lifecycle job running */
    kdp__lc_pending pending; /* to do once it is done */
    bool owes_destroy;       /* a start began since the last destroy */
    atomic_bool destroy_ran; /* the destroy job started (worker thread) */
    kdp__server *server;
    kdp__server *draining; /* shutting down gracefully during the stop */
    bool running;          /* the table and the probes run (and the ext is told so) */
    bool locked;           /* the lock file is ours */
    kdp__timer *start_timer;
    kdp__timer *restart_timer;
    kdp__timer *supersede_timer; /* a newer instance registered: stop, from the loop */
    bool peer_connected;         /* the kubelet's stream is open (since serving began) */
    const char *restart_why;     /* static string */
    kdp__backoff backoff;        /* start retries */
    /* Restarts back off when the same kubelet keeps ending registrations
     * that did not last (plugin/restarts.h); their count. */
    kdp__restarts restarts;
    unsigned starts; /* servers started */
} kdp__lifecycle;

int kdp__lifecycle_init(kdp__lifecycle *lc, const kdp__lifecycle_cfg *cfg);
void kdp__lifecycle_done(kdp__lifecycle *lc);

/* Before the start (IDLE): serve reg instead of the strategy of the config
 * (no_socket as in the config), and one more service. Return 0, -EBUSY (not
 * IDLE), -E2BIG (KDP__LC_MAX_SVCS). */
int kdp__lifecycle_set_reg(kdp__lifecycle *lc, kdp__reg *reg, bool no_socket);
int kdp__lifecycle_add_svc(kdp__lifecycle *lc, kdp__svc *svc);
/* Before the start (IDLE): svc stands alone (cfg.ext). Returns 0, -EBUSY,
 * -EALREADY (one). */
int kdp__lifecycle_set_ext(kdp__lifecycle *lc, kdp__svc *svc);

/* IDLE -> lock, refresh, list, serve, register. */
void kdp__lifecycle_start(kdp__lifecycle *lc);
/* Stop serving, destroy, release the lock; cfg.stopped when done. */
void kdp__lifecycle_stop(kdp__lifecycle *lc);
/* A restart, from a zero-delay timer (coalesced with one under way). */
void kdp__lifecycle_restart(kdp__lifecycle *lc, const char *why);
/* Synchronous stop for kdp_plugin_free(), in two halves around freeing the
 * worker: first the server (the calls' jobs are abandoned while the worker
 * still exists), then, with no callback running any more, destroy (on this
 * thread, only if its job never started), the watches and the lock. */
void kdp__lifecycle_teardown_serving(kdp__lifecycle *lc);
void kdp__lifecycle_teardown_finish(kdp__lifecycle *lc);

static inline kdp__lc_state kdp__lifecycle_state(const kdp__lifecycle *lc)
{
    return atomic_load(&lc->state);
}

/* The callbacks the parts call, bound to lc, for their init. */
kdp__reg_up kdp__lifecycle_reg_up(kdp__lifecycle *lc);
kdp__svc_up kdp__lifecycle_svc_up(kdp__lifecycle *lc);
kdp__pdir_cbs kdp__lifecycle_dir_cbs(kdp__lifecycle *lc);
/* The table's start_listed callback (ud = lc). */
void kdp__lifecycle_on_start_listed(void *ud);

#endif
