/* SPDX-License-Identifier: MIT */
/* dra_reg: see dra_reg.h. */
#include "dra_reg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dra_health_stream.h"
#include "grpc/wire.h"
#include "pluginregistration.pb-c.h"
#include "rpc.h"

#define METHOD_GET_INFO "/pluginregistration.Registration/GetInfo"
#define METHOD_NOTIFY   "/pluginregistration.Registration/NotifyRegistrationStatus"

void kd_reg_reset(kd_plugin *p)
{
    kdp__client_call_cancel(p->info);
    kdp__client_call_cancel(p->notify);
    kdp__client_call_cancel(p->health);
    p->info = p->notify = p->health = NULL;
    kdp__timer_stop(p->retry);
    free(p->driver);
    free(p->endpoint);
    free(p->version);
    p->driver = p->endpoint = p->version = NULL;
    p->registered = false;
    p->health_advertised = false;
    kc_strv_free(&p->health_adv);
    p->health_version = NULL;
    p->said_unimplemented = false;
    kc_strv_free(&p->health_ids);
    kc_strv_free(&p->health_states);
    kc_strv_free(&p->health_msgs_text);
}

static void send_info(kd_plugin *p);

void kd_reg_on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kd_plugin *p = ud;
    if (p->registered) {
        kd_health_open(p);
    } else {
        send_info(p);
    }
}

static void on_notify(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)resp;
    (void)len;
    kd_plugin *p = ud;
    p->notify = NULL;
    if (status != KDP__ST_OK) {
        char text[800];
        snprintf(text, sizeof(text), "NotifyRegistrationStatus to %s failed: %s: %s", p->reg_socket,
                 kdp__status_name(status), message);
        kd_say_plugin(p, "notify_failed", text, message);
    }
}

static void notify(kd_plugin *p, bool ok, const char *error)
{
    Pluginregistration__RegistrationStatus req = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    req.plugin_registered = ok;
    req.error = (char *)(error ? error : "");
    kdp__unary_opts opts = {.timeout_us = KD_NOTIFY_TIMEOUT};
    kdp__client_call_cancel(p->notify);
    p->notify = NULL;
    (void)kdp__client_unary_pb(p->k->loop, p->reg_socket, METHOD_NOTIFY, &req.base, &opts,
                               on_notify, p, &p->notify);
}

/* Asks again after the backoff; a refusal (tell) is also notified, a
 * GetInfo that did not get through is not. */
static void retry_later(kd_plugin *p, const char *why, bool tell)
{
    char text[1200];
    p->backoff_us = p->backoff_us ? p->backoff_us * 2 : KD_BACKOFF_INITIAL;
    if (p->backoff_us > KD_BACKOFF_MAX) {
        p->backoff_us = KD_BACKOFF_MAX;
    }
    char d[32];
    snprintf(text, sizeof(text), "%s %s: %s (asked again in %s)", p->reg_socket,
             tell ? "refused" : "unreachable", why,
             kc_format_duration(p->backoff_us, d, sizeof(d)));
    kd_say_plugin(p, tell ? "refused" : "info_failed", text, why);
    if (tell) {
        notify(p, false, why);
    }
    kdp__timer_start(p->retry, p->backoff_us);
}

static void refuse(kd_plugin *p, const char *why)
{
    retry_later(p, why, true);
}

/* The health versions the plugin advertises ("v1.DRAResourceHealth" ->
 * "v1"), any position. */
static void note_health(kd_plugin *p, const Pluginregistration__PluginInfo *m)
{
    size_t suffix = strlen(KD_HEALTH_SUFFIX);
    for (size_t i = 0; i < m->n_supported_versions; i++) {
        const char *v = m->supported_versions[i];
        size_t n = strlen(v);
        if (n > suffix && strcmp(v + n - suffix, KD_HEALTH_SUFFIX) == 0) {
            char ver[64];
            snprintf(ver, sizeof(ver), "%.*s", (int)(n - suffix), v);
            p->health_advertised = true;
            (void)kc_strv_add(&p->health_adv, ver);
        }
    }
}

