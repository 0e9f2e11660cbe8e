/* SPDX-License-Identifier: MIT */
/* driver: kdp_plugin_enable_dra (the config checked, the paths made, the
 * checkpoint loaded), the status, and the plugin's hooks (plugin.h's
 * kdp__plugin_ext) that drive the rest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "base/log.h"
#include "base/validate.h"
#include "dra/dra_int.h"

#define SOCKET_PATH_MAX   107
#define INSTANCE_MAX      63
#define DEFAULT_RESYNC_MS (10U * 60U * 1000U)
#define DEFAULT_CDI_DIR   "/var/run/cdi"
#define REG_SUFFIX        "-reg.sock"

kdp_dra_status *kdp__dra_status_lock(kdp__dra *d)
{
    pthread_mutex_lock(&d->mu);
    return &d->st;
}

void kdp__dra_status_unlock(kdp__dra *d)
{
    pthread_mutex_unlock(&d->mu);
}

/* ---- the plugin's hooks ---- */

static void on_serving(void *ud, bool on)
{
    kdp__dra *d = ud;
    kdp__dra_kubelet_serving(d, on);
    if (d->api) {
        kdp__dra_api_serving(d->api, on);
    }
    if (on) {
        kdp__dra_names_changed(d, true);
    }
}

static void on_devices_changed(void *ud)
{
    kdp__dra *d = ud;
    kdp__dra_health_changed(d);
    kdp__dra_names_changed(d, false);
}

