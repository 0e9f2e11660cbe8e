/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's DRA settings: a resource's dra: (driver, devicePlugin,
 * unhealthyTaint) and an entry's attributes: (NAME: int, bool, string, or
 * {version: X}) and capacity: (NAME: quantity), each checked as the API
 * server checks them; fingerprinted and freed here too.
 */
#include "config_dra.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifdef KDP_GENERIC_DRA
#include <kdp_dra.h>
#endif

#define ATTR_ID_MAX     32
#define ATTR_DOMAIN_MAX 63
#define ATTR_STRING_MAX 64

/* ---- dra: ---- */

static int f_driver(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_dra *d = obj;
    if (yw_dup_text(c, v, key, 63, &d->driver) < 0) {
        return -1;
    }
#ifdef KDP_GENERIC_DRA
    const char *why = NULL;
    if (kdp_dra_validate_driver_name(d->driver, &why) < 0) {
        return yw_fail(c, v, key, "invalid DRA driver name \"%s\": %s (e.g. gpu.example.com)",
                       d->driver, why);
    }
#endif
    return 0;
}

static int f_device_plugin(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_bool(c, v, key, &((gen_dra *)obj)->device_plugin);
}

static int f_taint(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    /* in kdp_dra_taint_effect's order */
    static const char *const names[] = {"NoSchedule", "NoExecute", "None", "Informational"};
    const char *s = yw_text(c, v, key, 32, false);
    if (!s) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            ((gen_dra *)obj)->unhealthy_taint = i;
            return 0;
        }
    }
    return yw_fail(c, v, key, "must be NoSchedule, NoExecute, Informational or None, not \"%s\"",
                   s);
}

enum { DRA_DRIVER, DRA_DEVICE_PLUGIN, DRA_TAINT, DRA_FIELDS };
static const yw_field dra_fields[DRA_FIELDS] = {
    [DRA_DRIVER] = {"driver", f_driver},
    [DRA_DEVICE_PLUGIN] = {"devicePlugin", f_device_plugin},
    [DRA_TAINT] = {"unhealthyTaint", f_taint},
};

int gen_dra_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_dra *d)
{
    if (!GEN_HAS_DRA) {
        return yw_fail(c, n, key,
                       "kdp-generic serves no DRA: run kdp-generic-dra (the image of "
                       "deploy/Dockerfile.dra with --build-arg BINARY=kdp-generic-dra)");
    }
    unsigned seen = 0;
    d->set = true;
    if (yw_parse_map(c, n, key, dra_fields, DRA_FIELDS, d, &seen) < 0) {
        return -1;
    }
    return seen & YW_BIT(DRA_DRIVER) ? 0 : yw_fail(c, n, key, "driver is required");
}

void gen_dra_fingerprint(FILE *f, const gen_dra *d)
{
    fprintf(f, "dra\x1f%d\x1f%s\x1f%d\x1f%d\x1f", d->set, d->driver ? d->driver : "\x1e",
            d->device_plugin, d->unhealthy_taint);
}

void gen_dra_clear(gen_dra *d)
{
    free(d->driver);
    memset(d, 0, sizeof(*d));
}

/* ---- names and values ---- */

static bool is_id_char(char ch, bool first)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
           (!first && ch >= '0' && ch <= '9');
}

/* A DNS subdomain of len bytes at s. */
static bool is_subdomain(const char *s, size_t len)
{
    bool ok = len > 0 && len <= ATTR_DOMAIN_MAX;
    for (size_t i = 0; ok && i < len; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        bool edge = i == 0 || i + 1 == len || s[i - 1] == '.' || s[i + 1] == '.';
        ok = alnum || (!edge && (ch == '-' || ch == '.'));
    }
    return ok;
}

/* An attribute or capacity name: a C identifier of at most 32 characters,
 * optionally after "domain/". NULL, or what is wrong. */
