/* SPDX-License-Identifier: MIT */
/*
 * drametrics: the DRA driver's families on the plugin's /metrics page (an
 * extension's, src/plugin): its registration, the kubelet's calls and
 * their claims, the claims and shares prepared, the slices published and
 * their failures, and the API server's answers by verb and code. Each
 * series is labelled with the plugin's resource and the driver.
 *
 * Loop thread (the page is written there).
 */
#ifndef KDP_DRA_DRAMETRICS_H
#define KDP_DRA_DRAMETRICS_H

#include <stddef.h>

#include "base/expfmt.h"
#include "plugin/plugin.h"

extern const kdp__ext_family kdp__dra_families[];
extern const size_t kdp__dra_n_families;

/* Family f's samples of the driver ud (a kdp__dra). */
void kdp__dra_metrics(void *ud, size_t f, const char *resource, kdp__expfmt *w);

#endif
