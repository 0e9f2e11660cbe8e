/* SPDX-License-Identifier: MIT */
/*
 * dra_kubelet: `kdpctl dra kubelet`, the kubelet's DRA side on kdp's own
 * client: <root>/plugins_registry is walked and watched (regdir.c, on kdp's
 * inotify watch); each socket gets GetInfo (1 s); type "DRAPlugin", then the version:
 * the plugin's supported_versions in its order, the first the kubelet
 * supports (--versions, default v1,v1beta1; "v1alpha1.DRAResourceHealth"
 * only notes the health service); the endpoint must be an absolute path to
 * a socket; then NotifyRegistrationStatus. A refused socket is asked again
 * after a backoff (500 ms doubling to 2m2s). Each registered plugin gets the
 * health stream (NodeWatchResources, reopened 5 s after it ends, advertised
 * or not, as the kubelet does; UNIMPLEMENTED said once), and every health
 * list is printed. A later registration of a driver replaces the earlier
 * one; a socket removed deregisters its plugin.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dra.h"
#include "dra_health.pb-c.h"
#include "grpc/wire.h"
#include "kubelet.h"
#include "pluginregistration.pb-c.h"
#include "regdir.h"
#include "rpc.h"

#define METHOD_GET_INFO "/pluginregistration.Registration/GetInfo"
#define METHOD_NOTIFY   "/pluginregistration.Registration/NotifyRegistrationStatus"

/* ---- output ---- */

static void say_plugin(kd_plugin *p, const char *event, const char *text, const char *error)
{
    if (p->k->o->json) {
        kc_json j;
        kd_json(&j, event);
        kc_json_str(&j, "socket", p->reg_socket);
        kc_json_str(&j, "driver", p->driver);
        kc_json_str(&j, "endpoint", p->endpoint);
        kc_json_str(&j, "version", p->version);
        if (error) {
            kc_json_str(&j, "error", error);
        }
        kc_json_emit(&j);
        return;
    }
    kd_say(text);
}

/* ---- plugins ---- */

static void plugin_reset(kd_plugin *p)
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
    p->said_unimplemented = false;
    kc_strv_free(&p->health_ids);
    kc_strv_free(&p->health_states);
    kc_strv_free(&p->health_msgs_text);
}

/* Frees p, already unlinked. */
static void plugin_destroy(kd_plugin *p)
{
    kd_calls_cancel(p->k, p);
    plugin_reset(p);
    kdp__timer_free(p->retry);
    free(p->reg_socket);
    free(p);
}

static void plugin_free(kd_plugin *p)
{
    kd *k = p->k;
    for (kd_plugin **pp = &k->plugins; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            k->n_plugins--;
            break;
        }
    }
    plugin_destroy(p);
}

kd_plugin *kd_find_driver(kd *k, const char *driver)
{
    for (kd_plugin *p = k->plugins; p; p = p->next) { /* newest first */
        if (p->registered && strcmp(p->driver, driver) == 0) {
            return p;
        }
    }
    return NULL;
}

static kd_plugin *find_socket(kd *k, const char *path)
{
    for (kd_plugin *p = k->plugins; p; p = p->next) {
        if (strcmp(p->reg_socket, path) == 0) {
            return p;
        }
    }
    return NULL;
}

/* ---- the health stream ---- */

static const char *health_name(int h)
{
    return h == V1ALPHA1__HEALTH_STATUS__HEALTHY     ? "Healthy"
           : h == V1ALPHA1__HEALTH_STATUS__UNHEALTHY ? "Unhealthy"
                                                     : "Unknown";
}

