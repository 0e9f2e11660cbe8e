/* SPDX-License-Identifier: MIT */
/*
 * status: what a plugin's modules publish for kdp_plugin_get_status(), read
 * from any thread. Each module writes its own fields between
 * kdp__status_lock() and kdp__status_unlock(), on the loop thread; the state
 * comes from the lifecycle's atomic.
 */
#ifndef KDP_STATUS_H
#define KDP_STATUS_H

#include <pthread.h>

#include "kdp.h"

#define KDP__REG_ERROR_MAX 256

typedef struct kdp__status {
    pthread_mutex_t mu;
    kdp_plugin_status st; /* state and stuck_callbacks are filled at the query */
    /* The last registration failure since the last success ("" if none):
     * the kubelet's reason or ours, control characters blanked (/healthz). */
    char reg_error[KDP__REG_ERROR_MAX];
} kdp__status;

static inline void kdp__status_init(kdp__status *s)
{
    pthread_mutex_init(&s->mu, NULL);
    s->st = (kdp_plugin_status){0};
    s->reg_error[0] = '\0';
}

static inline void kdp__status_done(kdp__status *s)
{
    pthread_mutex_destroy(&s->mu);
}

static inline kdp_plugin_status *kdp__status_lock(kdp__status *s)
{
    pthread_mutex_lock(&s->mu);
    return &s->st;
}

static inline void kdp__status_unlock(kdp__status *s)
{
    pthread_mutex_unlock(&s->mu);
}

#endif
