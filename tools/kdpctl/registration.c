/* SPDX-License-Identifier: MIT */
/*
 * registration: one plugin's registration with the emulated kubelet, in the
 * kubelet's order: Register arrives; version and resource name are checked
 * (the kubelet's messages); the plugin is dialled back at DIR/<endpoint>
 * (10 s) and asked GetDevicePluginOptions while Register is held; Register
 * is answered; ListAndWatch is opened and every device list compared with
 * the one before. A later registration of the same resource replaces this
 * one; its stream stays open (as the kubelet keeps it) but is ignored. When
 * it ends: nothing more with endpoint tracking per socket path; by resource
 * name (--endpoint-tracking resource), the kubelet finds the resource's
 * newest registration instead and disconnects it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/validate.h"
#include "deviceplugin.pb-c.h"
#include "devlist.h"
#include "grpc/wire.h"
#include "kubelet.h"
#include "rpc.h"

/* grpc-go's names for the status codes, as its error strings show them. */
const char *kl_go_code(int status)
{
    static const char *const names[] = {
        "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
        "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
        "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
        "DataLoss", "Unauthenticated"};
    return status >= 0 && status <= 16 ? names[status] : "Unknown";
}

void kl_go_quote(kc_buf *b, const char *s)
{
    kc_buf_json_string(b, s);
}

static void say(kl_plugin *p, const char *text, const char *extra)
{
    kl_say(p->resource, text, extra);
}

/* ---- lifetime ---- */

