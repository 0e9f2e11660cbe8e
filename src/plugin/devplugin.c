/* SPDX-License-Identifier: MIT */
#include "plugin/devplugin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "grpc/wire.h"
#include "plugin/table.h"

#define OF(svc) KDP__CONTAINER_OF(svc, kdp__devplugin, base)

/* An open ListAndWatch stream. */
typedef struct stream {
    kdp__link link; /* in d->streams */
    kdp__call *call;
    kdp__devplugin *d;
} stream;

/* A registration went out: every kubelet opens ListAndWatch within
 * milliseconds of it. One that cut our connection before it did (a kubelet
 * tracking plugins by resource name, during a handover) would leave us
 * registered and never told: after a wait without the stream, the kubelet
 * is taken for gone (the lifecycle registers again). The wait starts at 1 s
 * and doubles each time it expires, up to 30 s, so that a kubelet too busy
 * to open the stream in time is not registered with over and over; a stream
 * that comes resets it. */
#define PEER_WAIT_MIN_US (1ULL * 1000000ULL)
#define PEER_WAIT_MAX_US (30ULL * 1000000ULL)

/* ---- GetDevicePluginOptions ---- */

void kdp__devplugin_options(const kdp__devplugin *d, V1beta1__DevicePluginOptions *out)
{
    out->pre_start_required = d->calls.ops->prestart != NULL;
    out->get_preferred_allocation_available =
        d->calls.ops->preferred != NULL || d->calls.preferred != KDP_PREFERRED_NONE;
}

static void h_options(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    kdp__devplugin_options(ud, &opts);
    (void)kdp__call_reply_pb(call, &opts.base);
}

/* ---- ListAndWatch ---- */

static void on_stream_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    stream *l = ud;
    kdp__devplugin *d = l->d;
    kdp__link_remove(&l->link);
    d->n_streams--;
    bool peer = d->peer_stream == l;
    free(l);
    if (peer) {
        d->peer_stream = NULL;
        d->base.up.peer_gone(d->base.up.ud, "the kubelet's ListAndWatch stream ended");
    }
}

static void h_list_and_watch(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    kdp__devplugin *d = ud;
    if (d->n_streams >= KDP__MAX_LIST_STREAMS) {
        char msg[512];
        snprintf(msg, sizeof(msg), "%s: too many ListAndWatch streams open (%u): close some",
                 d->resource, KDP__MAX_LIST_STREAMS);
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, msg);
        return;
    }
    size_t msg_len = 0;
    const uint8_t *msg = kdp__table_message(d->table, &msg_len);
    stream *l = msg ? calloc(1, sizeof(*l)) : NULL;
    if (!l) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    d->n_streams++;
    l->call = call;
    l->d = d;
    kdp__list_insert_after(&d->streams, &l->link);
    kdp__call_set_cancel(call, on_stream_cancel, l);
    if (d->expect_peer && !d->peer_stream) {
        /* the first stream after a Register is the kubelet's: its end is a
         * restart trigger, the others' (kdpctl watch ...) are not */
        d->peer_stream = l;
        d->expect_peer = false;
        kdp__timer_stop(d->peer_wait);
        d->peer_wait_us = PEER_WAIT_MIN_US;
        if (d->base.up.peer_connected) {
            d->base.up.peer_connected(d->base.up.ud);
        }
    }
    if (kdp__call_send_latest(call, msg, msg_len) == 0 && d->stats) {
        kdp__count(&d->stats->lw_messages, 1);
    }
}

void kdp__devplugin_broadcast(kdp__devplugin *d)
{
    size_t len = 0;
    const uint8_t *msg = kdp__table_message(d->table, &len);
    kdp__link *it;
    kdp__list_for_each(it, &d->streams)
    {
        stream *l = KDP__CONTAINER_OF(it, stream, link);
        /* the latest list replaces any still queued: a stream that does not
         * read holds at most two lists, however often the devices change */
        if (!msg || kdp__call_send_latest(l->call, msg, len) < 0) {
            log_error("%s: cannot queue the device list for a ListAndWatch stream", d->resource);
        } else if (d->stats) {
            kdp__count(&d->stats->lw_messages, 1);
        }
    }
}