static const char *name_error(const char *name)
{
    const char *slash = strchr(name, '/');
    const char *id = slash ? slash + 1 : name;
    if (slash && !is_subdomain(name, (size_t)(slash - name))) {
        return "its domain must be a DNS subdomain of at most 63 characters";
    }
    size_t len = strlen(id);
    bool ok = len > 0 && len <= ATTR_ID_MAX;
    for (size_t i = 0; ok && i < len; i++) {
        ok = is_id_char(id[i], i == 0);
    }
    return ok ? NULL
              : "must be a C identifier of at most 32 characters (e.g. model), optionally after "
                "a domain and '/'";
}

/* A Kubernetes quantity: digits, an optional fraction, an optional suffix. */
static bool quantity_ok(const char *s)
{
    static const char *const suffixes[] = {"",   "m",  "k",  "M",  "G",  "T",  "P", "E",
                                           "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", NULL};
    size_t i = strspn(s, "0123456789");
    if (i == 0) {
        return false;
    }
    if (s[i] == '.') {
        size_t f = strspn(s + i + 1, "0123456789");
        if (f == 0) {
            return false;
        }
        i += 1 + f;
    }
    for (const char *const *x = suffixes; *x; x++) {
        if (strcmp(s + i, *x) == 0) {
            return true;
        }
    }
    return false;
}

/* The name of pair p: checked, and not already one of e's attributes or
 * capacities (sub gets its key). NULL after an error. */
static const char *pair_name(yw_ctx *c, yaml_node_pair_t *p, const char *key, char *sub,
                             const gen_entry *e)
{
    const char *name = yw_text(c, yw_node_at(c, p->key), key, 128, false);
    if (!name) {
        return NULL;
    }
    yw_subkey(sub, key, name);
    const char *why = name_error(name);
    if (why) {
        (void)yw_fail(c, yw_node_at(c, p->key), sub, "%s", why);
        return NULL;
    }
    for (size_t i = 0; i < e->n_attrs; i++) {
        if (e->attrs[i].name && strcmp(e->attrs[i].name, name) == 0) {
            (void)yw_fail(c, yw_node_at(c, p->key), sub, "is also an attribute");
            return NULL;
        }
    }
    for (size_t i = 0; i < e->n_caps; i++) {
        if (e->caps[i].name && strcmp(e->caps[i].name, name) == 0) {
            (void)yw_fail(c, yw_node_at(c, p->key), sub, "is also a capacity");
            return NULL;
        }
    }
    return name;
}

static size_t pairs_of(yw_ctx *c, yaml_node_t *n, const char *key, const char *what)
{
    if (!GEN_HAS_DRA) {
        (void)yw_fail(c, n, key, "is for DRA: run kdp-generic-dra");
        return SIZE_MAX;
    }
    if (n->type != YAML_MAPPING_NODE) {
        (void)yw_fail(c, n, key, "must be a mapping of NAME: %s, not %s", what, yw_type_name(n));
        return SIZE_MAX;
    }
    size_t len = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    if (len > GEN_MAX_FIELDS) {
        (void)yw_fail(c, n, key, "must have at most %u entries", GEN_MAX_FIELDS);
        return SIZE_MAX;
    }
    return len;
}

/* ---- attributes: ---- */

static bool is_int(const char *s)
{
    const char *d = s + (*s == '-');
    size_t n = strspn(d, "0123456789");
    return n > 0 && n <= 18 && d[n] == '\0';
}

static int attr_value(yw_ctx *c, yaml_node_t *v, const char *sub, gen_attr *a)
{
    if (v->type == YAML_MAPPING_NODE &&
        v->data.mapping.pairs.top - v->data.mapping.pairs.start == 1) {
        yaml_node_pair_t *p = v->data.mapping.pairs.start;
        const char *k = yw_text(c, yw_node_at(c, p->key), sub, 16, false);
        if (!k || strcmp(k, "version") != 0) {
            return k ? yw_fail(c, v, sub, "a mapping value must be {version: X.Y.Z}") : -1;
        }
        a->type = GEN_ATTR_VERSION;
        return yw_dup_text(c, yw_node_at(c, p->value), sub, ATTR_STRING_MAX, &a->string_value);
    }
    const char *s = yw_text(c, v, sub, ATTR_STRING_MAX, true);
    if (!s) {
        return -1;
    }
    bool plain = v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (plain && is_int(s)) {
        a->type = GEN_ATTR_INT;
        a->int_value = strtoll(s, NULL, 10);
        return 0;
    }
    if (plain && (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)) {
        a->type = GEN_ATTR_BOOL;
        a->bool_value = s[0] == 't';
        return 0;
    }
    a->type = GEN_ATTR_STRING;
    return (a->string_value = strdup(s)) ? 0 : yw_oom(c, v, sub);
}

