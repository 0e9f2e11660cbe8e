/* SPDX-License-Identifier: MIT */
/*
 * driver: a plugin's DRA driver (kdp_plugin_enable_dra), the one owner of
 * its parts, which know nothing of each other:
 *
 *   config    the configuration checked, the paths
 *   devices   the table's devices described and named for the slices
 *   health    the health stream
 *   claims    the claim operations (a state machine each) and their slots
 *   claimsvc  the DRAPlugin service, its calls
 *   sockets   the registration and service sockets
 *   apilink   claims read and slices published through the API server
 *   checkpoint, claimjob: the records and the work on them
 *
 * It composes them, and fans out what one says to the others: a table
 * change reaches the descriptions and the health stream; new descriptions
 * reach the slices and the health stream; each part's state reaches the
 * status (under mu: kdp_plugin_get_dra_status reads it from any thread).
 * Loop thread, but for that status.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "dra/apilink.h"
#include "dra/bootid.h"
#include "dra/claimops.h"
#include "dra/claimsvc.h"
#include "dra/config.h"
#include "dra/counters.h"
#include "dra/descs.h"
#include "dra/devstatus.h"
#include "dra/driver_int.h"
#include "dra/health.h"
#include "dra/metadata.h"
#include "dra/sockets.h"
#include "dra/taints.h"
#include "kdp_dra.h"
#include "plugin/plugin.h"

#define WAIT_CALLBACKS_MS 1000U

enum {
    MADE_DESCS = 1,
    MADE_HEALTH,
    MADE_TAINTS,
    MADE_COUNTERS,
    MADE_CLAIMS,
    MADE_SOCKETS,
    MADE_API,
    MADE_STATUSW
};

/* ---- the status ---- */

static kdp_dra_status *status_lock(kdp__dra *d)
{
    pthread_mutex_lock(&d->mu);
    return &d->st;
}

static void status_unlock(kdp__dra *d)
{
    pthread_mutex_unlock(&d->mu);
}

/* ---- fan-out ---- */

/* devices: the published devices changed. */
static void on_described(void *ud)
{
    kdp__dra *d = ud;
    status_lock(d)->devices = kdp__dra_descs_count(&d->descs);
    status_unlock(d);
    kdp__dra_tell_health(d);
    kdp__dra_publish(d);
    if (d->serving && !d->sockets_on) {
        /* the kubelet's first calls (prepares again after a restart) find
         * the devices described */
        d->sockets_on = true;
        kdp__dra_sockets_serving(&d->sockets, true);
    }
}

/* taints, counters: the author's taints or counter sets changed. */
static void on_taints(void *ud)
{
    kdp__dra_publish(ud);
}

/* The plugin's hooks. */
static void on_serving(void *ud, bool on)
{
    kdp__dra *d = ud;
    d->serving = on;
    if (on) {
        kdp__dra_api_start(d->api);
        kdp__dra_descs_update(&d->descs, true); /* the sockets once it is told */
    } else {
        d->sockets_on = false;
        kdp__dra_sockets_serving(&d->sockets, false);
    }
}

static void on_devices_changed(void *ud)
{
    kdp__dra *d = ud;
    kdp__dra_tell_health(d); /* a health change: the stream, and the taints */
    kdp__dra_publish(d);
    kdp__dra_descs_update(&d->descs, false);
}

static void on_probe_note(void *ud, const char *id, kdp__probe_note note, const char *why)
{
    kdp__dra *d = ud;
    if (kdp__dra_descs_note(&d->descs, id, note, why)) {
        kdp__dra_tell_health(d);
    }
}

/* The plugin's /healthz: the DRA side is up when the kubelet took its
 * registration and the API server has its slices. */
static bool dra_health(void *ud, char *why, size_t cap)
{
    kdp__dra *d = ud;
    kdp_dra_status st = *status_lock(d);
    status_unlock(d);
    if (!st.registered) {
        snprintf(why, cap,
                 "not registered: waiting for the kubelet's plugin watcher to ask "
                 "%s (GetInfo)",
                 d->conf.reg_path);
        return false;
    }
    if (!st.published) {
        snprintf(why, cap, "registered; slices not published%s%s", st.api_error[0] ? ": " : " yet",
                 st.api_error);
        return false;
    }
    snprintf(why, cap, "registered; %zu device%s published in %zu slice%s; API server: %s%s",
             st.devices, st.devices == 1 ? "" : "s", st.slices, st.slices == 1 ? "" : "s",
             st.api_error[0] ? "last call failed: " : "reached", st.api_error);
    return true;
}

