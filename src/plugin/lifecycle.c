/* SPDX-License-Identifier: MIT */
/*
 * lifecycle: the state machine (see lifecycle.h).
 *
 * Restarts come from the parts (lifecycle_up.c hears them): the
 * registration strategy (a new kubelet, our socket gone at Register), the
 * directory (our socket deleted, the directory gone) and the served
 * services (the kubelet's stream ended). Each restart stops serving, runs
 * destroy, then starts again: at once, or after a backoff when the same
 * kubelet keeps ending registrations that did not last (restarts.h).
 */
#include "plugin/lifecycle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "plugin/endpoint.h"
#include "plugin/lifecycle_int.h"

#define DRAIN_LINGER_US (1000000ULL) /* bound on GOAWAY delivery at stop */

static void serve(kdp__lifecycle *lc);
static void serve_on(kdp__lifecycle *lc);
static void after_job(kdp__lifecycle *lc);

static void publish_restarts(kdp__lifecycle *lc)
{
    kdp_plugin_status *st = kdp__status_lock(lc->cfg.status);
    st->restarts = lc->restarts.total;
    kdp__status_unlock(lc->cfg.status);
}

/* ---- starting ---- */

/* The start is tried again after delay_us; a missing directory is awaited
 * through its parent meanwhile (its return starts it at once). */
static void schedule_start(kdp__lifecycle *lc, uint64_t delay_us)
{
    kdp__timer_start(lc->start_timer, delay_us);
    kdp__pdir_await(lc->cfg.dir);
}

static void on_start_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__lifecycle_start(ud);
}

/* The table and the probes run, and the service that stands alone is told
 * so (once, until run_off). */
static void run_on(kdp__lifecycle *lc)
{
    kdp__lifecycle_cfg *c = &lc->cfg;
    if (lc->running) {
        return;
    }
    lc->running = true;
    kdp__table_serving(c->table, true);
    if (c->prober) {
        kdp__prober_serving(c->prober, true);
    }
    if (c->ext) {
        c->ext->ops->serving(c->ext, true);
    }
}

static void run_off(kdp__lifecycle *lc)
{
    kdp__lifecycle_cfg *c = &lc->cfg;
    if (!lc->running) {
        return;
    }
    lc->running = false;
    if (c->ext) {
        c->ext->ops->serving(c->ext, false);
    }
    kdp__table_serving(c->table, false);
    if (c->prober) {
        kdp__prober_serving(c->prober, false);
    }
}

static void release_lock(kdp__lifecycle *lc)
{
    kdp__lockfile_release(lc->cfg.lock);
    lc->locked = false;
}

static void fatal(kdp__lifecycle *lc, int err)
{
    run_off(lc);
    kdp__lifecycle_set_state(lc, KDP__LC_STOPPED, "fatal");
    release_lock(lc);
    lc->cfg.stopped(lc->cfg.stopped_ud, err);
}

/* The device-plugin side cannot be served yet (err: the lock or the socket
 * could not be made): tried again after a backoff; a service that stands
 * alone runs meanwhile, the table with it. */
static void dp_wait(kdp__lifecycle *lc, int err, const char *what, const char *path)
{
    kdp__lifecycle_cfg *c = &lc->cfg;
    uint64_t delay = kdp__backoff_next(&lc->backoff);
    if (!kdp__pdir_report(c->dir, err)) {
        log_error("%s: cannot %s %s: %s; trying again in %llu ms", c->resource, what, path,
                  strerror(-err), (unsigned long long)(delay / 1000));
    }
    kdp__lifecycle_set_state(lc, KDP__LC_STARTING, "the device-plugin side cannot be served yet");
    if (c->ext) {
        run_on(lc);
    }
    schedule_start(lc, delay);
}

static void after_refresh(kdp__lifecycle *lc)
{
    int r = kdp__table_list_for_start(lc->cfg.table);
    if (r == 0) {
        lc->job = KDP__LC_JOB_LIST; /* kdp__lifecycle_on_start_listed goes on */
        return;
    }
    serve(lc); /* no list op, or it could not start (it is retried while serving) */
}