static void unlink_plugin(kl_plugin *p)
{
    for (kl_plugin **pp = &p->k->plugins; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

void kl_plugin_free(kl_plugin *p)
{
    if (!p) {
        return;
    }
    unlink_plugin(p);
    if (p->reg) {
        kdp__call_set_cancel(p->reg, NULL, NULL);
        (void)kdp__call_finish(p->reg, KDP__ST_UNAVAILABLE, "kubelet is stopping");
    }
    kdp__client_call_cancel(p->dial);
    kdp__client_call_cancel(p->list_stream);
    kdp__devtab_clear(&p->tab);
    free(p->resource);
    free(p->endpoint);
    free(p->version);
    free(p->socket);
    free(p->reg_socket);
    free(p);
}

static void on_register_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    kl_plugin *p = ud;
    p->reg = NULL; /* the plugin gave up; the kubelet goes on regardless */
}

/* ---- rejection ---- */

static void reject(kl *k, kdp__call *call, const V1beta1__RegisterRequest *r, int status,
                   const char *msg, const char *detail)
{
    if (call) {
        (void)kdp__call_finish(call, status, msg);
    }
    const char *res = r && r->resource_name ? r->resource_name : "";
    if (k->o->json) {
        kc_json j;
        kl_json(&j, "rejected");
        kc_json_str(&j, "resource", res);
        kc_json_str(&j, "endpoint", r ? r->endpoint : NULL);
        kc_json_str(&j, "version", r ? r->version : NULL);
        kc_json_str(&j, "status", kdp__status_name(status));
        kc_json_str(&j, "error", msg);
        kc_json_str(&j, "detail", detail);
        kc_json_emit(&j);
        return;
    }
    kc_buf b = {0};
    kc_buf_printf(&b, "Register rejected (%s): %s", kdp__status_name(status), msg);
    if (detail) {
        kc_buf_printf(&b, " (%s)", detail);
    }
    kl_say(*res ? res : "(no resource name)", b.failed ? msg : b.s, NULL);
    kc_buf_free(&b);
}

static void reject_plugin(kl_plugin *p, const char *msg)
{
    if (p->via_watcher) {
        kl_watcher_connected(p->k, p, msg);
        kl_plugin_free(p);
        return;
    }
    V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
    r.resource_name = p->resource;
    r.endpoint = p->endpoint;
    r.version = p->version;
    kdp__call *call = p->reg;
    p->reg = NULL;
    reject(p->k, call, &r, KDP__ST_UNKNOWN, msg, NULL);
    kl_plugin_free(p);
}

/* ---- ListAndWatch ---- */

static void say_devices(kl_plugin *p, const kdp__devtab *old, size_t len)
{
    if (p->k->o->json) {
        kc_json j;
        kl_json(&j, "devices");
        kc_json_str(&j, "resource", p->resource);
        kc_json_str(&j, "endpoint", p->endpoint);
        kc_json_int(&j, "seq", p->seq);
        kc_json_uint(&j, "bytes", len);
        kc_devices_json(&j, &p->tab);
        kc_changes_json(&j, old, &p->tab);
        kc_json_emit(&j);
        return;
    }
    kc_buf head = {0};
    kc_buf lines = {0};
    kc_buf_printf(&head, "devices #%ld: ", p->seq);
    kc_devices_summary(&head, &p->tab);
    if (kc_changes_text(&lines, old, &p->tab, "    ") == 0) {
        kc_buf_puts(&lines, "    (no change)\n");
    }
    say(p, head.failed ? "devices" : head.s, lines.failed ? NULL : lines.s);
    kc_buf_free(&head);
    kc_buf_free(&lines);
}

static void on_list_msg(const uint8_t *msg, size_t len, void *ud)
{
    kl_plugin *p = ud;
    if (p->state != KL_ACTIVE) {
        return; /* replaced: the resource's devices come from its successor */
    }
    kdp__devtab old;
    kdp__devtab_init(&old);
    kdp__devtab_move(&old, &p->tab);
    kc_buf warn = {0};
    int r = kc_devtab_decode(msg, len, &p->tab, &warn);
    if (warn.len) {
        kc_print_warnings(p->resource, &warn);
    }
    kc_buf_free(&warn);
    if (r < 0) {
        kdp__devtab_move(&p->tab, &old);
        say(p,
            r == -EBADMSG ? "a ListAndWatch message does not decode: ignored"
                          : "out of memory reading a ListAndWatch message",
            NULL);
        return;
    }
    p->seq++;
    say_devices(p, &old, len);
    kdp__devtab_clear(&old);
    kl_cap_devices(p);
}

/* marked: how many devices the end made the kubelet count unhealthy. */
static void say_stream_end(kl_plugin *p, int status, const char *message, size_t marked)
{
    if (p->k->o->json) {
        kc_json j;
        kl_json(&j, "stream_end");
        kc_json_str(&j, "resource", p->resource);
        kc_json_str(&j, "endpoint", p->endpoint);
        kc_json_str(&j, "status", kdp__status_name(status));
        kc_json_int(&j, "code", status);
        kc_json_str(&j, "message", message);
        kc_json_bool(&j, "replaced", p->state == KL_REPLACED);
        kc_json_uint(&j, "marked_unhealthy", marked);
        kc_json_emit(&j);
        return;
    }
    kc_buf b = {0};
    kc_buf_printf(&b, "ListAndWatch %sended (%s%s%s)",
                  p->state == KL_REPLACED ? "of the replaced registration " : "",
                  kdp__status_name(status), *message ? ": " : "", message);
    if (status == KDP__ST_RESOURCE_EXHAUSTED) {
        kc_buf_puts(&b, " (a device list over the kubelet's 4 MiB limit: the kubelet rejects it "
                        "too)");
    }
    if (p->state != KL_REPLACED) {
        kc_buf_printf(&b,
                      ": the kubelet now counts its %zu device%s as unhealthy until it "
                      "registers again",
                      marked, marked == 1 ? "" : "s");
    }
    say(p, b.failed ? "ListAndWatch ended" : b.s, NULL);
    kc_buf_free(&b);
}

kl_plugin *kl_current(kl *k, const char *resource)
{
    for (kl_plugin *p = k->plugins; p; p = p->next) {
        if (p->state == KL_ACTIVE && strcmp(p->resource, resource) == 0) {
            return p;
        }
    }
    return NULL;
}

void kl_disconnect(kl_plugin *p, const char *cause, const char *cause_endpoint)
{
    kdp__client_call_cancel(p->list_stream); /* closes the connection */
    p->list_stream = NULL;
    p->state = KL_ENDED;
    size_t n = kl_cap_count(p->k, p->resource);
    if (p->k->o->json) {
        kc_json j;
        kl_json(&j, "disconnected");
        kc_json_str(&j, "resource", p->resource);
        kc_json_str(&j, "endpoint", p->endpoint);
        kc_json_str(&j, "via", p->via_watcher ? "watcher" : KL_SOCKET);
        kc_json_str(&j, "cause", cause);
        kc_json_str(&j, "cause_endpoint", cause_endpoint);
        kc_json_uint(&j, "marked_unhealthy", n);
        kc_json_emit(&j);
        return;
    }
    char text[1400];
    snprintf(text, sizeof(text),
             "disconnected (endpoint %s, the newest registration): endpoint tracking by resource "
             "name found it when %s%s; its %zu device%s counted unhealthy until it registers "
             "again",
             p->endpoint, cause_endpoint,
             strcmp(cause, "stream_end") == 0 ? "'s ListAndWatch ended" : " was deregistered", n,
             n == 1 ? "" : "s");
    say(p, text, NULL);
}

static void on_list_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)resp;
    (void)len;
    kl_plugin *p = ud;
    kl *k = p->k;
    p->list_stream = NULL; /* freed by the client when this returns */
    /* The kubelet's PluginDisconnected: per socket path only the current
     * registration's end counts; by resource name, the end of any of them
     * finds the newest one, which is disconnected. */
    kl_plugin *victim = NULL;
    bool mark = p->state == KL_ACTIVE;
    if (p->state == KL_REPLACED && k->o->tracking == KC_TRACK_RESOURCE) {
        victim = kl_current(k, p->resource);
        mark = victim != NULL;
    }
    size_t marked = mark ? kl_cap_count(k, p->resource) : 0;
    say_stream_end(p, status, message, marked);
    if (victim) {
        kl_disconnect(victim, "stream_end", p->endpoint);
    }
    if (mark) {
        kl_cap_mark(k, p->resource, "stream_end", p->endpoint);
    }
    if (p->state == KL_REPLACED) {
        kl_plugin_free(p);
        return;
    }
    p->state = KL_ENDED;
}