/* sockets: the registration. */
static void on_registration(void *ud, kdp__reg_state s, const char *why)
{
    kdp__dra *d = ud;
    status_lock(d)->registered = s == KDP__REG_REGISTERED;
    status_unlock(d);
    kdp__plugin_report_registration(d->p, s, why);
}

/* claimsvc: a call came. */
static void on_called(void *ud, const char *version)
{
    kdp__dra *d = ud;
    kdp_dra_status *st = status_lock(d);
    snprintf(st->version, sizeof(st->version), "%s", version);
    status_unlock(d);
}

/* apilink */
static void on_slices(void *ud, const kdp__slices_status *ss)
{
    kdp__dra *d = ud;
    kdp_dra_status *st = status_lock(d);
    st->published = ss->published;
    st->pool_generation = ss->generation;
    st->slices = ss->slices;
    snprintf(st->api_error, sizeof(st->api_error), "%s", ss->error);
    status_unlock(d);
}

static void on_api_error(void *ud, const char *why)
{
    kdp__dra *d = ud;
    kdp_dra_status *st = status_lock(d);
    snprintf(st->api_error, sizeof(st->api_error), "%s", why ? why : "");
    status_unlock(d);
}

/* ---- what the claims need ---- */

static int read_claim(void *ud, const kdp_dra_claim_ref *ref, kdp__cop_read_cb cb, void *cb_ud,
                      void **handle, char *why, size_t why_len)
{
    kdp__dra *d = ud;
    return kdp__dra_api_get_claim(d->api, ref, cb, cb_ud, handle, why, why_len);
}

static void cancel_read(void *ud, void *handle)
{
    kdp__dra *d = ud;
    kdp__dra_api_cancel(d->api, handle);
}

/* Every device of rec in the table and healthy: its kdp ID and default
 * node filled in. */
/* A claim's device found in the table: its kdp ID, host node and (for the
 * device metadata) attributes. Returns 0 or -ENOMEM. */
static int fill_dev(kdp__dra *d, kdp__dra_rdev *rd, const kdp__dev *dev)
{
    int r = kdp__dra_rec_set(&rd->device_id, dev->id);
    const kdp__dra_desc *desc = kdp__dra_descs_find(&d->descs, dev->id);
    if (r == 0 && d->conf.device_metadata && desc) {
        bool oom = false;
        free(rd->attrs);
        rd->attrs = kdp__dra_md_attrs(rd->device, desc->d.attrs, desc->d.n_attrs, &oom);
        r = oom ? -ENOMEM : 0;
    }
    if (r == 0 && dev->host_path) {
        kdp_cdi_node *n = &rd->default_node;
        r = kdp__dra_rec_set((char **)&n->path,
                             dev->container_path ? dev->container_path : dev->host_path);
        if (r == 0) {
            r = kdp__dra_rec_set((char **)&n->host_path, dev->host_path);
        }
        if (r == 0) {
            r = kdp__dra_rec_set((char **)&n->permissions, dev->permissions);
        }
    }
    return r;
}

static bool check_devices(void *ud, kdp__dra_rec *rec, char *msg, size_t len)
{
    kdp__dra *d = ud;
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    kdp__dra_binds_prefill(d, rec); /* fresher than the claim read */
    if (rec->n_devs == 0) {
        snprintf(msg, len, "the claim has no device of driver %s on node %s", d->conf.driver,
                 d->conf.node);
        return false;
    }
    for (size_t i = 0; i < rec->n_devs; i++) {
        kdp__dra_rdev *rd = &rec->devs[i];
        const char *id = kdp__dra_descs_id_of(&d->descs, rd->device);
        const kdp__dev *dev = id ? kdp__devtab_find(tab, id) : NULL;
        if (!dev) {
            snprintf(msg, len, "device %.100s is not among the driver's devices on node %s",
                     rd->device, d->conf.node);
            return false;
        }
        if (dev->health != KDP_HEALTHY) {
            snprintf(msg, len, "device %.100s (%.100s) is unhealthy", rd->device, dev->id);
            return false;
        }
        if (fill_dev(d, rd, dev) < 0) {
            snprintf(msg, len, "out of memory");
            return false;
        }
    }
    return true;
}

/* A recorded device no longer in the table has no kdp ID for the
 * unprepare op (kdp_dra_alloc.device_id NULL). */
