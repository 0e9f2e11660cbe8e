/* SPDX-License-Identifier: MIT */
#include "plugin/regmode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"

KDP_EXPORT int kdp_registration_parse(const char *s, kdp_registration *ret)
{
    static const struct {
        const char *name;
        kdp_registration mode;
    } names[] = {
        {"kubelet", KDP_REGISTRATION_KUBELET},
        {"watcher", KDP_REGISTRATION_WATCHER},
        {"auto", KDP_REGISTRATION_AUTO},
    };
    for (size_t i = 0; s && ret && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(s, names[i].name) == 0) {
            *ret = names[i].mode;
            return 0;
        }
    }
    return -EINVAL;
}

const char *kdp__regmode_name(kdp_registration mode)
{
    return mode == KDP_REGISTRATION_WATCHER ? "plugin watcher" : KDP_KUBELET_SOCKET;
}

const char *kdp__regmode_dir(kdp_registration mode, const kdp_kubelet_paths *paths)
{
    return mode == KDP_REGISTRATION_WATCHER ? paths->plugins_registry_dir
                                            : paths->device_plugin_dir;
}

static bool is_a(const char *path, mode_t type)
{
    struct stat st;
    return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/* kubelet.sock if it is there (every kubelet serves it today), else the
 * watcher if its directory is, else kubelet.sock (to be waited for). */
static kdp_registration decide(const char *resource, const kdp_kubelet_paths *paths)
{
    char sock[sizeof(paths->device_plugin_dir) + sizeof(KDP_KUBELET_SOCKET) + 1];
    snprintf(sock, sizeof(sock), "%s/%s", paths->device_plugin_dir, KDP_KUBELET_SOCKET);
    kdp_registration mode = KDP_REGISTRATION_KUBELET;
    const char *why = "neither is there yet: waiting for kubelet.sock";
    if (is_a(sock, S_IFSOCK)) {
        why = "it exists";
    } else if (is_a(paths->plugins_registry_dir, S_IFDIR)) {
        mode = KDP_REGISTRATION_WATCHER;
        why = "there is no kubelet.sock, and plugins_registry/ exists";
    }
    log_info("%s: registration auto: %s (%s; %s, %s)", resource, kdp__regmode_name(mode), why, sock,
             paths->plugins_registry_dir);
    return mode;
}

int kdp__regmode_resolve(const kdp_config *cfg, const kdp_kubelet_paths *paths,
                         kdp_registration *ret)
{
    kdp_registration mode = cfg->registration;
    if (mode == KDP_REGISTRATION_DEFAULT) {
        const char *env = getenv(KDP_REGISTRATION_ENV);
        mode = KDP_REGISTRATION_KUBELET;
        if (env && *env && kdp_registration_parse(env, &mode) < 0) {
            log_error("invalid $%s \"%.64s\": \"kubelet\", \"watcher\" or \"auto\"",
                      KDP_REGISTRATION_ENV, env);
            return -EINVAL;
        }
    }
    if (mode != KDP_REGISTRATION_KUBELET && mode != KDP_REGISTRATION_WATCHER &&
        mode != KDP_REGISTRATION_AUTO) {
        log_error("invalid kdp_config.registration %d: KDP_REGISTRATION_KUBELET, "
                  "KDP_REGISTRATION_WATCHER or KDP_REGISTRATION_AUTO",
                  (int)mode);
        return -EINVAL;
    }
    if (mode == KDP_REGISTRATION_AUTO) {
        mode = decide(cfg->resource_name, paths);
    }
    if (mode == KDP_REGISTRATION_WATCHER && cfg->socket_name && cfg->socket_name[0] == '.') {
        log_error("invalid socket name \"%s\" for the plugin watcher: the kubelet skips names "
                  "that start with '.'",
                  cfg->socket_name);
        return -EINVAL;
    }
    *ret = mode;
    return 0;
}
