/* SPDX-License-Identifier: MIT */
#include "plugin/reg_watcher.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/list.h"
#include "base/log.h"
#include "grpc/server.h"
#include "grpc/wire.h"
#include "kdp.h"
#include "pluginregistration.pb-c.h"

/* The plugin type and the versions the kubelet's device manager takes
 * (pluginwatcher: GetInfo's supported_versions must hold "v1beta1"). */
#define PLUGIN_TYPE "DevicePlugin"

/* The kubelet's stream ended: how long to wait for its GetInfo before
 * re-creating the socket (the kubelet reconciles once a second). */
#define LOST_US      (5ULL * 1000000ULL)
#define RETRY_MIN_US (100ULL * 1000ULL)
#define RETRY_MAX_US (30ULL * 1000000ULL)

#define OF_REG(r) KDP__CONTAINER_OF(r, kdp__reg_watcher, base)
#define OF_SVC(s) KDP__CONTAINER_OF(s, kdp__reg_watcher, svc)

static void set_state(kdp__reg_watcher *w, kdp__reg_state st, const char *why)
{
    w->state = st;
    w->base.up.state(w->base.up.ud, st, why);
}

/* ---- the Registration service ---- */

static void h_get_info(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    kdp__reg_watcher *w = ud;
    Pluginregistration__InfoRequest *req = pluginregistration__info_request__unpack(NULL, len, msg);
    if (!req) {
        (void)kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT, "cannot decode InfoRequest");
        return;
    }
    pluginregistration__info_request__free_unpacked(req, NULL);
    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    info.type = (char *)w->info.type;
    info.name = (char *)w->info.name;
    info.endpoint = (char *)w->info.endpoint;
    info.n_supported_versions = w->info.n_versions;
    info.supported_versions = (char **)w->info.versions;
    if (kdp__call_reply_pb(call, &info.base) < 0 || !w->active) {
        return;
    }
    w->infos++;
    kdp__timer_stop(w->lost);
    log_debug("%s: the kubelet asked GetInfo on %s", w->resource, w->socket_path);
    /* the kubelet connects next: its ListAndWatch is the one to watch */
    w->base.up.attempt(w->base.up.ud, true);
    if (w->state != KDP__REG_REGISTERED) {
        set_state(w, KDP__REG_REGISTERING, "GetInfo answered");
    }
}

static void on_lost(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__reg_watcher *w = ud;
    if (w->active && w->state != KDP__REG_REGISTERED) {
        w->base.up.restart(w->base.up.ud, "the kubelet did not ask GetInfo again after its stream "
                                          "ended: re-creating the registration socket");
    }
}

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__reg_watcher *w = ud;
    if (w->active) {
        w->base.up.restart(w->base.up.ud,
                           "re-creating the registration socket after the kubelet's refusal");
    }
}

/* The kubelet's reason comes from the peer: bounded here, its control
 * characters blanked by the log. */
static void refused(kdp__reg_watcher *w, const char *error)
{
    uint64_t delay = kdp__backoff_next(&w->backoff);
    log_error("%s: the kubelet refused the registration: %.400s; re-creating %s in %llu ms so "
              "that it asks again",
              w->resource, error && *error ? error : "(no reason given)", w->socket_path,
              (unsigned long long)(delay / 1000));
    if (w->base.up.failed) {
        w->base.up.failed(w->base.up.ud, error && *error ? error : "(no reason given)");
    }
    w->base.up.attempt(w->base.up.ud, false);
    set_state(w, KDP__REG_REGISTERING, "the kubelet refused the registration");
    kdp__timer_start(w->retry, delay);
}

static void h_notify(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    kdp__reg_watcher *w = ud;
    Pluginregistration__RegistrationStatus *st =
        pluginregistration__registration_status__unpack(NULL, len, msg);
    if (!st) {
        (void)kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT, "cannot decode RegistrationStatus");
        return;
    }
    Pluginregistration__RegistrationStatusResponse resp =
        PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    (void)kdp__call_reply_pb(call, &resp.base);
    if (w->active && st->plugin_registered) {
        kdp__timer_stop(w->retry);
        kdp__backoff_reset(&w->backoff);
        w->infos_registered = w->infos;
        log_info("%s: registered with the kubelet (plugin watcher, %s)", w->resource,
                 w->socket_path);
        set_state(w, KDP__REG_REGISTERED, "NotifyRegistrationStatus: registered");
    } else if (w->active) {
        refused(w, st->error);
    }
    pluginregistration__registration_status__free_unpacked(st, NULL);
}

