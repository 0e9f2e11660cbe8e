/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's resources (docs/generic.md), one item of the resources:
 * list at a time: each key with its check (the devices: list is
 * config_devices.c's, health: config_health.c's), the defaults, and the
 * checks that need the whole resource.
 */
#include "config_resource.h"

#include <kdp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_devices.h"
#include "config_dra.h"
#include "config_health.h"

static int f_name(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_rparse *rp = obj;
    rp->name_node = v;
    if (yw_dup_text(c, v, key, 253 + 64, &rp->r->name) < 0) {
        return -1;
    }
    const char *why = NULL;
    if (kdp_validate_resource_name(rp->r->name, &why) < 0) {
        return yw_fail(c, v, key, "invalid resource name \"%s\": %s", rp->r->name, why);
    }
    return 0;
}

/* The library's own rule (kdp_validate_socket_name): one rule everywhere. */
static int check_socket(yw_ctx *c, yaml_node_t *v, const char *key, const char *s)
{
    const char *why = NULL;
    if (kdp_validate_socket_name(s, &why) < 0) {
        return yw_fail(c, v, key, "%s", why);
    }
    return 0;
}

static int f_socket(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_rparse *rp = obj;
    rp->socket_node = v;
    if (yw_dup_text(c, v, key, KDP_SOCKET_NAME_MAX, &rp->r->socket) < 0) {
        return -1;
    }
    return check_socket(c, v, key, rp->r->socket);
}

static int f_devices(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return gen_devices_parse(c, v, key, ((gen_rparse *)obj)->r);
}

static int f_count(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_count(c, v, key, GEN_MAX_COUNT, &((gen_rparse *)obj)->r->count);
}

static int f_preferred(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((gen_rparse *)obj)->r;
    const char *s = yw_text(c, v, key, 16, false);
    if (!s) {
        return -1;
    }
    if (strcmp(s, "packed") == 0) {
        r->preferred = KDP_PREFERRED_PACKED;
    } else if (strcmp(s, "spread") == 0) {
        r->preferred = KDP_PREFERRED_SPREAD;
    } else if (strcmp(s, "none") == 0) {
        r->preferred = KDP_PREFERRED_NONE;
    } else {
        return yw_fail(c, v, key,
                       "must be \"packed\" or \"none\", not \"%s\"; or \"spread\" (for shared "
                       "devices: count above 1)",
                       s);
    }
    return 0;
}

static int f_one_per_container(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_rparse *rp = obj;
    rp->one_node = v;
    return yw_get_bool(c, v, key, &rp->r->one_per_container);
}

static int f_permissions(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((gen_rparse *)obj)->r;
    if (yw_dup_text(c, v, key, 3, &r->permissions) < 0) {
        return -1;
    }
    const char *s = r->permissions;
    for (size_t i = 0; s[i]; i++) {
        if (!strchr("rwm", s[i]) || strchr(s + i + 1, s[i])) {
            return yw_fail(c, v, key, "must be letters from \"rwm\", each at most once");
        }
    }
    return 0;
}

static int f_mount_host(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((gen_mount *)obj)->host_path);
}

static int f_mount_container(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((gen_mount *)obj)->container_path);
}

static int f_mount_ro(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_bool(c, v, key, &((gen_mount *)obj)->read_only);
}

enum { MOUNT_HOST_PATH, MOUNT_CONTAINER_PATH, MOUNT_READ_ONLY, MOUNT_FIELDS };
static const yw_field mount_fields[MOUNT_FIELDS] = {
    [MOUNT_HOST_PATH] = {"hostPath", f_mount_host},
    [MOUNT_CONTAINER_PATH] = {"containerPath", f_mount_container},
    [MOUNT_READ_ONLY] = {"readOnly", f_mount_ro},
};

static int f_mounts(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((gen_rparse *)obj)->r;
    if (yw_check_list(c, v, key, 0, GEN_MAX_MOUNTS) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    r->mounts = calloc(n ? n : 1, sizeof(*r->mounts));
    if (!r->mounts) {
        return yw_oom(c, v, key);
    }
    r->n_mounts = n;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        yaml_node_t *m = yw_node_at(c, v->data.sequence.items.start[i]);
        unsigned seen;
        if (yw_parse_map(c, m, sub, mount_fields, MOUNT_FIELDS, &r->mounts[i], &seen) < 0) {
            return -1;
        }
        if (!(seen & YW_BIT(MOUNT_HOST_PATH))) {
            return yw_fail(c, m, sub, "hostPath is required");
        }
    }
    return 0;
}

