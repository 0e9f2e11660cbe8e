/* SPDX-License-Identifier: MIT */
#include "plugin/reg_kubelet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/list.h"
#include "base/log.h"
#include "grpc/wire.h"
#include "kdp.h"
#include "runtime/watch.h"

#define REGISTER_TIMEOUT_US (30ULL * 1000000ULL)
#define WAIT_FALLBACK_US    (30ULL * 1000000ULL) /* kubelet.sock re-checked this often */
#define FAST_RETRIES        5U
#define FAST_RETRY_US       1000U /* kubelet.sock exists but is not listening yet */

#define OF(r) KDP__CONTAINER_OF(r, kdp__reg_kubelet, base)

static void do_register(kdp__reg_kubelet *k);

static void set_state(kdp__reg_kubelet *k, kdp__reg_state st, const char *why)
{
    k->state = st;
    k->base.up.state(k->base.up.ud, st, why);
}

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__reg_kubelet *k = ud;
    if (k->active) {
        do_register(k);
    }
}

static void on_registered(int status, const char *message, const uint8_t *resp, size_t len,
                          void *ud)
{
    (void)resp;
    (void)len;
    kdp__reg_kubelet *k = ud;
    k->call = NULL;
    if (!k->active || k->state != KDP__REG_REGISTERING) {
        return;
    }
    if (status == KDP__ST_OK) {
        k->fast_retries = 0;
        kdp__backoff_reset(&k->backoff);
        log_info("%s: registered with the kubelet (endpoint %s)", k->resource, k->endpoint);
        set_state(k, KDP__REG_REGISTERED, "Register OK");
        return;
    }
    if (!k->base.up.socket_intact(k->base.up.ud)) {
        k->base.up.restart(k->base.up.ud, "Register failed and our socket is gone");
        return;
    }
    if (k->creates != k->reg_creates) {
        /* A restarting kubelet: this attempt reached the old (stale)
         * kubelet.sock and a new one has appeared since (possibly with the
         * same inode, so the watch could not tell): try it now, not after a
         * backoff. Bounded: each retry needs another creation. */
        log_info("%s: Register failed (%s) but %s was re-created since: registering again",
                 k->resource, message, KDP_KUBELET_SOCKET);
        kdp__backoff_reset(&k->backoff);
        do_register(k);
        return;
    }
    if (k->base.up.failed) { /* counted, and said by /healthz until a success */
        char why[300];
        snprintf(why, sizeof(why), "%s: %s", kdp__status_name(status), message ? message : "");
        k->base.up.failed(k->base.up.ud, why);
    }
    /* kubelet.sock appears at bind(), a moment before listen(): a connect in
     * between is refused. Right after the file appeared, retry at once. */
    uint64_t delay = k->fast_retries > 0 ? FAST_RETRY_US : kdp__backoff_next(&k->backoff);
    if (k->fast_retries > 0) {
        k->fast_retries--;
        log_debug("%s: Register refused right after kubelet.sock appeared: %s; retrying",
                  k->resource, message);
    } else {
        log_warn("%s: Register failed: %s: %s; retrying in %llu ms", k->resource,
                 kdp__status_name(status), message, (unsigned long long)(delay / 1000));
    }
    k->base.up.attempt(k->base.up.ud, false);
    kdp__timer_start(k->retry, delay);
}

static void do_register(kdp__reg_kubelet *k)
{
    struct stat st;
    if (stat(k->kubelet_path, &st) < 0) {
        if (k->state != KDP__REG_WAITING) {
            log_info("%s: waiting for the kubelet (%s does not exist yet)", k->resource,
                     k->kubelet_path);
        }
        kdp__timer_start(k->retry, WAIT_FALLBACK_US);
        set_state(k, KDP__REG_WAITING, "kubelet.sock does not exist");
        return;
    }
    kdp__timer_stop(k->retry);
    k->kubelet_ino = st.st_ino;
    k->kubelet_ctime = st.st_ctim;
    k->reg_creates = k->creates;
    set_state(k, KDP__REG_REGISTERING, "Register");
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    k->options(k->options_ud, &opts);
    V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
    req.version = (char *)KDP_KUBELET_API_VERSION;
    req.endpoint = (char *)k->endpoint;
    req.resource_name = (char *)k->resource;
    req.options = &opts;
    kdp__unary_opts o = {.timeout_us = REGISTER_TIMEOUT_US};
    k->base.up.attempt(k->base.up.ud, true);
    int r = kdp__client_unary_pb(k->loop, k->kubelet_path, "/v1beta1.Registration/Register",
                                 &req.base, &o, on_registered, k, &k->call);
    if (r < 0) {
        log_error("%s: cannot start Register: %s", k->resource, strerror(-r));
        if (k->base.up.failed) {
            k->base.up.failed(k->base.up.ud, strerror(-r));
        }
        k->base.up.attempt(k->base.up.ud, false);
        kdp__timer_start(k->retry, kdp__backoff_next(&k->backoff));
    }
}