int gen_attrs_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_entry *e)
{
    size_t len = pairs_of(c, n, key, "value (an integer, true/false, a string or {version: X})");
    if (len == SIZE_MAX) {
        return -1;
    }
    e->attrs = calloc(len ? len : 1, sizeof(*e->attrs));
    if (!e->attrs) {
        return yw_oom(c, n, key);
    }
    for (size_t i = 0; i < len; i++) {
        yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
        char sub[YW_KEYLEN];
        const char *name = pair_name(c, p, key, sub, e);
        if (!name) {
            return -1;
        }
        gen_attr *a = &e->attrs[e->n_attrs];
        if (!(a->name = strdup(name))) {
            return yw_oom(c, n, key);
        }
        e->n_attrs++;
        if (attr_value(c, yw_node_at(c, p->value), sub, a) < 0) {
            return -1;
        }
    }
    return 0;
}

/* ---- capacity: ---- */

int gen_caps_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_entry *e)
{
    size_t len = pairs_of(c, n, key, "quantity (e.g. 80Gi, 4)");
    if (len == SIZE_MAX) {
        return -1;
    }
    e->caps = calloc(len ? len : 1, sizeof(*e->caps));
    if (!e->caps) {
        return yw_oom(c, n, key);
    }
    for (size_t i = 0; i < len; i++) {
        yaml_node_pair_t *p = &n->data.mapping.pairs.start[i];
        char sub[YW_KEYLEN];
        const char *name = pair_name(c, p, key, sub, e);
        if (!name) {
            return -1;
        }
        yaml_node_t *v = yw_node_at(c, p->value);
        const char *q = yw_text(c, v, sub, 64, false);
        if (!q) {
            return -1;
        }
        if (!quantity_ok(q)) {
            return yw_fail(c, v, sub, "must be a quantity (e.g. 80Gi, 4, 500m), not \"%s\"", q);
        }
        gen_cap *cap = &e->caps[e->n_caps];
        cap->name = strdup(name);
        cap->quantity = strdup(q);
        e->n_caps++;
        if (!cap->name || !cap->quantity) {
            return yw_oom(c, v, sub);
        }
    }
    return 0;
}

void gen_attrs_fingerprint(FILE *f, const gen_entry *e)
{
    fprintf(f, "attrs\x1f%zu\x1f%zu\x1f", e->n_attrs, e->n_caps);
    for (size_t i = 0; i < e->n_attrs; i++) {
        const gen_attr *a = &e->attrs[i];
        fprintf(f, "%s\x1f%d\x1f%lld\x1f%d\x1f%s\x1f", a->name, a->type, a->int_value,
                a->bool_value, a->string_value ? a->string_value : "\x1e");
    }
    for (size_t i = 0; i < e->n_caps; i++) {
        fprintf(f, "%s\x1f%s\x1f", e->caps[i].name, e->caps[i].quantity);
    }
}

void gen_attrs_clear(gen_entry *e)
{
    for (size_t i = 0; i < e->n_attrs; i++) {
        free(e->attrs[i].name);
        free(e->attrs[i].string_value);
    }
    free(e->attrs);
    for (size_t i = 0; i < e->n_caps; i++) {
        free(e->caps[i].name);
        free(e->caps[i].quantity);
    }
    free(e->caps);
    e->attrs = NULL;
    e->caps = NULL;
    e->n_attrs = 0;
    e->n_caps = 0;
}
