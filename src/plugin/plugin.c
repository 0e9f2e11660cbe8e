/* SPDX-License-Identifier: MIT */
/* plugin: kdp_plugin_new and _free. A plugin is made of parts, each its
 * own module (jobs, table, lockfile, pdir, devplugin, reg_kubelet,
 * lifecycle); this file checks the config (pconfig.h), builds the parts,
 * wires their callbacks together, and frees them. The public calls that
 * hand over to a part are plugin_calls.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/validate.h"
#include "plugin/observe.h"
#include "plugin/pconfig.h"
#include "plugin/plugin_int.h"
#include "plugin/regmode.h"
#include "plugin/response.h"

/* After kdp__pconfig_check: the names are there and valid. */
static int fill_strings(kdp_plugin *p, const kdp_config *cfg, const char *dir)
{
    // NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): kdp__pconfig_check refused NULL
    p->resource = strdup(cfg->resource_name);
    const char *inst = NULL;
    uint64_t gen = 0;
    int r = kdp__pconfig_instance(cfg, &inst, &gen);
    if (r < 0) {
        return r;
    }
    p->socket_name = kdp__handover_socket_name(cfg->socket_name, inst);
    if (inst && !(p->instance = strdup(inst))) {
        return -ENOMEM;
    }
    const char *why = NULL;
    /* a plugin without the device-plugin API never makes its socket: its
     * name (the context's key) is not checked */
    if (!p->alone && p->socket_name && inst &&
        kdp__validate_socket_name(p->socket_name, &why) < 0) {
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
    p->socket_path = p->socket_name ? kdp__pconfig_join(dir, p->socket_name) : NULL;
    p->env_name = cfg->env_name ? strdup(cfg->env_name) : kdp__default_env_name(p->resource);
    if (!p->resource || !p->socket_name || !p->dir || !p->socket_path || !p->env_name) {
        return -ENOMEM;
    }
    if (!p->alone && strlen(p->socket_path) > KDP_SOCKET_PATH_MAX) {
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

static void probe_note(void *ud, const char *id, kdp__probe_note note, const char *why)
{
    kdp_plugin *p = ud;
    if (p->has_ext && p->ext.probe_note) {
        p->ext.probe_note(p->ext.ud, id, note, why);
    }
}

/* Health checks: rounds of the probe op while serving, the verdicts kept in
 * the table, each answer told to the extension. */
static int make_prober(kdp_plugin *p, const kdp_config *cfg)
{
    kdp__probe_cfg pc;
    (void)kdp__probe_cfg_from(cfg, &pc); /* checked by kdp__pconfig_check */
    int r = kdp__prober_init(&p->prober, p->ctx->loop, &p->table, &p->jobs, p, p->ops.probe, p->ud,
                             p->resource, &pc);
    if (r == 0 && p->ops.probe) {
        p->table.shared.probe_stats = &p->prober.stats;
        kdp__prober_set_note(&p->prober, probe_note, p);
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
    p->devplugin.calls.preferred = cfg->preferred;
    p->devplugin.calls.replicas = cfg->replicas;
    p->devplugin.calls.one_per_container = cfg->replicas_one_per_container;
    p->table.shared.replicas = cfg->replicas;
    p->table.stats = &p->pstats;
    p->devplugin.stats = &p->pstats;
    p->devplugin.calls.stats = &p->pstats;
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

/* kdp_plugin_new, and kdp__plugin_new_alone with alone set: cfg's names
 * are kdp's own then (not checked), and the device-plugin API is never
 * served. */
static int plugin_new(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops, void *ud, bool alone,
                      kdp_plugin **ret)
{
    int r = kdp__ctx_check_caller(ctx, alone ? "kdp_dra_driver_new" : "kdp_plugin_new",
                                  "create plugins before the context runs, or on its thread "
                                  "outside the callbacks (kdp_ctx_post() runs a function "
                                  "there)");
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
    if (r == 0 && cfg->resource_name && !alone) {
        r = kdp__regmode_resolve(cfg, paths, &mode);
    }
    if (r == 0) {
        r = kdp__pconfig_check(cfg, kdp__regmode_dir(mode, paths), !alone);
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
    p->alone = alone;
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

KDP_EXPORT int kdp_plugin_new(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops, void *ud,
                              kdp_plugin **ret)
{
    if (!ret || !cfg) {
        log_error("kdp_plugin_new: %s is NULL", !ret ? "ret" : "the config (cfg)");
        return -EINVAL;
    }
    return plugin_new(ctx, cfg, ops, ud, false, ret);
}

int kdp__plugin_new_alone(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops, void *ud,
                          const char *name, kdp_plugin **ret)
{
    kdp_config c = {0};
    if (cfg) {
        c = *cfg;
    }
    int r = kdp__pconfig_check_no_dp(&c, "kdp_dra_driver_new");
    if (r < 0) {
        return r;
    }
    /* never served: a name of its own for the context's key and the logs */
    char sock[300];
    if ((size_t)snprintf(sock, sizeof(sock), "dra-%s.sock", name) >= sizeof(sock)) {
        return -EINVAL;
    }
    c.resource_name = name;
    c.socket_name = sock;
    return plugin_new(ctx, &c, ops, ud, true, ret);
}

/* Plugins freed while one of their callbacks still ran past the wait (see
 * kdp_plugin_free): their memory stays, for that callback. */
static pthread_mutex_t left_behind_mu = PTHREAD_MUTEX_INITIALIZER;
static kdp_plugin *left_behind;

KDP_EXPORT void kdp_plugin_free(kdp_plugin *p)
{
    if (!p || kdp__ctx_check_caller(p->ctx, "kdp_plugin_free",
                                    "freeing it would pull the plugin out from under the "
                                    "callback: to stop the plugin call kdp_plugin_stop() "
                                    "(thread-safe, also from a callback), then free it once "
                                    "kdp_plugin_run() or kdp_ctx_run() has returned") < 0) {
        return;
    }
    plugin_free(p);
}

/* Returns true if one left a callback running. */
static bool free_attached(kdp_plugin *p)
{
    bool left = false;
    kdp__link *l;
    while ((l = kdp__list_first(&p->attached))) {
        kdp__attachment *a = KDP__CONTAINER_OF(l, kdp__attachment, link);
        kdp__link_remove(l);
        left |= a->free(a);
    }
    return left;
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
        left = free_attached(p);
        left |= kdp__jobs_done(&p->jobs, 1000);
        kdp__lifecycle_teardown_finish(&p->lc);
    } else {
        left = free_attached(p);
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
    out->ext = p->has_ext;
    out->device_plugin = !p->has_ext || p->ext_device_plugin;
    if (p->has_ext) {
        out->ext_name = p->ext.name ? p->ext.name : "extension";
        out->ext_up =
            !p->ext.health || p->ext.health(p->ext.ud, out->ext_why, sizeof(out->ext_why));
        out->ext_metrics = p->ext.metrics;
        out->ext_metrics.ud = p->ext.ud;
    }
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
