/* SPDX-License-Identifier: MIT */
/*
 * health: /v1alpha1.DRAResourceHealth/NodeWatchResources. Every device of
 * the pool with its health (the table's: the author's and the probes', as
 * the device-plugin list has it), the full list at the stream's start, at
 * every change, and every HEALTH_RESEND_S while a stream is open: the
 * kubelet takes a device it has heard nothing of for its health timeout
 * (30 s by default; health_check_timeout_seconds, sent as HEALTH_TIMEOUT_S,
 * from 1.35) as Unknown, and a device missing from a message likewise. No
 * stream, no timer: an idle driver nobody watches does not wake up. Not
 * served with kdp_dra_config.no_health: the server answers UNIMPLEMENTED.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "dra/dra_int.h"
#include "dra_health.pb-c.h"
#include "grpc/wire.h"

#define MAX_STREAMS 16
/* The kubelet's default (1.34's fixed healthTimeout), said explicitly. */
#define HEALTH_TIMEOUT_S 30
/* A third of it: two messages may be lost before a device goes Unknown. */
#define HEALTH_RESEND_S (HEALTH_TIMEOUT_S / 3)

typedef struct hstream {
    kdp__link link;
    kdp__dra *d;
    kdp__call *call;
} hstream;

/* The message for the table now, packed (NULL on ENOMEM). */
static uint8_t *encode(kdp__dra *d, size_t *ret_len)
{
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    size_t n = tab->n;
    V1alpha1__DeviceHealth *hs = calloc(n ? n : 1, sizeof(*hs));
    V1alpha1__DeviceIdentifier *ids = calloc(n ? n : 1, sizeof(*ids));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    V1alpha1__DeviceHealth **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    char(*names)[64] = calloc(n ? n : 1, sizeof(*names));
    uint8_t *buf = NULL;
    if (hs && ids && ptrs && names) {
        size_t m = 0;
        int64_t now = (int64_t)time(NULL);
        for (size_t i = 0; i < n; i++) {
            const kdp__dev *dev = &tab->devs[i];
            if (!kdp__dra_name_of(d, dev, names[m])) {
                continue;
            }
            v1alpha1__device_identifier__init(&ids[m]);
            ids[m].pool_name = d->node;
            ids[m].device_name = names[m];
            v1alpha1__device_health__init(&hs[m]);
            hs[m].device = &ids[m];
            hs[m].health = dev->health == KDP_HEALTHY ? V1ALPHA1__HEALTH_STATUS__HEALTHY
                                                      : V1ALPHA1__HEALTH_STATUS__UNHEALTHY;
            hs[m].last_updated_time = now;
            hs[m].health_check_timeout_seconds = HEALTH_TIMEOUT_S;
            ptrs[m] = &hs[m];
            m++;
        }
        V1alpha1__NodeWatchResourcesResponse resp = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
        resp.n_devices = m;
        resp.devices = ptrs;
        size_t len = v1alpha1__node_watch_resources_response__get_packed_size(&resp);
        buf = malloc(len ? len : 1);
        if (buf) {
            *ret_len = v1alpha1__node_watch_resources_response__pack(&resp, buf);
        }
    }
    free(hs);
    free(ids);
    free(ptrs);
    free(names);
    return buf;
}

static void stream_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    hstream *s = ud;
    kdp__link_remove(&s->link);
    s->d->n_streams--;
    if (kdp__list_empty(&s->d->streams)) {
        kdp__timer_stop(s->d->health_resend);
    }
    free(s);
}

static void on_resend(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra_health_changed(ud); /* re-arms while a stream is open */
}

int kdp__dra_health_init(kdp__dra *d)
{
    return kdp__timer_new(d->loop, on_resend, d, &d->health_resend);
}

void kdp__dra_health_done(kdp__dra *d)
{
    kdp__timer_free(d->health_resend);
    d->health_resend = NULL;
}

static void h_watch(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    kdp__dra *d = ud;
    V1alpha1__NodeWatchResourcesRequest *req =
        v1alpha1__node_watch_resources_request__unpack(NULL, len, msg);
    if (!req) {
        (void)kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT,
                               "cannot decode NodeWatchResourcesRequest");
        return;
    }
    v1alpha1__node_watch_resources_request__free_unpacked(req, NULL);
    if (d->n_streams >= MAX_STREAMS) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "too many health streams");
        return;
    }
    hstream *s = calloc(1, sizeof(*s));
    size_t n = 0;
    uint8_t *buf = s ? encode(d, &n) : NULL;
    if (!buf || kdp__call_send(call, buf, n) < 0) {
        free(s);
        free(buf);
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    free(buf);
    s->d = d;
    s->call = call;
    kdp__list_append(&d->streams, &s->link);
    d->n_streams++;
    kdp__call_set_cancel(call, stream_cancel, s);
    if (!kdp__timer_armed(d->health_resend)) {
        kdp__timer_start(d->health_resend, HEALTH_RESEND_S * 1000000ULL);
    }
    log_info("%s: the kubelet watches the devices' health", d->driver);
}

size_t kdp__dra_health_methods(kdp__dra *d, kdp__method *out, size_t cap)
{
    if (d->no_health || cap < 1) {
        return 0;
    }
    out[0] = (kdp__method){"/v1alpha1.DRAResourceHealth/NodeWatchResources", KDP__SERVER_STREAMING,
                           h_watch, d, NULL};
    return 1;
}

void kdp__dra_health_changed(kdp__dra *d)
{
    if (kdp__list_empty(&d->streams)) {
        return;
    }
    /* the next full list a period after this one */
    kdp__timer_start(d->health_resend, HEALTH_RESEND_S * 1000000ULL);
    size_t n = 0;
    uint8_t *buf = encode(d, &n);
    if (!buf) {
        log_error("%s: out of memory for the health stream's message", d->driver);
        return;
    }
    for (kdp__link *l = d->streams.next; l != &d->streams; l = l->next) {
        hstream *s = KDP__CONTAINER_OF(l, hstream, link);
        (void)kdp__call_send_latest(s->call, buf, n);
    }
    free(buf);
}