/* ---- registration ---- */

static void say_registered(kl_plugin *p)
{
    char dial[32];
    kc_ms(p->dialed_us - p->arrived_us, dial, sizeof(dial));
    bool differ = p->req_has_options &&
                  (p->req_pre_start != p->pre_start || p->req_preferred != p->preferred);
    if (p->k->o->json) {
        kc_json j;
        kl_json(&j, "registered");
        kc_json_str(&j, "resource", p->resource);
        kc_json_str(&j, "endpoint", p->endpoint);
        kc_json_str(&j, "version", p->version);
        kc_json_str(&j, "via", p->via_watcher ? "watcher" : KL_SOCKET);
        if (p->via_watcher) {
            kc_json_str(&j, "socket", p->reg_socket);
        }
        kc_json_obj(&j, "options");
        kc_json_bool(&j, "pre_start_required", p->pre_start);
        kc_json_bool(&j, "get_preferred_allocation_available", p->preferred);
        kc_json_end(&j);
        kc_json_bool(&j, "request_options", p->req_has_options);
        kc_json_bool(&j, "options_differ", differ);
        kc_json_ms(&j, "dial_ms", p->dialed_us - p->arrived_us);
        kc_json_emit(&j);
        return;
    }
    char text[2048];
    if (p->via_watcher) {
        snprintf(text, sizeof(text),
                 "registered via watcher (socket %s, endpoint %s, options: pre_start_required=%s "
                 "get_preferred_allocation_available=%s; connected in %s ms)",
                 p->reg_socket, p->endpoint, p->pre_start ? "true" : "false",
                 p->preferred ? "true" : "false", dial);
    } else {
        snprintf(text, sizeof(text),
                 "registered (endpoint %s, options: pre_start_required=%s "
                 "get_preferred_allocation_available=%s; dialled back in %s ms)",
                 p->endpoint, p->pre_start ? "true" : "false", p->preferred ? "true" : "false",
                 dial);
    }
    say(p, text, NULL);
    if (differ) {
        say(p,
            "warning: the options in RegisterRequest differ from GetDevicePluginOptions "
            "(kubelets up to 1.24 use the request's)",
            NULL);
    }
}

