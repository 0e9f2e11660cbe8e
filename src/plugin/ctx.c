/* SPDX-License-Identifier: MIT */
/* ctx: see ctx.h. */
#include "plugin/ctx.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "runtime/worker.h"

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
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &ctx->members)
    {
        kdp__member *m = KDP__CONTAINER_OF(l, kdp__member, link);
        m->ops->stop(m);
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
    kdp__link_init(&ctx->members);
    int r = kdp__loop_new(&ctx->loop);
    if (r == 0) {
        r = kdp__wakeup_new(ctx->loop, on_stop_wake, ctx, &ctx->stop_wake);
    }
    if (r == 0) {
        r = kdp__posts_init(&ctx->posts, ctx->loop, ctx);
        ctx->posts_made = r == 0;
    }
    if (r < 0) {
        kdp_ctx_free(ctx);
        return r;
    }
    *ret = ctx;
    return 0;
}

int kdp__ctx_check_caller(kdp_ctx *ctx, const char *fn, const char *instead)
{
    if (kdp__worker_current()) {
        log_error("%s called from inside a callback: refused; %s", fn, instead);
        return -EPERM;
    }
    if (!ctx) {
        return 0;
    }
    int owner = atomic_load(&ctx->owner);
    int self = (int)gettid();
    if (owner != 0 && owner != self) {
        log_error("%s called from thread %d while thread %d runs the context: refused; %s", fn,
                  self, owner, instead);
        return -EBUSY;
    }
    if (owner == self && ctx->dispatching) {
        log_error("%s called from inside kdp's event loop (a log sink?): refused; %s", fn, instead);
        return -EPERM;
    }
    return 0;
}

/* A posted function may not free, run or dispatch the context it runs in. */
static int refuse_in_posts(const kdp_ctx *ctx, const char *fn)
{
    if (!ctx->in_posts) {
        return 0;
    }
    log_error("%s called from a function kdp_ctx_post() runs: refused (the context runs it); "
              "stop it with kdp_ctx_stop() and free it once kdp_ctx_run() has returned",
              fn);
    return -EPERM;
}

KDP_EXPORT void kdp_ctx_free(kdp_ctx *ctx)
{
    if (!ctx ||
        kdp__ctx_check_caller(ctx, "kdp_ctx_free",
                              "call kdp_ctx_stop() (thread-safe), then free the context "
                              "once kdp_ctx_run() has returned") < 0 ||
        refuse_in_posts(ctx, "kdp_ctx_free") < 0) { /* its own thread: no race */
        return;
    }
    if (ctx->posts_made) { /* before the plugins go: a waiting call may free one */
        ctx->in_posts = true;
        kdp__posts_done(&ctx->posts);
        ctx->in_posts = false;
    }
    kdp__link *l;
    while ((l = kdp__list_first(&ctx->members))) {
        kdp__member *m = KDP__CONTAINER_OF(l, kdp__member, link);
        m->ops->free(m); /* detaches itself */
    }
    if (ctx->addon) {
        ctx->addon->free(ctx);
    }
    kdp__wakeup_free(ctx->stop_wake);
    kdp__loop_free(ctx->loop);
    free(ctx);
}

int kdp__ctx_attach(kdp_ctx *ctx, kdp__member *m)
{
    kdp__link *l;
    kdp__list_for_each(l, &ctx->members)
    {
        const kdp__member *o = KDP__CONTAINER_OF(l, kdp__member, link);
        if (strcmp(o->key, m->key) == 0) {
            log_error("two plugins of one context on the same socket %s", m->key);
            return -EADDRINUSE;
        }
    }
    kdp__list_append(&ctx->members, &m->link);
    return 0;
}

void kdp__ctx_detach(kdp_ctx *ctx, kdp__member *m)
{
    (void)ctx;
    kdp__link_remove(&m->link);
}

static bool all_stopped(const kdp_ctx *ctx)
{
    const kdp__link *l;
    kdp__list_for_each(l, &ctx->members)
    {
        const kdp__member *m = KDP__CONTAINER_OF(l, kdp__member, link);
        if (!m->ops->stopped(m)) {
            return false;
        }
    }
    return true;
}

void kdp__ctx_member_stopped(kdp_ctx *ctx, int error)
{
    if (error < 0 && ctx->error == 0) {
        ctx->error = error;
    }
    if (error < 0) {
        kdp_ctx_stop(ctx); /* a fatal error in one plugin stops the process */
    }
}

/* The add-on's start, once, before the first start of the plugins. */
static int start_addon(kdp_ctx *ctx)
{
    if (ctx->addon_started || !ctx->addon) {
        return 0;
    }
    int r = ctx->addon->start(ctx);
    ctx->addon_started = r == 0;
    return r;
}

