/* SPDX-License-Identifier: MIT */
/*
 * taints: the author's own taints on devices (kdp_plugin_set_dra_taints),
 * by kdp ID. Set from any thread into the shared copy (under its mutex,
 * checked, with their timeAdded), taken by the loop on a wakeup into the
 * loop's copy, which publishing reads without a lock; `changed` then tells
 * the owner to publish. At most KDP__DRA_TAINTED_MAX devices carry taints.
 *
 * kdp__dra_taints_effect names an effect as the API spells it, for kdp's
 * own taint too.
 */
#ifndef KDP_DRA_TAINTS_H
#define KDP_DRA_TAINTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "k8s/slicebuild.h"
#include "kdp_dra.h"
#include "runtime/loop.h"

#define KDP__DRA_TAINTED_MAX 4096

/* One taint, by value. A label name is at most 253 + 1 + 63 bytes. */
typedef struct kdp__dra_taint {
    char key[320];
    char value[64];
    kdp_dra_taint_effect effect;
    int64_t time_added; /* Unix seconds */
} kdp__dra_taint;

typedef struct kdp__dra_tainted {
    char *id;
    kdp__dra_taint t[KDP_DRA_MAX_TAINTS];
    size_t n;
} kdp__dra_tainted;

/* Devices with taints, sorted by ID. */
typedef struct kdp__dra_taintset {
    kdp__dra_tainted *v;
    size_t n, cap;
} kdp__dra_taintset;

typedef struct kdp__dra_taints {
    const char *driver;  /* borrowed, for log lines */
    const char *own_key; /* kdp's own ("<driver>/unhealthy"), refused; borrowed */
    void (*changed)(void *ud);
    void *ud;
    kdp__wakeup *wake;
    pthread_mutex_t mu;
    kdp__dra_taintset shared; /* under mu */
    uint64_t ver;             /* under mu: bumped at each change */
    uint64_t taken;           /* loop: the ver of `loop` */
    kdp__dra_taintset loop;   /* loop thread */
} kdp__dra_taints;

/* driver and own_key are borrowed. changed runs on the loop thread.
 * Returns 0 or -ENOMEM. */
int kdp__dra_taints_init(kdp__dra_taints *t, kdp__loop *l, const char *driver, const char *own_key,
                         void (*changed)(void *), void *ud);
void kdp__dra_taints_done(kdp__dra_taints *t);
/* kdp_plugin_set_dra_taints (any thread): see kdp_dra.h. */
int kdp__dra_taints_set(kdp__dra_taints *t, const char *id, const kdp_dra_taint *v, size_t n);
/* The author's taints on kdp ID id as slicebuild takes them, into out
 * (cap at most): how many. Loop thread; valid until the loop runs again. */
size_t kdp__dra_taints_get(const kdp__dra_taints *t, const char *id, kdp__slice_taint *out,
                           size_t cap);
/* "NoSchedule", "NoExecute", "None"; NULL for KDP_DRA_TAINT_NONE or a bad
 * value. */
const char *kdp__dra_taints_effect(kdp_dra_taint_effect e);

#endif
