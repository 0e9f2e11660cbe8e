/* SPDX-License-Identifier: MIT */
/* kdp-generic's DRA settings (docs/generic.md): a resource's dra: section,
 * an entry's attributes: and capacity:, parsed, checked, fingerprinted and
 * freed here; served by dra.c. */
#ifndef KDP_GENERIC_CONFIG_DRA_H
#define KDP_GENERIC_CONFIG_DRA_H

#include <stdio.h>
#include <yaml.h>

#include "config.h"
#include "yamlwalk.h"

/* Whether this kdp-generic serves DRA (built with libkdp-dra). */
#ifdef KDP_GENERIC_DRA
#define GEN_HAS_DRA 1
#else
#define GEN_HAS_DRA 0
#endif

/* The resource's dra: mapping into d. Returns 0, or -1 with the error in c. */
int gen_dra_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_dra *d);
/* An entry's attributes: and capacity: mappings. */
int gen_attrs_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_entry *e);
int gen_caps_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_entry *e);
void gen_dra_fingerprint(FILE *f, const gen_dra *d);
void gen_attrs_fingerprint(FILE *f, const gen_entry *e);
void gen_dra_clear(gen_dra *d);
void gen_attrs_clear(gen_entry *e);

#endif