static void op_start(kdp__reg *r)
{
    kdp__reg_kubelet *k = OF(r);
    k->active = true;
    k->state = KDP__REG_REGISTERING; /* not WAITING: "waiting for the kubelet" is said once */
    do_register(k);
}

static void op_stop(kdp__reg *r)
{
    kdp__reg_kubelet *k = OF(r);
    k->active = false;
    kdp__client_call_cancel(k->call);
    k->call = NULL;
    kdp__timer_stop(k->retry);
}

static void op_dir_event(kdp__reg *r, int what, const char *name)
{
    kdp__reg_kubelet *k = OF(r);
    if (what != KDP__WATCH_CREATED || !name || strcmp(name, KDP_KUBELET_SOCKET) != 0) {
        return;
    }
    k->creates++; /* counted in every state: see on_registered() */
    /* also while (re)starting: the Register that follows may hit the bind
     * -> listen gap */
    k->fast_retries = FAST_RETRIES;
    if (!k->active) {
        k->base.up.peer_appeared(k->base.up.ud);
        return;
    }
    struct stat st;
    if (k->state == KDP__REG_WAITING || (k->state == KDP__REG_REGISTERING && !k->call)) {
        log_info("%s: %s appeared: registering", k->resource, KDP_KUBELET_SOCKET);
        kdp__backoff_reset(&k->backoff);
        do_register(k);
    } else if (stat(k->kubelet_path, &st) == 0 && st.st_ino != k->kubelet_ino) {
        k->base.up.restart(k->base.up.ud, "kubelet.sock was re-created (the kubelet restarted)");
    }
}

/* The kubelet we registered with is still there: its kubelet.sock exists,
 * the very file it was at our last Register (inode and change time: an
 * inode number comes back at once on tmpfs, and the change time is coarse),
 * and was not created again since. */
static bool op_same_peer(kdp__reg *r)
{
    kdp__reg_kubelet *k = OF(r);
    struct stat st;
    return k->kubelet_ino && stat(k->kubelet_path, &st) == 0 && st.st_ino == k->kubelet_ino &&
           st.st_ctim.tv_sec == k->kubelet_ctime.tv_sec &&
           st.st_ctim.tv_nsec == k->kubelet_ctime.tv_nsec && k->creates == k->reg_creates;
}

static const kdp__reg_ops ops = {
    .name = "kubelet.sock",
    .start = op_start,
    .stop = op_stop,
    .dir_event = op_dir_event,
    .same_peer = op_same_peer,
};

int kdp__reg_kubelet_init(kdp__reg_kubelet *k, kdp__loop *l, const char *dir, const char *endpoint,
                          const char *resource, kdp__reg_options_fn options, void *options_ud,
                          const kdp__reg_up *up)
{
    memset(k, 0, sizeof(*k));
    k->base.ops = &ops;
    k->base.up = *up;
    k->loop = l;
    k->resource = resource;
    k->endpoint = endpoint;
    k->options = options;
    k->options_ud = options_ud;
    kdp__backoff_init(&k->backoff, 50000, 10000000, 0);
    size_t n = strlen(dir);
    bool slash = n > 0 && dir[n - 1] == '/';
    if (asprintf(&k->kubelet_path, "%s%s%s", dir, slash ? "" : "/", KDP_KUBELET_SOCKET) < 0) {
        k->kubelet_path = NULL;
        return -ENOMEM;
    }
    return kdp__timer_new(l, on_retry, k, &k->retry);
}

void kdp__reg_kubelet_done(kdp__reg_kubelet *k)
{
    op_stop(&k->base);
    kdp__timer_free(k->retry);
    k->retry = NULL;
    free(k->kubelet_path);
    k->kubelet_path = NULL;
}
