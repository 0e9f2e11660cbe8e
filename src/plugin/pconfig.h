/* SPDX-License-Identifier: MIT */
/*
 * pconfig: a plugin's kdp_config checked before anything is made (the
 * resource and socket names, env_name, preferred, replicas, the probe's
 * bounds, the socket's directory; each refusal logged naming the field and
 * the rule), the instance and generation it runs as (kdp_config or the
 * environment), and paths joined. No state; the environment is read.
 */
#ifndef KDP_PCONFIG_H
#define KDP_PCONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "kdp.h"

/* The config, with dir the directory of the plugin's socket; names: the
 * resource and socket names too (false for a plugin without the
 * device-plugin API, whose names kdp makes). Returns 0 or -EINVAL
 * (logged). */
int kdp__pconfig_check(const kdp_config *cfg, const char *dir, bool names);
/* For a plugin without the device-plugin API (a DRA-only driver): refuses
 * the fields only that API uses (resource_name, socket_name, env_name,
 * replicas ...), naming the first one set and caller. Returns 0 or
 * -EINVAL (logged). */
int kdp__pconfig_check_no_dp(const kdp_config *cfg, const char *caller);
/* The instance (kdp_config.instance, else $KDP_INSTANCE; NULL: none) and
 * generation (kdp_config.generation, else $KDP_GENERATION, else 0) of a
 * plugin among several (plugin/handover.h). Returns 0 or -EINVAL
 * (logged). */
int kdp__pconfig_instance(const kdp_config *cfg, const char **ret, uint64_t *ret_gen);
/* "dir/name" (one slash), malloc'ed; NULL when out of memory. */
char *kdp__pconfig_join(const char *dir, const char *name);

#endif
