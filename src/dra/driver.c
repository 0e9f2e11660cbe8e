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
#include "dra/descs.h"
#include "dra/health.h"
#include "dra/sockets.h"
#include "dra/taints.h"
#include "kdp_dra.h"
#include "plugin/plugin.h"

#define WAIT_CALLBACKS_MS 1000U

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
    kdp__dra_claims claims;
    kdp__dra_claimsvc claimsvc;
    kdp__dra_sockets sockets;
    kdp__dra_api *api;
    unsigned made; /* how many of the parts above were made, in that order */

    pthread_mutex_t mu;
    kdp_dra_status st;
} kdp__dra;

enum { MADE_DESCS = 1, MADE_HEALTH, MADE_TAINTS, MADE_CLAIMS, MADE_SOCKETS, MADE_API };

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

/* What the health stream says of a device (docs/dra.md, "Health"): the
 * author's Unhealthy as it is; the health check's verdict with its reason,
 * or Unknown when the check could not tell (no answer in time, the health
 * subsystem down); Unknown too while a Healthy device's health subsystem is
 * down (whatever kdp_config.probe_down keeps for the device-plugin side). */
static void health_of(const kdp__dev *dev, const kdp__dra_desc *x, kdp__dra_hdev *out)
{
    bool unsure = x->note == KDP__NOTE_NO_ANSWER || x->note == KDP__NOTE_DOWN;
    out->message[0] = '\0';
    if (dev->author_health != KDP_HEALTHY) {
        out->health = KDP__DRA_UNHEALTHY;
        snprintf(out->message, sizeof(out->message), "the driver reports the device Unhealthy");
    } else if (dev->probe.bad) {
        out->health = unsure ? KDP__DRA_UNKNOWN : KDP__DRA_UNHEALTHY;
        snprintf(out->message, sizeof(out->message), "%s",
                 x->note == KDP__NOTE_OK ? "held Unhealthy until enough health checks in a row pass"
                                         : x->why);
    } else if (x->note == KDP__NOTE_DOWN) {
        out->health = KDP__DRA_UNKNOWN;
        snprintf(out->message, sizeof(out->message), "%s", x->why);
    } else {
        out->health = KDP__DRA_HEALTHY;
    }
}

/* The pool's devices with their health, to the health stream. */
static void tell_health(kdp__dra *d)
{
    if (d->conf.no_health) {
        return;
    }
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    kdp__dra_hdev *v = calloc(tab->n ? tab->n : 1, sizeof(*v));
    if (!v) {
        log_error("%s: out of memory for the health stream", d->conf.driver);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < tab->n; i++) {
        const char *name = kdp__dra_descs_name_of(&d->descs, tab->devs[i].id);
        if (name) {
            snprintf(v[m].name, sizeof(v[m].name), "%s", name);
            health_of(&tab->devs[i], kdp__dra_descs_find(&d->descs, tab->devs[i].id), &v[m++]);
        }
    }
    if (kdp__dra_health_set(&d->health, v, m) < 0) {
        log_error("%s: out of memory for the health stream", d->conf.driver);
    }
    free(v);
}

/* The published devices to the slices, an Unhealthy one tainted (the
 * scheduler then gives it to no claim that does not tolerate it), the
 * author's taints too: the descriptions as they are, the health as the
 * table has it now. */
