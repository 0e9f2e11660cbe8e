/* SPDX-License-Identifier: MIT */
/* kubelet_paths: where the kubelet's directories are (kdp_kubelet_paths_get),
 * from the settings, their environment variables and the defaults. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kdp.h"

#define PATH_CAP sizeof(((kdp_kubelet_paths *)0)->root)

/* s, set: not NULL and not "". */
static const char *set(const char *s)
{
    return s && *s ? s : NULL;
}

/* out = dir without its trailing slashes ("/" stays), then sub if any.
 * what names the setting in the log line of an error. */
static int put(char out[PATH_CAP], const char *dir, const char *sub, const char *what)
{
    if (dir[0] != '/') {
        log_error("%s: \"%s\" is not an absolute path", what, dir);
        return -EINVAL;
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') {
        n--;
    }
    if (n == 1) {
        n = 0; /* "/": the subdirectory's own slash is enough */
    }
    int w = sub ? snprintf(out, PATH_CAP, "%.*s/%s", (int)n, dir, sub)
                : snprintf(out, PATH_CAP, "%.*s", (int)(n ? n : 1), dir);
    if (w < 0 || (size_t)w >= PATH_CAP) {
        log_error("%s: the path is over %zu bytes", what, PATH_CAP - 1);
        return -ENAMETOOLONG;
    }
    return 0;
}

KDP_EXPORT int kdp_kubelet_paths_get(const char *kubelet_root, const char *device_plugin_dir,
                                     kdp_kubelet_paths *ret)
{
    if (!ret) {
        return -EINVAL;
    }
    const char *env_root = set(getenv(KDP_KUBELET_ROOT_ENV));
    const char *env_dir = set(getenv(KDP_DEVICE_PLUGIN_DIR_ENV));
    const char *root = KDP_KUBELET_ROOT;
    const char *root_what = "the default kubelet root";
    ret->root_from = "the default";
    if (set(kubelet_root)) {
        root = kubelet_root;
        root_what = "kdp_config.kubelet_root";
        ret->root_from = "kdp_config.kubelet_root";
    } else if (env_root) {
        root = env_root;
        root_what = "$" KDP_KUBELET_ROOT_ENV;
        ret->root_from = "$" KDP_KUBELET_ROOT_ENV;
    }
    int r = put(ret->root, root, NULL, root_what);
    if (r == 0) {
        r = put(ret->plugins_registry_dir, root, KDP_PLUGINS_REGISTRY_SUBDIR, root_what);
    }
    if (r == 0) {
        r = put(ret->pod_resources_socket, root, KDP_POD_RESOURCES_SUBPATH, root_what);
    }
    if (r < 0) {
        return r;
    }
    if (set(device_plugin_dir)) {
        ret->device_plugin_dir_from = "kdp_config.device_plugin_dir";
        return put(ret->device_plugin_dir, device_plugin_dir, NULL, ret->device_plugin_dir_from);
    }
    if (env_dir) {
        ret->device_plugin_dir_from = "$" KDP_DEVICE_PLUGIN_DIR_ENV;
        return put(ret->device_plugin_dir, env_dir, NULL, ret->device_plugin_dir_from);
    }
    /* Not below the root: the kubelet's --root-dir does not move it either. */
    ret->device_plugin_dir_from = "the kubelet's constant";
    return put(ret->device_plugin_dir, KDP_DEVICE_PLUGIN_DIR, NULL, ret->device_plugin_dir_from);
}