static size_t op_methods(kdp__svc *svc, kdp__method *out, size_t cap)
{
    kdp__devplugin *d = OF(svc);
    const kdp__method m[] = {
        {"/v1beta1.DevicePlugin/GetDevicePluginOptions", KDP__UNARY, h_options, d, NULL},
        {"/v1beta1.DevicePlugin/ListAndWatch", KDP__SERVER_STREAMING, h_list_and_watch, d, NULL},
        {"/v1beta1.DevicePlugin/GetPreferredAllocation", KDP__UNARY, kdp__devcalls_preferred,
         &d->calls, NULL},
        {"/v1beta1.DevicePlugin/Allocate", KDP__UNARY, kdp__devcalls_allocate, &d->calls,
         kdp__devcalls_allocate_ended},
        {"/v1beta1.DevicePlugin/PreStartContainer", KDP__UNARY, kdp__devcalls_prestart, &d->calls,
         NULL},
    };
    size_t n = sizeof(m) / sizeof(m[0]);
    if (n > cap) {
        return 0;
    }
    memcpy(out, m, sizeof(m));
    return n;
}

static void op_serving(kdp__svc *svc, bool on)
{
    kdp__devplugin *d = OF(svc);
    if (!on) {
        /* the server's end cancelled every stream already; nothing the
         * server did counts as the kubelet going away */
        d->peer_stream = NULL;
        d->expect_peer = false;
        kdp__timer_stop(d->peer_wait);
    }
}

static void on_peer_wait(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__devplugin *d = ud;
    if (d->expect_peer && !d->peer_stream) {
        d->expect_peer = false;
        log_warn("%s: the kubelet opened no ListAndWatch within %llu ms of the registration",
                 d->resource, (unsigned long long)(d->peer_wait_us / 1000U));
        d->peer_wait_us =
            d->peer_wait_us * 2 > PEER_WAIT_MAX_US ? PEER_WAIT_MAX_US : d->peer_wait_us * 2;
        d->base.up.peer_gone(d->base.up.ud,
                             "the kubelet opened no ListAndWatch after the registration");
    }
}

static void op_expect_peer(kdp__svc *svc, bool on)
{
    kdp__devplugin *d = OF(svc);
    d->expect_peer = on;
    if (on && !d->peer_stream) {
        kdp__timer_start(d->peer_wait, d->peer_wait_us);
    } else if (!on) {
        kdp__timer_stop(d->peer_wait);
    }
}

int kdp__devplugin_init_loop(kdp__devplugin *d, kdp__loop *l)
{
    d->peer_wait_us = PEER_WAIT_MIN_US;
    return kdp__timer_new(l, on_peer_wait, d, &d->peer_wait);
}

void kdp__devplugin_release_loop(kdp__devplugin *d)
{
    kdp__timer_free(d->peer_wait);
    d->peer_wait = NULL;
}

static const kdp__svc_ops ops = {
    .name = "v1beta1.DevicePlugin",
    .methods = op_methods,
    .serving = op_serving,
    .expect_peer = op_expect_peer,
};

void kdp__devplugin_init(kdp__devplugin *d, kdp_plugin *owner, const kdp_ops *kops, void *ud,
                         const char *resource, const char *env_name, kdp__table *table,
                         kdp__jobs *jobs, const kdp__svc_up *up)
{
    memset(d, 0, sizeof(*d));
    d->base.ops = &ops;
    d->base.up = *up;
    d->resource = resource;
    d->table = table;
    kdp__link_init(&d->streams);
    kdp__devcalls_init(&d->calls, owner, kops, ud, resource, env_name, table, jobs);
}