void kd_print_health(kd_plugin *p, const char *why)
{
    if (p->k->o->json) {
        kc_json j;
        kd_json(&j, "health");
        kc_json_str(&j, "driver", p->driver);
        kc_json_str(&j, "why", why);
        kc_json_arr(&j, "devices");
        for (size_t i = 0; i < p->health_ids.n; i++) {
            kc_json_obj(&j, NULL);
            kc_json_str(&j, "device", p->health_ids.v[i]);
            kc_json_str(&j, "health", p->health_states.v[i]);
            kc_json_str(&j, "message", p->health_msgs_text.v[i]);
            kc_json_end(&j);
        }
        kc_json_emit(&j);
        return;
    }
    kc_buf head = {0};
    kc_buf_printf(&head, "%s: health (%s): %zu devices", p->driver, why, p->health_ids.n);
    kc_table t;
    kc_table_init(&t, 3);
    const char *hdr[3] = {"DEVICE (POOL/NAME)", "HEALTH", "MESSAGE"};
    kc_table_row(&t, hdr);
    for (size_t i = 0; i < p->health_ids.n; i++) {
        const char *row[3] = {p->health_ids.v[i], p->health_states.v[i], p->health_msgs_text.v[i]};
        kc_table_row(&t, row);
    }
    kc_buf out = {0};
    if (p->health_ids.n) {
        kc_table_render(&t, &out, "    ");
    }
    kd_say_as("dra-kubelet", head.failed ? "health" : head.s, out.len ? out.s : NULL);
    kc_buf_free(&out);
    kc_buf_free(&head);
    kc_table_free(&t);
}

static void on_health_msg(const uint8_t *msg, size_t len, void *ud)
{
    kd_plugin *p = ud;
    V1alpha1__NodeWatchResourcesResponse *m =
        v1alpha1__node_watch_resources_response__unpack(NULL, len, msg);
    if (!m) {
        say_plugin(p, "health_bad", "a health message that does not decode: ignored",
                   "does not decode as NodeWatchResourcesResponse");
        return;
    }
    kc_strv_free(&p->health_ids);
    kc_strv_free(&p->health_states);
    kc_strv_free(&p->health_msgs_text);
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
    kd_print_health(p, p->health_msgs == 1 ? "stream opened" : "changed");
}

static void open_health(kd_plugin *p);

static void on_health_done(int status, const char *message, const uint8_t *resp, size_t len,
                           void *ud)
{
    (void)resp;
    (void)len;
    kd_plugin *p = ud;
    p->health = NULL;
    if (status == KDP__ST_UNIMPLEMENTED) {
        if (!p->said_unimplemented) {
            char text[600];
            snprintf(text, sizeof(text),
                     "%s: no health stream (UNIMPLEMENTED%s): asked again every 5s, said once",
                     p->driver, p->health_advertised ? ", though advertised" : "");
            say_plugin(p, "health_unimplemented", text, message);
        }
        p->said_unimplemented = true;
    } else {
        char text[800];
        snprintf(text, sizeof(text), "%s: health stream ended: %s%s%s; reopened in 5s", p->driver,
                 kdp__status_name(status), *message ? ": " : "", message);
        say_plugin(p, "health_ended", text, message);
    }
    kdp__timer_start(p->retry, KD_HEALTH_RETRY);
}

static void open_health(kd_plugin *p)
{
    if (p->k->o->no_health || !p->registered) {
        return;
    }
    V1alpha1__NodeWatchResourcesRequest req = V1ALPHA1__NODE_WATCH_RESOURCES_REQUEST__INIT;
    uint8_t buf[8];
    size_t n = protobuf_c_message_pack(&req.base, buf);
    kdp__unary_opts opts = {.max_recv = KC_KUBELET_MAX_RECV};
    p->health_msgs = 0;
    if (kdp__client_stream(p->k->loop, p->endpoint, KD_METHOD_HEALTH, buf, n, &opts, on_health_msg,
                           on_health_done, p, &p->health) < 0) {
        kdp__timer_start(p->retry, KD_HEALTH_RETRY);
    }
}

/* ---- registration ---- */

static void send_info(kd_plugin *p);

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kd_plugin *p = ud;
    if (p->registered) {
        open_health(p);
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
        say_plugin(p, "notify_failed", text, message);
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
    say_plugin(p, tell ? "refused" : "info_failed", text, why);
    if (tell) {
        notify(p, false, why);
    }
    kdp__timer_start(p->retry, p->backoff_us);
}

static void refuse(kd_plugin *p, const char *why)
{
    retry_later(p, why, true);
}

/* The version the kubelet takes: the plugin's first entry it supports
 * ("v1.DRAPlugin" -> "v1"). NULL if none. */
