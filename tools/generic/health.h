/* SPDX-License-Identifier: MIT */
/* kdp-generic's health checks: what the probe op of a resource with a
 * health: section (docs/generic.md) does for one device. */
#ifndef KDP_GENERIC_HEALTH_H
#define KDP_GENERIC_HEALTH_H

#include <kdp.h>
#include <stddef.h>

#include "config.h"
#include "scan.h"

/* Checks d under r's health: section: its nodes exist (nodeExists, under
 * r->root), the file exists (under r->root), the command exits 0 (1:
 * Unhealthy, 2: the health subsystem is down, anything else or its
 * deadline: a failure; killed with SIGKILL and reaped at the deadline).
 * The reason of a failure goes to kdp_plugin_set_error(p). Returns a
 * kdp_probe_result (or -errno, a failure). Worker thread (blocks up to the
 * command's deadline). */
int gen_health_check(kdp_plugin *p, const gen_resource *r, const gen_dev *d);

/* One template ({path}, {name}, {id} of d) expanded: a string to free(),
 * NULL when out of memory. */
char *gen_health_expand(const char *tmpl, const gen_dev *d);

#endif
