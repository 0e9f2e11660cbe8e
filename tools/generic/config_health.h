/* SPDX-License-Identifier: MIT */
/* kdp-generic's health: section (docs/generic.md): parsed, checked,
 * fingerprinted and freed here; run by health.c. */
#ifndef KDP_GENERIC_CONFIG_HEALTH_H
#define KDP_GENERIC_CONFIG_HEALTH_H

#include <stdio.h>
#include <yaml.h>

#include "config.h"
#include "yamlwalk.h"

/* Reads the mapping n (at key) into h. Returns 0, or -1 with the error
 * recorded in c (naming the key and the fix). */
int gen_health_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_health *h);
/* Writes h's settings for a resource's fingerprint. */
void gen_health_fingerprint(FILE *f, const gen_health *h);
void gen_health_clear(gen_health *h);
/* Checks a template: the placeholders {path}, {name} and {id} only.
 * Returns NULL, or what is wrong (static). */
const char *gen_health_template_error(const char *s);

#endif
