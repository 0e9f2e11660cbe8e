/* SPDX-License-Identifier: MIT */
/* ctx: the event loop shared by several plugins, its run/dispatch/stop, and
 * SIGTERM/SIGINT handling for kdp_ctx_run(). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"
#include "plugin_int.h"

/* The context whose kdp_ctx_run() owns SIGTERM/SIGINT right now. */
static kdp_ctx *_Atomic signal_ctx;

static void on_stop_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    kdp_ctx *ctx = ud;
    if (ctx->stop_requested) {
        return;
    }
    ctx->stop_requested = true;
    log_info("stopping");
    for (kdp_plugin *p = ctx->plugins; p; p = p->next) {
        kdp__plugin_begin_stop(p);
    }
}

KDP_EXPORT int kdp_ctx_new(kdp_ctx **ret)
{
    if (!ret) {
        return -EINVAL;
    }
    kdp_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        return -ENOMEM;
    }
    int r = kdp__loop_new(&ctx->loop);
    if (r == 0) {
        r = kdp__wakeup_new(ctx->loop, on_stop_wake, ctx, &ctx->stop_wake);
    }
    if (r < 0) {
        kdp_ctx_free(ctx);
        return r;
    }
    *ret = ctx;
    return 0;
}

KDP_EXPORT void kdp_ctx_free(kdp_ctx *ctx)
{
    if (!ctx) {
        return;
    }
    while (ctx->plugins) {
        kdp_plugin_free(ctx->plugins); /* unlinks itself */
    }
    kdp__wakeup_free(ctx->stop_wake);
    kdp__loop_free(ctx->loop);
    free(ctx);
}

static bool all_stopped(const kdp_ctx *ctx)
{
    for (const kdp_plugin *p = ctx->plugins; p; p = p->next) {
        if (p->state != P_STOPPED) {
            return false;
        }
    }
    return true;
}

void kdp__ctx_plugin_stopped(kdp_ctx *ctx, kdp_plugin *p, int error)
{
    (void)p;
    if (error < 0 && ctx->error == 0) {
        ctx->error = error;
    }
    if (error < 0) {
        kdp_ctx_stop(ctx); /* a fatal error in one plugin stops the process */
    }
}

/* Starts every plugin not started yet (plugins may be added between
 * dispatches). */
static void start_all(kdp_ctx *ctx)
{
    ctx->started = true;
    for (kdp_plugin *p = ctx->plugins; p; p = p->next) {
        if (ctx->stop_requested) {
            if (p->state == P_IDLE) {
                kdp__plugin_begin_stop(p); /* IDLE goes straight to STOPPED */
            }
            continue;
        }
        if (p->state == P_IDLE && !p->stop_pending) {
            kdp__plugin_start(p);
        }
    }
}

KDP_EXPORT int kdp_ctx_get_fd(kdp_ctx *ctx)
{
    return ctx ? kdp__loop_fd(ctx->loop) : -EINVAL;
}

KDP_EXPORT int kdp_ctx_dispatch(kdp_ctx *ctx)
{
    if (!ctx) {
        return -EINVAL;
    }
    start_all(ctx);
    int r = kdp__loop_dispatch(ctx->loop, 0);
    if (r < 0) {
        return r;
    }
    if (ctx->started && all_stopped(ctx)) {
        return ctx->error < 0 ? ctx->error : 1;
    }
    return 0;
}

KDP_EXPORT int kdp_ctx_stop(kdp_ctx *ctx)
{
    if (!ctx) {
        return -EINVAL;
    }
    kdp__wakeup_signal(ctx->stop_wake); /* async-signal-safe */
    return 0;
}

static void on_signal(int signo)
{
    (void)signo;
    kdp_ctx *ctx = atomic_load(&signal_ctx);
    if (ctx) {
        kdp__wakeup_signal(ctx->stop_wake);
    }
}

/* A plain sigaction handler rather than a signalfd: it works whichever thread
 * the signal lands on, threads the application made before us included. */
static void install_signals(kdp_ctx *ctx, struct sigaction old[2])
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    atomic_store(&signal_ctx, ctx);
    sigaction(SIGTERM, &sa, &old[0]);
    sigaction(SIGINT, &sa, &old[1]);
}

static void restore_signals(struct sigaction old[2])
{
    sigaction(SIGTERM, &old[0], NULL);
    sigaction(SIGINT, &old[1], NULL);
    atomic_store(&signal_ctx, NULL);
}

KDP_EXPORT int kdp_ctx_run(kdp_ctx *ctx)
{
    if (!ctx) {
        return -EINVAL;
    }
    if (!ctx->plugins) {
        log_error("kdp_ctx_run: no plugin to run");
        return -EINVAL;
    }
    struct sigaction old[2];
    install_signals(ctx, old);
    start_all(ctx);
    int r = 0;
    while (!all_stopped(ctx)) { /* every plugin stopped: by request, signal or error */
        r = kdp__loop_dispatch(ctx->loop, -1);
        if (r < 0) {
            log_error("event loop: %s", strerror(-r));
            break;
        }
    }
    restore_signals(old);
    return r < 0 ? r : ctx->error;
}