static void fn_refresh(kdp__pjob *j)
{
    kdp__lifecycle *lc = j->owner;
    j->result = kdp__pjob_checked(j, lc->cfg.ops->refresh(lc->cfg.owner, lc->cfg.ud));
}

/* A failed job's error line (a timeout was logged by the deadline). */
static void log_job_failure(const kdp__lifecycle *lc, const kdp__pjob *j, bool timed_out)
{
    if (!timed_out) {
        log_error("%s: %s callback failed: %s%s%s", lc->cfg.resource, j->what, strerror(-j->result),
                  j->has_msg ? ": " : "", j->has_msg ? j->msg : "");
    }
}

static void complete_refresh(kdp__pjob *j, bool timed_out)
{
    kdp__lifecycle *lc = j->owner;
    lc->job = KDP__LC_JOB_NONE;
    if (timed_out || j->result < 0) {
        log_job_failure(lc, j, timed_out);
        uint64_t delay = kdp__backoff_next(&lc->backoff);
        log_warn("%s: starting again in %llu ms", lc->cfg.resource,
                 (unsigned long long)(delay / 1000));
        if (lc->pending != KDP__LC_PENDING_STOP) {
            lc->pending = KDP__LC_PENDING_NONE; /* the start is retried anyway */
            schedule_start(lc, delay);
        }
        after_job(lc);
        return;
    }
    if (lc->pending != KDP__LC_PENDING_NONE) {
        after_job(lc);
        return;
    }
    after_refresh(lc);
}

void kdp__lifecycle_on_start_listed(void *ud)
{
    kdp__lifecycle *lc = ud;
    lc->job = KDP__LC_JOB_NONE;
    if (lc->pending != KDP__LC_PENDING_NONE) {
        after_job(lc);
        return;
    }
    serve(lc);
}

void kdp__lifecycle_start(kdp__lifecycle *lc)
{
    if (lc->pending == KDP__LC_PENDING_STOP) {
        return;
    }
    kdp__lifecycle_cfg *c = &lc->cfg;
    /* The lock first: a second instance must fail before it runs any of
     * the author's callbacks. */
    int lr = c->no_socket ? 0 : kdp__lockfile_ensure(c->lock);
    lc->locked = lr == 0 && !c->no_socket;
    if (lr == -EADDRINUSE) {
        fatal(lc, lr);
        return;
    }
    if (lr < 0 && (!c->ext || lc->running)) {
        dp_wait(lc, lr, "take the lock", c->lock->path);
        return;
    }
    /* (with a service that stands alone, a start without the lock lists the
     * table for it; serve() takes the lock, or waits for it) */
    if (lr == 0) {
        kdp__pdir_ok(c->dir);
    }
    kdp__lifecycle_set_state(lc, KDP__LC_STARTING, "start");
    lc->owes_destroy = true;
    atomic_store(&lc->destroy_ran, false);
    if (!c->ops->refresh) {
        after_refresh(lc);
        return;
    }
    kdp__pjob *j = kdp__pjob_new(c->jobs, "refresh", lc);
    int r = -ENOMEM;
    if (j) {
        j->fn = fn_refresh;
        j->complete = complete_refresh;
        lc->job = KDP__LC_JOB_REFRESH;
        r = kdp__pjob_submit(j, 0);
    }
    if (r == 0) {
        return;
    }
    lc->job = KDP__LC_JOB_NONE;
    log_error("%s: cannot run the refresh callback: %s", c->resource, strerror(-r));
    schedule_start(lc, kdp__backoff_next(&lc->backoff));
}

/* ---- serving ---- */

