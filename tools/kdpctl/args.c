/* SPDX-License-Identifier: MIT */
/* args: durations, ID lists, socket paths. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdpctl.h"

int kc_parse_duration(const char *s, uint64_t *ret_us)
{
    static const struct {
        const char *unit;
        double us;
    } units[] = {{"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}};
    if (!s || !*s || *s == '-' || *s == '+') {
        return -EINVAL;
    }
    char *end;
    double v = strtod(s, &end);
    if (end == s || v != v) {
        return -EINVAL;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].unit) == 0) {
            double us = v * units[i].us;
            if (us < 1.0 || us > 1e15) { /* > 0 and under about 31 years */
                return -EINVAL;
            }
            *ret_us = (uint64_t)us;
            return 0;
        }
    }
    return -EINVAL;
}

const char *kc_format_duration(uint64_t us, char *buf, size_t cap)
{
    if (us % 60000000U == 0) {
        snprintf(buf, cap, "%llum", (unsigned long long)(us / 60000000U));
    } else if (us % 1000000U == 0) {
        snprintf(buf, cap, "%llus", (unsigned long long)(us / 1000000U));
    } else {
        snprintf(buf, cap, "%llums", (unsigned long long)((us + 999) / 1000));
    }
    return buf;
}

int kc_strv_add(kc_strv *v, const char *s)
{
    char **nv = realloc(v->v, (v->n + 2) * sizeof(*nv));
    if (!nv) {
        return -ENOMEM;
    }
    v->v = nv;
    nv[v->n] = strdup(s);
    if (!nv[v->n]) {
        return -ENOMEM;
    }
    nv[++v->n] = NULL;
    return 0;
}

void kc_strv_free(kc_strv *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->v[i]);
    }
    free(v->v);
    *v = (kc_strv){0};
}

int kc_split_ids(const char *list, kc_strv *ret)
{
    kc_strv v = {0};
    const char *p = list;
    while (p && *p) {
        size_t n = strcspn(p, ",");
        char *item = strndup(p, n);
        int r = item ? 0 : -ENOMEM;
        if (r == 0 && n > 0) {
            r = kc_strv_add(&v, item);
        }
        free(item);
        if (r < 0) {
            kc_strv_free(&v);
            return r;
        }
        p += n + (p[n] == ',');
    }
    *ret = v;
    return 0;
}

const char *kc_default_dir(const char *kubelet_root)
{
    static kdp_kubelet_paths paths; /* one per process: the options' lifetime */
    return kdp_kubelet_paths_get(kubelet_root, NULL, &paths) == 0 ? paths.device_plugin_dir : NULL;
}

char *kc_socket_path(const kc_opts *o, const char *sock)
{
    if (strchr(sock, '/')) {
        return strdup(sock);
    }
    char *path;
    size_t n = strlen(o->dir);
    bool slash = n > 0 && o->dir[n - 1] == '/';
    return asprintf(&path, "%s%s%s", o->dir, slash ? "" : "/", sock) < 0 ? NULL : path;
}

const char *kc_registry_dir(const kc_opts *o, bool explicit_only)
{
    static kdp_kubelet_paths paths; /* one per process: the options' lifetime */
    if (o->registry) {
        return o->registry;
    }
    const char *env = getenv(KDP_KUBELET_ROOT_ENV);
    if (explicit_only && !o->root && !(env && *env)) {
        return NULL;
    }
    return kdp_kubelet_paths_get(o->root, NULL, &paths) == 0 ? paths.plugins_registry_dir : NULL;
}
