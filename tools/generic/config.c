/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's configuration: the schema (docs/generic.md). The file is read
 * with libyaml's document loader and walked with yamlwalk.c, which names the
 * file, the line and the key in every error ("config.yaml:7:
 * resources[0].count: must be a positive integer"); here, each mapping's
 * fields as a table, their meaning, and the checks that need a whole
 * resource. Each table has an enum of its fields, so that a check reads
 * "seen & YW_BIT(ENTRY_PATH)" rather than a bare bit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <kdp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config_health.h"
#include "yamlwalk.h"

#define SCALAR_BUDGET 200000 /* scalars copied per load, aliases included */

static bool parse_usb_id(const char *s, size_t len, uint16_t *out)
{
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        len -= 2;
    }
    if (len == 0 || len > 4) {
        return false;
    }
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) {
            return false;
        }
        v = v * 16 + (unsigned)d;
    }
    *out = (uint16_t)v;
    return true;
}

static int get_usb_id(yw_ctx *c, const yaml_node_t *n, const char *key, uint16_t *out)
{
    const char *s = yw_text(c, n, key, 16, true);
    if (!s) {
        return -1;
    }
    if (!parse_usb_id(s, strlen(s), out)) {
        return yw_fail(c, n, key, "must be a hexadecimal USB ID of 4 digits at most (e.g. 0403)");
    }
    return 0;
}

/* ---- usb ---- */

static int f_usb_vendor(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return get_usb_id(c, v, key, &((gen_usb *)obj)->vendor);
}

static int f_usb_product(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    ((gen_usb *)obj)->has_product = true;
    return get_usb_id(c, v, key, &((gen_usb *)obj)->product);
}

static int f_usb_serial(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_dup_text(c, v, key, 255, &((gen_usb *)obj)->serial);
}

enum { USB_VENDOR, USB_PRODUCT, USB_SERIAL, USB_FIELDS };
static const yw_field usb_fields[USB_FIELDS] = {
    [USB_VENDOR] = {"vendor", f_usb_vendor},
    [USB_PRODUCT] = {"product", f_usb_product},
    [USB_SERIAL] = {"serial", f_usb_serial},
};

/* usb: VENDOR[:PRODUCT], or {vendor, product, serial}. */
static int parse_usb(yw_ctx *c, yaml_node_t *n, const char *key, gen_usb *u)
{
    u->set = true;
    if (n->type == YAML_SCALAR_NODE) {
        const char *s = yw_text(c, n, key, 16, false);
        if (!s) {
            return -1;
        }
        const char *colon = strchr(s, ':');
        size_t vl = colon ? (size_t)(colon - s) : strlen(s);
        if (!parse_usb_id(s, vl, &u->vendor) ||
            (colon && !parse_usb_id(colon + 1, strlen(colon + 1), &u->product))) {
            return yw_fail(c, n, key,
                           "must be VENDOR or VENDOR:PRODUCT in hexadecimal (e.g. 0403:6001), or "
                           "a mapping with vendor, product and serial");
        }
        u->has_product = colon != NULL;
        return 0;
    }
    unsigned seen;
    if (yw_parse_map(c, n, key, usb_fields, USB_FIELDS, u, &seen) < 0) {
        return -1;
    }
    return seen & YW_BIT(USB_VENDOR) ? 0 : yw_fail(c, n, key, "vendor is required");
}

/* ---- devices ---- */

static bool id_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.' || ch == ':';
}

