/* SPDX-License-Identifier: MIT */
#include "dra/prepared.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/validate.h"
#include "dra/devstatus.h"

int kdp__dra_prepared_init(kdp_dra_prepared *r, size_t n)
{
    r->n = n;
    r->devs = calloc(n ? n : 1, sizeof(*r->devs));
    return r->devs ? 0 : -ENOMEM;
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

void kdp__dra_prepared_done(kdp_dra_prepared *r)
{
    for (size_t i = 0; r && r->devs && i < r->n; i++) {
        kdp__dra_pdev *d = &r->devs[i];
        for (size_t j = 0; j < d->n_nodes; j++) {
            free((char *)d->nodes[j].path);
            free((char *)d->nodes[j].host_path);
            free((char *)d->nodes[j].permissions);
        }
        free(d->nodes);
        free_strv(d->env, d->n_env);
        free_strv(d->cdi_ids, d->n_cdi_ids);
        free(d->status);
    }
    if (r) {
        free(r->devs);
        r->devs = NULL;
        r->n = 0;
    }
}

static int check_index(const kdp_dra_prepared *r, size_t device, const char *what)
{
    if (!r || device >= r->n) {
        log_error("kdp_dra_prepared_%s: device index %zu is past the claim's %zu devices", what,
                  device, r ? r->n : 0);
        return -EINVAL;
    }
    return 0;
}

static int push_str(char ***v, size_t *n, const char *s)
{
    if (*n >= KDP__DRA_PREPARED_MAX) {
        return -E2BIG;
    }
    char **nv = realloc(*v, (*n + 1) * sizeof(*nv));
    if (!nv) {
        return -ENOMEM;
    }
    *v = nv;
    if (!(nv[*n] = strdup(s))) {
        return -ENOMEM;
    }
    (*n)++;
    return 0;
}

KDP_EXPORT int kdp_dra_prepared_add_node(kdp_dra_prepared *r, size_t device,
                                         const kdp_cdi_node *node)
{
    int rc = check_index(r, device, "add_node");
    if (rc < 0) {
        return rc;
    }
    const char *why = NULL;
    if (!node || !node->path || kdp__validate_abs_path(node->path, &why) < 0 ||
        (node->host_path && kdp__validate_abs_path(node->host_path, &why) < 0) ||
        (node->permissions && kdp__validate_permissions(node->permissions, &why) < 0)) {
        log_error("kdp_dra_prepared_add_node: invalid device node %.200s: %s",
                  node && node->path ? node->path : "(null)", why ? why : "path is missing");
        return -EINVAL;
    }
    kdp__dra_pdev *d = &r->devs[device];
    if (d->n_nodes >= KDP__DRA_PREPARED_MAX) {
        return -E2BIG;
    }
    kdp_cdi_node *nn = realloc(d->nodes, (d->n_nodes + 1) * sizeof(*nn));
    if (!nn) {
        return -ENOMEM;
    }
    d->nodes = nn;
    kdp_cdi_node c = {strdup(node->path), node->host_path ? strdup(node->host_path) : NULL,
                      node->permissions ? strdup(node->permissions) : NULL};
    if (!c.path || (node->host_path && !c.host_path) || (node->permissions && !c.permissions)) {
        free((char *)c.path);
        free((char *)c.host_path);
        free((char *)c.permissions);
        return -ENOMEM;
    }
    d->nodes[d->n_nodes++] = c;
    return 0;
}

KDP_EXPORT int kdp_dra_prepared_add_env(kdp_dra_prepared *r, size_t device, const char *key,
                                        const char *value)
{
    int rc = check_index(r, device, "add_env");
    if (rc < 0) {
        return rc;
    }
    const char *why = NULL;
    if (!key || !value || kdp__validate_env_key(key, &why) < 0) {
        log_error("kdp_dra_prepared_add_env: invalid variable %.80s: %s", key ? key : "(null)",
                  why ? why : "key or value is NULL");
        return -EINVAL;
    }
    char *kv = NULL;
    if (asprintf(&kv, "%s=%s", key, value) < 0) {
        return -ENOMEM;
    }
    kdp__dra_pdev *d = &r->devs[device];
    rc = push_str(&d->env, &d->n_env, kv);
    free(kv);
    return rc;
}

KDP_EXPORT int kdp_dra_prepared_add_cdi_id(kdp_dra_prepared *r, size_t device, const char *cdi_id)
{
    int rc = check_index(r, device, "add_cdi_id");
    if (rc < 0) {
        return rc;
    }
    const char *why = NULL;
    if (!cdi_id || kdp__validate_cdi_name(cdi_id, &why) < 0) {
        log_error("kdp_dra_prepared_add_cdi_id: invalid CDI ID \"%.200s\": %s",
                  cdi_id ? cdi_id : "(null)", why ? why : "NULL");
        return -EINVAL;
    }
    kdp__dra_pdev *d = &r->devs[device];
    return push_str(&d->cdi_ids, &d->n_cdi_ids, cdi_id);
}

KDP_EXPORT int kdp_dra_prepared_set_status(kdp_dra_prepared *r, size_t device,
                                           const kdp_dra_device_status *st)
{
    int rc = check_index(r, device, "set_status");
    if (rc < 0) {
        return rc;
    }
    char why[300];
    char *json = NULL;
    rc = kdp__dra_devstatus_json(st, (int64_t)time(NULL), &json, why, sizeof(why));
    if (rc == -EINVAL) {
        log_error("kdp_dra_prepared_set_status: device %zu: %s", device, why);
    }
    if (rc < 0) {
        return rc;
    }
    free(r->devs[device].status);
    r->devs[device].status = json;
    return 0;
}
