/* SPDX-License-Identifier: MIT */
/* plugin: the public kdp_plugin calls. A plugin is made of parts, each its
 * own module (jobs, table, lockfile, pdir, devplugin, reg_kubelet,
 * lifecycle); this file builds them, wires their callbacks together, and
 * frees them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/validate.h"
#include "plugin/observe.h"
#include "plugin/plugin_int.h"
#include "plugin/regmode.h"
#include "plugin/response.h"

static char *join(const char *dir, const char *name)
{
    char *s = NULL;
    size_t n = strlen(dir);
    bool slash = n > 0 && dir[n - 1] == '/';
    return asprintf(&s, "%s%s%s", dir, slash ? "" : "/", name) < 0 ? NULL : s;
}

static int check_replicas(const kdp_config *cfg)
{
    if (cfg->replicas > KDP_MAX_REPLICAS) {
        log_error("invalid kdp_config.replicas %u: at most KDP_MAX_REPLICAS (%u)", cfg->replicas,
                  KDP_MAX_REPLICAS);
        return -EINVAL;
    }
    if (cfg->replicas_one_per_container && cfg->replicas <= 1) {
        log_warn("%s: kdp_config.replicas_one_per_container has no effect without replicas > 1",
                 cfg->resource_name);
    }
    return 0;
}

static int check_config(const kdp_config *cfg, const char *dir)
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
    if (cfg->preferred != KDP_PREFERRED_NONE && cfg->preferred != KDP_PREFERRED_PACKED &&
        cfg->preferred != KDP_PREFERRED_SPREAD) {
        log_error("invalid kdp_config.preferred %d: KDP_PREFERRED_NONE, KDP_PREFERRED_PACKED or "
                  "KDP_PREFERRED_SPREAD",
                  (int)cfg->preferred);
        return -EINVAL;
    }
    if (check_replicas(cfg) < 0) {
        return -EINVAL;
    }
    kdp__probe_cfg pc;
    if (kdp__probe_cfg_from(cfg, &pc) < 0) {
        return -EINVAL;
    }
    if (kdp__validate_abs_path(dir, &why) < 0) {
        log_error("invalid directory for the plugin's socket \"%s\": %s", dir, why);
        return -EINVAL;
    }
    return 0;
}

/* The instance (kdp_config.instance, else $KDP_INSTANCE; NULL: none) and
 * generation (kdp_config.generation, else $KDP_GENERATION, else 0) of a
 * plugin among several (handover.h). Returns 0 or -EINVAL (logged). */
static int instance_of(const kdp_config *cfg, const char **ret, uint64_t *ret_gen)
{
    const char *inst = cfg->instance;
    const char *from = "kdp_config.instance";
    if (!inst) {
        inst = getenv(KDP_INSTANCE_ENV);
        from = "$" KDP_INSTANCE_ENV;
        if (inst && !*inst) {
            inst = NULL;
        }
    }
    const char *why = NULL;
    if (inst && kdp__handover_check_instance(inst, &why) < 0) {
        log_error("invalid %s \"%.80s\": %s", from, inst, why);
        return -EINVAL;
    }
    uint64_t gen = cfg->generation;
    const char *env = getenv(KDP_GENERATION_ENV);
    if (!gen && env && *env) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(env, &end, 10);
        if (errno || *end || env[0] == '-') {
            log_error("invalid $%s \"%.40s\": a non-negative integer (the DaemonSet's "
                      "pod-template-generation label)",
                      KDP_GENERATION_ENV, env);
            return -EINVAL;
        }
        gen = v;
    }
    *ret = inst;
    *ret_gen = gen;
    return 0;
}