/* The version the kubelet takes: the plugin's first entry it supports
 * ("v1.DRAPlugin" -> "v1"). NULL if none. */
static char *choose_version(kd_plugin *p, const Pluginregistration__PluginInfo *m)
{
    const kc_strv *ours = &p->k->o->versions;
    note_health(p, m);
    for (size_t i = 0; i < m->n_supported_versions; i++) {
        const char *v = m->supported_versions[i];
        const char *dot = strchr(v, '.');
        if (!dot || strcmp(dot, ".DRAPlugin") != 0) {
            continue;
        }
        for (size_t j = 0; j < ours->n; j++) {
            if (strlen(ours->v[j]) == (size_t)(dot - v) &&
                strncmp(ours->v[j], v, (size_t)(dot - v)) == 0) {
                return strndup(v, (size_t)(dot - v));
            }
        }
    }
    return NULL;
}

/* The health stream's version, as the kubelet picks it: 1.37 takes its own
 * first version the plugin advertises (none: no stream); 1.34-1.36
 * (legacy) v1alpha1 whatever is advertised. */
static const char *choose_health(const kd_plugin *p)
{
    const kd_opts *o = p->k->o;
    if (o->no_health) {
        return NULL;
    }
    if (o->health_legacy) {
        return "v1alpha1";
    }
    for (size_t i = 0; i < o->health_versions.n; i++) {
        for (size_t j = 0; j < p->health_adv.n; j++) {
            if (strcmp(o->health_versions.v[i], p->health_adv.v[j]) == 0) {
                return o->health_versions.v[i];
            }
        }
    }
    return NULL;
}

/* Another registration of the same driver is replaced by p's. */
static void replace_older(kd_plugin *p)
{
    for (kd_plugin *q = p->k->plugins; q; q = q->next) {
        if (q != p && q->registered && strcmp(q->driver, p->driver) == 0) {
            if (strcmp(q->endpoint, p->endpoint) == 0) {
                continue; /* the check below refuses p instead */
            }
            char text[800];
            snprintf(text, sizeof(text), "%s: the registration through %s replaces %s's", p->driver,
                     p->reg_socket, q->reg_socket);
            kd_say_plugin(p, "replaced", text, NULL);
        }
    }
}

/* The endpoint's checks: NULL, or the refusal in why. */
static const char *check_endpoint(kd_plugin *p, const char *endpoint, char *why, size_t cap)
{
    struct stat st;
    if (endpoint[0] != '/') {
        snprintf(why, cap, "endpoint \"%s\" is not an absolute path", endpoint);
        return why;
    }
    int se = stat(endpoint, &st) < 0 ? errno : 0;
    if (se || !S_ISSOCK(st.st_mode)) {
        snprintf(why, cap, "endpoint %s: %s", endpoint, se ? strerror(se) : "not a socket");
        return why;
    }
    for (kd_plugin *q = p->k->plugins; q; q = q->next) {
        if (q != p && q->registered && strcmp(q->endpoint, endpoint) == 0) {
            snprintf(why, cap,
                     "cannot hijack the endpoint %s of another instance (registered through %s)",
                     endpoint, q->reg_socket);
            return why;
        }
    }
    return NULL;
}

