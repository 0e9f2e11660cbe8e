/* SPDX-License-Identifier: MIT */
/* config: a DRA driver's configuration checked (see config.h). */
#include "dra/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "base/log.h"
#include "base/validate.h"
#include "discovery/cdi.h"
#include "dra/claimops.h"
#include "dra/metadata.h"
#include "plugin/plugin.h"

#define SOCKET_PATH_MAX   107
#define INSTANCE_MAX      63
#define DEFAULT_RESYNC_MS (10U * 60U * 1000U)
#define DEFAULT_CDI_DIR   "/var/run/cdi"
#define REG_SUFFIX        "-reg.sock"

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

static int check_node(const kdp_dra_config *cfg, const char **ret)
{
    const char *why = NULL;
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
    *ret = node;
    return 0;
}

static int check_instance_of(const kdp_dra_config *cfg, kdp_plugin *p, const char **ret)
{
    const char *inst = cfg->instance;
    const char *from = "kdp_dra_config.instance";
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
    *ret = inst;
    return 0;
}

static int check(const kdp_dra_config *cfg)
{
    const char *why = NULL;
    if (kdp_dra_validate_driver_name(cfg->driver_name, &why) < 0) {
        return bad("kdp_dra_config.driver_name", cfg->driver_name, why);
    }
    if (cfg->state_dir && kdp__validate_abs_path(cfg->state_dir, &why) < 0) {
        return bad("kdp_dra_config.state_dir", cfg->state_dir, why);
    }
    if (cfg->cdi_dir && kdp__validate_abs_path(cfg->cdi_dir, &why) < 0) {
        return bad("kdp_dra_config.cdi_dir", cfg->cdi_dir, why);
    }
    const char *env_cdi = getenv(KDP_DRA_CDI_DIR_ENV);
    if (!cfg->cdi_dir && env_cdi && kdp__validate_abs_path(env_cdi, &why) < 0) {
        return bad("$" KDP_DRA_CDI_DIR_ENV, env_cdi, why);
    }
    if (cfg->cdi_mode && !kdp__cdi_mode_ok(cfg->cdi_mode)) {
        log_error("kdp_plugin_enable_dra: invalid kdp_dra_config.cdi_mode 0%o: read and write "
                  "bits only, the owner's included (0600, 0640, 0644; 0: 0644)",
                  cfg->cdi_mode);
        return -EINVAL;
    }
    if (cfg->resync_interval_ms && cfg->resync_interval_ms < 1000) {
        log_error("kdp_plugin_enable_dra: invalid kdp_dra_config.resync_interval_ms %u: 0 (10 "
                  "minutes) or at least 1000",
                  cfg->resync_interval_ms);
        return -EINVAL;
    }
    if ((unsigned)cfg->unhealthy_taint > KDP_DRA_TAINT_INFORMATIONAL) {
        log_error("kdp_plugin_enable_dra: invalid kdp_dra_config.unhealthy_taint %d: "
                  "KDP_DRA_TAINT_NO_SCHEDULE, _NO_EXECUTE, _NONE or _INFORMATIONAL",
                  (int)cfg->unhealthy_taint);
        return -EINVAL;
    }
    if (cfg->concurrent_claims > KDP__DRA_MAX_SLOTS) {
        log_error("kdp_plugin_enable_dra: invalid kdp_dra_config.concurrent_claims %u: 0 (one "
                  "at a time) to %u",
                  cfg->concurrent_claims, KDP__DRA_MAX_SLOTS);
        return -EINVAL;
    }
    return 0;
}

static int fmt(char **out, const char *f, ...) __attribute__((format(printf, 2, 3)));

