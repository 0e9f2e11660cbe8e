/* SPDX-License-Identifier: MIT */
#include "yamlwalk.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

static int yw_vfail_at(yw_ctx *c, size_t line, const char *key, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
static int yw_vfail_at(yw_ctx *c, size_t line, const char *key, const char *fmt, va_list ap)
{
    if (c->failed) {
        return -1;
    }
    c->failed = true;
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (asprintf(&c->err, "%s:%zu: %s%s%s", c->file, line, key, *key ? ": " : "", msg) < 0) {
        c->err = NULL;
    }
    return -1;
}

int yw_fail(yw_ctx *c, const yaml_node_t *n, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = yw_vfail_at(c, n ? n->start_mark.line + 1 : 1, key, fmt, ap);
    va_end(ap);
    return r;
}

int yw_oom(yw_ctx *c, const yaml_node_t *n, const char *key)
{
    return yw_fail(c, n, key, "out of memory");
}

/* ---- scalars ---- */

const char *yw_type_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return n->data.scalar.length ? "a string" : "empty";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

/* A scalar's text, checked (not empty unless allowed, no NUL, capped). */
const char *yw_text(yw_ctx *c, const yaml_node_t *n, const char *key, size_t max, bool empty_ok)
{
    if (n->type != YAML_SCALAR_NODE) {
        yw_fail(c, n, key, "must be a string, not %s", yw_type_name(n));
        return NULL;
    }
    const char *s = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    if (--c->budget < 0) {
        yw_fail(c, n, key, "the configuration is too large");
        return NULL;
    }
    if (len == 0 && !empty_ok) {
        yw_fail(c, n, key, "must not be empty");
    } else if (len > max) {
        yw_fail(c, n, key, "is too long (%zu bytes at most)", max);
    } else if (strlen(s) != len) {
        yw_fail(c, n, key, "must not contain a NUL character");
    } else {
        return s;
    }
    return NULL;
}

int yw_dup_text(yw_ctx *c, const yaml_node_t *n, const char *key, size_t max, char **out)
{
    const char *s = yw_text(c, n, key, max, false);
    if (!s) {
        return -1;
    }
    free(*out);
    *out = strdup(s);
    return *out ? 0 : yw_oom(c, n, key);
}

int yw_get_bool(yw_ctx *c, const yaml_node_t *n, const char *key, bool *out)
{
    const char *s = yw_text(c, n, key, 8, true);
    if (!s) {
        return -1;
    }
    static const char *const yes[] = {"true", "yes", "on"};
    static const char *const no[] = {"false", "no", "off"};
    for (size_t i = 0; i < 3; i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *out = strcasecmp(s, yes[i]) == 0;
            return 0;
        }
    }
    return yw_fail(c, n, key, "must be true or false");
}

int yw_get_count(yw_ctx *c, const yaml_node_t *n, const char *key, unsigned max, unsigned *out)
{
    const char *s = n->type == YAML_SCALAR_NODE ? yw_text(c, n, key, 32, true) : NULL;
    if (!s && c->failed) {
        return -1;
    }
    unsigned long v = 0;
    bool ok = s && *s;
    for (const char *p = s; ok && *p; p++) {
        ok = *p >= '0' && *p <= '9';
        v = ok && v <= max ? v * 10 + (unsigned long)(*p - '0') : v;
    }
    if (!ok || v == 0) {
        return yw_fail(c, n, key, "must be a positive integer");
    }
    if (v > max) {
        return yw_fail(c, n, key, "must be at most %u", max);
    }
    *out = (unsigned)v;
    return 0;
}

/* An absolute path (glob patterns too): no ".." component. */
int yw_get_path(yw_ctx *c, const yaml_node_t *n, const char *key, size_t max, char **out)
{
    const char *s = yw_text(c, n, key, max, false);
    if (!s) {
        return -1;
    }
    if (s[0] != '/') {
        return yw_fail(c, n, key, "must be an absolute path (e.g. /dev/ttyUSB*), not \"%s\"", s);
    }
    if (strstr(s, "/../") || (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0)) {
        return yw_fail(c, n, key, "must not contain a \"..\" component");
    }
    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p < 0x20) {
            return yw_fail(c, n, key, "must not contain control characters");
        }
    }
    return yw_dup_text(c, n, key, max, out);
}