static void dra_free(kdp__dra *d)
{
    if (!d) {
        return;
    }
    kdp__dra_kubelet_done(d); /* the servers: their calls end */
    kdp__dra_prepare_done(d);
    kdp__dra_api_free(d->api);
    kdp__dra_names_done(d);
    kdp__dra_health_done(d);
    kdp__ckpt_unref(d->ckpt);
    free(d->driver);
    free(d->node);
    free(d->instance);
    free(d->state_dir);
    free(d->cdi_dir);
    free(d->cdi_kind);
    free(d->reg_path);
    free(d->svc_dir);
    free(d->svc_path);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static void att_free(kdp__attachment *a)
{
    dra_free(KDP__CONTAINER_OF(a, kdp__dra, att));
}

/* ---- the config ---- */

static int bad(const char *field, const char *value, const char *why)
{
    log_error("kdp_plugin_enable_dra: invalid %s \"%.200s\": %s", field, value ? value : "(null)",
              why);
    return -EINVAL;
}

/* An instance goes into socket names: a DNS label's characters (a pod UID
 * is one). */
static int check_instance(const char *inst, const char *from)
{
    for (const char *s = inst; *s; s++) {
        bool ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                  (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.';
        if (!ok) {
            return bad(from, inst, "letters, digits, '-', '_' and '.' only (a pod UID)");
        }
    }
    if (!*inst || strlen(inst) > INSTANCE_MAX || inst[0] == '.') {
        return bad(from, inst, "1 to 63 characters, not starting with '.'");
    }
    return 0;
}

static int check_config(const kdp_dra_config *cfg, const char **ret_node, const char **ret_inst,
                        kdp_plugin *p)
{
    const char *why = NULL;
    if (kdp_dra_validate_driver_name(cfg->driver_name, &why) < 0) {
        return bad("kdp_dra_config.driver_name", cfg->driver_name, why);
    }
    const char *node = cfg->node_name;
    const char *from = "kdp_dra_config.node_name";
    if (!node) {
        node = getenv(KDP_DRA_NODE_NAME_ENV);
        from = "$" KDP_DRA_NODE_NAME_ENV;
    }
    if (!node || !*node) {
        log_error("kdp_plugin_enable_dra: no node name: set kdp_dra_config.node_name or $%s "
                  "(in a DaemonSet, from the downward API: fieldRef spec.nodeName)",
                  KDP_DRA_NODE_NAME_ENV);
        return -EINVAL;
    }
    if (kdp__k8snames_dns_subdomain(node, &why) < 0) {
        return bad(from, node, why);
    }
    const char *inst = cfg->instance;
    from = "kdp_dra_config.instance";
    if (!inst) {
        inst = getenv(KDP_DRA_POD_UID_ENV);
        from = "$" KDP_DRA_POD_UID_ENV;
        if (!inst || !*inst) {
            inst = kdp__plugin_instance(p);
            from = "kdp_config.instance";
        }
    }
    if (inst && check_instance(inst, from) < 0) {
        return -EINVAL;
    }
    if (cfg->state_dir && kdp__validate_abs_path(cfg->state_dir, &why) < 0) {
        return bad("kdp_dra_config.state_dir", cfg->state_dir, why);
    }
    if (cfg->cdi_dir && kdp__validate_abs_path(cfg->cdi_dir, &why) < 0) {
        return bad("kdp_dra_config.cdi_dir", cfg->cdi_dir, why);
    }
    if (cfg->resync_interval_ms && cfg->resync_interval_ms < 1000) {
        log_error("kdp_plugin_enable_dra: invalid kdp_dra_config.resync_interval_ms %u: 0 (10 "
                  "minutes) or at least 1000",
                  cfg->resync_interval_ms);
        return -EINVAL;
    }
    *ret_node = node;
    *ret_inst = inst;
    return 0;
}

static int make_paths(kdp__dra *d)
{
    const char *root = kdp__plugin_kubelet_root(d->p);
    const char *inst = d->instance;
    int r = 0;
    if (asprintf(&d->reg_path, "%s/plugins_registry/%s%s%s" REG_SUFFIX, root, d->driver,
                 inst ? "-" : "", inst ? inst : "") < 0) {
        d->reg_path = NULL;
        r = -ENOMEM;
    }
    if (r == 0 && asprintf(&d->svc_dir, "%s/plugins/%s", root, d->driver) < 0) {
        d->svc_dir = NULL;
        r = -ENOMEM;
    }
    if (r == 0 && asprintf(&d->svc_path, "%s/dra%s%s.sock", d->svc_dir, inst ? "-" : "",
                           inst ? inst : "") < 0) {
        d->svc_path = NULL;
        r = -ENOMEM;
    }
    if (r == 0 && asprintf(&d->cdi_kind, "k8s.%s/claim", d->driver) < 0) {
        d->cdi_kind = NULL;
        r = -ENOMEM;
    }
    if (r < 0) {
        return r;
    }
    const char *too_long = strlen(d->reg_path) > SOCKET_PATH_MAX   ? d->reg_path
                           : strlen(d->svc_path) > SOCKET_PATH_MAX ? d->svc_path
                                                                   : NULL;
    if (too_long) {
        log_error("kdp_plugin_enable_dra: socket path %s is too long for a unix socket (%d bytes "
                  "at most): a shorter kubelet root, driver name or instance",
                  too_long, SOCKET_PATH_MAX);
        return -ENAMETOOLONG;
    }
    const char *why = NULL;
    if (kdp_validate_cdi_kind(d->cdi_kind, &why) < 0) {
        return bad("CDI kind (from the driver name)", d->cdi_kind, why);
    }
    return 0;
}

static int fill(kdp__dra *d, const kdp_dra_config *cfg, const char *node, const char *inst)
{
    d->driver = strdup(cfg->driver_name);
    d->node = strdup(node);
    d->instance = inst ? strdup(inst) : NULL;
    d->cdi_dir = strdup(cfg->cdi_dir ? cfg->cdi_dir : DEFAULT_CDI_DIR);
    if (!d->driver || !d->node || (inst && !d->instance) || !d->cdi_dir) {
        return -ENOMEM;
    }
    int r = make_paths(d);
    if (r < 0) {
        return r;
    }
    d->state_dir = strdup(cfg->state_dir ? cfg->state_dir : d->svc_dir);
    if (!d->state_dir) {
        return -ENOMEM;
    }
    d->device_plugin_too = cfg->device_plugin_too;
    d->no_health = cfg->no_health;
    d->resync_ms = cfg->resync_interval_ms ? cfg->resync_interval_ms : DEFAULT_RESYNC_MS;
    d->versions[d->n_versions++] = "v1.DRAPlugin";
    d->versions[d->n_versions++] = "v1beta1.DRAPlugin";
    if (!d->no_health) {
        d->versions[d->n_versions++] = "v1alpha1.DRAResourceHealth";
    }
    return 0;
}

static int make(kdp__dra *d, const kdp_dra_config *cfg)
{
    int r = kdp__ckpt_open(d->state_dir, &d->ckpt);
    if (r < 0) {
        return r;
    }
    kdp__dra_status_lock(d)->prepared = kdp__ckpt_count(d->ckpt);
    kdp__dra_status_unlock(d);
    r = kdp__dra_names_init(d);
    if (r == 0) {
        r = kdp__dra_health_init(d);
    }
    if (r == 0) {
        r = kdp__dra_prepare_init(d);
    }
    if (r == 0) {
        r = kdp__dra_kubelet_init(d);
    }
    if (r == 0) {
        r = kdp__dra_api_new(d, cfg->kubeconfig, &d->api);
    }
    return r;
}

KDP_EXPORT int kdp_plugin_enable_dra(kdp_plugin *p, const kdp_dra_config *cfg,
                                     const kdp_dra_ops *ops)
{
    if (!p || !cfg) {
        log_error("kdp_plugin_enable_dra: %s is NULL", !p ? "the plugin (p)" : "the config (cfg)");
        return -EINVAL;
    }
    if (kdp__plugin_ext_ud(p)) {
        log_error("%s: kdp_plugin_enable_dra: DRA is already on", kdp_plugin_resource(p));
        return -EALREADY;
    }
    kdp_plugin_status pst;
    if (kdp_plugin_get_status(p, &pst) == 0 && pst.state != KDP_PLUGIN_IDLE) {
        log_error("%s: kdp_plugin_enable_dra: the plugin runs already: enable DRA before "
                  "kdp_plugin_run() or kdp_ctx_run()",
                  kdp_plugin_resource(p));
        return -EBUSY;
    }
    const char *node = NULL;
    const char *inst = NULL;
    int r = check_config(cfg, &node, &inst, p);
    if (r < 0) {
        return r;
    }
    kdp__dra *d = calloc(1, sizeof(*d));
    if (!d) {
        return -ENOMEM;
    }
    pthread_mutex_init(&d->mu, NULL);
    d->p = p;
    d->loop = kdp__plugin_loop(p);
    d->ud = kdp_plugin_userdata(p);
    if (ops) {
        d->ops = *ops;
    }
    kdp__link_init(&d->streams);
    kdp__link_init(&d->ops_inflight); /* dra_free may run before prepare_init */
    kdp__link_init(&d->calls);
    r = fill(d, cfg, node, inst);
    if (r == 0) {
        r = make(d, cfg);
    }
    kdp__plugin_ext ext = {.serving = on_serving, .devices_changed = on_devices_changed, .ud = d};
    if (r == 0) {
        r = kdp__plugin_set_ext(p, &ext, cfg->device_plugin_too);
    }
    if (r < 0) {
        dra_free(d);
        return r;
    }
    d->att.free = att_free;
    kdp__plugin_attach(p, &d->att);
    log_info("%s: DRA driver %s on node %s%s%s (registration %s, service %s, state %s%s)",
             kdp_plugin_resource(p), d->driver, d->node, d->instance ? ", instance " : "",
             d->instance ? d->instance : "", d->reg_path, d->svc_path, d->state_dir,
             d->device_plugin_too ? "; the device-plugin API too" : "; DRA only");
    return 0;
}

KDP_EXPORT int kdp_plugin_get_dra_status(kdp_plugin *p, kdp_dra_status *ret)
{
    if (!p || !ret) {
        return -EINVAL;
    }
    kdp__dra *d = kdp__plugin_ext_ud(p);
    if (!d) {
        return -ENOENT;
    }
    *ret = *kdp__dra_status_lock(d);
    kdp__dra_status_unlock(d);
    return 0;
}
