/* SPDX-License-Identifier: MIT */
/* health: the DRA driver's health stream (see health.h). */
#include "dra/health.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "dra_health.pb-c.h"
#include "grpc/wire.h"

typedef struct hstream {
    kdp__link link;
    kdp__dra_health *h;
    kdp__call *call;
} hstream;

static V1alpha1__HealthStatus status_of(kdp__dra_hstate st)
{
    switch (st) {
    case KDP__DRA_HEALTHY:
        return V1ALPHA1__HEALTH_STATUS__HEALTHY;
    case KDP__DRA_UNHEALTHY:
        return V1ALPHA1__HEALTH_STATUS__UNHEALTHY;
    case KDP__DRA_UNKNOWN:
        break;
    }
    return V1ALPHA1__HEALTH_STATUS__UNKNOWN;
}

/* The message for the list now, packed (NULL on ENOMEM). */
static uint8_t *encode(const kdp__dra_health *h, size_t *ret_len)
{
    size_t n = h->n;
    V1alpha1__DeviceHealth *hs = calloc(n ? n : 1, sizeof(*hs));
    V1alpha1__DeviceIdentifier *ids = calloc(n ? n : 1, sizeof(*ids));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    V1alpha1__DeviceHealth **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    uint8_t *buf = NULL;
    if (hs && ids && ptrs) {
        int64_t now = (int64_t)time(NULL);
        for (size_t i = 0; i < n; i++) {
            v1alpha1__device_identifier__init(&ids[i]);
            ids[i].pool_name = (char *)h->pool;
            ids[i].device_name = h->devs[i].name;
            v1alpha1__device_health__init(&hs[i]);
            hs[i].device = &ids[i];
            hs[i].health = status_of(h->devs[i].health);
            hs[i].message = h->devs[i].message;
            hs[i].last_updated_time = now;
            hs[i].health_check_timeout_seconds = KDP__DRA_HEALTH_TIMEOUT_S;
            ptrs[i] = &hs[i];
        }
        V1alpha1__NodeWatchResourcesResponse resp = V1ALPHA1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
        resp.n_devices = n;
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
    return buf;
}

/* The list to every stream, and again a period later. */
static void send_all(kdp__dra_health *h)
{
    if (kdp__list_empty(&h->streams)) {
        return;
    }
    kdp__timer_start(h->resend, h->resend_us);
    size_t n = 0;
    uint8_t *buf = encode(h, &n);
    if (!buf) {
        log_error("%s: out of memory for the health stream's message", h->driver);
        return;
    }
    kdp__link *l;
    kdp__list_for_each(l, &h->streams)
    {
        (void)kdp__call_send_latest(KDP__CONTAINER_OF(l, hstream, link)->call, buf, n);
    }
    free(buf);
}

static void stream_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    hstream *s = ud;
    kdp__link_remove(&s->link);
    s->h->n_streams--;
    if (kdp__list_empty(&s->h->streams)) {
        kdp__timer_stop(s->h->resend);
    }
    free(s);
}

static void on_resend(kdp__timer *t, void *ud)
{
    (void)t;
    send_all(ud);
}

static void h_watch(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    kdp__dra_health *h = ud;
    V1alpha1__NodeWatchResourcesRequest *req =
        v1alpha1__node_watch_resources_request__unpack(NULL, len, msg);
    if (!req) {
        (void)kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT,
                               "cannot decode NodeWatchResourcesRequest");
        return;
    }
    v1alpha1__node_watch_resources_request__free_unpacked(req, NULL);
    if (h->n_streams >= KDP__DRA_HEALTH_MAX_STREAMS) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "too many health streams");
        return;
    }
    hstream *s = calloc(1, sizeof(*s));
    size_t n = 0;
    uint8_t *buf = s ? encode(h, &n) : NULL;
    if (!buf || kdp__call_send(call, buf, n) < 0) {
        free(s);
        free(buf);
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    free(buf);
    s->h = h;
    s->call = call;
    kdp__list_append(&h->streams, &s->link);
    h->n_streams++;
    kdp__call_set_cancel(call, stream_cancel, s);
    if (!kdp__timer_armed(h->resend)) {
        kdp__timer_start(h->resend, h->resend_us);
    }
    log_info("%s: the kubelet watches the devices' health", h->driver);
}

size_t kdp__dra_health_methods(kdp__dra_health *h, bool v1alpha1, kdp__method *out, size_t cap)
{
    size_t n = v1alpha1 ? 2 : 1;
    if (cap < n) {
        return 0;
    }
    /* v1 and v1alpha1 have the same messages: one handler */
    out[0] = (kdp__method){"/v1.DRAResourceHealth/NodeWatchResources", KDP__SERVER_STREAMING,
                           h_watch, h, NULL};
    if (v1alpha1) {
        out[1] = (kdp__method){"/v1alpha1.DRAResourceHealth/NodeWatchResources",
                               KDP__SERVER_STREAMING, h_watch, h, NULL};
    }
    return n;
}

int kdp__dra_health_set(kdp__dra_health *h, const kdp__dra_hdev *devs, size_t n)
{
    bool same = n == h->n;
    for (size_t i = 0; same && i < n; i++) {
        same = devs[i].health == h->devs[i].health && strcmp(devs[i].name, h->devs[i].name) == 0 &&
               strcmp(devs[i].message, h->devs[i].message) == 0;
    }
    if (same) {
        return 0; /* the resend timer says it again */
    }
    kdp__dra_hdev *v = malloc((n ? n : 1) * sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    if (n) {
        memcpy(v, devs, n * sizeof(*v));
    }
    free(h->devs);
    h->devs = v;
    h->n = n;
    send_all(h);
    return 0;
}

int kdp__dra_health_init(kdp__dra_health *h, kdp__loop *l, const char *driver, const char *pool)
{
    memset(h, 0, sizeof(*h));
    h->loop = l;
    h->driver = driver;
    h->pool = pool;
    kdp__link_init(&h->streams);
    h->resend_us = KDP__DRA_HEALTH_RESEND_S * 1000000ULL;
    const char *env = getenv(KDP__DRA_HEALTH_RESEND_ENV);
    unsigned long ms = env && *env ? strtoul(env, NULL, 10) : 0;
    if (ms >= 100 && ms * 1000ULL < h->resend_us) {
        h->resend_us = ms * 1000ULL;
    }
    return kdp__timer_new(l, on_resend, h, &h->resend);
}

void kdp__dra_health_done(kdp__dra_health *h)
{
    kdp__timer_free(h->resend);
    h->resend = NULL;
    free(h->devs);
    h->devs = NULL;
    h->n = 0;
}