/* asprintf that leaves *out NULL on failure. Returns 0 or -ENOMEM. */
static int fmt(char **out, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vasprintf(out, f, ap);
    va_end(ap);
    if (n < 0) {
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int make_paths(kdp__dra_conf *c, const char *root)
{
    const char *inst = c->instance;
    const char *dash = inst ? "-" : "";
    inst = inst ? inst : "";
    if (fmt(&c->reg_path, "%s/plugins_registry/%s%s%s" REG_SUFFIX, root, c->driver, dash, inst) <
            0 ||
        fmt(&c->svc_dir, "%s/plugins/%s", root, c->driver) < 0 ||
        fmt(&c->svc_path, "%s/dra%s%s.sock", c->svc_dir, dash, inst) < 0 ||
        fmt(&c->cdi_kind, "k8s.%s/claim", c->driver) < 0 ||
        fmt(&c->taint_key, "%s/" KDP_DRA_UNHEALTHY_TAINT, c->driver) < 0) {
        return -ENOMEM;
    }
    const char *too_long = strlen(c->reg_path) > SOCKET_PATH_MAX   ? c->reg_path
                           : strlen(c->svc_path) > SOCKET_PATH_MAX ? c->svc_path
                                                                   : NULL;
    if (too_long) {
        log_error("kdp_plugin_enable_dra: socket path %s is too long for a unix socket (%d bytes "
                  "at most): a shorter kubelet root, driver name or instance",
                  too_long, SOCKET_PATH_MAX);
        return -ENAMETOOLONG;
    }
    const char *why = NULL;
    if (kdp_validate_cdi_kind(c->cdi_kind, &why) < 0) {
        return bad("CDI kind (from the driver name)", c->cdi_kind, why);
    }
    return 0;
}

int kdp__dra_conf_init(kdp__dra_conf *c, kdp_plugin *p, const kdp_dra_config *cfg)
{
    memset(c, 0, sizeof(*c));
    const char *node = NULL;
    const char *inst = NULL;
    int r = check(cfg);
    if (r == 0) {
        r = check_node(cfg, &node);
    }
    if (r == 0) {
        r = check_instance_of(cfg, p, &inst);
    }
    if (r < 0) {
        return r;
    }
    c->driver = strdup(cfg->driver_name);
    c->node = strdup(node);
    c->instance = inst ? strdup(inst) : NULL;
    c->kubeconfig = cfg->kubeconfig ? strdup(cfg->kubeconfig) : NULL;
    const char *cdi = cfg->cdi_dir ? cfg->cdi_dir : getenv(KDP_DRA_CDI_DIR_ENV);
    c->cdi_dir = strdup(cdi ? cdi : DEFAULT_CDI_DIR);
    c->cdi_mode = cfg->cdi_mode ? cfg->cdi_mode : 0644U;
    if (!c->driver || !c->node || (inst && !c->instance) || (cfg->kubeconfig && !c->kubeconfig) ||
        !c->cdi_dir) {
        return -ENOMEM;
    }
    r = make_paths(c, kdp__plugin_kubelet_root(p));
    if (r < 0) {
        return r;
    }
    c->state_dir = strdup(cfg->state_dir ? cfg->state_dir : c->svc_dir);
    if (!c->state_dir || asprintf(&c->md_dir, "%s/" KDP__DRA_MD_SUBDIR, c->state_dir) < 0) {
        c->md_dir = NULL;
        return -ENOMEM;
    }
    c->device_metadata = cfg->device_metadata;
    c->device_plugin_too = cfg->device_plugin_too;
    c->no_health = cfg->no_health;
    c->no_health_v1alpha1 = cfg->no_health_v1alpha1;
    c->resync_ms = cfg->resync_interval_ms ? cfg->resync_interval_ms : DEFAULT_RESYNC_MS;
    c->concurrent_claims = cfg->concurrent_claims ? cfg->concurrent_claims : 1;
    c->unhealthy_taint = cfg->unhealthy_taint;
    c->versions[c->n_versions++] = "v1.DRAPlugin";
    c->versions[c->n_versions++] = "v1beta1.DRAPlugin";
    if (!c->no_health) {
        c->versions[c->n_versions++] = "v1.DRAResourceHealth";
    }
    if (!c->no_health && !c->no_health_v1alpha1) {
        c->versions[c->n_versions++] = "v1alpha1.DRAResourceHealth";
    }
    return 0;
}

void kdp__dra_conf_done(kdp__dra_conf *c)
{
    free(c->driver);
    free(c->node);
    free(c->instance);
    free(c->kubeconfig);
    free(c->state_dir);
    free(c->md_dir);
    free(c->cdi_dir);
    free(c->cdi_kind);
    free(c->reg_path);
    free(c->svc_dir);
    free(c->svc_path);
    free(c->taint_key);
    memset(c, 0, sizeof(*c));
}
