/* SPDX-License-Identifier: MIT */
/* commands: options, list, watch, preferred and prestart against one plugin
 * socket (allocate is in allocate.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "devlist.h"
#include "grpc/client.h"
#include "grpc/wire.h"
#include "kdpctl.h"
#include "print.h"
#include "rpc.h"

/* ---- options ---- */

int kc_cmd_options(const kc_opts *o)
{
    char *path = kc_socket_path(o, o->pos.v[0]);
    if (!path) {
        return kc_fail_errno(o, "socket path", -ENOMEM);
    }
    V1beta1__Empty req = V1BETA1__EMPTY__INIT;
    kc_reply rep;
    int e = kc_call_plugin(o, path, KC_METHOD_OPTIONS, &req.base, &rep);
    free(path);
    if (e != KC_EXIT_OK) {
        return e;
    }
    V1beta1__DevicePluginOptions *m =
        v1beta1__device_plugin_options__unpack(NULL, rep.len, rep.resp);
    kc_reply_free(&rep);
    if (!m) {
        return kc_fail_decode(o, "DevicePluginOptions");
    }
    if (o->json) {
        kc_json j;
        kc_json_begin(&j);
        kc_json_bool(&j, "pre_start_required", m->pre_start_required);
        kc_json_bool(&j, "get_preferred_allocation_available",
                     m->get_preferred_allocation_available);
        kc_json_emit(&j);
    } else {
        printf("pre_start_required                  %s\n"
               "get_preferred_allocation_available  %s\n",
               m->pre_start_required ? "true" : "false",
               m->get_preferred_allocation_available ? "true" : "false");
    }
    v1beta1__device_plugin_options__free_unpacked(m, NULL);
    return KC_EXIT_OK;
}

/* ---- list and watch: one ListAndWatch stream ---- */

typedef struct watch {
    const kc_opts *o;
    const char *path;
    bool list; /* `list`: the first message as a table, then stop */
    kdp__loop *loop;
    kdp__client_call *call;
    kdp__timer *timer;
    kdp__signal *sig[2];
    kdp__devtab tab;
    long seq;
    kc_call call_info; /* the stream has no deadline of kdpctl's: timeout_us 0 */
    int exit;          /* -1 while running */
} watch;

static void print_list(const watch *w)
{
    if (w->o->json) {
        kc_json j;
        kc_json_begin(&j);
        kc_devices_json(&j, &w->tab);
        kc_json_emit(&j);
        return;
    }
    kc_buf out = {0};
    kc_devices_table(&out, &w->tab, "");
    kc_devices_summary(&out, &w->tab);
    kc_buf_puts(&out, "\n");
    (void)kc_buf_write(&out, stdout);
    kc_buf_free(&out);
}

static void print_update(const watch *w, const kdp__devtab *old)
{
    if (w->o->json) {
        kc_json j;
        kc_json_begin(&j);
        kc_json_str(&j, "event", "devices");
        kc_json_int(&j, "seq", w->seq);
        kc_json_uint(&j, "t_ns", kc_wall_ns());
        kc_devices_json(&j, &w->tab);
        kc_changes_json(&j, old, &w->tab);
        kc_json_emit(&j);
        return;
    }
    char clock[32];
    kc_buf out = {0};
    kc_buf_printf(&out, "%s #%ld ", kc_clock(clock, sizeof(clock)), w->seq);
    kc_devices_summary(&out, &w->tab);
    kc_buf_puts(&out, "\n");
    if (kc_changes_text(&out, old, &w->tab, "  ") == 0) {
        kc_buf_puts(&out, "  (the same devices again)\n");
    }
    (void)kc_buf_write(&out, stdout);
    kc_buf_free(&out);
}

static void watch_stop(watch *w, int exit_status)
{
    if (w->exit < 0) {
        w->exit = exit_status;
    }
    kdp__client_call_cancel(w->call); /* also from on_msg: freed from the loop */
    w->call = NULL;
    kdp__loop_quit(w->loop);
}

static void on_list_msg(const uint8_t *msg, size_t len, void *ud)
{
    watch *w = ud;
    kdp__devtab old;
    kdp__devtab_init(&old);
    kdp__devtab_move(&old, &w->tab);
    kc_buf warn = {0};
    int r = kc_devtab_decode(msg, len, &w->tab, &warn);
    kc_print_warnings(w->o->cmd, &warn);
    kc_buf_free(&warn);
    if (r < 0) {
        kdp__devtab_clear(&old);
        watch_stop(w, r == -EBADMSG ? kc_fail_decode(w->o, "ListAndWatchResponse")
                                    : kc_fail_errno(w->o, "device list", r));
        return;
    }
    w->seq++;
    if (w->list) {
        print_list(w);
    } else {
        print_update(w, &old);
    }
    kdp__devtab_clear(&old);
    if (w->o->count > 0 && w->seq >= w->o->count) {
        watch_stop(w, KC_EXIT_OK);
    }
}