static int env_pair(yw_ctx *c, yaml_node_pair_t *p, const char *key, gen_resource *r)
{
    yaml_node_t *k = yw_node_at(c, p->key);
    yaml_node_t *v = yw_node_at(c, p->value);
    const char *name = yw_text(c, k, key, 255, false);
    if (!name) {
        return -1;
    }
    char sub[YW_KEYLEN];
    yw_subkey(sub, key, name);
    if (strchr(name, '=')) {
        return yw_fail(c, k, sub, "an environment variable name must not contain '='");
    }
    for (size_t i = 0; i < r->n_env; i++) {
        if (strcmp(r->env[i].key, name) == 0) {
            return yw_fail(c, k, sub, "duplicate key");
        }
    }
    const char *val = yw_text(c, v, sub, 32768, true);
    if (!val) {
        return -1;
    }
    gen_env *e = &r->env[r->n_env];
    e->key = strdup(name);
    e->value = strdup(val);
    r->n_env++;
    return e->key && e->value ? 0 : yw_oom(c, v, sub);
}

static int f_env(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((gen_rparse *)obj)->r;
    if (v->type != YAML_MAPPING_NODE) {
        return yw_fail(c, v, key, "must be a mapping of NAME: value, not %s", yw_type_name(v));
    }
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (n > GEN_MAX_ENV) {
        return yw_fail(c, v, key, "must have at most %u variables", GEN_MAX_ENV);
    }
    r->env = calloc(n ? n : 1, sizeof(*r->env));
    r->n_env = 0;
    if (!r->env) {
        return yw_oom(c, v, key);
    }
    for (size_t i = 0; i < n; i++) {
        if (env_pair(c, &v->data.mapping.pairs.start[i], key, r) < 0) {
            return -1;
        }
    }
    return 0;
}

static int f_cdi_kind(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((gen_rparse *)obj)->r;
    if (yw_dup_text(c, v, key, 320, &r->cdi_kind) < 0) {
        return -1;
    }
    const char *why = NULL;
    if (kdp_validate_cdi_kind(r->cdi_kind, &why) < 0) {
        return yw_fail(c, v, key, "invalid CDI kind \"%s\": %s", r->cdi_kind, why);
    }
    return 0;
}

static int f_cdi_specs(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_bool(c, v, key, &((gen_rparse *)obj)->r->cdi_device_specs);
}

enum { CDI_KIND, CDI_DEVICE_SPECS, CDI_FIELDS };
static const yw_field cdi_fields[CDI_FIELDS] = {
    [CDI_KIND] = {"kind", f_cdi_kind},
    [CDI_DEVICE_SPECS] = {"deviceSpecs", f_cdi_specs},
};

/* cdi: true | false | {kind, deviceSpecs} */
static int f_cdi(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_rparse *rp = obj;
    rp->cdi_node = v;
    if (v->type == YAML_SCALAR_NODE) {
        return yw_get_bool(c, v, key, &rp->r->cdi);
    }
    unsigned seen;
    rp->r->cdi = true;
    return yw_parse_map(c, v, key, cdi_fields, CDI_FIELDS, rp, &seen);
}

