/* SPDX-License-Identifier: MIT */
/* kdp-generic's resources (docs/generic.md): one item of the resources:
 * list parsed, checked and given its defaults here. */
#ifndef KDP_GENERIC_CONFIG_RESOURCE_H
#define KDP_GENERIC_CONFIG_RESOURCE_H

#include <yaml.h>

#include "config.h"
#include "yamlwalk.h"

/* A resource being read, with the nodes its errors point at (for the
 * checks across resources too): a key's node, else the resource's. */
typedef struct gen_rparse {
    gen_resource *r;
    yaml_node_t *name_node;
    yaml_node_t *socket_node;
    yaml_node_t *cdi_node;
    yaml_node_t *one_node; /* onePerContainer */
    yaml_node_t *dra_node;
} gen_rparse;

/* Reads the mapping n (at key) into rp->r, which the caller zeroed, and
 * applies the defaults (socket, count, permissions, a mount's
 * containerPath, cdi.kind) with the checks that need the whole resource
 * (c->dp_dir bounds the socket path). Returns 0, or -1 with the error
 * recorded in c. */
int gen_resource_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_rparse *rp);

#endif
