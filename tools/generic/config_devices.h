/* SPDX-License-Identifier: MIT */
/* kdp-generic's devices: list (docs/generic.md): parsed, checked,
 * fingerprinted and freed here; matched by scan.c. */
#ifndef KDP_GENERIC_CONFIG_DEVICES_H
#define KDP_GENERIC_CONFIG_DEVICES_H

#include <stdio.h>
#include <yaml.h>

#include "config.h"
#include "yamlwalk.h"

/* Reads the list v (at key: 1 to GEN_MAX_ENTRIES entries) into
 * r->entries. Returns 0, or -1 with the error recorded in c (naming the
 * key and the fix). */
int gen_devices_parse(yw_ctx *c, yaml_node_t *v, const char *key, gen_resource *r);
/* Writes e's settings for a resource's fingerprint. */
void gen_entry_fingerprint(FILE *f, const gen_entry *e);
void gen_entry_clear(gen_entry *e);

#endif
