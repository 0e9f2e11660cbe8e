/* SPDX-License-Identifier: MIT */
/*
 * dra_int: the DRA driver of one plugin (kdp_plugin_enable_dra), shared by
 * the modules of src/dra: driver.c (enable, status, the plugin's hooks),
 * kubelet.c (the registration and service sockets), prepare.c (the
 * NodePrepareResources / NodeUnprepareResources pipeline), health.c (the
 * health stream), devnames.c (the devices' names and descriptions) and
 * apiserver.c (claims and slices through src/k8s).
 *
 * Loop thread for everything here, except `mu` and what it guards (the
 * status, read by kdp_plugin_get_dra_status from any thread) and the
 * checkpoint (its own mutex, written by the worker's jobs).
 */
#ifndef KDP_DRA_INT_H
#define KDP_DRA_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "base/backoff.h"
#include "base/list.h"
#include "dra/abandoned.h"
#include "dra/checkpoint.h"
#include "grpc/server.h"
#include "kdp_dra.h"
#include "plugin/plugin.h"
#include "plugin/reg_watcher.h"
#include "runtime/loop.h"

typedef struct kdp__dra kdp__dra;

/* What a claim read from the API server gives (or an error): a record
 * without the prepare's answer (dra/claimrec.h), its devices filtered to
 * this driver and this node's pool. cb runs once, on the loop. */
typedef void (*kdp__dra_claim_cb)(void *ud, int err, const char *why, json_t *rec);

typedef struct kdp__dra_api kdp__dra_api; /* apiserver.c */

struct kdp__dra {
    kdp__attachment att;
    kdp_plugin *p;
    kdp__loop *loop;
    kdp_dra_ops ops;
    void *ud;

    char *driver;
    char *node;
    char *instance; /* NULL: none */
    char *state_dir;
    char *cdi_dir;
    char *cdi_kind; /* "k8s.<driver>/claim" */
    char *reg_path; /* <root>/plugins_registry/<driver>[-<instance>]-reg.sock */
    char *svc_dir;  /* <root>/plugins/<driver> */
    char *svc_path; /* <svc_dir>/dra[-<instance>].sock */
    bool device_plugin_too;
    bool no_health;
    unsigned resync_ms;
    const char *versions[3];
    size_t n_versions;

    /* kubelet.c */
    bool serving;
    kdp__reg_watcher reg;
    kdp__server *reg_server;
    kdp__server *svc_server;
    kdp__timer *reopen; /* re-create the registration socket */
    kdp__timer *retry;  /* serving could not begin: again */
    kdp__backoff retry_backoff;
    const char *failed_path; /* the socket that could not be served */

    /* health.c: open NodeWatchResources streams */
    kdp__link streams;
    size_t n_streams;
    kdp__timer *health_resend; /* the full list again, while a stream is open */

    /* prepare.c: claims being prepared or unprepared */
    kdp__link ops_inflight;
    kdp__link calls;
    kdp__timer *kick_timer; /* starts the ops waiting for their claim */
    kdp__ckpt *ckpt;
    kdp__abandoned *abandoned; /* claims whose job overran its deadline and runs on */

    /* devnames.c: device name <-> kdp ID, from the describe op */
    json_t *name_of;   /* ID -> name */
    json_t *id_of;     /* name -> ID */
    json_t *described; /* name -> {attrs, caps}: the slices' devices */
    bool describing;   /* the describe job runs */
    bool describe_again;
    kdp__timer *describe_retry; /* a describe overran or could not run: again */
    kdp__backoff describe_backoff;

    kdp__dra_api *api; /* NULL: no API server configured */

    pthread_mutex_t mu;
    kdp_dra_status st;
};

/* driver.c: the status, under mu. */
kdp_dra_status *kdp__dra_status_lock(kdp__dra *d);
void kdp__dra_status_unlock(kdp__dra *d);

/* kubelet.c */
int kdp__dra_kubelet_init(kdp__dra *d);
void kdp__dra_kubelet_done(kdp__dra *d);
/* Serving begins (the sockets made, registration waited for) or ends. */
void kdp__dra_kubelet_serving(kdp__dra *d, bool on);

/* prepare.c: the DRAPlugin methods (v1 and v1beta1) into out; how many. */
size_t kdp__dra_prepare_methods(kdp__dra *d, kdp__method *out, size_t cap);
int kdp__dra_prepare_init(kdp__dra *d);
/* Ends every call (answered UNAVAILABLE by the server's end) and claim op. */
void kdp__dra_prepare_done(kdp__dra *d);

/* health.c */
int kdp__dra_health_init(kdp__dra *d);
void kdp__dra_health_done(kdp__dra *d);
size_t kdp__dra_health_methods(kdp__dra *d, kdp__method *out, size_t cap);
void kdp__dra_health_changed(kdp__dra *d);

/* devnames.c */
int kdp__dra_names_init(kdp__dra *d);
void kdp__dra_names_done(kdp__dra *d);
/* The table changed: describe the devices new to it (a job), then publish
 * if the devices changed (force: publish anyway). */
void kdp__dra_names_changed(kdp__dra *d, bool force);
/* The device of the table named name in the slices: its kdp__dev, or NULL. */
const kdp__dev *kdp__dra_device_by_name(kdp__dra *d, const char *name);
/* The name of table device dev in the slices into out; false if it has
 * none (an ID that gives no valid name). */
bool kdp__dra_name_of(kdp__dra *d, const kdp__dev *dev, char out[64]);

/* apiserver.c */
int kdp__dra_api_new(kdp__dra *d, const char *kubeconfig, kdp__dra_api **ret);
void kdp__dra_api_free(kdp__dra_api *a);
void kdp__dra_api_serving(kdp__dra_api *a, bool on);
/* Reads a claim: 0 and cb later (on the loop, never from inside this
 * call), *ret a handle for kdp__dra_api_cancel until then; or -errno with
 * why (cb never runs). */
int kdp__dra_api_get_claim(kdp__dra_api *a, const kdp_dra_claim_ref *ref, kdp__dra_claim_cb cb,
                           void *ud, void **ret, char *why, size_t why_len);
void kdp__dra_api_cancel(kdp__dra_api *a, void *handle);
/* The described devices changed: publish them (d->described). */
void kdp__dra_api_publish(kdp__dra_api *a);

#endif