static int fill_strings(kdp_plugin *p, const kdp_config *cfg, const char *dir)
{
    p->resource = strdup(cfg->resource_name);
    const char *inst = NULL;
    uint64_t gen = 0;
    int r = instance_of(cfg, &inst, &gen);
    if (r < 0) {
        return r;
    }
    p->socket_name = kdp__handover_socket_name(cfg->socket_name, inst);
    if (inst && !(p->instance = strdup(inst))) {
        return -ENOMEM;
    }
    const char *why = NULL;
    if (p->socket_name && inst && kdp__validate_socket_name(p->socket_name, &why) < 0) {
        log_error("invalid socket name \"%s\" (socket_name with the instance): %s", p->socket_name,
                  why);
        return -EINVAL;
    }
    if (p->socket_name && p->resource &&
        kdp__handover_init(&p->handover, p->resource, dir, p->socket_name, cfg->socket_name, inst,
                           gen) < 0) {
        return -ENOMEM;
    }
    p->dir = strdup(dir);
    p->socket_path = p->socket_name ? join(dir, p->socket_name) : NULL;
    p->env_name = cfg->env_name ? strdup(cfg->env_name) : kdp__default_env_name(p->resource);
    if (!p->resource || !p->socket_name || !p->dir || !p->socket_path || !p->env_name) {
        return -ENOMEM;
    }
    if (strlen(p->socket_path) > KDP_SOCKET_PATH_MAX) {
        log_error("socket path %s is too long for a unix socket (%d bytes at most)", p->socket_path,
                  KDP_SOCKET_PATH_MAX);
        return -ENAMETOOLONG;
    }
    return 0;
}

/* ---- the parts, wired together ---- */

/* Construction progress: each part is made in this order, and freed in
 * the reverse one (kdp__plugin_free), whatever failed in between. */
enum { MADE_NONE = 0, MADE_JOBS, MADE_TABLE, MADE_LOCK, MADE_REG, MADE_LC, MADE_ALL };

static void plugin_free(kdp_plugin *p);

#define OF_MEMBER(m) KDP__CONTAINER_OF(m, kdp_plugin, member)

static void member_start(kdp__member *m)
{
    kdp__lifecycle_start(&OF_MEMBER(m)->lc);
}

static void member_stop(kdp__member *m)
{
    kdp__lifecycle_stop(&OF_MEMBER(m)->lc);
}

static bool member_idle(const kdp__member *m)
{
    const kdp_plugin *p = OF_MEMBER(m);
    return kdp__lifecycle_state(&p->lc) == KDP__LC_IDLE && p->lc.pending != KDP__LC_PENDING_STOP;
}

static bool member_stopped(const kdp__member *m)
{
    return kdp__lifecycle_state(&OF_MEMBER(m)->lc) == KDP__LC_STOPPED;
}

static void member_free(kdp__member *m)
{
    plugin_free(OF_MEMBER(m));
}

static void plugin_view(kdp_plugin *p, kdp__pview *out);

static void member_view(kdp__member *m, kdp__pview *out)
{
    plugin_view(OF_MEMBER(m), out);
}

static const kdp__member_ops member_ops = {
    .start = member_start,
    .stop = member_stop,
    .idle = member_idle,
    .stopped = member_stopped,
    .free = member_free,
    .view = member_view,
};

static void table_changed(void *ud)
{
    kdp_plugin *p = ud;
    kdp__devplugin_broadcast(&p->devplugin);
    if (p->has_ext && p->ext.devices_changed) {
        p->ext.devices_changed(p->ext.ud);
    }
}

static void table_start_listed(void *ud)
{
    kdp_plugin *p = ud;
    kdp__lifecycle_on_start_listed(&p->lc);
}

static void lc_stopped(void *ud, int err)
{
    kdp_plugin *p = ud;
    kdp__ctx_member_stopped(p->ctx, err);
}

static void reg_options(void *ud, V1beta1__DevicePluginOptions *out)
{
    kdp_plugin *p = ud;
    kdp__devplugin_options(&p->devplugin, out);
}

static void on_stop_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    kdp_plugin *p = ud;
    if (atomic_exchange(&p->stop_wanted, false)) {
        kdp__lifecycle_stop(&p->lc);
    }
}

/* Health checks: rounds of the probe op while serving, the verdicts kept in
 * the table. */
