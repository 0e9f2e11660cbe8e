/* SPDX-License-Identifier: MIT */
/* pconfig: a kdp_config checked (see pconfig.h). */
#include "plugin/pconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/validate.h"
#include "plugin/handover.h"
#include "plugin/probe.h"

char *kdp__pconfig_join(const char *dir, const char *name)
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

/* The fields a plugin without the device-plugin API has no use for. */
int kdp__pconfig_check_no_dp(const kdp_config *cfg, const char *caller)
{
    const struct {
        const char *name;
        bool set;
    } dp_only[] = {
        {"resource_name", cfg->resource_name != NULL},
        {"socket_name", cfg->socket_name != NULL},
        {"device_plugin_dir", cfg->device_plugin_dir != NULL},
        {"env_name", cfg->env_name != NULL},
        {"registration", cfg->registration != KDP_REGISTRATION_DEFAULT},
        {"replicas", cfg->replicas != 0},
        {"replicas_one_per_container", cfg->replicas_one_per_container},
        {"preferred", cfg->preferred != KDP_PREFERRED_NONE},
    };
    for (size_t i = 0; i < sizeof(dp_only) / sizeof(dp_only[0]); i++) {
        if (dp_only[i].set) {
            log_error("%s: kdp_config.%s is for the device-plugin API, which a DRA-only driver "
                      "does not serve: leave it unset, or make a plugin with kdp_plugin_new() "
                      "and serve both APIs with kdp_plugin_enable_dra() (device_plugin_too)",
                      caller, dp_only[i].name);
            return -EINVAL;
        }
    }
    return 0;
}

static int check_names(const kdp_config *cfg)
{
    const char *why = NULL;
    if (!cfg->resource_name || kdp__validate_resource_name(cfg->resource_name, &why) < 0) {
        log_error("invalid resource name \"%s\": %s%s",
                  cfg->resource_name ? cfg->resource_name : "(null)", why ? why : "missing",
                  cfg->resource_name ? ""
                                     : " (a DRA driver that serves no device-plugin resource is "
                                       "made with kdp_dra_driver_new(), kdp_dra.h)");
        return -EINVAL;
    }
    if (!cfg->socket_name || kdp__validate_socket_name(cfg->socket_name, &why) < 0) {
        log_error("invalid socket name \"%s\": %s", cfg->socket_name ? cfg->socket_name : "(null)",
                  why ? why : "missing");
        return -EINVAL;
    }
    return 0;
}

int kdp__pconfig_check(const kdp_config *cfg, const char *dir, bool names)
{
    const char *why = NULL;
    if (names && check_names(cfg) < 0) {
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

int kdp__pconfig_instance(const kdp_config *cfg, const char **ret, uint64_t *ret_gen)
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
