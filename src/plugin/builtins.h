/* SPDX-License-Identifier: MIT */
/*
 * builtins: kdp's own part of a /metrics page (kdp_build_info and the
 * kdp_* families, one series per plugin, labelled with its resource) and
 * the /healthz answer, both from views of the plugins (kdp__pview) taken on
 * the loop thread. No I/O, no locks: unit-testable with made-up views.
 */
#ifndef KDP_BUILTINS_H
#define KDP_BUILTINS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/expfmt.h"
#include "plugin/pstats.h"

/* Every kdp_* family, each once, with one series per view (per label
 * combination). */
void kdp__builtins_render(const kdp__pview *v, size_t n, kdp__expfmt *w);
/* Whether a plugin counts as up (serving and registered): kdp_plugin_up
 * and /healthz. When not, why into buf ("waiting for kubelet.sock" ...). */
bool kdp__builtins_up(const kdp__pview *v, char *why, size_t cap);
/* The /healthz body into w ("ok\n", else one "resource: reason" line per
 * plugin that is not up, or "no plugins"); returns 200 or 503. */
int kdp__builtins_healthz(const kdp__pview *v, size_t n, kdp__expfmt *w);

#endif