/* sharedNodes: globs every container of the resource gets. */
static int f_shared(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((gen_rparse *)obj)->r;
    if (yw_check_list(c, v, key, 1, GEN_MAX_SHARED) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    r->shared = calloc(n + 1, sizeof(*r->shared));
    if (!r->shared) {
        return yw_oom(c, v, key);
    }
    r->n_shared = n;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        if (yw_get_path(c, yw_node_at(c, v->data.sequence.items.start[i]), sub, GEN_MAX_STRING,
                        &r->shared[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* rescanInterval: "0s" (off) or 100ms to 1h. */
static int f_rescan(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((gen_rparse *)obj)->r;
    if (yw_get_duration(c, v, key, 0, 3600000, "0s (off) or 100ms to 1h (60m)", &r->rescan_ms) <
        0) {
        return -1;
    }
    return r->rescan_ms == 0 || r->rescan_ms >= 100
               ? 0
               : yw_fail(c, v, key, "must be 0s (off) or from 100ms to 1h (60m)");
}

static int f_dra(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_rparse *rp = obj;
    rp->dra_node = v;
    return gen_dra_parse(c, v, key, &rp->r->dra);
}

static int f_health(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return gen_health_parse(c, v, key, &((gen_rparse *)obj)->r->health);
}

enum {
    RES_NAME,
    RES_SOCKET,
    RES_DEVICES,
    RES_COUNT,
    RES_PERMISSIONS,
    RES_MOUNTS,
    RES_ENV,
    RES_CDI,
    RES_PREFERRED,
    RES_ONE_PER_CONTAINER,
    RES_HEALTH,
    RES_SHARED,
    RES_RESCAN,
    RES_DRA,
    RES_FIELDS
};
static const yw_field resource_fields[RES_FIELDS] = {
    [RES_NAME] = {"name", f_name},
    [RES_SOCKET] = {"socket", f_socket},
    [RES_DEVICES] = {"devices", f_devices},
    [RES_COUNT] = {"count", f_count},
    [RES_PERMISSIONS] = {"permissions", f_permissions},
    [RES_MOUNTS] = {"mounts", f_mounts},
    [RES_ENV] = {"env", f_env},
    [RES_CDI] = {"cdi", f_cdi},
    [RES_PREFERRED] = {"preferred", f_preferred},
    [RES_ONE_PER_CONTAINER] = {"onePerContainer", f_one_per_container},
    [RES_HEALTH] = {"health", f_health},
    [RES_SHARED] = {"sharedNodes", f_shared},
    [RES_RESCAN] = {"rescanInterval", f_rescan},
    [RES_DRA] = {"dra", f_dra},
};

/* A resource name's character in a default socket name: lower case letters
 * and digits as they are, '-' for anything else. */
static char socket_char(char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) {
        return ch;
    }
    return (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : '-');
}

/* "example.com/serial" -> "kdp-example-com-serial.sock", or NULL (reported). */
static char *default_socket(yw_ctx *c, const gen_rparse *rp, const char *key)
{
    const char *name = rp->r->name;
    size_t len = strlen(name);
    if (len + 9 > KDP_SOCKET_NAME_MAX) {
        (void)yw_fail(c, rp->name_node, key,
                      "the socket name made from it would be too long: set socket");
        return NULL;
    }
    char *sock = malloc(len + 10);
    if (!sock) {
        (void)yw_oom(c, rp->name_node, key);
        return NULL;
    }
    char *o = sock + sprintf(sock, "kdp-");
    for (const char *p = name; *p; p++) {
        *o++ = socket_char(*p);
    }
    memcpy(o, ".sock", sizeof(".sock"));
    return sock;
}

/* rescanInterval's default: sysfs sends no inotify events, so a driver
 * bound or unbound is seen by reading it again. */
static unsigned default_rescan(const gen_resource *r)
{
    for (size_t i = 0; i < r->n_entries; i++) {
        if (r->entries[i].pci.set) {
            return GEN_PCI_RESCAN_MS;
        }
    }
    return 0;
}

/* Defaults and the checks that need the whole resource. */
static int finish_resource(yw_ctx *c, yaml_node_t *n, const char *key, gen_rparse *rp,
                           unsigned seen)
{
    gen_resource *r = rp->r;
    char sub[YW_KEYLEN];
    if (!(seen & YW_BIT(RES_NAME)) || !(seen & YW_BIT(RES_DEVICES))) {
        yw_subkey(sub, key, seen & YW_BIT(RES_NAME) ? "devices" : "name");
        return yw_fail(c, n, sub, "is required");
    }
    yw_subkey(sub, key, "name");
    if (!r->socket && !(r->socket = default_socket(c, rp, sub))) {
        return -1;
    }
    if (strlen(c->dp_dir) + 1 + strlen(r->socket) > KDP_SOCKET_PATH_MAX) {
        yw_subkey(sub, key, "socket");
        return yw_fail(c, rp->socket_node, sub,
                       "the socket path %s/%s is over %d bytes (the unix socket limit)", c->dp_dir,
                       r->socket, KDP_SOCKET_PATH_MAX);
    }
    if (!r->count) {
        r->count = 1;
    }
    if (!(seen & YW_BIT(RES_RESCAN))) {
        r->rescan_ms = default_rescan(r);
    }
    if (r->dra.set && r->count > 1) {
        yw_subkey(sub, key, "dra");
        return yw_fail(c, rp->dra_node, sub,
                       "cannot serve count above 1: a DRA device is shared by the claims that "
                       "share it (set count to 1)");
    }
    if (r->one_per_container && r->count < 2) {
        yw_subkey(sub, key, "onePerContainer");
        return yw_fail(c, rp->one_node, sub, "needs count above 1 (devices shared)");
    }
    if (!r->permissions && !(r->permissions = strdup("rw"))) {
        return yw_oom(c, n, key);
    }
    for (size_t i = 0; i < r->n_mounts; i++) {
        gen_mount *m = &r->mounts[i];
        if (!m->container_path && !(m->container_path = strdup(m->host_path))) {
            return yw_oom(c, n, key);
        }
    }
    if (r->cdi && !r->cdi_kind) {
        const char *why = NULL;
        yw_subkey(sub, key, "cdi");
        if (kdp_validate_cdi_kind(r->name, &why) < 0) {
            return yw_fail(c, rp->cdi_node, sub,
                           "the resource name is not a valid CDI kind (%s): set cdi.kind", why);
        }
        if (!(r->cdi_kind = strdup(r->name))) {
            return yw_oom(c, n, key);
        }
    }
    return 0;
}

int gen_resource_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_rparse *rp)
{
    unsigned seen = 0;
    if (yw_parse_map(c, n, key, resource_fields, RES_FIELDS, rp, &seen) < 0) {
        return -1;
    }
    if (!rp->name_node) {
        rp->name_node = n;
    }
    if (!rp->socket_node) {
        rp->socket_node = rp->name_node;
    }
    if (!rp->cdi_node) {
        rp->cdi_node = n;
    }
    if (!rp->dra_node) {
        rp->dra_node = n;
    }
    return finish_resource(c, n, key, rp, seen);
}
