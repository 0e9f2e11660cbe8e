/* SPDX-License-Identifier: MIT */
#include "plugin/observe.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/expfmt.h"
#include "base/log.h"
#include "plugin/builtins.h"
#include "plugin/metrics.h"

#define ADDRESS_MAX 128

typedef struct observe {
    kdp_ctx *ctx;
    kdp__registry reg;
    kdp__http *http;
    bool serve_called;  /* kdp_ctx_serve_metrics was: $KDP_METRICS_ADDRESS is not read */
    int env_error;      /* $KDP_METRICS_ADDRESS could not be served: every run fails with it */
    pthread_mutex_t mu; /* address, for kdp_ctx_get_metrics_address from any thread */
    char address[ADDRESS_MAX];
} observe;

static void addon_free(kdp_ctx *ctx);
static int addon_start(kdp_ctx *ctx);

static const kdp__ctx_addon addon = {.start = addon_start, .free = addon_free};

const kdp__ctx_addon *kdp__observe_addon(void)
{
    return &addon;
}

/* The context's (made on first use: loop thread, or before it runs). */
static observe *get(kdp_ctx *ctx)
{
    observe *o = atomic_load(&ctx->addon_data);
    if (o) {
        return o;
    }
    o = calloc(1, sizeof(*o));
    if (!o) {
        return NULL;
    }
    o->ctx = ctx;
    kdp__registry_init(&o->reg);
    pthread_mutex_init(&o->mu, NULL);
    ctx->addon = &addon;
    atomic_store(&ctx->addon_data, o);
    return o;
}

static void addon_free(kdp_ctx *ctx)
{
    observe *o = atomic_load(&ctx->addon_data);
    if (!o) {
        return;
    }
    atomic_store(&ctx->addon_data, NULL);
    kdp__http_free(o->http); /* the unix socket's file removed */
    kdp__registry_done(&o->reg);
    pthread_mutex_destroy(&o->mu);
    free(o);
}

/* ---- the pages ---- */

/* Every plugin's view. Returns 0 (*ret NULL when there is none) or
 * -ENOMEM. */
static int views(kdp_ctx *ctx, kdp__pview **ret, size_t *ret_n)
{
    size_t n = 0;
    kdp__link *l;
    kdp__list_for_each(l, &ctx->members)
    {
        n++;
    }
    *ret = NULL;
    *ret_n = 0;
    if (n == 0) {
        return 0;
    }
    kdp__pview *v = calloc(n, sizeof(*v));
    if (!v) {
        return -ENOMEM; /* not "no plugins" */
    }
    size_t i = 0;
    kdp__list_for_each(l, &ctx->members)
    {
        kdp__member *m = KDP__CONTAINER_OF(l, kdp__member, link);
        m->ops->view(m, &v[i++]);
    }
    *ret = v;
    *ret_n = n;
    return 0;
}

static void text(kdp__http_resp *resp, int status, const char *body)
{
    resp->status = status;
    resp->body = strdup(body);
    resp->len = resp->body ? strlen(body) : 0;
}

void kdp__observe_handle(kdp_ctx *ctx, const char *method, const char *path, kdp__http_resp *resp)
{
    bool metrics = strcmp(path, "/metrics") == 0;
    bool healthz = strcmp(path, "/healthz") == 0;
    if (!metrics && !healthz) {
        text(resp, 404, "not found: kdp serves /metrics and /healthz\n");
        return;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        text(resp, 405, "method not allowed: GET or HEAD\n");
        resp->allow = "GET, HEAD";
        return;
    }
    size_t n = 0;
    kdp__pview *v = NULL;
    if (views(ctx, &v, &n) < 0) {
        text(resp, 500, "out of memory\n");
        return;
    }
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    int status = 200;
    if (metrics) {
        kdp__builtins_render(v, n, &w);
        observe *o = atomic_load(&ctx->addon_data);
        if (o) {
            kdp__registry_render(&o->reg, &w);
        }
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    } else {
        status = kdp__builtins_healthz(v, n, &w);
    }
    free(v);
    resp->body = kdp__expfmt_take(&w, &resp->len);
    if (!resp->body) {
        text(resp, 500, "out of memory\n");
        return;
    }
    resp->status = status;
}