static void forget_gone(void *ud, kdp__dra_rec *rec)
{
    kdp__dra *d = ud;
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    for (size_t i = 0; i < rec->n_devs; i++) {
        kdp__dra_rdev *rd = &rec->devs[i];
        if (rd->device_id && !kdp__devtab_find(tab, rd->device_id)) {
            (void)kdp__dra_rec_set(&rd->device_id, NULL);
        }
    }
}

/* An operation ended: the count; the claim's status written (a prepare:
 * its devices' statuses, if any; an unprepare: this driver's removed, but
 * for those of devices with binding conditions, which hold while the claim
 * stays allocated). */
static void op_ended(void *ud, bool unprepare, const kdp__dra_rec *rec)
{
    kdp__dra *d = ud;
    status_lock(d)->prepared = kdp__ckpt_count(d->ckpt);
    status_unlock(d);
    if (d->binds_on) {
        kdp__dra_binds_retry(&d->binds); /* room for a bind op that waits */
    }
    bool had = false;
    bool kept = false; /* a device's binding conditions: they are the allocation's */
    for (size_t i = 0; rec && i < rec->n_devs; i++) {
        had |= rec->devs[i].status != NULL;
        kept |= rec->devs[i].n_bind > 0;
    }
    if (!rec || !had || d->made < MADE_STATUSW) {
        return;
    }
    if (!unprepare || !kept) {
        kdp__statusw_put(&d->statusw, rec, unprepare);
        return;
    }
    /* an unprepare: this driver's entries go, but for the devices with
     * binding conditions, whose entries are left as the claim has them */
    kdp__dra_rec *left = kdp__dra_rec_dup(rec, true);
    if (!left) {
        log_error("%s: claim %s/%s: out of memory: its status is left as it is", d->conf.driver,
                  rec->ns, rec->name);
        return;
    }
    for (size_t i = 0; i < left->n_devs; i++) {
        left->devs[i].keep_entry = left->devs[i].n_bind > 0;
        (void)kdp__dra_rec_set(&left->devs[i].status, NULL);
    }
    kdp__statusw_put(&d->statusw, left, false);
    kdp__dra_rec_free(left);
}

static int write_status(void *ud, const kdp_dra_claim_ref *ref, const kdp__cstat_entry *e, size_t n,
                        kdp__cstat_done_cb done, void *done_ud, kdp__cstat_req **ret)
{
    kdp__dra *d = ud;
    return kdp__dra_api_write_status(d->api, ref, e, n, done, done_ud, ret);
}

/* ---- life ---- */

/* Returns true if a prepare or unprepare callback is still running (the
 * plugin keeps its memory for it; what the callback's job uses, the job's
 * environment, is counted and stays). */
static bool dra_free(kdp__dra *d)
{
    if (!d) {
        return false;
    }
    bool left = false;
    if (d->made >= MADE_SOCKETS) {
        kdp__dra_sockets_done(&d->sockets); /* the servers: their calls end */
    }
    if (d->made >= MADE_CLAIMS) {
        kdp__dra_claimsvc_done(&d->claimsvc); /* the calls' ops detached */
        left = kdp__dra_claims_done(&d->claims, WAIT_CALLBACKS_MS);
    }
    if (d->made >= MADE_STATUSW) {
        kdp__statusw_done(&d->statusw); /* before the client its writes use */
    }
    kdp__dra_api_free(d->api); /* and its claim watch */
    if (d->binds_on) {
        kdp__dra_binds_done(&d->binds);
    }
    if (d->made >= MADE_COUNTERS) {
        kdp__dra_counters_done(&d->counters);
    }
    if (d->made >= MADE_TAINTS) {
        kdp__dra_taints_done(&d->taints);
    }
    if (d->made >= MADE_HEALTH) {
        kdp__dra_health_done(&d->health);
    }
    if (d->made >= MADE_DESCS) {
        kdp__dra_descs_done(&d->descs);
    }
    kdp__cj_env_unref(d->env);
    kdp__abandoned_unref(d->abandoned);
    kdp__ckpt_unref(d->ckpt);
    kdp__dra_conf_done(&d->conf);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return left;
}

static bool att_free(kdp__attachment *a)
{
    return dra_free(KDP__CONTAINER_OF(a, kdp__dra, att));
}