static void on_list_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)resp;
    (void)len;
    watch *w = ud;
    w->call = NULL; /* freed by the client when this returns */
    char msg[600];
    if (w->seq == 0 && status != KDP__ST_OK) {
        snprintf(msg, sizeof(msg), "%s", message);
    } else {
        snprintf(msg, sizeof(msg), "the ListAndWatch stream ended after %ld message%s%s%s", w->seq,
                 w->seq == 1 ? "" : "s", *message ? ": " : "", message);
    }
    bool early = w->list || w->o->count > 0;
    if (status == KDP__ST_OK && !early) {
        watch_stop(w, KC_EXIT_OK);
        return;
    }
    if (status == KDP__ST_OK) {
        /* Not a failure the client saw: the plugin ended the stream. */
        kc_print_error(w->o->json, w->o->cmd, kdp__status_name(KDP__ST_UNKNOWN), KDP__ST_UNKNOWN,
                       msg,
                       "the plugin ended the stream itself (status OK) while kdpctl waited for "
                       "more: a kubelet would count its devices unhealthy until it registers "
                       "again");
        watch_stop(w, KC_EXIT_FAIL);
        return;
    }
    w->call_info.elapsed_us = kdp__now_us() - w->call_info.start_us;
    watch_stop(w, kc_fail_call(w->o, &w->call_info, status, message, msg));
}

static void on_watch_timeout(kdp__timer *t, void *ud)
{
    (void)t;
    watch *w = ud;
    char d[32];
    char msg[256];
    kc_format_duration(w->o->timeout_us ? w->o->timeout_us : KC_DEFAULT_TIMEOUT, d, sizeof(d));
    if (!w->list && w->o->count <= 0) {
        watch_stop(w, KC_EXIT_OK); /* --timeout alone: watch for that long */
        return;
    }
    snprintf(msg, sizeof(msg), "%ld of %ld ListAndWatch message%s within %s", w->seq,
             w->list ? 1 : w->o->count, w->o->count == 1 || w->list ? "" : "s", d);
    const char *hint =
        w->seq == 0 ? "kdpctl's --timeout fired before the plugin sent a device list, which a "
                      "plugin sends as soon as the stream opens: is the plugin stuck, or is this "
                      "not a gRPC server?"
                    : "kdpctl's --timeout fired: a plugin sends a new device list only when its "
                      "devices change; a longer --timeout, or a smaller --count";
    kc_print_error(w->o->json, w->o->cmd, kdp__status_name(KDP__ST_DEADLINE_EXCEEDED),
                   KDP__ST_DEADLINE_EXCEEDED, msg, hint);
    watch_stop(w, KC_EXIT_FAIL);
}

static void on_watch_signal(kdp__signal *s, int signo, void *ud)
{
    (void)s;
    (void)signo;
    watch_stop(ud, KC_EXIT_OK);
}

static int watch_start(watch *w)
{
    int r = kdp__loop_new(&w->loop);
    const int signals[2] = {SIGINT, SIGTERM};
    for (int i = 0; r == 0 && i < 2; i++) {
        r = kdp__signal_add(w->loop, signals[i], on_watch_signal, w, &w->sig[i]);
    }
    if (r == 0) {
        r = kdp__timer_new(w->loop, on_watch_timeout, w, &w->timer);
    }
    if (r < 0) {
        return r;
    }
    uint64_t tmo = w->o->timeout_us;
    if (w->list && !tmo) {
        tmo = KC_DEFAULT_TIMEOUT;
    }
    if (tmo) {
        kdp__timer_start(w->timer, tmo);
    }
    /* The kubelet's own receive limit, so an oversized list fails here too. */
    kdp__unary_opts opts = {.max_recv = KC_KUBELET_MAX_RECV};
    V1beta1__Empty req = V1BETA1__EMPTY__INIT;
    uint8_t buf[8];
    size_t len = protobuf_c_message_pack(&req.base, buf);
    kc_call_begin(&w->call_info, w->path, 0);
    return kdp__client_stream(w->loop, w->path, KC_METHOD_LIST_AND_WATCH, buf, len, &opts,
                              on_list_msg, on_list_done, w, &w->call);
}

static int run_stream(const kc_opts *o, bool list)
{
    char *path = kc_socket_path(o, o->pos.v[0]);
    watch w = {.o = o, .path = path, .list = list, .exit = -1};
    kdp__devtab_init(&w.tab);
    int r = path ? watch_start(&w) : -ENOMEM;
    if (r == 0) {
        r = kdp__loop_run(w.loop);
    }
    kdp__client_call_cancel(w.call);
    kdp__timer_free(w.timer);
    kdp__signal_free(w.sig[0]);
    kdp__signal_free(w.sig[1]);
    if (w.loop) {
        kc_loop_drain(w.loop);
    }
    kdp__loop_free(w.loop);
    kdp__devtab_clear(&w.tab);
    free(path);
    if (r < 0 && w.exit < 0) {
        return kc_fail_errno(o, "cannot watch", r);
    }
    return w.exit < 0 ? KC_EXIT_FAIL : w.exit;
}

int kc_cmd_list(const kc_opts *o)
{
    kc_opts lo = *o;
    lo.count = 1;
    return run_stream(&lo, true);
}

