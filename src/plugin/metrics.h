/* SPDX-License-Identifier: MIT */
/*
 * metrics: the metrics an author adds to a context's /metrics page
 * (kdp_metric_new, kdp_metric_add, kdp_metric_set): the naming rules, the
 * series of each, and their part of the page. One mutex per registry: the
 * values may change from any thread; a page is written under it.
 */
#ifndef KDP_METRICS_H
#define KDP_METRICS_H

#include <pthread.h>
#include <stddef.h>

#include "base/expfmt.h"
#include "base/list.h"
#include "kdp.h"

typedef struct kdp__registry {
    pthread_mutex_t mu;
    kdp__link metrics; /* kdp_metric, in the order made */
} kdp__registry;

void kdp__registry_init(kdp__registry *r);
/* Frees every metric. */
void kdp__registry_done(kdp__registry *r);
/* kdp_metric_new on r (the caller checked the calling thread). */
int kdp__registry_add(kdp__registry *r, kdp_metric_type type, const char *name, const char *help,
                      const char *const *labels, size_t n_labels, kdp_metric **ret);
/* Every metric of r, each family once, its series in the order made. */
void kdp__registry_render(kdp__registry *r, kdp__expfmt *w);

/* The rules (also for tests): 0 or -EINVAL, *why says what is wrong. */
int kdp__metric_check_name(const char *name, const char **why);
int kdp__metric_check_label(const char *name, const char **why);

#endif