/* The kubelet's checks of GetInfo's answer: NULL, or the refusal in why. */
static const char *check_info(kd_plugin *p, const Pluginregistration__PluginInfo *m, char *why,
                              size_t cap)
{
    if (!p->driver || !p->endpoint) {
        return "out of memory";
    }
    if (strcmp(m->type, KD_PLUGIN_TYPE) != 0) {
        snprintf(why, cap, "type \"%s\" is not \"%s\" (this is the DRA kubelet)", m->type,
                 KD_PLUGIN_TYPE);
        return why;
    }
    if (!*m->name) {
        return "no driver name in GetInfo's name";
    }
    p->version = choose_version(p, m);
    if (!p->version) {
        kc_buf b = {0};
        for (size_t i = 0; i < p->k->o->versions.n; i++) {
            kc_buf_printf(&b, "%s%s.DRAPlugin", i ? ", " : "", p->k->o->versions.v[i]);
        }
        snprintf(why, cap,
                 "none of the plugin's supported_versions is one this kubelet supports (%s)",
                 b.len ? b.s : "none");
        kc_buf_free(&b);
        return why;
    }
    return check_endpoint(p, m->endpoint, why, cap);
}

static void accept_info(kd_plugin *p, const Pluginregistration__PluginInfo *m)
{
    char why[1200];
    p->driver = strdup(m->name);
    p->endpoint = strdup(m->endpoint);
    const char *refusal = check_info(p, m, why, sizeof(why));
    if (refusal) {
        refuse(p, refusal);
        return;
    }
    replace_older(p);
    p->registered = true;
    p->backoff_us = 0;
    p->health_version = choose_health(p);
    char text[1200];
    char health[200];
    if (p->k->o->no_health) {
        snprintf(health, sizeof(health), "not asked (--no-health)");
    } else if (p->k->o->health_legacy) {
        snprintf(health, sizeof(health), "v1alpha1, %s",
                 p->health_advertised ? "advertised" : "not advertised, asked anyway (legacy)");
    } else if (p->health_version) {
        snprintf(health, sizeof(health), "%s" KD_HEALTH_SUFFIX, p->health_version);
    } else {
        snprintf(health, sizeof(health), "none: no version this kubelet has is advertised");
    }
    snprintf(text, sizeof(text), "%s registered: %s.DRAPlugin at %s (health %s)", p->driver,
             p->version, p->endpoint, health);
    kd_say_plugin(p, "registered", text, NULL);
    notify(p, true, NULL);
    /* newest first: kd_find_driver finds this one */
    kd *k = p->k;
    for (kd_plugin **pp = &k->plugins; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    p->next = k->plugins;
    k->plugins = p;
    kd_health_open(p);
}

static void on_info(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    kd_plugin *p = ud;
    p->info = NULL;
    if (status != KDP__ST_OK) {
        char why[800];
        snprintf(why, sizeof(why), "GetInfo failed: %s: %s", kdp__status_name(status), message);
        retry_later(p, why, false);
        return;
    }
    Pluginregistration__PluginInfo *m = pluginregistration__plugin_info__unpack(NULL, len, resp);
    if (!m) {
        refuse(p, "GetInfo's answer does not decode as PluginInfo");
        return;
    }
    char text[1200];
    kc_buf v = {0};
    for (size_t i = 0; i < m->n_supported_versions; i++) {
        kc_buf_printf(&v, "%s%s", i ? ", " : "", m->supported_versions[i]);
    }
    snprintf(text, sizeof(text), "GetInfo %s: type %s, name %s, endpoint %s, versions [%s]",
             p->reg_socket, m->type, m->name, m->endpoint, v.len ? v.s : "");
    kc_buf_free(&v);
    if (!p->k->o->json) {
        kd_say(text);
    }
    accept_info(p, m);
    pluginregistration__plugin_info__free_unpacked(m, NULL);
}

static void send_info(kd_plugin *p)
{
    kd_reg_reset(p);
    Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    kdp__unary_opts opts = {.timeout_us = KD_INFO_TIMEOUT};
    int r = kdp__client_unary_pb(p->k->loop, p->reg_socket, METHOD_GET_INFO, &req.base, &opts,
                                 on_info, p, &p->info);
    if (r < 0) {
        retry_later(p, strerror(-r), false);
    }
}

void kd_reg_start(kd_plugin *p)
{
    p->backoff_us = 0;
    send_info(p);
}
