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
    memset(r, 0, sizeof(*r));
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
        kdp__dra_edits_clear(&d->edits);
        free_strv(d->cdi_ids, d->n_cdi_ids);
        free(d->status);
    }
    if (r) {
        kdp__dra_edits_clear(&r->claim);
        free(r->devs);
        r->devs = NULL;
        r->n = 0;
    }
}

/* Device `device`'s edits, or the whole claim's (KDP_DRA_CLAIM); NULL
 * (logged) past the claim's devices. */
static kdp__dra_edits *edits_of(kdp_dra_prepared *r, size_t device, const char *what)
{
    if (r && device == KDP_DRA_CLAIM) {
        return &r->claim;
    }
    if (!r || device >= r->n) {
        log_error("kdp_dra_prepared_%s: device index %zu is past the claim's %zu devices "
                  "(KDP_DRA_CLAIM: the whole claim)",
                  what, device, r ? r->n : 0);
        return NULL;
    }
    return &r->devs[device].edits;
}

/* For what belongs to one device only. */
static int check_index(const kdp_dra_prepared *r, size_t device, const char *what)
{
    if (!r || device >= r->n) {
        log_error("kdp_dra_prepared_%s: device index %zu is %s", what, device,
                  device == KDP_DRA_CLAIM ? "the whole claim: give it to each device instead"
                                          : "past the claim's devices");
        return -EINVAL;
    }
    return 0;
}

/* A failure of an edit the author gave: -E2BIG said. */
static int added(int rc, const char *what)
{
    if (rc == -E2BIG) {
        log_error("kdp_dra_prepared_%s: more than %u of a kind for one device (or the claim)", what,
                  KDP__DRA_EDITS_MAX);
    }
    return rc;
}

KDP_EXPORT int kdp_dra_prepared_add_node(kdp_dra_prepared *r, size_t device,
                                         const kdp_cdi_node *node)
{
    kdp__dra_edits *e = edits_of(r, device, "add_node");
    if (!e) {
        return -EINVAL;
    }
    const char *why = NULL;
    if (!node || !node->path || kdp__validate_abs_path(node->path, &why) < 0 ||
        (node->host_path && kdp__validate_abs_path(node->host_path, &why) < 0) ||
        (node->permissions && kdp__validate_permissions(node->permissions, &why) < 0)) {
        log_error("kdp_dra_prepared_add_node: invalid device node %.200s: %s",
                  node && node->path ? node->path : "(null)", why ? why : "path is missing");
        return -EINVAL;
    }
    return added(kdp__dra_edits_add_node(e, node), "add_node");
}

KDP_EXPORT int kdp_dra_prepared_add_env(kdp_dra_prepared *r, size_t device, const char *key,
                                        const char *value)
{
    kdp__dra_edits *e = edits_of(r, device, "add_env");
    if (!e) {
        return -EINVAL;
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
    int rc = kdp__dra_edits_add_env(e, kv);
    free(kv);
    return added(rc, "add_env");
}

KDP_EXPORT int kdp_dra_prepared_add_mount(kdp_dra_prepared *r, size_t device,
                                          const char *container_path, const char *host_path,
                                          bool read_only)
{
    kdp__dra_edits *e = edits_of(r, device, "add_mount");
    if (!e) {
        return -EINVAL;
    }
    const char *why = "NULL";
    const char *bad = NULL;
    if (!container_path || kdp__validate_abs_path(container_path, &why) < 0) {
        bad = container_path ? container_path : "(null container_path)";
    } else if (!host_path || kdp__validate_abs_path(host_path, &why) < 0) {
        bad = host_path ? host_path : "(null host_path)";
    }
    if (bad) {
        log_error("kdp_dra_prepared_add_mount: invalid path \"%.200s\": %s", bad, why);
        return -EINVAL;
    }
    return added(kdp__dra_edits_add_mount(e, host_path, container_path, read_only), "add_mount");
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