static int make_prober(kdp_plugin *p, const kdp_config *cfg)
{
    kdp__probe_cfg pc;
    (void)kdp__probe_cfg_from(cfg, &pc); /* checked by check_config */
    int r = kdp__prober_init(&p->prober, p->ctx->loop, &p->table, &p->jobs, p, p->ops.probe, p->ud,
                             p->resource, &pc);
    if (r == 0 && p->ops.probe) {
        p->table.shared.probe_stats = &p->prober.stats;
    }
    return r;
}

/* The worker's jobs, the device table and the health checks. */
static int make_work(kdp_plugin *p, const kdp_config *cfg)
{
    kdp__loop *l = p->ctx->loop;
    unsigned timeout =
        cfg->callback_timeout_ms ? cfg->callback_timeout_ms : KDP__DEFAULT_CB_TIMEOUT_MS;
    p->made = MADE_JOBS;
    int r = kdp__jobs_init(&p->jobs, l, timeout, KDP_MAX_STUCK_CALLBACKS, p->resource);
    if (r < 0) {
        return r;
    }
    p->jobs.stats = &p->pstats;
    kdp__table_cbs tcbs = {.changed = table_changed, .start_listed = table_start_listed, .ud = p};
    p->made = MADE_TABLE;
    r = kdp__table_init(&p->table, l, p->resource, &p->status, &p->jobs, p, p->ops.list, p->ud,
                        cfg->rescan_interval_ms, &tcbs);
    if (r == 0) {
        r = make_prober(p, cfg);
    }
    return r;
}

static int make_parts(kdp_plugin *p, const kdp_config *cfg)
{
    kdp__loop *l = p->ctx->loop;
    int r = make_work(p, cfg);
    if (r < 0) {
        return r;
    }
    p->made = MADE_LOCK;
    r = kdp__lockfile_init(&p->lock, p->dir, p->socket_name, p->socket_path, p->resource);
    if (r < 0) {
        return r;
    }
    kdp__pdir_cbs dcbs = kdp__lifecycle_dir_cbs(&p->lc);
    kdp__pdir_init(&p->pdir, l, p->dir, p->resource, &p->status, &dcbs);
    kdp__svc_up sup = kdp__lifecycle_svc_up(&p->lc);
    kdp__devplugin_init(&p->devplugin, p, &p->ops, p->ud, p->resource, p->env_name, &p->table,
                        &p->jobs, &sup);
    r = kdp__devplugin_init_loop(&p->devplugin, l);
    if (r < 0) {
        return r;
    }
    p->devplugin.preferred = cfg->preferred;
    p->devplugin.replicas = cfg->replicas;
    p->devplugin.one_per_container = cfg->replicas_one_per_container;
    p->table.shared.replicas = cfg->replicas;
    p->table.stats = &p->pstats;
    p->devplugin.stats = &p->pstats;
    kdp__reg_up rup = kdp__lifecycle_reg_up(&p->lc);
    p->made = MADE_REG;
    bool watcher = p->regmode == KDP_REGISTRATION_WATCHER;
    if (watcher) {
        r = kdp__reg_watcher_init(&p->watcher, l, p->socket_path, p->resource, NULL, &rup);
        p->watcher.svc.up = sup;
    } else {
        r = kdp__reg_kubelet_init(&p->reg, l, p->dir, p->socket_name, p->resource, reg_options, p,
                                  &rup);
    }
    if (r < 0) {
        return r;
    }
    kdp__lifecycle_cfg lcfg = {
        .loop = l,
        .resource = p->resource,
        .socket_path = p->socket_path,
        .socket_name = p->socket_name,
        .owner = p,
        .ops = &p->ops,
        .ud = p->ud,
        .jobs = &p->jobs,
        .table = &p->table,
        .prober = &p->prober,
        .lock = &p->lock,
        .dir = &p->pdir,
        .reg = watcher ? &p->watcher.base : &p->reg.base,
        .svcs = {&p->devplugin.base, watcher ? &p->watcher.svc : NULL},
        .n_svcs = watcher ? 2 : 1,
        .handover = &p->handover,
        .status = &p->status,
        .stats = &p->pstats,
        .stopped = lc_stopped,
        .stopped_ud = p,
    };
    p->made = MADE_LC;
    r = kdp__lifecycle_init(&p->lc, &lcfg);
    if (r == 0) {
        r = kdp__wakeup_new(l, on_stop_wake, p, &p->stop_wake);
    }
    if (r == 0) {
        r = kdp__podres_queue_new(l, &p->podres);
    }
    if (r == 0) {
        p->made = MADE_ALL;
    }
    return r;
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
    if (!ctx->addon) {
        ctx->addon = kdp__observe_addon(); /* $KDP_METRICS_ADDRESS at the first run */
    }
    p->member.ops = &member_ops;
    p->member.key = p->socket_path;
    return kdp__ctx_attach(ctx, &p->member);
}

