/* SPDX-License-Identifier: MIT */
/*
 * yamlwalk: the generic half of kdp-generic's configuration reader: walking
 * a libyaml document against a table of fields, with errors that name the
 * file, the line and the key ("config.yaml:7: resources[0].count: ..."),
 * unknown and duplicate keys refused, and every size capped. The schema
 * (which fields, what they mean) is config.c's.
 */
#ifndef KG_YAMLWALK_H
#define KG_YAMLWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#define YW_KEYLEN 192

typedef struct yw_ctx {
    const char *file;
    const char *dp_dir;
    yaml_document_t doc;
    char *err; /* the first error, "FILE:LINE: KEY: what" */
    bool failed;
    long budget; /* scalars still to copy (aliases can multiply them) */
} yw_ctx;

/* A key of a mapping and what reads its value into obj. */
typedef int (*yw_field_fn)(yw_ctx *c, yaml_node_t *val, const char *key, void *obj);

typedef struct yw_field {
    const char *name;
    yw_field_fn fn;
} yw_field;

/* The bit yw_parse_map sets in *seen for fields[i]. */
#define YW_BIT(i) (1U << (i))

/* Records the first error (at n's line; n may be NULL) and returns -1. */
int yw_fail(yw_ctx *c, const yaml_node_t *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int yw_oom(yw_ctx *c, const yaml_node_t *n, const char *key);
const char *yw_type_name(const yaml_node_t *n);
/* A scalar's text, at most max bytes (empty only if empty_ok); NULL after
 * an error. Valid as long as the document. */
const char *yw_text(yw_ctx *c, const yaml_node_t *n, const char *key, size_t max, bool empty_ok);
int yw_dup_text(yw_ctx *c, const yaml_node_t *n, const char *key, size_t max, char **out);
int yw_get_bool(yw_ctx *c, const yaml_node_t *n, const char *key, bool *out);
/* A positive integer, at most max. */
int yw_get_count(yw_ctx *c, const yaml_node_t *n, const char *key, unsigned max, unsigned *out);
/* An absolute path of at most max bytes, with no ".." component, copied. */
int yw_get_path(yw_ctx *c, const yaml_node_t *n, const char *key, size_t max, char **out);
/* A duration ("500ms", "10s", "2m") into *out, in milliseconds, from min to
 * max (bounds says so in the error, e.g. "100ms to 24h (1440m)"). */
int yw_get_duration(yw_ctx *c, const yaml_node_t *n, const char *key, unsigned min, unsigned max,
                    const char *bounds, unsigned *out);
yaml_node_t *yw_node_at(yw_ctx *c, int idx);
/* out = key.name / key[i] (YW_KEYLEN bytes; a long one is cut with "..."). */
void yw_subkey(char *out, const char *key, const char *name);
void yw_item_key(char *out, const char *key, size_t i);
/* Walks a mapping: every key must be one of fields (nf of them, at most
 * 32), at most once; *seen gets YW_BIT(i) for each field i present. */
int yw_parse_map(yw_ctx *c, yaml_node_t *n, const char *key, const yw_field *fields, size_t nf,
                 void *obj, unsigned *seen);
/* A list of min to max items. */
int yw_check_list(yw_ctx *c, yaml_node_t *n, const char *key, size_t min, size_t max);
size_t yw_list_len(const yaml_node_t *n);

#endif