static void serve(kdp__lifecycle *lc)
{
    kdp__lifecycle_cfg *c = &lc->cfg;
    char who[512];
    if (c->no_socket) {
        serve_on(lc);
        return;
    }
    if (!lc->locked) {
        int lr = kdp__lockfile_ensure(c->lock);
        if (lr == -EADDRINUSE) {
            fatal(lc, lr);
            return;
        }
        if (lr < 0) {
            dp_wait(lc, lr, "take the lock", c->lock->path);
            return;
        }
        lc->locked = true;
        kdp__pdir_ok(c->dir);
    }
    if (c->handover && kdp__handover_outranked(c->handover, who, sizeof(who))) {
        /* an instance of a higher generation serves: never register (the
         * kubelet would take this one for the newest); the stop follows */
        kdp__lifecycle_superseded(lc, who);
        return;
    }
    /* The watch first: a deletion of our socket right after we create it
     * (a starting kubelet cleaning the directory) must not go unseen. */
    kdp__pdir_watch(c->dir);
    int r =
        kdp__endpoint_open(c->loop, c->resource, c->socket_path, c->svcs, c->n_svcs, &lc->server);
    if (r < 0) {
        dp_wait(lc, r, "serve", c->socket_path);
        return;
    }
    kdp__pdir_stop_awaiting(c->dir);
    log_info("%s: serving on %s (%zu devices)", c->resource, c->socket_path,
             kdp__table_told(c->table)->n);
    serve_on(lc);
}

/* Serving begins (the server listening, if there is one). */
static void serve_on(kdp__lifecycle *lc)
{
    kdp__lifecycle_cfg *c = &lc->cfg;
    lc->starts++;
    for (size_t i = 0; i < c->n_svcs; i++) {
        c->svcs[i]->ops->serving(c->svcs[i], true);
    }
    run_on(lc);
    c->reg->ops->start(c->reg); /* reports WAITING or REGISTERING */
}

/* Closes what serving opened; leaves the lock held. */
static kdp__server *detach_server(kdp__lifecycle *lc)
{
    kdp__lifecycle_cfg *c = &lc->cfg;
    c->reg->ops->stop(c->reg);
    for (size_t i = 0; i < c->n_svcs; i++) {
        c->svcs[i]->ops->serving(c->svcs[i], false);
    }
    if (!c->ext) {
        run_off(lc); /* with a service that stands alone, the stop only */
    }
    kdp__timer_stop(lc->start_timer);
    kdp__timer_stop(lc->restart_timer);
    kdp__restarts_unregistered(&lc->restarts);
    kdp__server *s = lc->server;
    lc->server = NULL;
    return s;
}

/* For a restart: the kubelet is gone or going, close at once. */
static void stop_serving(kdp__lifecycle *lc)
{
    lc->peer_connected = false;
    kdp__server_free(detach_server(lc)); /* ends every stream; removes our socket */
}

/* ---- stopping and restarting ---- */

static void on_drained(kdp__server *s, void *ud)
{
    kdp__lifecycle *lc = ud;
    lc->draining = NULL;
    kdp__server_free(s);
    after_job(lc); /* STOPPING: destroy next */
}

static void finish_stop(kdp__lifecycle *lc)
{
    kdp__pdir_stop_awaiting(lc->cfg.dir);
    kdp__pdir_unwatch(lc->cfg.dir);
    kdp__timer_stop(lc->start_timer);
    run_off(lc);
    release_lock(lc);
    kdp__lifecycle_set_state(lc, KDP__LC_STOPPED, "stop");
    log_info("%s: stopped", lc->cfg.resource);
    lc->cfg.stopped(lc->cfg.stopped_ud, 0);
}

static void fn_destroy(kdp__pjob *j)
{
    kdp__lifecycle *lc = j->owner;
    atomic_store(&lc->destroy_ran, true); /* kdp_plugin_free must not run it again */
    lc->cfg.ops->destroy(lc->cfg.owner, lc->cfg.ud);
}

static void complete_destroy(kdp__pjob *j, bool timed_out)
{
    (void)timed_out; /* a destroy that overruns is left behind; we go on */
    kdp__lifecycle *lc = j->owner;
    lc->job = KDP__LC_JOB_NONE;
    lc->owes_destroy = false;
    after_job(lc);
}

/* Starts the destroy job a start owes. Returns true if it runs (its
 * completion calls after_job), false if there is nothing to wait for (no
 * destroy op, or it could not start): owes_destroy is then cleared. */