KDP_EXPORT int kdp_plugin_new(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops, void *ud,
                              kdp_plugin **ret)
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
    /* On the heap: 16 KiB is a lot for the stack of a caller's thread. */
    kdp_kubelet_paths *paths = malloc(sizeof(*paths));
    if (!paths) {
        return -ENOMEM;
    }
    kdp_registration mode = KDP_REGISTRATION_KUBELET;
    r = kdp_kubelet_paths_get(cfg->kubelet_root, cfg->device_plugin_dir, paths);
    if (r == 0 && cfg->resource_name) {
        r = kdp__regmode_resolve(cfg, paths, &mode);
    }
    if (r == 0) {
        r = check_config(cfg, kdp__regmode_dir(mode, paths));
    }
    kdp_plugin *p = r == 0 ? calloc(1, sizeof(*p)) : NULL;
    if (!p) {
        free(paths);
        return r < 0 ? r : -ENOMEM;
    }
    log_debug("%s: device-plugin directory %s (from %s; kubelet root %s, from %s)",
              cfg->resource_name, paths->device_plugin_dir, paths->device_plugin_dir_from,
              paths->root, paths->root_from);
    kdp__status_init(&p->status);
    kdp__pstats_init(&p->pstats);
    kdp__link_init(&p->attached);
    kdp__link_init(&p->member.link);
    p->ud = ud;
    if (ops) {
        p->ops = *ops;
    }
    p->regmode = mode;
    r = fill_strings(p, cfg, kdp__regmode_dir(mode, paths));
    p->podres_socket = strdup(paths->pod_resources_socket);
    p->kubelet_root = strdup(paths->root);
    p->replicas = cfg->replicas;
    free(paths);
    if (r == 0 && (!p->podres_socket || !p->kubelet_root)) {
        r = -ENOMEM;
    }
    if (r == 0) {
        r = attach(p, ctx);
    }
    if (r == 0) {
        r = make_parts(p, cfg);
    }
    if (r < 0) {
        plugin_free(p);
        return r;
    }
    *ret = p;
    return 0;
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
    plugin_free(p);
}

static void free_attached(kdp_plugin *p)
{
    kdp__link *l;
    while ((l = kdp__list_first(&p->attached))) {
        kdp__attachment *a = KDP__CONTAINER_OF(l, kdp__attachment, link);
        kdp__link_remove(l);
        a->free(a);
    }
}

