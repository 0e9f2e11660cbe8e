/* SPDX-License-Identifier: MIT */
/*
 * watcher: the kubelet's plugin-watcher side of `kdpctl kubelet`, as the
 * kubelet's pluginmanager does it (and tests/kubelet/watcher.go models it):
 * plugins_registry/ is walked at start and watched (regdir.c, on kdp's
 * inotify watch); names starting with '.' and anything not a socket are
 * ignored. For each
 * socket: GetInfo (1 s); type "DevicePlugin", "v1beta1" among its
 * supported_versions and a valid extended resource name, else
 * NotifyRegistrationStatus(false, the kubelet's text) and a retry with
 * backoff (500 ms doubling up to 2m2s); the endpoint ("" = this socket, else
 * a full path) is connected as after a Register (registration.c); then
 * NotifyRegistrationStatus(true) (5 s). A failed connect is notified and
 * not retried, as the kubelet has already put the plugin in its actual
 * state. A socket created again is a new incarnation: deregistered, then
 * registered again. A socket removed is deregistered: its plugin's
 * connection is closed. A restart (SIGHUP) forgets all of it and walks the
 * directory again, never deleting anything in it.
 *
 * Only the directory itself is watched, not subdirectories.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/validate.h"
#include "grpc/wire.h"
#include "kubelet.h"
#include "regdir.h"
#include "rpc.h"

#define METHOD_GET_INFO "/pluginregistration.Registration/GetInfo"
#define METHOD_NOTIFY   "/pluginregistration.Registration/NotifyRegistrationStatus"

typedef enum kw_state {
    KW_INFO,       /* GetInfo in flight */
    KW_CONNECTING, /* accepted; the connect (GetDevicePluginOptions) in flight */
    KW_REGISTERED, /* connected */
    KW_BROKEN,     /* the connect failed: in the actual state, not retried */
    KW_BACKOFF,    /* refused or unreachable: the retry timer runs */
} kw_state;

struct kw_entry {
    kl *k;
    kw_entry *next;
    char *path;
    kw_state state;
    kdp__client_call *info;
    kdp__client_call *notify;
    bool notify_ok;    /* what the notify in flight says */
    kdp__timer *retry; /* a retry after the backoff, or the next dial */
    uint64_t backoff_us;
    uint64_t dial_start_us; /* the first dial of this register operation */
    char *resource;         /* GetInfo's name, once accepted */
};

/* ---- output ---- */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void say_event(kw_entry *e, const char *event, const char *json_key, const char *json_val,
                      const char *who, const char *text)
{
    if (e->k->o->json) {
        kc_json j;
        kl_json(&j, event);
        kc_json_str(&j, "socket", e->path);
        if (json_key) {
            kc_json_str(&j, json_key, json_val);
        }
        kc_json_emit(&j);
        return;
    }
    kl_say(who, text, NULL);
}

/* ---- lifetime ---- */

/* The registration of e's socket that is still connecting, if any. */
static kl_plugin *connecting_plugin(kw_entry *e)
{
    for (kl_plugin *p = e->k->plugins; p; p = p->next) {
        if (p->via_watcher && p->state == KL_DIALING && strcmp(p->reg_socket, e->path) == 0) {
            return p;
        }
    }
    return NULL;
}

/* Cancels what e has in flight (not its retry timer). */
static void entry_cancel(kw_entry *e)
{
    kdp__client_call_cancel(e->info);
    e->info = NULL;
    kdp__client_call_cancel(e->notify);
    e->notify = NULL;
    kl_plugin_free(connecting_plugin(e));
    free(e->resource);
    e->resource = NULL;
}

static void entry_free(kw_entry *e)
{
    for (kw_entry **pp = &e->k->entries; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    }
    entry_cancel(e);
    kdp__timer_free(e->retry);
    free(e->path);
    free(e);
}

