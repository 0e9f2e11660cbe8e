/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the DRA driver's kubelet-facing services end to end:
 * a REAL plugin with DRA enabled (kdp_plugin_new + kdp_plugin_enable_dra,
 * DRA only, serving its service socket in a temp kubelet root; its API
 * server is a closed port, so every claim read fails at once) gets the input
 * as one request through kdp's own gRPC client, decoded and dispatched by
 * src/dra/claimsvc.c, claimops.c and health.c, the author's callbacks on
 * the DRA side's worker.
 *
 * Input: byte 0 = flags, then the request message.
 *   bits 0-2 method: 0 v1 NodePrepareResources, 1 v1 NodeUnprepareResources,
 *            2 v1beta1 NodePrepareResources, 3 v1beta1 NodeUnprepareResources,
 *            4 and 6 v1alpha1 NodeWatchResources (the first message read,
 *            then the call cancelled), 5 and 7 a method the driver lacks;
 *   bit 3    grpc-timeout of 1 ms (any call may then end DEADLINE_EXCEEDED).
 *
 * Checked (without the timeout): an undecodable request gets
 * INVALID_ARGUMENT; a decodable one gets OK with a map entry for every
 * claim UID of the request and for no other (more than 1024 claims:
 * RESOURCE_EXHAUSTED); a prepare's entries all carry an error
 * and no device (no claim can be read: the API server is unreachable, or the
 * claim's UID is empty or not one kdp takes, 1-128 of [A-Za-z0-9._-] not
 * starting with '.': UIDs name files); an unprepare's entry has no error
 * when its UID is one kdp takes (kdp never prepared it: nothing to undo)
 * and one when it is not; NodeWatchResources with a decodable request gets a first message
 * listing the three devices of the table in the node's pool (described
 * before the first input), dev-1
 * UNHEALTHY and the others HEALTHY (undecodable: INVALID_ARGUMENT); an
 * unknown method gets UNIMPLEMENTED. Every call ends within 5 s, and nothing
 * the driver logs holds a control character (no forged log lines).
 */
#include <errno.h>
#include <kdp_dra.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/safetext.h"
#include "dra_health.pb-c.h"
#include "dra_v1.pb-c.h"
#include "grpc/client.h"
#include "grpc/wire.h"
#include "plugin/ctx.h"
#include "runtime/loop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "fuzz_dra_rpc: check failed: %s (line %d)\n", #x, __LINE__);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define DRIVER  "fuzz.example.com"
#define NODE    "node-a"
#define CALL_US (5ULL * 1000000ULL)
/* The most claims the driver takes in one call (src/dra/prepare.c). */
#define MAX_KEYS 1024

static char dir[64];
static char svc_path[160];
static kdp_ctx *ctx;
static kdp_plugin *plugin;

static const char *const paths[8] = {
    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources",
    "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
    "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodeUnprepareResources",
    "/v1alpha1.DRAResourceHealth/NodeWatchResources",
    "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeFrobnicate",
    "/v1alpha1.DRAResourceHealth/NodeWatchResources",
    "/k8s.io.kubelet.pkg.apis.dra.v9.DRAPlugin/NodePrepareResources",
};

static void check_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    /* no forged, hidden or reordered text: controls, line separators and
     * bidi controls escaped, valid UTF-8 (base/safetext) */
    CHECK(kdp__safetext_clean(msg));
}

static int prepare(kdp_plugin *p, const kdp_dra_claim *c, kdp_dra_prepared *out, void *ud)
{
    (void)p;
    (void)c;
    (void)out;
    (void)ud;
    CHECK(!"prepare op called although no claim can be read");
    return -EIO;
}

static int unprepare(kdp_plugin *p, const kdp_dra_claim *c, void *ud)
{
    (void)p;
    (void)c;
    (void)ud;
    CHECK(!"unprepare op called although nothing was prepared");
    return -EIO;
}

static void cleanup(void)
{
    kdp_ctx_free(ctx);
}

