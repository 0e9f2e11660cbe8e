/* SPDX-License-Identifier: MIT */
/* dra_health_stream: see dra_health_stream.h. */
#include "dra_health_stream.h"

#include <stdio.h>
#include <string.h>

#include "dra_health.pb-c.h"
#include "grpc/wire.h"
#include "rpc.h"

static const char *health_name(int h)
{
    return h == V1ALPHA1__HEALTH_STATUS__HEALTHY     ? "Healthy"
           : h == V1ALPHA1__HEALTH_STATUS__UNHEALTHY ? "Unhealthy"
                                                     : "Unknown";
}

static bool strv_equal(const kc_strv *a, const kc_strv *b)
{
    if (a->n != b->n) {
        return false;
    }
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->v[i], b->v[i]) != 0) {
            return false;
        }
    }
    return true;
}

static void on_health_msg(const uint8_t *msg, size_t len, void *ud)
{
    kd_plugin *p = ud;
    V1alpha1__NodeWatchResourcesResponse *m =
        v1alpha1__node_watch_resources_response__unpack(NULL, len, msg);
    if (!m) {
        kd_say_plugin(p, "health_bad", "a health message that does not decode: ignored",
                      "does not decode as NodeWatchResourcesResponse");
        return;
    }
    kc_strv old_ids = p->health_ids;
    kc_strv old_states = p->health_states;
    kc_strv old_msgs = p->health_msgs_text;
    p->health_ids = (kc_strv){0};
    p->health_states = (kc_strv){0};
    p->health_msgs_text = (kc_strv){0};
    for (size_t i = 0; i < m->n_devices && i < KD_MAX_HEALTH; i++) {
        const V1alpha1__DeviceHealth *d = m->devices[i];
        char id[600];
        snprintf(id, sizeof(id), "%s/%s", d->device ? d->device->pool_name : "?",
                 d->device ? d->device->device_name : "?");
        if (kc_strv_add(&p->health_ids, id) < 0 ||
            kc_strv_add(&p->health_states, health_name(d->health)) < 0 ||
            kc_strv_add(&p->health_msgs_text, d->message ? d->message : "") < 0) {
            break;
        }
    }
    /* The lists may differ in length after a memory error: keep them equal. */
    size_t n = p->health_ids.n;
    n = p->health_states.n < n ? p->health_states.n : n;
    n = p->health_msgs_text.n < n ? p->health_msgs_text.n : n;
    p->health_ids.n = p->health_states.n = p->health_msgs_text.n = n;
    p->health_msgs++;
    v1alpha1__node_watch_resources_response__free_unpacked(m, NULL);
    /* the driver sends the list again while nothing changes (the kubelet
     * marks a device Unknown after 30 s without news): not a change */
    bool same = p->health_msgs > 1 && strv_equal(&old_ids, &p->health_ids) &&
                strv_equal(&old_states, &p->health_states) &&
                strv_equal(&old_msgs, &p->health_msgs_text);
    kc_strv_free(&old_ids);
    kc_strv_free(&old_states);
    kc_strv_free(&old_msgs);
    if (same && !p->k->o->json) {
        return; /* --json says it: scripts may want to see the stream alive */
    }
    kd_print_health(p, p->health_msgs == 1 ? "stream opened" : same ? "resent" : "changed");
}

static void on_health_done(int status, const char *message, const uint8_t *resp, size_t len,
                           void *ud)
{
    (void)resp;
    (void)len;
    kd_plugin *p = ud;
    p->health = NULL;
    bool legacy = p->k->o->health_legacy;
    if (status == KDP__ST_UNIMPLEMENTED) {
        if (!p->said_unimplemented) {
            char text[600];
            snprintf(text, sizeof(text), "%s: no health stream (UNIMPLEMENTED%s): %s", p->driver,
                     p->health_advertised ? ", though advertised" : "",
                     legacy ? "asked again every 5s, said once" : "not asked again (as 1.37)");
            kd_say_plugin(p, "health_unimplemented", text, message);
        }
        p->said_unimplemented = true;
        if (!legacy) {
            return;
        }
    } else {
        char text[800];
        snprintf(text, sizeof(text), "%s: health stream ended: %s%s%s; reopened in 5s", p->driver,
                 kdp__status_name(status), *message ? ": " : "", message);
        kd_say_plugin(p, "health_ended", text, message);
    }
    kdp__timer_start(p->retry, KD_HEALTH_RETRY);
}

void kd_health_open(kd_plugin *p)
{
    if (!p->registered || !p->health_version) {
        if (p->registered && !p->k->o->no_health && !p->said_unimplemented) {
            p->said_unimplemented = true; /* said once */
            kd_say_plugin(p, "health_none",
                          "no health stream: the plugin advertises no health version this "
                          "kubelet has (--health-versions)",
                          NULL);
        }
        return;
    }
    V1alpha1__NodeWatchResourcesRequest req = V1ALPHA1__NODE_WATCH_RESOURCES_REQUEST__INIT;
    uint8_t buf[8];
    size_t n = protobuf_c_message_pack(&req.base, buf);
    kdp__unary_opts opts = {.max_recv = KC_KUBELET_MAX_RECV};
    char method[96];
    snprintf(method, sizeof(method), "/%s" KD_HEALTH_SUFFIX "/NodeWatchResources",
             p->health_version);
    p->health_msgs = 0;
    if (kdp__client_stream(p->k->loop, p->endpoint, method, buf, n, &opts, on_health_msg,
                           on_health_done, p, &p->health) < 0) {
        kdp__timer_start(p->retry, KD_HEALTH_RETRY);
    }
}

const char *kd_health_state(const kd_plugin *p)
{
    if (p->k->o->no_health) {
        return "off (--no-health)";
    }
    if (p->health) {
        return "open";
    }
    if (!p->health_version) {
        return "none advertised";
    }
    if (kdp__timer_armed(p->retry)) {
        return "reopening";
    }
    return p->said_unimplemented ? "not asked again (UNIMPLEMENTED)" : "closed";
}