static kw_entry *entry_find(kl *k, const char *path)
{
    for (kw_entry *e = k->entries; e; e = e->next) {
        if (strcmp(e->path, path) == 0) {
            return e;
        }
    }
    return NULL;
}

/* ---- deregistration ---- */

/* The registration DeRegisterPlugin closes for e's socket: the one made
 * through it (endpoint tracking per socket path), or, by resource name, the
 * resource's newest registration, whichever socket it came through. */
static kl_plugin *deregister_target(kw_entry *e, const char *res)
{
    if (e->k->o->tracking == KC_TRACK_RESOURCE && *res) {
        return kl_current(e->k, res);
    }
    for (kl_plugin *q = e->k->plugins; q; q = q->next) {
        if (q->via_watcher && q->state != KL_DIALING && strcmp(q->reg_socket, e->path) == 0) {
            return q;
        }
    }
    return NULL;
}

static void say_deregistered(kw_entry *e, const char *res, const char *why, const kl_plugin *p,
                             bool mark, size_t marked)
{
    bool other = p && !(p->via_watcher && strcmp(p->reg_socket, e->path) == 0);
    kc_buf b = {0};
    kc_buf_printf(&b, "deregistered via watcher: %s %s", e->path, why);
    if (other) {
        kc_buf_printf(&b,
                      "; endpoint tracking by resource name: the newest registration "
                      "(endpoint %s) disconnected",
                      p->endpoint);
    } else if (p) {
        kc_buf_puts(&b, "; connection closed");
    }
    if (mark) {
        kc_buf_printf(&b, ", its %zu device%s counted unhealthy", marked, marked == 1 ? "" : "s");
    }
    kl_say(*res ? res : "watcher", b.failed ? "deregistered via watcher" : b.s, NULL);
    kc_buf_free(&b);
}

/* The kubelet's unregister: the device manager's DeRegisterPlugin closes
 * the connection of deregister_target(); the resource's devices count as
 * unhealthy if that was its current registration. */
static void deregister(kw_entry *e, const char *why)
{
    kl *k = e->k;
    const char *res = e->resource ? e->resource : "";
    kl_plugin *p = deregister_target(e, res);
    bool mark = p && p->state == KL_ACTIVE;
    size_t marked = mark ? kl_cap_count(k, res) : 0;
    if (k->o->json) {
        kc_json j;
        kl_json(&j, "deregistered");
        kc_json_str(&j, "resource", res);
        kc_json_str(&j, "socket", e->path);
        kc_json_str(&j, "endpoint", p ? p->endpoint : NULL);
        kc_json_str(&j, "via", "watcher");
        kc_json_str(&j, "reason", why);
        kc_json_bool(&j, "disconnected", p != NULL);
        kc_json_uint(&j, "marked_unhealthy", marked);
        kc_json_emit(&j);
    } else {
        say_deregistered(e, res, why, p, mark, marked);
    }
    kl_plugin_free(p);
    if (mark) {
        kl_cap_mark(k, res, "deregistered", e->path);
    }
}

/* ---- NotifyRegistrationStatus ---- */

static void on_notify(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)resp;
    (void)len;
    kw_entry *e = ud;
    e->notify = NULL;
    if (e->k->o->json) {
        kc_json j;
        kl_json(&j, "watcher_notified");
        kc_json_str(&j, "socket", e->path);
        kc_json_str(&j, "resource", e->resource);
        kc_json_bool(&j, "registered", e->notify_ok);
        if (status != KDP__ST_OK) {
            kc_json_str(&j, "notify_error", message);
        }
        kc_json_emit(&j);
    } else if (status != KDP__ST_OK) {
        kc_buf b = {0};
        kc_buf_printf(&b,
                      "NotifyRegistrationStatus failed at socket %s, err: rpc error: code = %s "
                      "desc = %s",
                      e->path, kl_go_code(status), message);
        kl_say("watcher", b.failed ? "NotifyRegistrationStatus failed" : b.s, NULL);
        kc_buf_free(&b);
    }
}