static char *choose_version(kd_plugin *p, const Pluginregistration__PluginInfo *m)
{
    const kc_strv *ours = &p->k->o->versions;
    for (size_t i = 0; i < m->n_supported_versions; i++) {
        const char *v = m->supported_versions[i];
        if (strcmp(v, KD_HEALTH_SERVICE) == 0) {
            p->health_advertised = true;
            continue;
        }
        const char *dot = strchr(v, '.');
        if (!dot || strcmp(dot, ".DRAPlugin") != 0) {
            continue;
        }
        for (size_t j = 0; j < ours->n; j++) {
            if (strlen(ours->v[j]) == (size_t)(dot - v) &&
                strncmp(ours->v[j], v, (size_t)(dot - v)) == 0) {
                /* later entries may still advertise the health service */
                for (size_t h = i + 1; h < m->n_supported_versions; h++) {
                    p->health_advertised = p->health_advertised ||
                                           strcmp(m->supported_versions[h], KD_HEALTH_SERVICE) == 0;
                }
                return strndup(v, (size_t)(dot - v));
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
            say_plugin(p, "replaced", text, NULL);
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
    char text[1200];
    snprintf(text, sizeof(text), "%s registered: %s.DRAPlugin at %s (health %s)", p->driver,
             p->version, p->endpoint,
             p->k->o->no_health     ? "not asked (--no-health)"
             : p->health_advertised ? "advertised"
                                    : "not advertised, asked anyway");
    say_plugin(p, "registered", text, NULL);
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
    open_health(p);
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
    plugin_reset(p);
    Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    kdp__unary_opts opts = {.timeout_us = KD_INFO_TIMEOUT};
    int r = kdp__client_unary_pb(p->k->loop, p->reg_socket, METHOD_GET_INFO, &req.base, &opts,
                                 on_info, p, &p->info);
    if (r < 0) {
        retry_later(p, strerror(-r), false);
    }
}

/* ---- the directory ---- */

static void deregister(kd_plugin *p, const char *why)
{
    char text[800];
    snprintf(text, sizeof(text), "%s %s: %s deregistered", p->reg_socket, why,
             p->driver ? p->driver : "(not registered)");
    say_plugin(p, "deregistered", text, NULL);
}

static void on_found(const char *name, const char *path, const char *source, void *ud)
{
    kd *k = ud;
    kd_plugin *p = find_socket(k, path);
    if (p) {
        if (p->registered) {
            deregister(p, "created again");
        }
        kd_calls_cancel(k, p);
    } else {
        if (k->n_plugins >= KD_MAX_SOCKETS) {
            char text[600];
            snprintf(text, sizeof(text), "%s ignored: %d sockets tracked already", name,
                     KD_MAX_SOCKETS);
            kd_say(text);
            return;
        }
        p = calloc(1, sizeof(*p));
        if (!p || !(p->reg_socket = strdup(path)) ||
            kdp__timer_new(k->loop, on_retry, p, &p->retry) < 0) {
            if (p) {
                free(p->reg_socket);
            }
            free(p);
            return;
        }
        p->k = k;
        p->next = k->plugins;
        k->plugins = p;
        k->n_plugins++;
    }
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "found");
        kc_json_str(&j, "socket", p->reg_socket);
        kc_json_str(&j, "source", source);
        kc_json_emit(&j);
    } else {
        char text[600];
        snprintf(text, sizeof(text), "found %s (%s)", name, source);
        kd_say(text);
    }
    p->backoff_us = 0;
    send_info(p);
}

static void on_gone(const char *name, const char *path, void *ud)
{
    (void)name;
    kd_plugin *p = find_socket(ud, path);
    if (p) {
        deregister(p, "removed");
        plugin_free(p);
    }
}

static void on_dir_gone(void *ud)
{
    kd *k = ud;
    kd_say("plugins_registry was removed: no longer watching it");
    kc_regdir_free(k->regdir);
    k->regdir = NULL;
}

static int watch_start(kd *k)
{
    static const kc_regdir_ops ops = {on_found, on_gone, on_dir_gone};
    return kc_regdir_start(k->loop, k->registry, (size_t)KD_MAX_SOCKETS * 4, &ops, k, &k->regdir);
}

/* ---- the process ---- */

static void stop(kd *k, const char *reason)
{
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "exit");
        kc_json_str(&j, "reason", reason);
        kc_json_emit(&j);
    } else {
        char text[64];
        snprintf(text, sizeof(text), "%s: stopping", reason);
        kd_say(text);
    }
    if (k->exit < 0) {
        k->exit = KC_EXIT_OK;
    }
    kdp__loop_quit(k->loop);
}