static bool start_destroy(kdp__lifecycle *lc)
{
    if (lc->cfg.ops->destroy) {
        kdp__pjob *j = kdp__pjob_new(lc->cfg.jobs, "destroy", lc);
        if (j) {
            j->fn = fn_destroy;
            j->complete = complete_destroy;
            lc->job = KDP__LC_JOB_DESTROY;
            if (kdp__pjob_submit(j, 0) == 0) {
                return true;
            }
            lc->job = KDP__LC_JOB_NONE;
        }
        log_error("%s: cannot run the destroy callback", lc->cfg.resource);
    }
    lc->owes_destroy = false;
    return false;
}

/* The final stop, one step at a time: the server drains (GOAWAY, the
 * socket removed), destroy runs, then STOPPED. Returns true while a step
 * is under way (its end calls after_job again). */
static bool stop_step(kdp__lifecycle *lc)
{
    if (lc->owes_destroy) {
        if (kdp__lifecycle_state(lc) != KDP__LC_STOPPING) {
            kdp__lifecycle_set_state(lc, KDP__LC_STOPPING, "stop");
            kdp__server *s = detach_server(lc);
            run_off(lc);
            if (s) {
                lc->draining = s;
                kdp__server_shutdown(s, DRAIN_LINGER_US, on_drained, lc);
                return true;
            }
        }
        if (start_destroy(lc)) {
            return true;
        }
    }
    if (kdp__lifecycle_state(lc) != KDP__LC_STOPPED) {
        finish_stop(lc);
    }
    return false;
}

/* A restart: stop serving, destroy, then start again, at once or after the
 * restart backoff. Returns true while destroy runs. */
static bool restart_step(kdp__lifecycle *lc)
{
    stop_serving(lc); /* also stops a start that was waiting */
    if (lc->owes_destroy) {
        kdp__lifecycle_set_state(lc, KDP__LC_STARTING, lc->restart_why);
        if (start_destroy(lc)) {
            return true;
        }
    }
    lc->pending = KDP__LC_PENDING_NONE;
    uint64_t delay = kdp__restarts_delay(&lc->restarts, lc->cfg.reg);
    if (delay == 0) {
        kdp__lifecycle_start(lc);
        return false;
    }
    kdp__restarts_say_delay(&lc->restarts, lc->cfg.resource, delay);
    kdp__lifecycle_set_state(lc, KDP__LC_STARTING, "restart backoff");
    schedule_start(lc, delay);
    return false;
}

/* Called whenever a lifecycle job or step is done: acts on what is
 * pending. Never recursive: each step either waits for a callback (a job's
 * completion, the drain's end) or finishes here. */
static void after_job(kdp__lifecycle *lc)
{
    if (lc->job != KDP__LC_JOB_NONE) {
        return;
    }
    if (lc->pending == KDP__LC_PENDING_STOP) {
        (void)stop_step(lc);
    } else if (lc->pending == KDP__LC_PENDING_RESTART) {
        (void)restart_step(lc);
    }
}

static bool restartable(const kdp__lifecycle *lc)
{
    kdp__lc_state s = kdp__lifecycle_state(lc);
    return s != KDP__LC_IDLE && s != KDP__LC_STOPPING && s != KDP__LC_STOPPED &&
           lc->pending == KDP__LC_PENDING_NONE;
}

/* Restart triggers arrive from inside server, watch and stream callbacks,
 * so the restart itself runs from a zero-delay timer: never under the feet
 * of the code that noticed it, and the two or three signals of one kubelet
 * restart become one restart. */
void kdp__lifecycle_restart(kdp__lifecycle *lc, const char *why)
{
    if (!restartable(lc) || kdp__timer_armed(lc->restart_timer)) {
        return;
    }
    lc->restart_why = why;
    kdp__timer_start(lc->restart_timer, 0);
}

static void on_restart_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__lifecycle *lc = ud;
    if (!restartable(lc)) {
        return;
    }
    log_info("%s: restarting: %s", lc->cfg.resource, lc->restart_why);
    kdp__restarts_note(&lc->restarts, kdp__lifecycle_state(lc) == KDP__LC_REGISTERED, lc->cfg.reg,
                       kdp__now_us());
    publish_restarts(lc);
    lc->pending = KDP__LC_PENDING_RESTART;
    after_job(lc); /* now, or when the running job is done */
}