static void notify(kw_entry *e, bool ok, const char *error)
{
    Pluginregistration__RegistrationStatus st = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    st.plugin_registered = ok;
    st.error = (char *)(error ? error : "");
    kdp__unary_opts opts = {.timeout_us = KL_NOTIFY_TIMEOUT};
    kdp__client_call_cancel(e->notify);
    e->notify = NULL;
    e->notify_ok = ok;
    int r = kdp__client_unary_pb(e->k->loop, e->path, METHOD_NOTIFY, &st.base, &opts, on_notify, e,
                                 &e->notify);
    if (r < 0) {
        on_notify(KDP__ST_INTERNAL, strerror(-r), NULL, 0, e);
    }
}

/* ---- registration ---- */

static void backoff(kw_entry *e)
{
    e->backoff_us = e->backoff_us ? e->backoff_us * 2 : KL_BACKOFF_INITIAL;
    if (e->backoff_us > KL_BACKOFF_MAX) {
        e->backoff_us = KL_BACKOFF_MAX;
    }
    e->state = KW_BACKOFF;
    kdp__timer_start(e->retry, e->backoff_us);
}

/* GetInfo failed, or the connect could not start: retried. */
static void failed(kw_entry *e, const char *stage, const char *error)
{
    if (e->k->o->json) {
        kc_json j;
        kl_json(&j, "watcher_failed");
        kc_json_str(&j, "socket", e->path);
        kc_json_str(&j, "stage", stage);
        kc_json_str(&j, "error", error);
        kc_json_emit(&j);
    } else {
        kl_say("watcher", error, NULL);
    }
    backoff(e);
}

static void refuse(kw_entry *e, const Pluginregistration__PluginInfo *info, const char *stage,
                   const char *reason)
{
    if (e->k->o->json) {
        kc_json j;
        kl_json(&j, "watcher_refused");
        kc_json_str(&j, "socket", e->path);
        kc_json_str(&j, "stage", stage);
        kc_json_str(&j, "type", info->type);
        kc_json_str(&j, "resource", info->name);
        kc_json_str(&j, "reason", reason);
        kc_json_emit(&j);
    } else {
        kc_buf b = {0};
        kc_buf_printf(&b, "refused via watcher (socket %s): %s", e->path, reason);
        kl_say(*info->name ? info->name : "watcher", b.failed ? reason : b.s, NULL);
        kc_buf_free(&b);
    }
    notify(e, false, reason);
}

static void go_versions(kc_buf *b, const Pluginregistration__PluginInfo *info)
{
    kc_buf_puts(b, "[");
    for (size_t i = 0; i < info->n_supported_versions; i++) {
        kc_buf_printf(b, "%s%s", i ? " " : "", info->supported_versions[i]);
    }
    kc_buf_puts(b, "]");
}

int kl_info_check(const Pluginregistration__PluginInfo *info, const char *socket, kc_buf *reason,
                  const char **ret_stage)
{
    if (strcmp(info->type, KL_PLUGIN_TYPE) != 0) {
        kc_buf_printf(reason,
                      "RegisterPlugin error -- no handler registered for plugin type: %s at "
                      "socket %s",
                      info->type, socket);
        *ret_stage = "type";
        return -EINVAL;
    }
    bool version = false;
    for (size_t i = 0; i < info->n_supported_versions; i++) {
        version = version || strcmp(info->supported_versions[i], KL_API_VERSION) == 0;
    }
    if (!version) {
        kc_buf_puts(reason, "RegisterPlugin error -- plugin validation failed with err: manager "
                            "version, " KL_API_VERSION ", is not among plugin supported versions ");
        go_versions(reason, info);
    } else if (kdp__validate_resource_name(info->name, NULL) < 0) {
        kc_buf_puts(reason, "RegisterPlugin error -- plugin validation failed with err: invalid "
                            "name of device plugin socket: the ResourceName ");
        kl_go_quote(reason, info->name);
        kc_buf_puts(reason, " is invalid");
    } else {
        return 0;
    }
    *ret_stage = "validate";
    return -EINVAL;
}

