/* SPDX-License-Identifier: MIT */
/*
 * health: /v1alpha1.DRAResourceHealth/NodeWatchResources. Every device of
 * the pool with its health (the table's: the author's and the probes', as
 * the device-plugin list has it), the full list at the stream's start and
 * at every change (a device missing from a message goes Unknown). Not
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
    free(s);
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
