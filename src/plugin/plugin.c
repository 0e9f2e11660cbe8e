/* SPDX-License-Identifier: MIT */
/* plugin: the public kdp_plugin calls (construction, thread-safe setters).
 * The state machine is in lifecycle.c, the RPCs in service.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/validate.h"
#include "plugin/jobs.h"
#include "plugin/lifecycle.h"
#include "plugin/plugin_int.h"
#include "plugin/response.h"

static char *join(const char *dir, const char *name)
{
    char *s = NULL;
    size_t n = strlen(dir);
    bool slash = n > 0 && dir[n - 1] == '/';
    return asprintf(&s, "%s%s%s", dir, slash ? "" : "/", name) < 0 ? NULL : s;
}

static const char *plugin_dir(const kdp_config *cfg)
{
    if (cfg->device_plugin_dir && *cfg->device_plugin_dir) {
        return cfg->device_plugin_dir;
    }
    const char *env = getenv(KDP_DEVICE_PLUGIN_DIR_ENV);
    return env && *env ? env : KDP_DEVICE_PLUGIN_DIR;
}

static int check_config(const kdp_config *cfg)
{
    const char *why = NULL;
    if (!cfg->resource_name || kdp__validate_resource_name(cfg->resource_name, &why) < 0) {
        log_error("invalid resource name \"%s\": %s",
                  cfg->resource_name ? cfg->resource_name : "(null)", why ? why : "missing");
        return -EINVAL;
    }
    if (!cfg->socket_name || kdp__validate_socket_name(cfg->socket_name, &why) < 0) {
        log_error("invalid socket name \"%s\": %s", cfg->socket_name ? cfg->socket_name : "(null)",
                  why ? why : "missing");
        return -EINVAL;
    }
    if (cfg->env_name && kdp__validate_env_key(cfg->env_name, &why) < 0) {
        log_error("invalid env_name \"%s\": %s", cfg->env_name, why);
        return -EINVAL;
    }
    const char *dir = plugin_dir(cfg);
    if (kdp__validate_abs_path(dir, &why) < 0) {
        log_error("invalid device-plugin directory \"%s\": %s", dir, why);
        return -EINVAL;
    }
    return 0;
}

static void on_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    kdp_plugin *p = ud;
    if (atomic_exchange(&p->stop_wanted, false)) {
        kdp__plugin_begin_stop(p);
        return;
    }
    kdp__plugin_sync(p);
}

static int fill_strings(kdp_plugin *p, const kdp_config *cfg)
{
    const char *dir = plugin_dir(cfg);
    p->resource = strdup(cfg->resource_name);
    p->socket_name = strdup(cfg->socket_name);
    p->dir = strdup(dir);
    p->socket_path = join(dir, cfg->socket_name);
    p->kubelet_path = join(dir, KDP_KUBELET_SOCKET);
    char *lock_name = NULL;
    if (asprintf(&lock_name, "%s.lock", cfg->socket_name) >= 0) {
        p->lock_path = join(dir, lock_name);
        free(lock_name);
    }
    p->env_name = cfg->env_name ? strdup(cfg->env_name) : kdp__default_env_name(p->resource);
    if (!p->resource || !p->socket_name || !p->dir || !p->socket_path || !p->kubelet_path ||
        !p->lock_path || !p->env_name) {
        return -ENOMEM;
    }
    if (strlen(p->socket_path) > KDP_SOCKET_PATH_MAX) {
        log_error("socket path %s is too long for a unix socket (107 bytes at most)",
                  p->socket_path);
        return -ENAMETOOLONG;
    }
    return 0;
}

static int attach(kdp_plugin *p, kdp_ctx *ctx)
{
    if (!ctx) {
        int r = kdp_ctx_new(&ctx);
        if (r < 0) {
            return r;
        }
        p->own_ctx = true;
    }
    p->ctx = ctx;
    for (kdp_plugin *q = ctx->plugins; q; q = q->next) {
        if (strcmp(q->socket_path, p->socket_path) == 0) {
            log_error("two plugins of one context on the same socket %s", p->socket_path);
            return -EADDRINUSE;
        }
    }
    int r = kdp__worker_new(ctx->loop, KDP_MAX_STUCK_CALLBACKS, &p->worker);
    if (r == 0) {
        r = kdp__wakeup_new(ctx->loop, on_wake, p, &p->wake);
    }
    if (r == 0) {
        r = kdp__timer_new(ctx->loop, kdp__plugin_on_retry, p, &p->retry_timer);
    }
    if (r == 0) {
        r = kdp__timer_new(ctx->loop, kdp__plugin_on_rescan, p, &p->rescan_timer);
    }
    if (r == 0) {
        r = kdp__timer_new(ctx->loop, kdp__plugin_on_restart, p, &p->restart_timer);
    }
    if (r < 0) {
        return r;
    }
    p->next = ctx->plugins;
    ctx->plugins = p;
    return 0;
}

KDP_EXPORT int kdp_plugin_new(kdp_plugin **ret, kdp_ctx *ctx, const kdp_config *cfg,
                              const kdp_ops *ops, void *ud)
{
    if (!ret || !cfg) {
        log_error("kdp_plugin_new: %s is NULL", !ret ? "ret" : "the config (cfg)");
        return -EINVAL;
    }
    int r = kdp__ctx_check_caller(ctx, "kdp_plugin_new",
                                  "create plugins before the context runs, or on its thread");
    if (r < 0) {
        return r;
    }
    r = check_config(cfg);
    if (r < 0) {
        return r;
    }
    kdp_plugin *p = calloc(1, sizeof(*p));
    if (!p) {
        return -ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    kdp__devtab_init(&p->shared);
    kdp__devtab_init(&p->tab);
    p->lock_fd = -1;
    p->ud = ud;
    if (ops) {
        p->ops = *ops;
    }
    p->cb_timeout_ms =
        cfg->callback_timeout_ms ? cfg->callback_timeout_ms : KDP_DEFAULT_CB_TIMEOUT_MS;
    p->rescan_ms = cfg->rescan_interval_ms;
    kdp__backoff_init(&p->backoff, 50000, 10000000, 0);
    kdp__backoff_init(&p->restart_backoff, KDP_RESTART_BACKOFF_MIN_US, KDP_RESTART_BACKOFF_MAX_US,
                      0);
    kdp__backoff_init(&p->list_backoff, KDP_LIST_RETRY_MIN_US, KDP_LIST_RETRY_MAX_US, 0);
    r = fill_strings(p, cfg);
    if (r == 0) {
        r = attach(p, ctx);
    }
    if (r < 0) {
        kdp__plugin_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

static void detach(kdp_plugin *p)
{
    if (!p->ctx) {
        return;
    }
    for (kdp_plugin **pp = &p->ctx->plugins; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
}

/* Plugins freed while one of their callbacks still ran past the wait (see
 * kdp_plugin_free): their memory stays, for that callback. */