static void say_info(kw_entry *e, const Pluginregistration__PluginInfo *info)
{
    if (e->k->o->json) {
        kc_json j;
        kl_json(&j, "watcher_info");
        kc_json_str(&j, "socket", e->path);
        kc_json_str(&j, "type", info->type);
        kc_json_str(&j, "name", info->name);
        kc_json_str(&j, "endpoint", info->endpoint);
        kc_json_arr(&j, "supported_versions");
        for (size_t i = 0; i < info->n_supported_versions; i++) {
            kc_json_str(&j, NULL, info->supported_versions[i]);
        }
        kc_json_emit(&j);
        return;
    }
    kc_buf b = {0};
    kc_buf_printf(&b, "GetInfo %s: type %s, name %s, endpoint %s, versions ", base_name(e->path),
                  info->type, *info->name ? info->name : "\"\"",
                  *info->endpoint ? info->endpoint : "\"\" (this socket)");
    go_versions(&b, info);
    kl_say("watcher", b.failed ? "GetInfo answered" : b.s, NULL);
    kc_buf_free(&b);
}

static void accepted(kw_entry *e, const Pluginregistration__PluginInfo *info, uint64_t now)
{
    const char *endpoint = *info->endpoint ? info->endpoint : e->path;
    e->resource = strdup(info->name);
    int r = e->resource ? kl_connect_watcher(e->k, info->name, endpoint, e->path, now) : -ENOMEM;
    if (r < 0) {
        kc_buf b = {0};
        kc_buf_printf(&b,
                      "RegisterPlugin error -- plugin registration failed with err: failed to "
                      "dial device plugin: %s",
                      strerror(-r));
        refuse(e, info, "register", b.failed ? "RegisterPlugin error" : b.s);
        kc_buf_free(&b);
        e->state = KW_BROKEN;
        return;
    }
    e->state = KW_CONNECTING;
}

static void on_info(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    kw_entry *e = ud;
    uint64_t now = kdp__now_us();
    e->info = NULL;
    kc_buf b = {0};
    if (status != KDP__ST_OK && strncmp(message, "connect ", 8) == 0 &&
        now - e->dial_start_us < KL_DIAL_TIMEOUT) {
        /* grpc-go's blocking dial tries again until its 10 s are up (a
         * socket file appears at bind(), before listen()). */
        kdp__timer_start(e->retry, KL_REDIAL_DELAY);
        return;
    }
    if (status != KDP__ST_OK && strncmp(message, "connect ", 8) == 0) {
        kc_buf_printf(&b, "failed to dial socket %s, err: %s", e->path, message);
        failed(e, "dial", b.failed ? "failed to dial" : b.s);
        kc_buf_free(&b);
        return;
    }
    Pluginregistration__PluginInfo *info =
        status == KDP__ST_OK ? pluginregistration__plugin_info__unpack(NULL, len, resp) : NULL;
    if (!info) {
        kc_buf_printf(&b,
                      "failed to get plugin info using RPC GetInfo at socket %s, err: rpc error: "
                      "code = %s desc = %s",
                      e->path, kl_go_code(status ? status : KDP__ST_INTERNAL),
                      status ? message : "cannot decode the PluginInfo");
        failed(e, "get_info", b.failed ? "GetInfo failed" : b.s);
        kc_buf_free(&b);
        return;
    }
    say_info(e, info);
    const char *stage = NULL;
    if (kl_info_check(info, e->path, &b, &stage) < 0) {
        refuse(e, info, stage, b.failed ? "RegisterPlugin error" : b.s);
        backoff(e);
    } else {
        accepted(e, info, now);
    }
    kc_buf_free(&b);
    pluginregistration__plugin_info__free_unpacked(info, NULL);
}

