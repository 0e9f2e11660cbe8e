/* SPDX-License-Identifier: MIT */
/*
 * yamldepth: a linear pre-scan of YAML text for its flow nesting ([ and {)
 * before libyaml reads it: libyaml's scanner checks every open flow level
 * at each token, so 100,000 nested brackets (200 KB) take it about a
 * minute. Used for the kubeconfig and kdp-generic's configuration.
 */
#ifndef KDP_BASE_YAMLDEPTH_H
#define KDP_BASE_YAMLDEPTH_H

#include <stddef.h>

/* How deep flow collections may nest in a file kdp reads. */
#define KDP__YAML_MAX_FLOW_DEPTH 64U

/* 0 if no flow collection in text (len bytes) nests deeper than max;
 * else -E2BIG and *ret_line = the line (from 1) where it went deeper.
 * Brackets in quoted scalars and comments do not count. */
int kdp__yaml_flow_depth(const char *text, size_t len, unsigned max, size_t *ret_line);

#endif