int kc_cmd_watch(const kc_opts *o)
{
    return run_stream(o, false);
}

/* ---- prestart ---- */

int kc_cmd_prestart(const kc_opts *o)
{
    kc_strv ids = {0};
    int r = 0;
    for (size_t i = 1; r == 0 && i < o->pos.n; i++) {
        kc_strv part;
        r = kc_split_ids(o->pos.v[i], &part);
        for (size_t k = 0; r == 0 && k < part.n; k++) {
            r = kc_strv_add(&ids, part.v[k]);
        }
        kc_strv_free(&part);
    }
    char *path = r == 0 ? kc_socket_path(o, o->pos.v[0]) : NULL;
    if (!path) {
        kc_strv_free(&ids);
        return kc_fail_errno(o, "arguments", -ENOMEM);
    }
    V1beta1__PreStartContainerRequest req = V1BETA1__PRE_START_CONTAINER_REQUEST__INIT;
    req.devices_ids = ids.v;
    req.n_devices_ids = ids.n;
    kc_reply rep;
    int e = kc_call_plugin(o, path, KC_METHOD_PRESTART, &req.base, &rep);
    free(path);
    if (e == KC_EXIT_OK) {
        kc_reply_free(&rep);
        if (o->json) {
            kc_json j;
            kc_json_begin(&j);
            kc_json_bool(&j, "ok", true);
            kc_json_arr(&j, "ids");
            for (size_t i = 0; i < ids.n; i++) {
                kc_json_str(&j, NULL, ids.v[i]);
            }
            kc_json_emit(&j);
        } else {
            kc_buf out = {0};
            kc_buf_printf(&out, "PreStartContainer OK for %zu device%s\n", ids.n,
                          ids.n == 1 ? "" : "s");
            (void)kc_buf_write(&out, stdout);
            kc_buf_free(&out);
        }
    }
    kc_strv_free(&ids);
    return e;
}

/* ---- preferred ---- */

/* The first (only) container's answer: the request has one container. */
static void print_preferred(const kc_opts *o, const V1beta1__PreferredAllocationResponse *m)
{
    const V1beta1__ContainerPreferredAllocationResponse *cr =
        m->n_container_responses ? m->container_responses[0] : NULL;
    size_t n = cr ? cr->n_deviceids : 0;
    if (o->json) {
        kc_json j;
        kc_json_begin(&j);
        kc_json_arr(&j, "preferred");
        for (size_t i = 0; i < n; i++) {
            kc_json_str(&j, NULL, cr->deviceids[i]);
        }
        kc_json_emit(&j);
        return;
    }
    kc_buf out = {0};
    kc_buf_puts(&out, "preferred:");
    for (size_t i = 0; i < n; i++) {
        kc_buf_puts(&out, i ? ", " : " ");
        kc_buf_safe(&out, cr->deviceids[i]);
    }
    kc_buf_puts(&out, n ? "\n" : " (none)\n");
    (void)kc_buf_write(&out, stdout);
    kc_buf_free(&out);
}

static int preferred_call(const kc_opts *o, const char *path, kc_strv *avail, kc_strv *must)
{
    V1beta1__ContainerPreferredAllocationRequest cr =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    cr.available_deviceids = avail->v;
    cr.n_available_deviceids = avail->n;
    cr.must_include_deviceids = must->v;
    cr.n_must_include_deviceids = must->n;
    cr.allocation_size = (int32_t)o->size;
    V1beta1__ContainerPreferredAllocationRequest *crs[1] = {&cr};
    V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    req.container_requests = crs;
    req.n_container_requests = 1;
    kc_reply rep;
    int e = kc_call_plugin(o, path, KC_METHOD_PREFERRED, &req.base, &rep);
    if (e != KC_EXIT_OK) {
        return e;
    }
    V1beta1__PreferredAllocationResponse *m =
        v1beta1__preferred_allocation_response__unpack(NULL, rep.len, rep.resp);
    kc_reply_free(&rep);
    if (!m) {
        return kc_fail_decode(o, "PreferredAllocationResponse");
    }
    print_preferred(o, m);
    e = m->n_container_responses == 1 ? KC_EXIT_OK : KC_EXIT_FAIL;
    if (e != KC_EXIT_OK) {
        char msg[200];
        snprintf(msg, sizeof(msg), "%zu container responses to 1 container request",
                 m->n_container_responses);
        kc_print_error(o->json, o->cmd, NULL, 0, msg, "the plugin must answer each request");
    }
    v1beta1__preferred_allocation_response__free_unpacked(m, NULL);
    return e;
}

int kc_cmd_preferred(const kc_opts *o)
{
    kc_strv avail = {0};
    kc_strv must = {0};
    int r = kc_split_ids(o->available, &avail);
    if (r == 0 && o->must_include) {
        r = kc_split_ids(o->must_include, &must);
    }
    char *path = r == 0 ? kc_socket_path(o, o->pos.v[0]) : NULL;
    int e = path ? preferred_call(o, path, &avail, &must) : kc_fail_errno(o, "arguments", -ENOMEM);
    free(path);
    kc_strv_free(&avail);
    kc_strv_free(&must);
    return e;
}