static void run_once(int timeout_ms)
{
    struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
    (void)poll(&pfd, 1, timeout_ms);
    CHECK(kdp_ctx_dispatch(ctx) == 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void init(void)
{
    kdp_log_set(KDP_LOG_DEBUG, check_log, NULL);
    snprintf(dir, sizeof(dir), "/tmp/kdpfd-XXXXXX");
    CHECK(mkdtemp(dir));
    char p[160];
    static const char *const sub[] = {"plugins_registry", "plugins", "cdi", "state"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, sub[i]);
        CHECK(mkdir(p, 0700) == 0);
    }
    char kubeconfig[160];
    snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", dir);
    /* port 1 on the loopback: refused at once */
    write_file(kubeconfig, "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                           "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\n"
                           "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                           "users:\n- name: u\n  user: {token: fuzz}\n");
    unsetenv("POD_UID");
    unsetenv("KDP_INSTANCE");
    unsetenv("KUBECONFIG");
    CHECK(kdp_ctx_new(&ctx) == 0);
    kdp_config cfg = {.resource_name = "fuzz.test/dra",
                      .socket_name = "dra.sock",
                      .kubelet_root = dir,
                      .callback_timeout_ms = 2000};
    static const kdp_ops ops = {0};
    CHECK(kdp_plugin_new(ctx, &cfg, &ops, NULL, &plugin) == 0);
    const kdp_device devs[] = {
        {.id = "dev-0", .health = KDP_HEALTHY},
        {.id = "dev-1", .health = KDP_UNHEALTHY},
        {.id = "dev-2", .health = KDP_HEALTHY, .host_path = "/dev/null"},
    };
    CHECK(kdp_plugin_set_devices(plugin, devs, 3) == 0);
    char state[160];
    char cdi[160];
    snprintf(state, sizeof(state), "%s/state", dir);
    snprintf(cdi, sizeof(cdi), "%s/cdi", dir);
    kdp_dra_config dc = {.driver_name = DRIVER,
                         .node_name = NODE,
                         .kubeconfig = kubeconfig,
                         .state_dir = state,
                         .cdi_dir = cdi};
    kdp_dra_ops dops = {.prepare = prepare, .unprepare = unprepare};
    CHECK(kdp_plugin_enable_dra(plugin, &dc, &dops) == 0);
    atexit(cleanup);
    snprintf(svc_path, sizeof(svc_path), "%s/plugins/%s/dra.sock", dir, DRIVER);
    uint64_t start = kdp__now_us();
    struct stat st;
    kdp_dra_status ds = {0};
    /* serving, and the three devices described (the health stream lists
     * the pool's devices: the described ones) */
    while (stat(svc_path, &st) != 0 || kdp_plugin_get_dra_status(plugin, &ds) < 0 ||
           ds.devices != 3) {
        CHECK(kdp__now_us() - start < CALL_US);
        run_once(1);
    }
}

/* ---- one call ---- */

typedef struct outcome {
    bool done;
    int status;
    uint8_t *resp;
    size_t resp_len;
    bool got_msg;
    kdp__client_call *call;
} outcome;

static void on_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    outcome *o = ud;
    CHECK(!o->done && message);
    o->done = true;
    o->status = status;
    o->call = NULL;
    if (resp) {
        o->resp = malloc(len ? len : 1);
        CHECK(o->resp);
        memcpy(o->resp, resp, len);
        o->resp_len = len;
    }
}

static void check_health(const uint8_t *msg, size_t len)
{
    V1alpha1__NodeWatchResourcesResponse *m =
        v1alpha1__node_watch_resources_response__unpack(NULL, len, msg);
    CHECK(m && m->n_devices == 3);
    for (size_t i = 0; i < m->n_devices; i++) {
        const V1alpha1__DeviceHealth *h = m->devices[i];
        CHECK(h->device && strcmp(h->device->pool_name, NODE) == 0);
        bool sick = strcmp(h->device->device_name, "dev-1") == 0;
        CHECK(h->health ==
              (sick ? V1ALPHA1__HEALTH_STATUS__UNHEALTHY : V1ALPHA1__HEALTH_STATUS__HEALTHY));
    }
    v1alpha1__node_watch_resources_response__free_unpacked(m, NULL);
}

static void on_msg(const uint8_t *msg, size_t len, void *ud)
{
    outcome *o = ud;
    if (!o->got_msg) {
        check_health(msg, len);
    }
    o->got_msg = true;
}

/* The distinct strings of keys[0..n) (a request naming one UID twice gets
 * an entry for each claim: a map's last entry wins on the wire). */
static size_t distinct(const char *const *keys, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            seen = strcmp(keys[j], keys[i]) == 0;
        }
        d += !seen;
    }
    return d;
}

/* The UIDs the driver takes: 1-128 of [A-Za-z0-9._-], not starting with
 * '.' (they name files). */