static size_t svc_methods(kdp__svc *svc, kdp__method *out, size_t cap)
{
    kdp__reg_watcher *w = OF_SVC(svc);
    const kdp__method m[] = {
        {"/pluginregistration.Registration/GetInfo", KDP__UNARY, h_get_info, w, NULL},
        {"/pluginregistration.Registration/NotifyRegistrationStatus", KDP__UNARY, h_notify, w,
         NULL},
    };
    size_t n = sizeof(m) / sizeof(m[0]);
    if (n > cap) {
        return 0;
    }
    memcpy(out, m, sizeof(m));
    return n;
}

static void svc_serving(kdp__svc *svc, bool on)
{
    (void)svc;
    (void)on;
}

static void svc_expect_peer(kdp__svc *svc, bool on)
{
    (void)svc;
    (void)on;
}

static const kdp__svc_ops svc_ops = {
    .name = "pluginregistration.Registration",
    .methods = svc_methods,
    .serving = svc_serving,
    .expect_peer = svc_expect_peer,
};

/* ---- the strategy ---- */

static void reg_start(kdp__reg *r)
{
    kdp__reg_watcher *w = OF_REG(r);
    w->active = true;
    log_info("%s: waiting for the kubelet's plugin watcher to find %s", w->resource,
             w->socket_path);
    set_state(w, KDP__REG_WAITING, "waiting for the kubelet's GetInfo");
}

static void reg_stop(kdp__reg *r)
{
    kdp__reg_watcher *w = OF_REG(r);
    w->active = false;
    kdp__timer_stop(w->retry); /* the backoff stays: a refusal loop keeps growing */
    kdp__timer_stop(w->lost);
}

/* The kubelet's stream ended: a kubelet restart, or a deregistration. The
 * socket stays; the kubelet asks GetInfo again (a new kubelet walks the
 * directory), else the socket is re-created after LOST_US. */
static bool reg_peer_gone(kdp__reg *r, const char *why)
{
    kdp__reg_watcher *w = OF_REG(r);
    if (!w->active) {
        return false;
    }
    log_info("%s: %s: waiting for the kubelet to ask GetInfo again on %s", w->resource, why,
             w->socket_path);
    w->base.up.attempt(w->base.up.ud, false);
    set_state(w, KDP__REG_WAITING, "the kubelet's stream ended");
    kdp__timer_start(w->lost, LOST_US);
    return true;
}

static void reg_dir_event(kdp__reg *r, int what, const char *name)
{
    (void)r;
    (void)what;
    (void)name; /* the kubelet finds us; nothing of its shows here */
}

/* No new GetInfo since the last registration: the same kubelet. */
static bool reg_same_peer(kdp__reg *r)
{
    kdp__reg_watcher *w = OF_REG(r);
    return w->infos == w->infos_registered;
}

static const kdp__reg_ops reg_ops = {
    .name = "plugin watcher",
    .start = reg_start,
    .stop = reg_stop,
    .dir_event = reg_dir_event,
    .same_peer = reg_same_peer,
    .peer_gone = reg_peer_gone,
};

static const char *const dp_versions[] = {KDP_KUBELET_API_VERSION};

int kdp__reg_watcher_init(kdp__reg_watcher *w, kdp__loop *l, const char *socket_path,
                          const char *resource, const kdp__reg_info *info, const kdp__reg_up *up)
{
    memset(w, 0, sizeof(*w));
    if (info) {
        w->info = *info;
    } else {
        w->info = (kdp__reg_info){.type = PLUGIN_TYPE,
                                  .name = resource,
                                  .endpoint = "", /* this socket serves DevicePlugin too */
                                  .versions = dp_versions,
                                  .n_versions = 1};
    }
    w->base.ops = &reg_ops;
    w->base.up = *up;
    w->svc.ops = &svc_ops;
    w->resource = resource;
    w->socket_path = socket_path;
    kdp__backoff_init(&w->backoff, RETRY_MIN_US, RETRY_MAX_US, 0);
    int r = kdp__timer_new(l, on_retry, w, &w->retry);
    return r < 0 ? r : kdp__timer_new(l, on_lost, w, &w->lost);
}

void kdp__reg_watcher_done(kdp__reg_watcher *w)
{
    kdp__timer_free(w->retry);
    kdp__timer_free(w->lost);
    w->retry = NULL;
    w->lost = NULL;
}