static void plugin_free(kdp_plugin *p)
{
    if (!p) {
        return;
    }
    bool left = false;
    if (p->made == MADE_ALL) {
        kdp__lifecycle_teardown_serving(&p->lc);
        kdp__jobs_forget_all(&p->jobs); /* no deadline or completion after this */
        free_attached(p);
        left = kdp__jobs_done(&p->jobs, 1000);
        kdp__lifecycle_teardown_finish(&p->lc);
    } else {
        free_attached(p);
        if (p->made >= MADE_JOBS) {
            (void)kdp__jobs_done(&p->jobs, 1000);
        }
    }
    kdp__wakeup_free(p->stop_wake);
    kdp__podres_queue_free(p->podres);
    p->podres = NULL;
    if (p->made >= MADE_LC) {
        kdp__lifecycle_done(&p->lc);
    }
    if (p->made >= MADE_REG && p->regmode == KDP_REGISTRATION_WATCHER) {
        kdp__reg_watcher_done(&p->watcher);
    } else if (p->made >= MADE_REG) {
        kdp__reg_kubelet_done(&p->reg);
    }
    if (p->made >= MADE_LOCK) {
        kdp__devplugin_release_loop(&p->devplugin); /* NULL until made: calloc */
    }
    if (p->made >= MADE_REG) {
        kdp__pdir_done(&p->pdir);
    }
    if (p->made >= MADE_TABLE) {
        kdp__prober_release_loop(&p->prober); /* zeroed until made: calloc */
        kdp__table_release_loop(&p->table);
    }
    if (p->ctx) {
        kdp__ctx_detach(p->ctx, &p->member);
    }
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
        p->left_next = left_behind;
        left_behind = p;
        pthread_mutex_unlock(&left_behind_mu);
        return;
    }
    if (p->made >= MADE_TABLE) {
        kdp__table_done(&p->table);
    }
    if (p->made >= MADE_LOCK) {
        kdp__lockfile_done(&p->lock);
    }
    kdp__status_done(&p->status);
    free(p->resource);
    free(p->socket_name);
    kdp__handover_done(&p->handover);
    free(p->dir);
    free(p->socket_path);
    free(p->env_name);
    free(p->podres_socket);
    free(p->kubelet_root);
    free(p->instance);
    free(p);
}

KDP_EXPORT int kdp_plugin_query_pods(kdp_plugin *p, kdp_pods_fn done, void *ud)
{
    if (!p || !done) {
        return -EINVAL;
    }
    kdp__podres_req req = {.kind = KDP__PODRES_LIST,
                           .socket = p->podres_socket,
                           .resource = p->resource,
                           .replicas = p->replicas};
    return kdp__podres_queue_add(p->podres, &req, done, ud);
}

KDP_EXPORT int kdp_plugin_get_pods(kdp_plugin *p, unsigned timeout_ms, kdp_pods **ret)
{
    if (!p || !ret) {
        return -EINVAL;
    }
    if (atomic_load(&p->ctx->owner) == (int)gettid()) {
        log_error("%s: kdp_plugin_get_pods() from the thread running the context would block "
                  "its loop: use kdp_plugin_query_pods() there",
                  p->resource);
        return -EDEADLK;
    }
    kdp__podres_req req = {.kind = KDP__PODRES_LIST,
                           .socket = p->podres_socket,
                           .resource = p->resource,
                           .replicas = p->replicas,
                           .timeout_ms = timeout_ms};
    return kdp__podres_run(&req, ret);
}

KDP_EXPORT int kdp_plugin_run(kdp_plugin *p)
{
    return p ? kdp_ctx_run(p->ctx) : -EINVAL;
}

KDP_EXPORT int kdp_plugin_set_devices(kdp_plugin *p, const kdp_device *devs, size_t n)
{
    if (!p || (!devs && n)) {
        return -EINVAL;
    }
    return kdp__tabshared_set(&p->table.shared, devs, n);
}

KDP_EXPORT int kdp_plugin_set_device(kdp_plugin *p, const kdp_device *d)
{
    if (!p || !d) {
        return -EINVAL;
    }
    return kdp__tabshared_put(&p->table.shared, d);
}

KDP_EXPORT int kdp_plugin_remove_device(kdp_plugin *p, const char *id)
{
    if (!p || !id) {
        return -EINVAL;
    }
    return kdp__tabshared_remove(&p->table.shared, id);
}

KDP_EXPORT int kdp_plugin_set_health(kdp_plugin *p, const char *id, kdp_health health)
{
    if (!p || !id || (health != KDP_HEALTHY && health != KDP_UNHEALTHY)) {
        return -EINVAL;
    }
    return kdp__tabshared_set_health(&p->table.shared, id, health);
}

