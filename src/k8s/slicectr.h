/* SPDX-License-Identifier: MIT */
/*
 * slicectr: counters as ResourceSlices hold them (partitionable devices,
 * KEP-4815; resource.k8s.io/v1 since Kubernetes 1.35): a pool's counter
 * sets (spec.sharedCounters, in slices without devices, at most
 * KDP_DRA_MAX_SETS_PER_SLICE per slice) and what a device consumes of
 * them (devices[].consumesCounters), each checked with k8s/sharecheck;
 * and a device's consumptions resolved against the pool's sets (the API
 * server does not look across slices, the scheduler then refuses the whole
 * pool: kdp leaves such a device out instead).
 *
 * Pure: no I/O, any thread.
 */
#ifndef KDP_K8S_SLICECTR_H
#define KDP_K8S_SLICECTR_H

#include <jansson.h>
#include <stddef.h>

#include "kdp_dra.h"

/* The most counter sets a pool of kdp holds. */
#define KDP__SLICECTR_MAX_SETS 1024U

/* {name: {value}, ...} (a new reference; NULL: -ENOMEM). */
json_t *kdp__slicectr_counters(const kdp_dra_quantity *c, size_t n);
/* A device's consumesCounters, [{counterSet, counters[,
 * compatibilityGroups]}] (a new reference). NULL: a bad one (why says
 * which and why: the device is to be left out) or -ENOMEM (why empty). */
json_t *kdp__slicectr_consumes(const kdp_dra_consumption *c, size_t n, char *why, size_t why_len);
/* The pool's counter sets, each {name, counters}, sorted by name; a bad
 * one or the second of a name left out (logged). *ret: an array of new
 * references. Returns the count, -E2BIG (more than KDP__SLICECTR_MAX_SETS,
 * logged) or -ENOMEM. */
int kdp__slicectr_sets(const kdp_dra_counter_set *s, size_t n, json_t ***ret);
/* Whether the consumptions of a device (its JSON, consumesCounters) name
 * sets among sets (sorted by name, as kdp__slicectr_sets makes them) and
 * counters they have: NULL, or a line in why saying what is missing. */
const char *kdp__slicectr_unresolved(json_t *dev, json_t *const *sets, size_t n, char *why,
                                     size_t why_len);

#endif