/* p takes the resource: older registrations are replaced or forgotten. */
static void take_resource(kl_plugin *p)
{
    kl_plugin *next;
    for (kl_plugin *q = p->k->plugins; q; q = next) {
        next = q->next;
        if (q == p || strcmp(q->resource, p->resource) != 0) {
            continue;
        }
        if (q->state == KL_ENDED) {
            kl_plugin_free(q);
        } else if (q->state == KL_ACTIVE) {
            q->state = KL_REPLACED;
            if (p->k->o->json) {
                kc_json j;
                kl_json(&j, "replaced");
                kc_json_str(&j, "resource", p->resource);
                kc_json_str(&j, "old_endpoint", q->endpoint);
                kc_json_str(&j, "endpoint", p->endpoint);
                kc_json_emit(&j);
            } else {
                char text[600];
                snprintf(text, sizeof(text),
                         "a new registration (endpoint %s) replaces the one from %s", p->endpoint,
                         q->endpoint);
                say(p, text, NULL);
            }
        }
    }
}

static void open_stream(kl_plugin *p)
{
    kdp__unary_opts opts = {.max_recv = KC_KUBELET_MAX_RECV}; /* no deadline, like the kubelet */
    int r = kdp__client_stream(p->k->loop, p->socket, KC_METHOD_LIST_AND_WATCH, NULL, 0, &opts,
                               on_list_msg, on_list_done, p, &p->list_stream);
    if (r < 0) {
        say_stream_end(p, KDP__ST_INTERNAL, strerror(-r), kl_cap_count(p->k, p->resource));
        p->state = KL_ENDED;
    }
}

static bool take_options(kl_plugin *p, const uint8_t *resp, size_t len)
{
    V1beta1__DevicePluginOptions *m = v1beta1__device_plugin_options__unpack(NULL, len, resp);
    if (!m) {
        return false;
    }
    p->pre_start = m->pre_start_required;
    p->preferred = m->get_preferred_allocation_available;
    v1beta1__device_plugin_options__free_unpacked(m, NULL);
    return true;
}

static void on_options(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    kl_plugin *p = ud;
    p->dial = NULL;
    p->dialed_us = kdp__now_us();
    kc_buf msg = {0};
    if (status != KDP__ST_OK && strncmp(message, "connect ", 8) == 0) {
        kc_buf_printf(&msg, "failed to dial device plugin: %s", message);
    } else if (status != KDP__ST_OK) {
        kc_buf_printf(&msg, "failed to get device plugin options: rpc error: code = %s desc = %s",
                      kl_go_code(status), message);
    } else if (!take_options(p, resp, len)) {
        kc_buf_puts(&msg, "failed to get device plugin options: cannot decode the answer");
    }
    if (msg.len || msg.failed) {
        reject_plugin(p, msg.failed ? "failed to get device plugin options" : msg.s);
        kc_buf_free(&msg);
        return;
    }
    if (p->reg) {
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        kdp__call_set_cancel(p->reg, NULL, NULL);
        (void)kdp__call_reply_pb(p->reg, &empty.base);
        p->reg = NULL;
    }
    p->state = KL_ACTIVE;
    take_resource(p);
    say_registered(p);
    kl_registered(p->k, p);
    open_stream(p);
    if (p->via_watcher) {
        kl_watcher_connected(p->k, p, NULL);
    }
}