/* 1-4 hex digits, optionally 0x-prefixed. */
/* ---- mappings and lists ---- */

yaml_node_t *yw_node_at(yw_ctx *c, int idx)
{
    return yaml_document_get_node(&c->doc, idx);
}

/* key.name (a long key path is cut, marked with "...") */
void yw_subkey(char *out, const char *key, const char *name)
{
    int w = snprintf(out, YW_KEYLEN, "%s%s%s", key, *key ? "." : "", name);
    if (w < 0 || w >= YW_KEYLEN) {
        memcpy(out + YW_KEYLEN - 4, "...", 4);
    }
}

static void yw_list_names(char *out, size_t size, const yw_field *fields, size_t nf)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < nf && o < size; i++) {
        int w = snprintf(out + o, size - o, "%s%s", i ? ", " : "", fields[i].name);
        o += w > 0 ? (size_t)w : 0;
    }
}

/* Walks a mapping: every key must be one of fields, at most once; *seen
 * gets bit i for each field i present. */
int yw_parse_map(yw_ctx *c, yaml_node_t *n, const char *key, const yw_field *fields, size_t nf,
                 void *obj, unsigned *seen)
{
    if (n->type != YAML_MAPPING_NODE) {
        return yw_fail(c, n, key, "must be a mapping, not %s", yw_type_name(n));
    }
    *seen = 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yw_node_at(c, p->key);
        yaml_node_t *v = yw_node_at(c, p->value);
        const char *name = k ? yw_text(c, k, key, 64, false) : NULL;
        if (!name || !v) {
            return name ? yw_fail(c, k, key, "bad value") : yw_fail(c, k, key, "bad key");
        }
        size_t i = 0;
        while (i < nf && strcmp(fields[i].name, name) != 0) {
            i++;
        }
        char sub[YW_KEYLEN];
        yw_subkey(sub, key, name);
        if (i == nf) {
            char names[512];
            yw_list_names(names, sizeof(names), fields, nf);
            return yw_fail(c, k, sub, "unknown key (expected one of: %s)", names);
        }
        if (*seen & (1U << i)) {
            return yw_fail(c, k, sub, "duplicate key");
        }
        *seen |= 1U << i;
        if (fields[i].fn(c, v, sub, obj) < 0) {
            return -1;
        }
    }
    return 0;
}

int yw_check_list(yw_ctx *c, yaml_node_t *n, const char *key, size_t min, size_t max)
{
    if (n->type != YAML_SEQUENCE_NODE) {
        return yw_fail(c, n, key, "must be a list, not %s", yw_type_name(n));
    }
    size_t len = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (len < min) {
        return yw_fail(c, n, key, "must list at least %zu item%s", min, min == 1 ? "" : "s");
    }
    if (len > max) {
        return yw_fail(c, n, key, "must list at most %zu items", max);
    }
    return 0;
}

size_t yw_list_len(const yaml_node_t *n)
{
    return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

/* key[i] */
void yw_item_key(char *out, const char *key, size_t i)
{
    int w = snprintf(out, YW_KEYLEN, "%s[%zu]", key, i);
    if (w < 0 || w >= YW_KEYLEN) {
        memcpy(out + YW_KEYLEN - 4, "...", 4);
    }
}

/* "500ms", "10s", "2m" into milliseconds. */
int yw_get_duration(yw_ctx *c, const yaml_node_t *n, const char *key, unsigned min, unsigned max,
                    const char *bounds, unsigned *out)
{
    const char *s = yw_text(c, n, key, 32, false);
    if (!s) {
        return -1;
    }
    unsigned long long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v <= max ? v * 10 + (unsigned long long)(*p - '0') : v; /* capped past max */
    }
    unsigned long long unit = strcmp(p, "ms") == 0  ? 1
                              : strcmp(p, "s") == 0 ? 1000
                              : strcmp(p, "m") == 0 ? 60000
                                                    : 0;
    if (p == s || !unit) {
        return yw_fail(c, n, key,
                       "must be a duration: a whole number with ms, s or m (e.g. 500ms, 10s, "
                       "1m), not \"%s\"",
                       s);
    }
    v *= unit;
    if (v < min || v > max) {
        return yw_fail(c, n, key, "must be from %s, not %s", bounds, s);
    }
    *out = (unsigned)v;
    return 0;
}