static void on_signal(kdp__signal *s, int signo, void *ud)
{
    (void)s;
    stop(ud, signo == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_deadline(kdp__timer *t, void *ud)
{
    (void)t;
    stop(ud, "timeout");
}

void kd_kubelet_close(kd *k)
{
    kd_input_stop(k);
    kd_calls_cancel(k, NULL);
    while (k->plugins) {
        kd_plugin *p = k->plugins;
        k->plugins = p->next;
        k->n_plugins--;
        plugin_destroy(p);
    }
    kc_regdir_free(k->regdir);
    kdp__timer_free(k->deadline);
    for (int i = 0; i < 2; i++) {
        kdp__signal_free(k->sig[i]);
    }
    if (k->owns_loop) {
        kc_loop_drain(k->loop);
        kdp__loop_free(k->loop);
    }
    k->loop = NULL;
    kc_strv_free(&k->prepared);
    kc_strv_free(&k->prepared_devices);
    free(k->registry);
    k->registry = NULL;
}

/* The loop, signals and --timeout of a kubelet of its own. */
static int own_loop(kd *k)
{
    static const int signals[2] = {SIGINT, SIGTERM};
    int r = kdp__loop_new(&k->loop);
    k->owns_loop = r == 0;
    for (int i = 0; r == 0 && i < 2; i++) {
        r = kdp__signal_add(k->loop, signals[i], on_signal, k, &k->sig[i]);
    }
    if (r == 0) {
        r = kdp__timer_new(k->loop, on_deadline, k, &k->deadline);
    }
    if (r == 0 && k->o->timeout_us) {
        kdp__timer_start(k->deadline, k->o->timeout_us);
    }
    return r;
}

static void say_ready(kd *k)
{
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "ready");
        kc_json_str(&j, "registry", k->registry);
        kc_json_emit(&j);
        return;
    }
    char text[8400];
    snprintf(text, sizeof(text),
             "watching %s; commands on stdin: prepare DRIVER NS/NAME/UID..., unprepare "
             "DRIVER NS/NAME/UID..., state, health DRIVER",
             k->registry);
    kd_say(text);
}

int kd_kubelet_open(kd *k, const kd_opts *o, kdp__loop *shared)
{
    memset(k, 0, sizeof(*k));
    k->o = o;
    k->exit = -1;
    const char *root = o->root ? o->root : getenv(KDP_KUBELET_ROOT_ENV);
    if (!root || !*root) {
        root = KDP_KUBELET_ROOT;
    }
    if (asprintf(&k->registry, "%s%splugins_registry", root,
                 root[strlen(root) - 1] == '/' ? "" : "/") < 0) {
        k->registry = NULL;
        return kc_fail_errno(&(kc_opts){.cmd = "dra kubelet", .json = o->json}, "path", -ENOMEM);
    }
    k->loop = shared;
    int r = shared ? 0 : own_loop(k);
    const char *stage = "start";
    if (r == 0) {
        stage = "watch";
        r = watch_start(k);
    }
    if (r == 0) {
        stage = "read stdin";
        r = kd_input_start(k);
    }
    if (r < 0) {
        char msg[8600];
        snprintf(msg, sizeof(msg), "cannot %s %s: %s", stage, k->registry, strerror(-r));
        kc_print_error(o->json, "dra kubelet", NULL, 0, msg,
                       r == -EACCES ? "permission denied: run as root, or give --kubelet-root DIR "
                                      "(the driver's too)"
                                    : NULL);
        return KC_EXIT_FAIL;
    }
    say_ready(k);
    return 0;
}

int kd_cmd_kubelet(const kd_opts *o)
{
    kd k;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int e = kd_kubelet_open(&k, o, NULL);
    if (e == 0) {
        int r = kdp__loop_run(k.loop);
        if (r < 0 && k.exit < 0) {
            k.exit =
                kc_fail_errno(&(kc_opts){.cmd = "dra kubelet", .json = o->json}, "event loop", r);
        }
        e = k.exit < 0 ? KC_EXIT_OK : k.exit;
    }
    kd_kubelet_close(&k);
    return e;
}