static kl_plugin *plugin_new(kl *k, const V1beta1__RegisterRequest *r)
{
    kl_plugin *p = calloc(1, sizeof(*p));
    if (!p) {
        return NULL;
    }
    p->k = k;
    kdp__devtab_init(&p->tab);
    p->resource = strdup(r->resource_name);
    p->endpoint = strdup(r->endpoint);
    p->version = strdup(r->version);
    size_t n = strlen(k->o->dir);
    bool slash = n > 0 && k->o->dir[n - 1] == '/';
    if (asprintf(&p->socket, "%s%s%s", k->o->dir, slash ? "" : "/", r->endpoint) < 0) {
        p->socket = NULL;
    }
    p->req_has_options = r->options != NULL;
    p->req_pre_start = r->options && r->options->pre_start_required;
    p->req_preferred = r->options && r->options->get_preferred_allocation_available;
    p->next = k->plugins;
    k->plugins = p;
    if (!p->resource || !p->endpoint || !p->version || !p->socket) {
        kl_plugin_free(p);
        return NULL;
    }
    return p;
}

int kl_connect_watcher(kl *k, const char *resource, const char *endpoint, const char *reg_socket,
                       uint64_t arrived_us)
{
    V1beta1__RegisterRequest r = V1BETA1__REGISTER_REQUEST__INIT;
    r.resource_name = (char *)resource;
    r.endpoint = (char *)endpoint;
    r.version = (char *)KL_API_VERSION;
    kl_plugin *p = plugin_new(k, &r);
    if (!p) {
        return -ENOMEM;
    }
    p->via_watcher = true;
    free(p->socket);
    p->socket = strdup(endpoint); /* dialled as is, like the device manager's handler */
    p->reg_socket = strdup(reg_socket);
    if (!p->socket || !p->reg_socket) {
        kl_plugin_free(p);
        return -ENOMEM;
    }
    p->arrived_us = arrived_us;
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    kdp__unary_opts opts = {.timeout_us = KL_DIAL_TIMEOUT};
    int e = kdp__client_unary_pb(k->loop, p->socket, KC_METHOD_OPTIONS, &empty.base, &opts,
                                 on_options, p, &p->dial);
    if (e < 0) {
        kl_plugin_free(p);
    }
    return e;
}

/* Holds Register and dials the plugin back. */
static void dial_back(kl *k, kdp__call *call, const V1beta1__RegisterRequest *r, uint64_t now)
{
    kl_plugin *p = plugin_new(k, r);
    if (!p) {
        reject(k, call, r, KDP__ST_RESOURCE_EXHAUSTED, "out of memory", NULL);
        return;
    }
    p->arrived_us = now;
    p->reg = call;
    kdp__call_set_cancel(call, on_register_cancel, p);
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    kdp__unary_opts opts = {.timeout_us = KL_DIAL_TIMEOUT};
    int e = kdp__client_unary_pb(k->loop, p->socket, KC_METHOD_OPTIONS, &empty.base, &opts,
                                 on_options, p, &p->dial);
    if (e < 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "failed to dial device plugin: %s", strerror(-e));
        reject_plugin(p, msg);
    }
}

void kl_on_register(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    kl *k = ud;
    uint64_t now = kdp__now_us();
    V1beta1__RegisterRequest *r = v1beta1__register_request__unpack(NULL, len, req);
    if (!r) {
        reject(k, call, NULL, KDP__ST_INTERNAL,
               "grpc: error unmarshalling request: not a RegisterRequest", NULL);
        return;
    }
    kc_buf msg = {0};
    const char *why = NULL;
    if (strcmp(r->version, KL_API_VERSION) != 0) {
        kc_buf_puts(&msg, "requested API version ");
        kl_go_quote(&msg, r->version);
        kc_buf_puts(&msg,
                    " is not supported by kubelet. Supported version is [\"" KL_API_VERSION "\"]");
    } else if (kdp__validate_resource_name(r->resource_name, &why) < 0) {
        kc_buf_puts(&msg, "the ResourceName ");
        kl_go_quote(&msg, r->resource_name);
        kc_buf_puts(&msg, " is invalid");
    }
    if (msg.len || msg.failed) {
        reject(k, call, r, KDP__ST_UNKNOWN, msg.failed ? "invalid registration" : msg.s, why);
    } else {
        dial_back(k, call, r, now);
    }
    kc_buf_free(&msg);
    v1beta1__register_request__free_unpacked(r, NULL);
}