KDP_EXPORT int kdp_plugin_get_health(kdp_plugin *p, const char *id, kdp_health *ret)
{
    if (!p || !id || !ret) {
        return -EINVAL;
    }
    return kdp__tabshared_get_health(&p->table.shared, id, ret);
}

KDP_EXPORT int kdp_plugin_get_device_data(kdp_plugin *p, const char *id, void **ret)
{
    if (!p || !id || !ret) {
        return -EINVAL;
    }
    return kdp__tabshared_get_data(&p->table.shared, id, ret);
}

KDP_EXPORT int kdp_plugin_get_devices(kdp_plugin *p, kdp_device **ret, size_t *ret_n)
{
    if (!p || !ret || !ret_n) {
        return -EINVAL;
    }
    return kdp__tabshared_get_devices(&p->table.shared, ret, ret_n);
}

KDP_EXPORT int kdp_plugin_rescan(kdp_plugin *p)
{
    if (!p) {
        return -EINVAL;
    }
    kdp__table_rescan(&p->table);
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
    kdp__wakeup_signal(p->stop_wake);
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
        [KDP__LC_IDLE] = KDP_PLUGIN_IDLE,
        [KDP__LC_STARTING] = KDP_PLUGIN_STARTING,
        [KDP__LC_WAITING] = KDP_PLUGIN_WAITING,
        [KDP__LC_REGISTERING] = KDP_PLUGIN_REGISTERING,
        [KDP__LC_REGISTERED] = KDP_PLUGIN_REGISTERED,
        [KDP__LC_STOPPING] = KDP_PLUGIN_STOPPING,
        [KDP__LC_STOPPED] = KDP_PLUGIN_STOPPED,
    };
    kdp_plugin_status st = *kdp__status_lock(&p->status);
    kdp__status_unlock(&p->status);
    st.state = states[kdp__lifecycle_state(&p->lc)];
    st.stuck_callbacks = kdp__jobs_stuck(&p->jobs);
    st.probe_unhealthy =
        (unsigned)atomic_load_explicit(&p->prober.stats.held_unhealthy, memory_order_relaxed);
    st.probe_down = atomic_load_explicit(&p->prober.stats.down, memory_order_relaxed);
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

/* ---- plugin.h ---- */

void kdp__plugin_attach(kdp_plugin *p, kdp__attachment *a)
{
    kdp__list_append(&p->attached, &a->link);
}

void kdp__plugin_detach(kdp__attachment *a)
{
    kdp__link_remove(&a->link);
}

kdp__loop *kdp__plugin_loop(const kdp_plugin *p)
{
    return p->ctx->loop;
}

kdp_ctx *kdp__plugin_ctx(const kdp_plugin *p)
{
    return p->ctx;
}

KDP_EXPORT kdp_ctx *kdp_plugin_get_ctx(kdp_plugin *p)
{
    return p ? p->ctx : NULL;
}

static void plugin_view(kdp_plugin *p, kdp__pview *out)
{
    out->resource = p->resource;
    (void)kdp_plugin_get_status(p, &out->st);
    kdp__status_lock(&p->status);
    memcpy(out->reg_error, p->status.reg_error, sizeof(out->reg_error));
    kdp__status_unlock(&p->status);
    out->stats = &p->pstats;
    out->probe = p->ops.probe ? &p->prober.stats : NULL;
    out->healthy = kdp__devtab_count_healthy(&p->table.tab);
    out->unhealthy = p->table.tab.n - out->healthy;
    out->streams = p->devplugin.n_streams;
    out->watcher = p->regmode == KDP_REGISTRATION_WATCHER;
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
    int r = kdp_plugin_new(NULL, &cfg, &ops, ud, &p);
    if (r < 0) {
        return r;
    }
    r = kdp_plugin_run(p);
    kdp_plugin_free(p);
    return r;
}