/* Starts every plugin not started yet (plugins may be added between
 * dispatches). */
static void start_all(kdp_ctx *ctx)
{
    ctx->started = true;
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &ctx->members)
    {
        kdp__member *m = KDP__CONTAINER_OF(l, kdp__member, link);
        if (!m->ops->idle(m)) {
            continue;
        }
        if (ctx->stop_requested) {
            m->ops->stop(m); /* IDLE goes straight to STOPPED */
        } else {
            m->ops->start(m);
        }
    }
}

KDP_EXPORT int kdp_ctx_get_fd(kdp_ctx *ctx)
{
    return ctx ? kdp__loop_fd(ctx->loop) : -EINVAL;
}

/* Runs one turn of the loop (timeout_ms as kdp__loop_dispatch's). */
static int turn(kdp_ctx *ctx, int timeout_ms)
{
    ctx->dispatching = true;
    int r = kdp__loop_dispatch(ctx->loop, timeout_ms);
    ctx->dispatching = false;
    ctx->in_posts = true;
    size_t ran = r >= 0 ? kdp__posts_run(&ctx->posts) : 0;
    ctx->in_posts = false;
    if (ran > 0) {
        start_all(ctx); /* a call may have added a plugin */
    }
    return r;
}

KDP_EXPORT int kdp_ctx_post(kdp_ctx *ctx, kdp_post_fn fn, void *arg)
{
    if (!ctx || !fn) {
        log_error("kdp_ctx_post: %s is NULL", !ctx ? "the context" : "the function");
        return -EINVAL;
    }
    return kdp__posts_add(&ctx->posts, fn, arg);
}

KDP_EXPORT int kdp_ctx_dispatch(kdp_ctx *ctx)
{
    if (!ctx) {
        return -EINVAL;
    }
    int r = kdp__ctx_check_caller(ctx, "kdp_ctx_dispatch",
                                  "a context is dispatched by one thread, outside callbacks");
    if (r == 0) {
        r = refuse_in_posts(ctx, "kdp_ctx_dispatch"); /* its own thread: no race */
    }
    if (r < 0) {
        return r;
    }
    int self = (int)gettid();
    int none = 0;
    (void)atomic_compare_exchange_strong(&ctx->owner, &none, self);
    r = start_addon(ctx);
    if (r < 0) {
        atomic_store(&ctx->owner, 0);
        return r;
    }
    start_all(ctx);
    r = turn(ctx, 0);
    if (r > 0) {
        r = 0; /* events handled */
    }
    if (r == 0 && ctx->started && all_stopped(ctx)) {
        r = ctx->error < 0 ? ctx->error : 1;
    }
    if (r != 0) {
        atomic_store(&ctx->owner, 0); /* finished (or failed): any thread may free it now */
    }
    return r;
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
    if (kdp__worker_current()) {
        log_error("kdp_ctx_run called from inside a callback: refused (a context runs on one "
                  "thread, never inside its own callbacks)");
        return -EPERM;
    }
    int self = (int)gettid();
    int none = 0;
    if (!atomic_compare_exchange_strong(&ctx->owner, &none, self)) {
        if (none == self && refuse_in_posts(ctx, "kdp_ctx_run") < 0) {
            return -EPERM; /* from a posted function, on the thread that runs it */
        }
        log_error("kdp_ctx_run: the context is already running (on thread %d%s): refused; a "
                  "context runs once at a time",
                  none, none == self ? ", this one" : "");
        return -EBUSY;
    }
    int r = 0;
    if (kdp__list_empty(&ctx->members)) {
        log_error("kdp_ctx_run: no plugin to run: add one with kdp_plugin_new() first");
        r = -EINVAL;
    } else if (ctx->started && all_stopped(ctx)) {
        log_error("kdp_ctx_run: every plugin of this context has already run and stopped: a "
                  "stopped plugin does not start again; create a new one with kdp_plugin_new()");
        r = -ESHUTDOWN;
    } else {
        r = start_addon(ctx);
    }
    if (r < 0) {
        atomic_store(&ctx->owner, 0);
        return r;
    }
    struct sigaction old[2];
    install_signals(ctx, old);
    start_all(ctx);
    while (!all_stopped(ctx)) { /* every plugin stopped: by request, signal or error */
        r = turn(ctx, -1);
        if (r < 0) {
            log_error("event loop: %s", strerror(-r));
            break;
        }
    }
    restore_signals(old);
    atomic_store(&ctx->owner, 0);
    return r < 0 ? r : ctx->error;
}