void kdp__lifecycle_stop(kdp__lifecycle *lc)
{
    kdp__lc_state s = kdp__lifecycle_state(lc);
    if (lc->pending == KDP__LC_PENDING_STOP || s == KDP__LC_STOPPED) {
        return;
    }
    lc->pending = KDP__LC_PENDING_STOP;
    if (s == KDP__LC_IDLE) {
        kdp__lifecycle_set_state(lc, KDP__LC_STOPPED, "stopped before it started");
        lc->cfg.stopped(lc->cfg.stopped_ud, 0);
        return;
    }
    after_job(lc);
}

void kdp__lifecycle_teardown_serving(kdp__lifecycle *lc)
{
    stop_serving(lc); /* open calls are cancelled: their jobs are abandoned */
    run_off(lc);
    kdp__server_free(lc->draining);
    lc->draining = NULL;
}

void kdp__lifecycle_teardown_finish(kdp__lifecycle *lc)
{
    /* The worker is gone: destroy runs here if its job never started. */
    if (lc->owes_destroy && lc->cfg.ops->destroy && !atomic_load(&lc->destroy_ran)) {
        lc->cfg.ops->destroy(lc->cfg.owner, lc->cfg.ud);
    }
    lc->owes_destroy = false;
    kdp__pdir_done(lc->cfg.dir);
    release_lock(lc);
    kdp__timer_stop(lc->start_timer);
    kdp__timer_stop(lc->restart_timer);
    kdp__timer_stop(lc->supersede_timer);
    if (kdp__lifecycle_state(lc) != KDP__LC_STOPPED) {
        atomic_store(&lc->state, KDP__LC_STOPPED); /* freed: no transition rules apply */
    }
}

/* ---- life ---- */

static void on_supersede_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__lifecycle_stop(ud);
}

int kdp__lifecycle_set_reg(kdp__lifecycle *lc, kdp__reg *reg, bool no_socket)
{
    if (kdp__lifecycle_state(lc) != KDP__LC_IDLE) {
        return -EBUSY;
    }
    lc->cfg.reg = reg;
    lc->cfg.no_socket = no_socket;
    return 0;
}

int kdp__lifecycle_add_svc(kdp__lifecycle *lc, kdp__svc *svc)
{
    if (kdp__lifecycle_state(lc) != KDP__LC_IDLE) {
        return -EBUSY;
    }
    if (lc->cfg.n_svcs >= KDP__LC_MAX_SVCS) {
        return -E2BIG;
    }
    lc->cfg.svcs[lc->cfg.n_svcs++] = svc;
    return 0;
}

int kdp__lifecycle_set_ext(kdp__lifecycle *lc, kdp__svc *svc)
{
    if (kdp__lifecycle_state(lc) != KDP__LC_IDLE) {
        return -EBUSY;
    }
    if (lc->cfg.ext) {
        return -EALREADY;
    }
    lc->cfg.ext = svc;
    return 0;
}

int kdp__lifecycle_init(kdp__lifecycle *lc, const kdp__lifecycle_cfg *cfg)
{
    memset(lc, 0, sizeof(*lc));
    lc->cfg = *cfg;
    atomic_store(&lc->state, KDP__LC_IDLE);
    kdp__backoff_init(&lc->backoff, 50000, 10000000, 0);
    kdp__restarts_init(&lc->restarts);
    int r = kdp__timer_new(cfg->loop, on_start_timer, lc, &lc->start_timer);
    if (r == 0) {
        r = kdp__timer_new(cfg->loop, on_restart_timer, lc, &lc->restart_timer);
    }
    if (r == 0) {
        r = kdp__timer_new(cfg->loop, on_supersede_timer, lc, &lc->supersede_timer);
    }
    return r;
}

void kdp__lifecycle_done(kdp__lifecycle *lc)
{
    kdp__timer_free(lc->start_timer);
    kdp__timer_free(lc->restart_timer);
    kdp__timer_free(lc->supersede_timer);
    lc->start_timer = NULL;
    lc->restart_timer = NULL;
    lc->supersede_timer = NULL;
}