static void publish(kdp__dra *d)
{
    enum { PER = KDP_DRA_MAX_TAINTS + 1 };
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    kdp__dra_descs_view v;
    if (kdp__dra_descs_view_init(&d->descs, &v) < 0) {
        log_error("%s: out of memory publishing the slices", d->conf.driver);
        return;
    }
    kdp__slice_taint *t = calloc(v.n ? v.n * PER : 1, sizeof(*t));
    if (!t) {
        log_error("%s: out of memory publishing the slices", d->conf.driver);
        kdp__dra_descs_view_done(&v);
        return;
    }
    int64_t now = (int64_t)time(NULL);
    const char *effect = kdp__dra_taints_effect(d->conf.unhealthy_taint);
    for (size_t i = 0; i < v.n; i++) {
        const char *id = kdp__dra_descs_id_of(&d->descs, v.devs[i].name);
        const kdp__dev *dev = id ? kdp__devtab_find(tab, id) : NULL;
        bool sick = dev && dev->health != KDP_HEALTHY;
        int64_t since = id ? kdp__dra_descs_health(&d->descs, id, sick, now) : 0;
        kdp__slice_taint *mine = &t[i * PER];
        size_t k = 0;
        if (sick && effect) {
            mine[k++] = (kdp__slice_taint){.key = d->conf.taint_key,
                                           .value = dev->probe.bad ? "health-check-failed"
                                                                   : "reported-unhealthy",
                                           .effect = effect,
                                           .time_added = since};
        }
        k += id ? kdp__dra_taints_get(&d->taints, id, mine + k, PER - k) : 0;
        v.devs[i].taints = k ? mine : NULL;
        v.devs[i].n_taints = k;
    }
    kdp__dra_api_publish(d->api, v.devs, v.n);
    free(t);
    kdp__dra_descs_view_done(&v);
}

/* devices: the published devices changed. */
static void on_described(void *ud)
{
    kdp__dra *d = ud;
    status_lock(d)->devices = kdp__dra_descs_count(&d->descs);
    status_unlock(d);
    tell_health(d);
    publish(d);
}

/* taints: the author's taints changed. */
static void on_taints(void *ud)
{
    publish(ud);
}

/* The plugin's hooks. */
static void on_serving(void *ud, bool on)
{
    kdp__dra *d = ud;
    kdp__dra_sockets_serving(&d->sockets, on);
    if (on) {
        kdp__dra_api_start(d->api);
        kdp__dra_descs_update(&d->descs, true);
    }
}

static void on_devices_changed(void *ud)
{
    kdp__dra *d = ud;
    tell_health(d); /* a health change: the stream, and the taints */
    publish(d);
    kdp__dra_descs_update(&d->descs, false);
}

static void on_probe_note(void *ud, const char *id, kdp__probe_note note, const char *why)
{
    kdp__dra *d = ud;
    if (kdp__dra_descs_note(&d->descs, id, note, why)) {
        tell_health(d);
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
    snprintf(why, cap, "registered; %zu devices published in %zu slices", st.devices, st.slices);
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
static bool check_devices(void *ud, kdp__dra_rec *rec, char *msg, size_t len)
{
    kdp__dra *d = ud;
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
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
        int r = kdp__dra_rec_set(&rd->device_id, dev->id);
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
        if (r < 0) {
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

static void op_ended(void *ud)
{
    kdp__dra *d = ud;
    status_lock(d)->prepared = kdp__ckpt_count(d->ckpt);
    status_unlock(d);
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
    kdp__dra_api_free(d->api);
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

KDP_EXPORT int kdp_plugin_set_dra_taints(kdp_plugin *p, const char *id, const kdp_dra_taint *taints,
                                         size_t n)
{
    kdp__dra *d = p ? kdp__plugin_ext_ud(p) : NULL;
    if (!d) {
        log_error("kdp_plugin_set_dra_taints: %s",
                  p ? "DRA is not on (kdp_plugin_enable_dra)" : "the plugin (p) is NULL");
        return p ? -ENOENT : -EINVAL;
    }
    return kdp__dra_taints_set(&d->taints, id, taints, n);
}

KDP_EXPORT int kdp_plugin_redescribe_dra(kdp_plugin *p, const char *id)
{
    kdp__dra *d = p ? kdp__plugin_ext_ud(p) : NULL;
    kdp_health h;
    if (!d || (id && kdp_plugin_get_health(p, id, &h) < 0)) {
        log_error("kdp_plugin_redescribe_dra: %s%s%s",
                  !p   ? "the plugin (p) is NULL"
                  : !d ? "DRA is not on (kdp_plugin_enable_dra)"
                       : "no device ",
                  d && id ? id : "", d && id ? " in the plugin's table" : "");
        return p ? -ENOENT : -EINVAL;
    }
    return kdp__dra_descs_redescribe(&d->descs, id);
}