static bool is_alnum_ch(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

static int f_entry_path(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_entry *e = obj;
    if (e->paths) {
        return yw_fail(c, v, key, "path and paths cannot be used together (paths: is a group)");
    }
    e->paths = calloc(1, sizeof(*e->paths));
    if (!e->paths) {
        return yw_oom(c, v, key);
    }
    e->n_paths = 1;
    return yw_get_path(c, v, key, GEN_MAX_STRING, &e->paths[0]);
}

static int f_entry_paths(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_entry *e = obj;
    if (e->paths) {
        return yw_fail(c, v, key, "path and paths cannot be used together (paths: is a group)");
    }
    if (yw_check_list(c, v, key, 1, GEN_MAX_GROUP) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    e->paths = calloc(n, sizeof(*e->paths));
    if (!e->paths) {
        return yw_oom(c, v, key);
    }
    e->n_paths = n;
    e->group = true;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        if (yw_get_path(c, yw_node_at(c, v->data.sequence.items.start[i]), sub, GEN_MAX_STRING,
                        &e->paths[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

static int f_entry_id(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_entry *e = obj;
    if (yw_dup_text(c, v, key, 200, &e->id) < 0) {
        return -1;
    }
    size_t len = strlen(e->id);
    bool ok = is_alnum_ch(e->id[0]) && is_alnum_ch(e->id[len - 1]);
    for (size_t i = 0; ok && i < len; i++) {
        ok = id_char_ok(e->id[i]);
    }
    return ok ? 0
              : yw_fail(c, v, key,
                        "must be letters, digits, '_', '-', '.' or ':', with a letter or digit at "
                        "both ends");
}

static int f_entry_usb(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return parse_usb(c, v, key, &((gen_entry *)obj)->usb);
}

enum { ENTRY_PATH, ENTRY_PATHS, ENTRY_ID, ENTRY_USB, ENTRY_FIELDS };
static const yw_field entry_fields[ENTRY_FIELDS] = {
    [ENTRY_PATH] = {"path", f_entry_path},
    [ENTRY_PATHS] = {"paths", f_entry_paths},
    [ENTRY_ID] = {"id", f_entry_id},
    [ENTRY_USB] = {"usb", f_entry_usb},
};

static int parse_entry(yw_ctx *c, yaml_node_t *n, const char *key, gen_entry *e)
{
    if (n->type == YAML_SCALAR_NODE) { /* "- /dev/kvm" is short for "- path: /dev/kvm" */
        return f_entry_path(c, n, key, e);
    }
    unsigned seen;
    if (yw_parse_map(c, n, key, entry_fields, ENTRY_FIELDS, e, &seen) < 0) {
        return -1;
    }
    if (!(seen & (YW_BIT(ENTRY_PATH) | YW_BIT(ENTRY_PATHS) | YW_BIT(ENTRY_USB)))) {
        return yw_fail(c, n, key, "needs path (a glob), paths (a group) or usb");
    }
    if ((seen & YW_BIT(ENTRY_ID)) && !(seen & YW_BIT(ENTRY_PATHS))) {
        return yw_fail(c, n, key, "id is only for a group (paths:)");
    }
    return 0;
}

/* ---- resources ---- */

typedef struct rparse {
    gen_resource *r;
    yaml_node_t *name_node;
    yaml_node_t *socket_node;
    yaml_node_t *cdi_node;
    yaml_node_t *one_node; /* onePerContainer */
} rparse;

static int f_name(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    rparse *rp = obj;
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
    rparse *rp = obj;
    rp->socket_node = v;
    if (yw_dup_text(c, v, key, KDP_SOCKET_NAME_MAX, &rp->r->socket) < 0) {
        return -1;
    }
    return check_socket(c, v, key, rp->r->socket);
}

static int f_devices(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((rparse *)obj)->r;
    if (yw_check_list(c, v, key, 1, GEN_MAX_ENTRIES) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    r->entries = calloc(n, sizeof(*r->entries));
    if (!r->entries) {
        return yw_oom(c, v, key);
    }
    r->n_entries = n;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        if (parse_entry(c, yw_node_at(c, v->data.sequence.items.start[i]), sub, &r->entries[i]) <
            0) {
            return -1;
        }
    }
    return 0;
}

static int f_count(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_count(c, v, key, GEN_MAX_COUNT, &((rparse *)obj)->r->count);
}

static int f_preferred(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((rparse *)obj)->r;
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
    rparse *rp = obj;
    rp->one_node = v;
    return yw_get_bool(c, v, key, &rp->r->one_per_container);
}

static int f_permissions(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_resource *r = ((rparse *)obj)->r;
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
    gen_resource *r = ((rparse *)obj)->r;
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
    gen_resource *r = ((rparse *)obj)->r;
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
    gen_resource *r = ((rparse *)obj)->r;
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
    return yw_get_bool(c, v, key, &((rparse *)obj)->r->cdi_device_specs);
}

enum { CDI_KIND, CDI_DEVICE_SPECS, CDI_FIELDS };
static const yw_field cdi_fields[CDI_FIELDS] = {
    [CDI_KIND] = {"kind", f_cdi_kind},
    [CDI_DEVICE_SPECS] = {"deviceSpecs", f_cdi_specs},
};

/* cdi: true | false | {kind, deviceSpecs} */
static int f_cdi(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    rparse *rp = obj;
    rp->cdi_node = v;
    if (v->type == YAML_SCALAR_NODE) {
        return yw_get_bool(c, v, key, &rp->r->cdi);
    }
    unsigned seen;
    rp->r->cdi = true;
    return yw_parse_map(c, v, key, cdi_fields, CDI_FIELDS, rp, &seen);
}

static int f_health(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return gen_health_parse(c, v, key, &((rparse *)obj)->r->health);
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
static char *default_socket(yw_ctx *c, const rparse *rp, const char *key)
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

/* Defaults and the checks that need the whole resource. */
static int finish_resource(yw_ctx *c, yaml_node_t *n, const char *key, rparse *rp, unsigned seen)
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

static int parse_resource(yw_ctx *c, yaml_node_t *n, const char *key, rparse *rp)
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
    return finish_resource(c, n, key, rp, seen);
}

/* ---- the file ---- */

typedef struct top {
    gen_config *cfg;
    rparse *rps;
    char *root;
    char *sysfs;
    char *cdi_dir;
} top;

static int f_resources(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    top *t = obj;
    if (yw_check_list(c, v, key, 1, GEN_MAX_RESOURCES) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    t->cfg->res = calloc(n, sizeof(*t->cfg->res));
    t->rps = calloc(n, sizeof(*t->rps));
    if (!t->cfg->res || !t->rps) {
        return yw_oom(c, v, key);
    }
    t->cfg->n_res = n;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        t->rps[i].r = &t->cfg->res[i];
        if (parse_resource(c, yw_node_at(c, v->data.sequence.items.start[i]), sub, &t->rps[i]) <
            0) {
            return -1;
        }
    }
    return 0;
}

static int f_root(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((top *)obj)->root);
}

static int f_sysfs(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((top *)obj)->sysfs);
}

static int f_cdi_dir(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((top *)obj)->cdi_dir);
}

enum { TOP_RESOURCES, TOP_ROOT, TOP_SYSFS, TOP_CDI_DIR, TOP_FIELDS };
static const yw_field top_fields[TOP_FIELDS] = {
    [TOP_RESOURCES] = {"resources", f_resources},
    [TOP_ROOT] = {"root", f_root},
    [TOP_SYSFS] = {"sysfs", f_sysfs},
    [TOP_CDI_DIR] = {"cdiDir", f_cdi_dir},
};

/* Names, sockets and CDI kinds must be unique across resources. */
static int check_unique(yw_ctx *c, const top *t)
{
    const gen_config *cfg = t->cfg;
    for (size_t j = 1; j < cfg->n_res; j++) {
        const gen_resource *b = &cfg->res[j];
        for (size_t i = 0; i < j; i++) {
            const gen_resource *a = &cfg->res[i];
            char key[YW_KEYLEN];
            if (strcmp(a->name, b->name) == 0) {
                snprintf(key, sizeof(key), "resources[%zu].name", j);
                return yw_fail(c, t->rps[j].name_node, key,
                               "duplicate resource name \"%s\" (also resources[%zu])", b->name, i);
            }
            if (strcmp(a->socket, b->socket) == 0) {
                snprintf(key, sizeof(key), "resources[%zu].socket", j);
                return yw_fail(c, t->rps[j].socket_node, key,
                               "socket \"%s\" is also used by resources[%zu]", b->socket, i);
            }
            if (a->cdi && b->cdi && strcmp(a->cdi_kind, b->cdi_kind) == 0) {
                snprintf(key, sizeof(key), "resources[%zu].cdi", j);
                return yw_fail(c, t->rps[j].cdi_node, key,
                               "CDI kind \"%s\" is also used by resources[%zu]", b->cdi_kind, i);
            }
        }
    }
    return 0;
}

static void put_field(FILE *f, const char *s)
{
    fputs(s ? s : "\x1e", f);
    fputc('\x1f', f);
}

static void put_entry(FILE *f, const gen_entry *e)
{
    fprintf(f, "entry\x1f%d\x1f%zu\x1f", e->group, e->n_paths);
    for (size_t i = 0; i < e->n_paths; i++) {
        put_field(f, e->paths[i]);
    }
    put_field(f, e->id);
    fprintf(f, "%d\x1f%d\x1f%04x\x1f%04x\x1f", e->usb.set, e->usb.has_product, e->usb.vendor,
            e->usb.product);
    put_field(f, e->usb.serial);
}

static char *fingerprint(const gen_resource *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        return NULL;
    }
    const char *strs[] = {r->name,  r->socket,  r->permissions, r->root,
                          r->sysfs, r->cdi_dir, r->cdi_kind};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        put_field(f, strs[i]);
    }
    fprintf(f, "%u\x1f%d\x1f%d\x1f%d\x1f%d\x1f", r->count, r->cdi, r->cdi_device_specs,
            r->preferred, r->one_per_container);
    for (size_t i = 0; i < r->n_entries; i++) {
        put_entry(f, &r->entries[i]);
    }
    for (size_t i = 0; i < r->n_mounts; i++) {
        fprintf(f, "mount\x1f%d\x1f", r->mounts[i].read_only);
        put_field(f, r->mounts[i].host_path);
        put_field(f, r->mounts[i].container_path);
    }
    for (size_t i = 0; i < r->n_env; i++) {
        put_field(f, "env");
        put_field(f, r->env[i].key);
        put_field(f, r->env[i].value);
    }
    gen_health_fingerprint(f, &r->health);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The global settings go into each resource (and its fingerprint). */
static int finish_config(yw_ctx *c, top *t, yaml_node_t *root_node)
{
    const char *dflt[3] = {"/", "/sys", "/var/run/cdi"};
    char **src[3] = {&t->root, &t->sysfs, &t->cdi_dir};
    for (size_t i = 0; i < t->cfg->n_res; i++) {
        gen_resource *r = &t->cfg->res[i];
        char **dst[3] = {&r->root, &r->sysfs, &r->cdi_dir};
        for (size_t k = 0; k < 3; k++) {
            *dst[k] = strdup(*src[k] ? *src[k] : dflt[k]);
            if (!*dst[k]) {
                return yw_oom(c, root_node, "");
            }
        }
        r->fingerprint = fingerprint(r);
        if (!r->fingerprint) {
            return yw_oom(c, root_node, "");
        }
    }
    return check_unique(c, t);
}

static int walk(yw_ctx *c, gen_config *cfg)
{
    yaml_node_t *root = yaml_document_get_root_node(&c->doc);
    if (!root) {
        return yw_fail(c, NULL, "", "the file is empty: expected a mapping with a resources: list");
    }
    if (root->type != YAML_MAPPING_NODE) {
        return yw_fail(c, root, "", "expected a mapping with a resources: list, not %s",
                       yw_type_name(root));
    }
    top t = {.cfg = cfg};
    unsigned seen = 0;
    int r = yw_parse_map(c, root, "", top_fields, TOP_FIELDS, &t, &seen);
    if (r == 0 && !(seen & YW_BIT(TOP_RESOURCES))) {
        r = yw_fail(c, root, "resources", "is required");
    }
    if (r == 0) {
        r = finish_config(c, &t, root);
    }
    free(t.rps);
    free(t.root);
    free(t.sysfs);
    free(t.cdi_dir);
    return r;
}

/* Reads the whole file (a regular file, capped). */
static int read_file(yw_ctx *c, unsigned char **ret, size_t *ret_len)
{
    int fd = open(c->file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        return yw_fail(c, NULL, "", "cannot read the file: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)GEN_MAX_FILE_BYTES) {
        close(fd);
        return yw_fail(c, NULL, "", "must be a regular file of at most %u bytes",
                       GEN_MAX_FILE_BYTES);
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size + 1) : -1;
    close(fd);
    if (n < 0 || (size_t)n > (size_t)st.st_size) {
        free(buf);
        return yw_fail(c, NULL, "", "cannot read the file%s", n < 0 ? "" : ": it changed size");
    }
    *ret = buf;
    *ret_len = (size_t)n;
    return 0;
}

static int syntax_error(yw_ctx *c, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR) {
        return yw_fail(c, NULL, "", "out of memory");
    }
    const yaml_mark_t *m = p->problem ? &p->problem_mark : &p->context_mark;
    char ctx[256] = "";
    if (p->context) {
        snprintf(ctx, sizeof(ctx), " (%s, line %zu)", p->context, p->context_mark.line + 1);
    }
    yaml_node_t at = {.start_mark = *m};
    return yw_fail(c, &at, "", "YAML syntax error: %s%s", p->problem ? p->problem : "invalid YAML",
                   ctx);
}

int gen_config_load(const char *file, const char *dp_dir, gen_config *out, char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    yw_ctx c = {.file = file, .dp_dir = dp_dir, .budget = SCALAR_BUDGET};
    unsigned char *buf = NULL;
    size_t len = 0;
    if (read_file(&c, &buf, &len) < 0) {
        *err = c.err;
        return -1;
    }
    yaml_parser_t parser;
    int r = -1;
    if (!yaml_parser_initialize(&parser)) {
        r = yw_fail(&c, NULL, "", "out of memory");
    } else {
        yaml_parser_set_input_string(&parser, buf, len);
        if (!yaml_parser_load(&parser, &c.doc)) {
            r = syntax_error(&c, &parser);
        } else {
            r = walk(&c, out);
            yaml_document_delete(&c.doc);
        }
        yaml_parser_delete(&parser);
    }
    free(buf);
    if (r < 0) {
        gen_config_free(out);
        *err = c.err;
        return -1;
    }
    return 0;
}

/* ---- freeing ---- */

static void entry_clear(gen_entry *e)
{
    for (size_t i = 0; i < e->n_paths; i++) {
        free(e->paths[i]);
    }
    free(e->paths);
    free(e->id);
    free(e->usb.serial);
}

void gen_resource_clear(gen_resource *r)
{
    for (size_t i = 0; i < r->n_entries; i++) {
        entry_clear(&r->entries[i]);
    }
    free(r->entries);
    for (size_t i = 0; i < r->n_mounts; i++) {
        free(r->mounts[i].host_path);
        free(r->mounts[i].container_path);
    }
    free(r->mounts);
    for (size_t i = 0; i < r->n_env; i++) {
        free(r->env[i].key);
        free(r->env[i].value);
    }
    free(r->env);
    gen_health_clear(&r->health);
    char *strs[] = {r->name, r->socket, r->permissions, r->cdi_kind,
                    r->root, r->sysfs,  r->cdi_dir,     r->fingerprint};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        free(strs[i]);
    }
    memset(r, 0, sizeof(*r));
}

void gen_config_free(gen_config *c)
{
    for (size_t i = 0; i < c->n_res; i++) {
        gen_resource_clear(&c->res[i]);
    }
    free(c->res);
    memset(c, 0, sizeof(*c));
}