static int make_claims(kdp__dra *d)
{
    kdp__dra_claims_cfg cc = {
        .slots = d->conf.concurrent_claims,
        .timeout_ms = kdp__plugin_jobs(d->p)->timeout_ms,
        .env = d->env,
        .read = read_claim,
        .cancel = cancel_read,
        .check = check_devices,
        .forget_gone = forget_gone,
        .ended = op_ended,
        .ud = d,
    };
    int r = kdp__dra_claims_init(&d->claims, d->loop, d->conf.driver, &cc);
    d->made = MADE_CLAIMS; /* done frees what init made, even on failure */
    kdp__dra_claimsvc_init(&d->claimsvc, d->loop, &d->claims, d->conf.driver, d->conf.node,
                           on_called, d);
    return r;
}

static int make_sockets(kdp__dra *d)
{
    kdp__method m[KDP__DRA_SOCKETS_MAX_METHODS];
    size_t n = kdp__dra_claimsvc_methods(&d->claimsvc, m, KDP__DRA_SOCKETS_MAX_METHODS);
    if (!d->conf.no_health) {
        n += kdp__dra_health_methods(&d->health, !d->conf.no_health_v1alpha1, m + n,
                                     KDP__DRA_SOCKETS_MAX_METHODS - n);
    }
    kdp__dra_sockets_cfg sc = {
        .driver = d->conf.driver,
        .reg_path = d->conf.reg_path,
        .svc_path = d->conf.svc_path,
        .versions = d->conf.versions,
        .n_versions = d->conf.n_versions,
        .methods = m,
        .n_methods = n,
        .state = on_registration,
        .ud = d,
    };
    int r = kdp__dra_sockets_init(&d->sockets, d->loop, &sc);
    d->made = MADE_SOCKETS;
    return r;
}

static int make(kdp__dra *d)
{
    (void)kdp__bootid_read(d->boot_id); /* "" if not known: logged */
    int r = kdp__ckpt_open(d->conf.state_dir, d->boot_id, &d->ckpt);
    if (r < 0) {
        return r;
    }
    d->st.prepared = kdp__ckpt_count(d->ckpt);
    d->abandoned = kdp__abandoned_new();
    d->env = d->abandoned ? kdp__cj_env_new(d->p, &d->ops, kdp_plugin_userdata(d->p),
                                            d->conf.driver, d->conf.cdi_dir, d->conf.cdi_kind,
                                            d->boot_id, d->ckpt, d->abandoned)
                          : NULL;
    if (!d->env) {
        return -ENOMEM;
    }
    d->env->cdi_mode = d->conf.cdi_mode;
    if (kdp__cj_env_set_metadata(d->env, d->conf.md_dir, d->conf.node, d->conf.device_metadata) <
        0) {
        return -ENOMEM;
    }
    kdp__dra_descs_cbs dcb = {.changed = on_described, .ud = d};
    r = kdp__dra_descs_init(&d->descs, d->p, kdp__plugin_jobs(d->p), d->ops.describe,
                            kdp_plugin_userdata(d->p), d->conf.driver, &dcb);
    d->made = MADE_DESCS;
    if (r == 0) {
        r = kdp__dra_health_init(&d->health, d->loop, d->conf.driver, d->conf.node);
        d->made = MADE_HEALTH;
    }
    if (r == 0) {
        r = kdp__dra_taints_init(&d->taints, d->loop, d->conf.driver, d->conf.taint_key, on_taints,
                                 d);
        d->made = MADE_TAINTS;
    }
    if (r == 0) {
        r = kdp__dra_counters_init(&d->counters, d->loop, d->conf.driver, on_taints, d);
        d->made = MADE_COUNTERS;
    }
    if (r == 0) {
        r = make_claims(d);
    }
    if (r == 0) {
        r = make_sockets(d);
    }
    if (r == 0) {
        kdp__dra_api_cfg ac = {
            .driver = d->conf.driver,
            .node = d->conf.node,
            .kubeconfig = d->conf.kubeconfig,
            .resync_ms = d->conf.resync_ms,
            .status = on_slices,
            .error = on_api_error,
            .ud = d,
        };
        r = kdp__dra_api_new(d->loop, &ac, &d->api);
        d->made = MADE_API;
    }
    if (r == 0) {
        kdp__statusw_cfg wc = {.driver = d->conf.driver, .write = write_status, .ud = d};
        r = kdp__statusw_init(&d->statusw, d->loop, &wc);
        d->made = MADE_STATUSW;
    }
    if (r == 0 && (d->ops.bind || d->ops.unbind)) {
        r = kdp__dra_binds_make(d);
    }
    return r;
}