static void on_request(const char *method, const char *path, kdp__http_resp *resp, void *ud)
{
    observe *o = ud;
    kdp__observe_handle(o->ctx, method, path, resp);
}

/* ---- serving ---- */

static int serve(observe *o, const char *address, const char *from)
{
    if (o->http) {
        log_error("%s: the context serves metrics on %s already", from, o->address);
        return -EALREADY;
    }
    kdp__http *h = NULL;
    int r = kdp__http_listen(o->ctx->loop, address, NULL, on_request, o, &h);
    if (r < 0) {
        if (r != -EINVAL) { /* -EINVAL: logged with the accepted forms */
            log_error("%s: cannot serve metrics on \"%.200s\": %s", from, address, strerror(-r));
        }
        return r;
    }
    o->http = h;
    pthread_mutex_lock(&o->mu);
    snprintf(o->address, sizeof(o->address), "%s", kdp__http_address(h));
    pthread_mutex_unlock(&o->mu);
    log_info("metrics: serving /metrics and /healthz on %s", o->address);
    return 0;
}

static int addon_start(kdp_ctx *ctx)
{
    observe *o = atomic_load(&ctx->addon_data);
    if (o && o->env_error) {
        return o->env_error;
    }
    if (o && (o->serve_called || o->http)) {
        return 0;
    }
    const char *env = getenv(KDP_METRICS_ADDRESS_ENV);
    if (!env || !*env) {
        return 0;
    }
    o = get(ctx);
    if (!o) {
        return -ENOMEM;
    }
    int r = serve(o, env, "$" KDP_METRICS_ADDRESS_ENV);
    if (r < 0) {
        o->env_error = r;
        log_error("metrics: $%s=\"%.200s\" cannot be served (%s): not running",
                  KDP_METRICS_ADDRESS_ENV, env, strerror(-r));
    }
    return r;
}

KDP_EXPORT int kdp_ctx_serve_metrics(kdp_ctx *ctx, const char *address)
{
    if (!ctx || !address) {
        log_error("kdp_ctx_serve_metrics: %s is NULL", !ctx ? "ctx" : "address");
        return -EINVAL;
    }
    int r = kdp__ctx_check_caller(ctx, "kdp_ctx_serve_metrics",
                                  "call it before the context runs, or on its thread "
                                  "(kdp_ctx_post() runs a function there)");
    if (r < 0) {
        return r;
    }
    observe *o = get(ctx);
    if (!o) {
        return -ENOMEM;
    }
    o->serve_called = true;
    return serve(o, address, "kdp_ctx_serve_metrics");
}

KDP_EXPORT int kdp_ctx_get_metrics_address(kdp_ctx *ctx, char *buf, size_t len)
{
    if (!ctx || !buf) {
        return -EINVAL;
    }
    observe *o = atomic_load(&ctx->addon_data);
    if (!o) {
        return -ENOTCONN;
    }
    pthread_mutex_lock(&o->mu);
    size_t n = strlen(o->address);
    int r = n == 0 ? -ENOTCONN : n >= len ? -ENOSPC : (int)n;
    if (r > 0) {
        memcpy(buf, o->address, n + 1);
    }
    pthread_mutex_unlock(&o->mu);
    return r;
}

KDP_EXPORT int kdp_metric_new(kdp_ctx *ctx, kdp_metric_type type, const char *name,
                              const char *help, const char *const *labels, size_t n_labels,
                              kdp_metric **ret)
{
    if (!ctx || !ret) {
        log_error("kdp_metric_new: %s is NULL", !ctx ? "ctx" : "ret");
        return -EINVAL;
    }
    int r = kdp__ctx_check_caller(ctx, "kdp_metric_new",
                                  "make metrics before the context runs, or on its thread "
                                  "(kdp_ctx_post() runs a function there)");
    if (r < 0) {
        return r;
    }
    observe *o = get(ctx);
    if (!o) {
        return -ENOMEM;
    }
    return kdp__registry_add(&o->reg, type, name, help, labels, n_labels, ret);
}