static bool uid_ok(const char *uid)
{
    size_t n = strlen(uid);
    if (n == 0 || n > 128 || uid[0] == '.') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = uid[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.' || c == '_';
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* The distinct UIDs of the request's claims. */
static size_t
distinct_uids(const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_claims; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            seen = strcmp(r->claims[j]->uid, r->claims[i]->uid) == 0;
        }
        n += !seen;
    }
    return n;
}

static bool uid_in(const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *r,
                   const char *uid)
{
    for (size_t i = 0; i < r->n_claims; i++) {
        if (strcmp(r->claims[i]->uid, uid) == 0) {
            return true;
        }
    }
    return false;
}

static void check_answer(int method, const uint8_t *msg, size_t len, const outcome *o)
{
    if (method & 4) {
        if (method & 1) {
            CHECK(o->done && o->status == KDP__ST_UNIMPLEMENTED);
            return;
        }
        V1alpha1__NodeWatchResourcesRequest *w =
            v1alpha1__node_watch_resources_request__unpack(NULL, len, msg);
        CHECK(w ? o->got_msg : (o->done && o->status == KDP__ST_INVALID_ARGUMENT));
        v1alpha1__node_watch_resources_request__free_unpacked(w, NULL);
        return;
    }
    /* the request types of prepare and unprepare are the same on the wire */
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *req =
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, len,
                                                                                     msg);
    if (!req) {
        CHECK(o->status == KDP__ST_INVALID_ARGUMENT);
        return;
    }
    if (req->n_claims > MAX_KEYS) {
        CHECK(o->status == KDP__ST_RESOURCE_EXHAUSTED);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(req,
                                                                                            NULL);
        return;
    }
    CHECK(o->status == KDP__ST_OK && o->resp);
    bool unprepare = method & 1;
    size_t want = distinct_uids(req);
    if (unprepare) {
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse *r =
            k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__unpack(
                NULL, o->resp_len, o->resp);
        CHECK(r && r->n_claims >= want && r->n_claims <= MAX_KEYS);
        const char *keys[MAX_KEYS] = {0};
        for (size_t i = 0; i < r->n_claims; i++) {
            keys[i] = r->claims[i]->key;
        }
        CHECK(distinct(keys, r->n_claims) == want);
        for (size_t i = 0; i < r->n_claims; i++) {
            CHECK(uid_in(req, r->claims[i]->key) && r->claims[i]->value);
            bool failed = r->claims[i]->value->error[0] != '\0';
            CHECK(failed == !uid_ok(r->claims[i]->key));
        }
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(
            r, NULL);
    } else {
        K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse *r =
            k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__unpack(
                NULL, o->resp_len, o->resp);
        CHECK(r && r->n_claims >= want && r->n_claims <= MAX_KEYS);
        const char *keys[MAX_KEYS] = {0};
        for (size_t i = 0; i < r->n_claims; i++) {
            keys[i] = r->claims[i]->key;
        }
        CHECK(distinct(keys, r->n_claims) == want);
        for (size_t i = 0; i < r->n_claims; i++) {
            CHECK(uid_in(req, r->claims[i]->key) && r->claims[i]->value);
            CHECK(r->claims[i]->value->error[0] != '\0' && r->claims[i]->value->n_devices == 0);
        }
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(r,
                                                                                             NULL);
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(req, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        init();
    }
    if (size < 1) {
        return 0;
    }
    int method = data[0] & 7;
    bool timeout = data[0] & 8;
    const uint8_t *msg = data + 1;
    size_t len = size - 1;
    outcome o = {0};
    kdp__unary_opts opts = {.timeout_us = timeout ? 1000 : 0};
    int r;
    if (method == 4 || method == 6) {
        r = kdp__client_stream(ctx->loop, svc_path, paths[method], msg, len, &opts, on_msg, on_done,
                               &o, &o.call);
    } else {
        r = kdp__client_unary(ctx->loop, svc_path, paths[method], msg, len, &opts, on_done, &o,
                              &o.call);
    }
    CHECK(r == 0);
    uint64_t start = kdp__now_us();
    while (!o.done && !((method == 4 || method == 6) && o.got_msg)) {
        CHECK(kdp__now_us() - start < CALL_US);
        run_once(1);
    }
    if (!o.done) {
        kdp__client_call_cancel(o.call); /* a health stream, never ended by the driver */
    }
    if (!timeout) {
        check_answer(method, msg, len, &o);
    }
    free(o.resp);
    return 0;
}