KDP_EXPORT int kdp_plugin_enable_dra(kdp_plugin *p, const kdp_dra_config *cfg,
                                     const kdp_dra_ops *ops)
{
    if (!p || !cfg) {
        log_error("kdp_plugin_enable_dra: %s is NULL", !p ? "the plugin (p)" : "the config (cfg)");
        return -EINVAL;
    }
    if (kdp__plugin_ext_ud(p)) {
        log_error("%s: kdp_plugin_enable_dra: DRA is already on", kdp_plugin_resource(p));
        return -EALREADY;
    }
    kdp_plugin_status pst;
    if (kdp_plugin_get_status(p, &pst) == 0 && pst.state != KDP_PLUGIN_IDLE) {
        log_error("%s: kdp_plugin_enable_dra: the plugin runs already: enable DRA before "
                  "kdp_plugin_run() or kdp_ctx_run()",
                  kdp_plugin_resource(p));
        return -EBUSY;
    }
    kdp__dra *d = calloc(1, sizeof(*d));
    if (!d) {
        return -ENOMEM;
    }
    pthread_mutex_init(&d->mu, NULL);
    d->p = p;
    d->loop = kdp__plugin_loop(p);
    if (ops) {
        d->ops = *ops;
    }
    int r = kdp__dra_conf_init(&d->conf, p, cfg);
    if (r == 0) {
        r = make(d);
    }
    kdp__plugin_ext ext = {.serving = on_serving,
                           .devices_changed = on_devices_changed,
                           .probe_note = on_probe_note,
                           .health = dra_health,
                           .metrics = {.families = kdp__dra_families,
                                       .n_families = kdp__dra_n_families,
                                       .write = kdp__dra_metrics},
                           .name = "DRA",
                           .ud = d};
    if (r == 0) {
        r = kdp__plugin_set_ext(p, &ext, cfg->device_plugin_too);
    }
    if (r < 0) {
        (void)dra_free(d);
        return r;
    }
    d->att.free = att_free;
    kdp__plugin_attach(p, &d->att);
    const kdp__dra_conf *c = &d->conf;
    log_info("%s: DRA driver %s on node %s%s%s (registration %s, service %s, state %s%s)",
             kdp_plugin_resource(p), c->driver, c->node, c->instance ? ", instance " : "",
             c->instance ? c->instance : "", c->reg_path, c->svc_path, c->state_dir,
             c->device_plugin_too ? "; the device-plugin API too" : "; DRA only");
    return 0;
}

KDP_EXPORT int kdp_dra_driver_new(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops,
                                  const kdp_dra_config *dcfg, const kdp_dra_ops *dops, void *ud,
                                  kdp_plugin **ret)
{
    if (!ret || !dcfg) {
        log_error("kdp_dra_driver_new: %s is NULL", !ret ? "ret" : "the DRA config (dcfg)");
        return -EINVAL;
    }
    *ret = NULL;
    const char *why = NULL;
    if (kdp_dra_validate_driver_name(dcfg->driver_name, &why) < 0) {
        log_error("kdp_dra_driver_new: invalid kdp_dra_config.driver_name \"%s\": %s",
                  dcfg->driver_name ? dcfg->driver_name : "(null)", why);
        return -EINVAL;
    }
    if (dcfg->device_plugin_too) {
        log_error("%s: kdp_dra_driver_new: kdp_dra_config.device_plugin_too asks for the "
                  "device-plugin API, which needs a resource and a socket name: make the plugin "
                  "with kdp_plugin_new() and call kdp_plugin_enable_dra()",
                  dcfg->driver_name);
        return -EINVAL;
    }
    kdp_plugin *p = NULL;
    int r = kdp__plugin_new_alone(ctx, cfg, ops, ud, dcfg->driver_name, &p);
    if (r == 0) {
        r = kdp_plugin_enable_dra(p, dcfg, dops);
    }
    if (r < 0) {
        kdp_plugin_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

KDP_EXPORT int kdp_plugin_get_dra_status(kdp_plugin *p, kdp_dra_status *ret)
{
    if (!p || !ret) {
        return -EINVAL;
    }
    kdp__dra *d = kdp__plugin_ext_ud(p);
    if (!d) {
        return -ENOENT;
    }
    *ret = *status_lock(d);
    status_unlock(d);
    return 0;
}
