/* SPDX-License-Identifier: MIT */
/*
 * describe: the kdp_dra_device builder the describe op fills (kdp_dra.h):
 * a device's name in the slices, its attributes and capacities, and what
 * sharing adds (describe_share.c: the counters it consumes, multiple
 * allocations, request policies) and its binding conditions
 * (describe_bind.c), each checked with the API's rules as it is added.
 */
#ifndef KDP_DRA_DESCRIBE_H
#define KDP_DRA_DESCRIBE_H

#include <stdbool.h>
#include <stddef.h>

#include "kdp_dra.h"

typedef struct kdp__dra_cap {
    char *name;
    char *quantity;
    kdp_dra_request_policy *policy; /* NULL: none; a deep copy */
} kdp__dra_cap;

struct kdp_dra_device {
    const char *id;      /* the kdp ID (borrowed), for log lines */
    char *name;          /* NULL: the default from the ID */
    kdp_dra_attr *attrs; /* names and strings copied */
    size_t n_attrs;
    kdp__dra_cap *caps;
    size_t n_caps;
    kdp_dra_consumption *consumes; /* deep copies */
    size_t n_consumes;
    bool allow_multiple;
    /* binding conditions (describe_bind.c): strings copied */
    const char **bind_conds;
    size_t n_bind_conds;
    const char **bind_fails;
    size_t n_bind_fails;
    bool binds_to_node;
};

/* An empty description of device id (borrowed). */
void kdp__dra_device_init(kdp_dra_device *d, const char *id);
void kdp__dra_device_done(kdp_dra_device *d);
/* The default name of a kdp ID: lower-cased, every character a DNS label
 * cannot hold as '-', '-' trimmed at both ends, at most 63 characters.
 * Returns 0, or -EINVAL (nothing valid is left) with out untouched. */
int kdp__dra_default_name(const char *id, char out[64]);
/* Frees what describe_share.c copied into d (consumptions, policies). */
void kdp__dra_device_share_done(kdp_dra_device *d);
/* Frees what describe_bind.c copied into d (binding conditions). */
void kdp__dra_device_bind_done(kdp_dra_device *d);
/* A copy of the strings v[0..n) (NULL for n 0; *oom set on a failed
 * allocation: free what it holds), and its free (describe_share.c). */
const char **kdp__dra_strv_dup(const char *const *v, size_t n, bool *oom);
void kdp__dra_strv_free(const char *const *v, size_t n);

#endif
