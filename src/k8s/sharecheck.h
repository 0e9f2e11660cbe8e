/* SPDX-License-Identifier: MIT */
/*
 * sharecheck: the API server's rules (resource.k8s.io/v1, Kubernetes
 * 1.35-1.37, pkg/apis/resource/validation) for what sharing adds to a
 * ResourceSlice: counter sets (sharedCounters), what a device consumes of
 * them (consumesCounters, compatibilityGroups) and the request policy of a
 * capacity of a device that allows multiple allocations. One set of rules
 * for the describe calls (refused at the call), the slices kdp builds and
 * `kdpctl dra apiserver` (a 422 naming the field).
 *
 * Each check returns 0, or -EINVAL with e filled: the field, relative to
 * what was checked ("counters[memory].value", "requestPolicy.validValues[2]"),
 * and the reason in the API server's words ("Invalid value: ...",
 * "Required value", "Too many: ...", "Forbidden: ..."). Pure.
 */
#ifndef KDP_K8S_SHARECHECK_H
#define KDP_K8S_SHARECHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "kdp_dra.h"

typedef struct kdp__share_err {
    char field[160];
    char why[200];
} kdp__share_err;

/* Counters (a set's or a consumption's): 1 to KDP_DRA_MAX_COUNTERS, names
 * DNS labels and unique, values quantities >= 0. */
int kdp__share_check_counters(const kdp_dra_quantity *c, size_t n, kdp__share_err *e);
/* A counter set: its name a DNS label, its counters. */
int kdp__share_check_set(const kdp_dra_counter_set *s, kdp__share_err *e);
/* Counter sets of one pool: each, and names unique (the scheduler refuses
 * a pool with a name twice). */
int kdp__share_check_sets(const kdp_dra_counter_set *s, size_t n, kdp__share_err *e);
/* A consumption: counterSet a DNS label, its counters, at most
 * KDP_DRA_MAX_COMPAT_GROUPS compatibility groups, DNS labels, unique. */
int kdp__share_check_consumption(const kdp_dra_consumption *c, kdp__share_err *e);
/* A deep copy of n quantities (NULL on -ENOMEM; n 0 gives an empty
 * array), and its free (NULL is fine). */
kdp_dra_quantity *kdp__share_quantities_dup(const kdp_dra_quantity *q, size_t n);
void kdp__share_quantities_free(kdp_dra_quantity *q, size_t n);

/* The request policy of a capacity of value `value` (a quantity). */
int kdp__share_check_policy(const char *value, const kdp_dra_request_policy *p, kdp__share_err *e);

#endif