static void send_info(kw_entry *e)
{
    Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    kdp__unary_opts opts = {.timeout_us = KL_INFO_TIMEOUT};
    e->state = KW_INFO;
    int r = kdp__client_unary_pb(e->k->loop, e->path, METHOD_GET_INFO, &req.base, &opts, on_info, e,
                                 &e->info);
    if (r < 0) {
        failed(e, "get_info", strerror(-r));
    }
}

static void start_register(kw_entry *e)
{
    kdp__timer_stop(e->retry);
    e->dial_start_us = kdp__now_us();
    send_info(e);
}

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kw_entry *e = ud;
    if (e->state == KW_BACKOFF) {
        start_register(e);
    } else if (e->state == KW_INFO && !e->info) {
        send_info(e);
    }
}

void kl_watcher_connected(kl *k, kl_plugin *p, const char *error)
{
    kw_entry *e = entry_find(k, p->reg_socket);
    if (!e || e->state != KW_CONNECTING) {
        return;
    }
    if (error) {
        Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
        info.type = (char *)KL_PLUGIN_TYPE;
        info.name = p->resource;
        kc_buf b = {0};
        kc_buf_printf(&b, "RegisterPlugin error -- plugin registration failed with err: %s", error);
        e->state = KW_BROKEN;
        refuse(e, &info, "register", b.failed ? "RegisterPlugin error" : b.s);
        kc_buf_free(&b);
        return;
    }
    e->state = KW_REGISTERED;
    e->backoff_us = 0;
    notify(e, true, NULL);
}

/* ---- the directory ---- */

static void on_found(const char *name, const char *path, const char *source, void *ud)
{
    kl *k = ud;
    kw_entry *e = entry_find(k, path);
    if (e) {
        /* A new incarnation: what the old one registered goes first. */
        if (e->state == KW_REGISTERED || e->state == KW_BROKEN) {
            deregister(e, "created again");
        }
        entry_cancel(e);
    } else {
        e = calloc(1, sizeof(*e));
        if (!e || !(e->path = strdup(path)) ||
            kdp__timer_new(k->loop, on_retry, e, &e->retry) < 0) {
            if (e) {
                free(e->path);
            }
            free(e);
            return;
        }
        e->k = k;
        e->next = k->entries;
        k->entries = e;
    }
    char text[600];
    snprintf(text, sizeof(text), "found %s (%s)", name, source);
    say_event(e, "watcher_found", "source", source, "watcher", text);
    if (e->state != KW_BACKOFF || !kdp__timer_armed(e->retry)) {
        start_register(e); /* else the retry comes after the backoff */
    }
}

static void on_gone(const char *name, const char *path, void *ud)
{
    kw_entry *e = entry_find(ud, path);
    if (!e) {
        return;
    }
    if (e->state == KW_REGISTERED || e->state == KW_BROKEN) {
        deregister(e, "removed");
    } else {
        char text[600];
        snprintf(text, sizeof(text), "%s removed", name);
        say_event(e, "watcher_gone", NULL, NULL, "watcher", text);
    }
    entry_free(e);
}

static void on_dir_gone(void *ud)
{
    kl *k = ud;
    kc_buf b = {0};
    kc_buf_printf(&b, "%s was removed: no longer watching it", k->registry);
    kl_say("watcher", b.failed ? "plugins_registry removed" : b.s, NULL);
    kc_buf_free(&b);
    kc_regdir_free(k->regdir);
    k->regdir = NULL;
}

int kl_watcher_start(kl *k)
{
    static const kc_regdir_ops ops = {on_found, on_gone, on_dir_gone};
    return kc_regdir_start(k->loop, k->registry, 0, &ops, k, &k->regdir);
}

void kl_watcher_stop(kl *k)
{
    while (k->entries) {
        kw_entry *e = k->entries;
        k->entries = e->next; /* unlinked here: entry_free finds nothing to unlink */
        entry_free(e);
    }
    kc_regdir_free(k->regdir);
    k->regdir = NULL;
}