static pthread_mutex_t left_behind_mu = PTHREAD_MUTEX_INITIALIZER;
static kdp_plugin *left_behind;

KDP_EXPORT void kdp_plugin_free(kdp_plugin *p)
{
    if (!p || kdp__ctx_check_caller(p->ctx, "kdp_plugin_free",
                                    "to stop the plugin call kdp_plugin_stop() (thread-safe, "
                                    "also from a callback), then free it once kdp_plugin_run() "
                                    "or kdp_ctx_run() has returned") < 0) {
        return;
    }
    kdp__plugin_free(p);
}

void kdp__plugin_free(kdp_plugin *p)
{
    if (!p) {
        return;
    }
    kdp__plugin_teardown_serving(p);
    kdp__pjob_forget_all(p); /* lifecycle jobs: no deadline or completion after this */
    while (p->path_watches) {
        kdp__path_watch_free(p->path_watches);
    }
    bool left = kdp__worker_free(p->worker, 1000);
    p->worker = NULL;
    kdp__plugin_teardown_finish(p);
    detach(p);
    kdp__timer_free(p->retry_timer);
    kdp__timer_free(p->rescan_timer);
    kdp__timer_free(p->restart_timer);
    kdp__wakeup_free(p->wake);
    if (p->own_ctx) {
        kdp_ctx *ctx = p->ctx;
        p->ctx = NULL;
        kdp_ctx_free(ctx);
    }
    if (left) {
        /* A callback overran even the wait: it still reads the plugin (its
         * ops, user data, names) when it returns. Keep that memory, reachable
         * from here, rather than free it under the callback's feet. */
        pthread_mutex_lock(&left_behind_mu);
        p->next = left_behind;
        left_behind = p;
        pthread_mutex_unlock(&left_behind_mu);
        return;
    }
    kdp__devtab_clear(&p->shared);
    kdp__devtab_clear(&p->tab);
    free(p->law_msg);
    free(p->resource);
    free(p->socket_name);
    free(p->dir);
    free(p->socket_path);
    free(p->kubelet_path);
    free(p->lock_path);
    free(p->env_name);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

KDP_EXPORT int kdp_plugin_run(kdp_plugin *p)
{
    return p ? kdp_ctx_run(p->ctx) : -EINVAL;
}

/* Publishes a new table to the loop thread. Takes t's content. */
void kdp__plugin_publish(kdp_plugin *p, kdp__devtab *t)
{
    pthread_mutex_lock(&p->mu);
    kdp__devtab_move(&p->shared, t);
    p->shared_ver++;
    pthread_mutex_unlock(&p->mu);
    kdp__wakeup_signal(p->wake);
}

KDP_EXPORT int kdp_plugin_set_devices(kdp_plugin *p, const kdp_device *devs, size_t n)
{
    if (!p || (!devs && n)) {
        return -EINVAL;
    }
    kdp__devtab t;
    kdp__devtab_init(&t);
    const char *why = NULL;
    int r = kdp__devtab_from_array(&t, devs, n, &why);
    if (r < 0) {
        log_error("%s: kdp_plugin_set_devices: %s", p->resource, why ? why : strerror(-r));
        kdp__devtab_clear(&t);
        return r;
    }
    size_t len = kdp__devtab_encoded_size(&t);
    if (len > KDP_MAX_LIST_MESSAGE) {
        uint64_t now = kdp__now_us();
        uint64_t last = atomic_load(&p->set_rejected_logged_us);
        if (last && now - last < KDP_REJECT_LOG_US) {
            kdp__devtab_clear(&t);
            return -EMSGSIZE; /* said less than a minute ago */
        }
        atomic_store(&p->set_rejected_logged_us, now);
        log_error("%s: kdp_plugin_set_devices: %zu devices make a %zu-byte ListAndWatch message, "
                  "over the kubelet's limit of %u bytes (4 MiB): refused, the kubelet keeps the "
                  "current list. Use fewer devices or shorter IDs, or split them over several "
                  "resources (said at most once a minute)",
                  p->resource, n, len, KDP_MAX_LIST_MESSAGE);
        kdp__devtab_clear(&t);
        return -EMSGSIZE;
    }
    kdp__plugin_publish(p, &t);
    kdp__devtab_clear(&t);
    return 0;
}

KDP_EXPORT int kdp_plugin_set_health(kdp_plugin *p, const char *id, kdp_health health)
{
    if (!p || !id || (health != KDP_HEALTHY && health != KDP_UNHEALTHY)) {
        return -EINVAL;
    }
    pthread_mutex_lock(&p->mu);
    int r = kdp__devtab_set_health(&p->shared, id, health);
    if (r > 0) {
        p->shared_ver++;
    }
    pthread_mutex_unlock(&p->mu);
    if (r > 0) {
        kdp__wakeup_signal(p->wake);
    }
    return r < 0 ? r : 0;
}

KDP_EXPORT int kdp_plugin_rescan(kdp_plugin *p)
{
    if (!p) {
        return -EINVAL;
    }
    atomic_store(&p->rescan_wanted, true);
    kdp__wakeup_signal(p->wake);
    return 0;
}

KDP_EXPORT int kdp_plugin_stop(kdp_plugin *p)
{
    if (!p) {
        return -EINVAL;
    }
    if (p->own_ctx) {
        return kdp_ctx_stop(p->ctx); /* also ends kdp_plugin_run() */
    }
    atomic_store(&p->stop_wanted, true);
    kdp__wakeup_signal(p->wake);
    return 0;
}

KDP_EXPORT void kdp_plugin_set_error(kdp_plugin *p, const char *fmt, ...)
{
    kdp__job *cur = kdp__worker_current();
    if (!p || !fmt || !cur) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    kdp__job_set_error(cur, fmt, ap);
    va_end(ap);
}

KDP_EXPORT int kdp_plugin_get_status(kdp_plugin *p, kdp_plugin_status *ret)
{
    if (!p || !ret) {
        return -EINVAL;
    }
    static const kdp_plugin_state states[] = {
        [P_IDLE] = KDP_PLUGIN_IDLE,
        [P_STARTING] = KDP_PLUGIN_STARTING,
        [P_WAITING] = KDP_PLUGIN_WAITING,
        [P_REGISTERING] = KDP_PLUGIN_REGISTERING,
        [P_REGISTERED] = KDP_PLUGIN_REGISTERED,
        [P_STOPPING] = KDP_PLUGIN_STOPPING,
        [P_STOPPED] = KDP_PLUGIN_STOPPED,
    };
    pthread_mutex_lock(&p->mu);
    kdp_plugin_status st = p->pub;
    pthread_mutex_unlock(&p->mu);
    st.state = states[atomic_load(&p->state)];
    st.stuck_callbacks = p->worker ? kdp__worker_stuck(p->worker, NULL, NULL) : 0;
    *ret = st;
    return 0;
}

KDP_EXPORT const char *kdp_plugin_resource(const kdp_plugin *p)
{
    return p ? p->resource : NULL;
}

KDP_EXPORT void *kdp_plugin_userdata(const kdp_plugin *p)
{
    return p ? p->ud : NULL;
}

KDP_EXPORT int kdp_run_simple(const char *resource_name, const char *socket_name, kdp_list_fn list,
                              void *ud)
{
    if (!list) {
        return -EINVAL;
    }
    kdp_config cfg = {.resource_name = resource_name, .socket_name = socket_name};
    kdp_ops ops = {.list = list};
    kdp_plugin *p;
    int r = kdp_plugin_new(&p, NULL, &cfg, &ops, ud);
    if (r < 0) {
        return r;
    }
    r = kdp_plugin_run(p);
    kdp_plugin_free(p);
    return r;
}
