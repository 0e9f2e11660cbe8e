/* SPDX-License-Identifier: MIT */
/*
 * driver_int: the DRA driver's struct, for driver.c (the owner: life,
 * hooks, the public calls), fanout.c (what it tells its parts: the
 * health stream's list, the slices' devices and taints) and drametrics.c (its
 * figures on /metrics) only.
 */
#ifndef KDP_DRA_DRIVER_INT_H
#define KDP_DRA_DRIVER_INT_H

#include <pthread.h>

#include "dra/apilink.h"
#include "dra/binds.h"
#include "dra/bootid.h"
#include "dra/claimjob.h"
#include "dra/claimops.h"
#include "dra/claimsvc.h"
#include "dra/config.h"
#include "dra/counters.h"
#include "dra/descs.h"
#include "dra/health.h"
#include "dra/sockets.h"
#include "dra/statusw.h"
#include "dra/taints.h"
#include "kdp_dra.h"
#include "plugin/plugin.h"

typedef struct kdp__dra {
    kdp__attachment att;
    kdp_plugin *p;
    kdp__loop *loop;
    kdp_dra_ops ops;
    kdp__dra_conf conf;
    char boot_id[KDP__DRA_BOOT_ID_LEN];

    kdp__ckpt *ckpt;
    kdp__abandoned *abandoned;
    kdp__cj_env *env;
    kdp__dra_descs descs;
    kdp__dra_health health;
    kdp__dra_taints taints;
    kdp__dra_counters counters;
    kdp__dra_claims claims;
    kdp__dra_claimsvc claimsvc;
    kdp__dra_sockets sockets;
    kdp__dra_api *api;
    kdp__statusw statusw;
    kdp__dra_binds binds; /* with kdp_dra_ops.bind only (binds_on) */
    bool binds_on;
    bool serving;    /* the plugin's table runs */
    bool sockets_on; /* registered: once the first descriptions are in */
    unsigned made;   /* how many of the parts above were made, in that order */

    pthread_mutex_t mu;
    kdp_dra_status st;
} kdp__dra;

/* drametrics.c: the driver's families on the plugin's /metrics page (its
 * registration, the kubelet's calls and their claims, the claims and shares
 * prepared, the slices published and their failures, the API server's
 * answers by verb and code), each series labelled with the plugin's
 * resource and the driver; and family f's samples of the driver ud. Loop
 * thread (the page is written there). */
extern const kdp__ext_family kdp__dra_families[];
extern const size_t kdp__dra_n_families;
void kdp__dra_metrics(void *ud, size_t f, const char *resource, kdp__expfmt *w);

/* driver_binds.c: the binding side (kdp_dra_ops.bind): the binds part
 * made, fed by the API link's watch of the cluster's claims, its bind ops
 * on the claim slots, its statuses through statusw. 0 or -errno. */
int kdp__dra_binds_make(kdp__dra *d);
/* The author's statuses of claim rec, set while it waited for its binding
 * conditions, as its devices' api_status (for its prepare). */
void kdp__dra_binds_prefill(kdp__dra *d, kdp__dra_rec *rec);
/* A status of a claim waiting for its binding conditions (the author's
 * kdp_plugin_set_dra_device_status): 0, -ENOENT (no such claim), -ENODEV
 * (no such device), -EAGAIN, -ENOMEM. */
int kdp__dra_binds_status(kdp__dra *d, const char *uid, const char *device, const char *share_id,
                          const char *json);

/* The pool's devices with their health, to the health stream. */
void kdp__dra_tell_health(kdp__dra *d);
/* The published devices to the slices, with their taints. */
void kdp__dra_publish(kdp__dra *d);

#endif
