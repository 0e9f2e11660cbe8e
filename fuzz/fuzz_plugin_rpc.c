/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the device-plugin service end to end: three REAL
 * plugins (kdp_plugin_new on one kdp_ctx, each serving its socket in a temp
 * dir, no kubelet: they wait, serving) get the input as one request to one of
 * the v1beta1.DevicePlugin methods, decoded and dispatched by service.c, with
 * the user callbacks running on the plugins' worker threads.
 *
 *   plugin 0  "fuzz.test/none": no ops (default allocation, no preferred
 *             allocation, no pre-start);
 *   plugin 1  "fuzz.test/all": allocate, preferred and prestart ops that use
 *             every response builder with what the request carries;
 *   plugin 2  "fuzz.test/fail": ops that fail (every errno kdp maps, messages
 *             with control and non-ASCII bytes, a 5 ms callback deadline and
 *             an allocate that overruns it).
 *
 * Input: byte 0 = flags, then (raw mode) byte 1 = framing, then the message.
 *   bits 0-2 method: 0 GetDevicePluginOptions, 1 ListAndWatch,
 *            2 and 7 GetPreferredAllocation, 3 and 6 Allocate,
 *            4 PreStartContainer, 5 an unknown method;
 *   bits 3-4 plugin (3 = plugin 1 again);
 *   bit 5    raw mode: the request is framed here and written to the socket
 *            (see `framing`), the answer read and dropped; clear: kdp's own
 *            client makes the call and the answer is checked;
 *   bit 6    grpc-timeout of 1 ms (any call may then end DEADLINE_EXCEEDED);
 *   bit 7    device churn: the table changes during the call (a
 *            ListAndWatch call then waits for the second message).
 *   framing (raw mode): bits 0-2 DATA frame size (1, 3, 7, 16, 100, 1000,
 *            16384, 16384); bit 3 no END_STREAM (a half-open request);
 *            bit 4 RST_STREAM after the data; bit 5 the message is sent
 *            as is (its own 5-byte prefix, fuzzed), else a prefix is added;
 *            bit 6 the same request on a second stream; bit 7 hang up right
 *            after writing.
 *
 * Checked (client mode, no timeout, no churn): the status each request must
 * get (undecodable -> INVALID_ARGUMENT, unknown or unhealthy IDs ->
 * INVALID_ARGUMENT, no preferred op -> UNIMPLEMENTED, every errno the ops
 * return -> its status), one container response per container request, the
 * default env var, the options. In client mode: each ListAndWatch message
 * is the whole table (the base one, then with churn the churned one). In
 * every mode: the IDs a pre-start op gets are all in one table its plugin
 * has held (kdp checks them against the table of the moment, which the
 * churn may have changed); each connection is gone, with no call left
 * open, once the client has hung up; kdp's log lines carry no control
 * character. abort()s otherwise (a crash, a leak or a hang is a bug).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/safetext.h"
#include "deviceplugin.pb-c.h"
#include "grpc/client.h"
#include "grpc/server_int.h"
#include "grpc/wire.h"
#include "kdp.h"
#include "plugin/plugin_int.h"
#include "runtime/sock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            check_failed(__FILE__, __LINE__, #x);                                                  \
        }                                                                                          \
    } while (0)

#define N_PLUGINS    3
#define CALL_MAX_US  (20ULL * 1000000ULL) /* a call not over by then: a hang */
#define CLOSE_MAX_US (5ULL * 1000000ULL)
#define QUIET_MS     2
#define MAX_QUIET    100

enum { M_OPTIONS, M_LAW, M_PREFERRED, M_ALLOCATE, M_PRESTART, M_UNKNOWN };
static const int method_of[8] = {M_OPTIONS,  M_LAW,     M_PREFERRED, M_ALLOCATE,
                                 M_PRESTART, M_UNKNOWN, M_ALLOCATE,  M_PREFERRED};
static const char *const paths[] = {
    "/v1beta1.DevicePlugin/GetDevicePluginOptions", "/v1beta1.DevicePlugin/ListAndWatch",
    "/v1beta1.DevicePlugin/GetPreferredAllocation", "/v1beta1.DevicePlugin/Allocate",
    "/v1beta1.DevicePlugin/PreStartContainer",      "/v1beta1.DevicePlugin/Nope",
};

/* ---- failures on other threads ---- */

/* A CHECK that fails on the thread running the inputs (libFuzzer's main
 * thread) aborts at once. One that fails in an op, on a worker thread, must
 * not: libFuzzer's crash handler would run on the worker while its main
 * thread goes on, and save the input running when it gets there (maybe a
 * later one: kdp does not wait for an op whose call has ended); a second
 * failure meanwhile (libFuzzer's leak check runs the input again at once)
 * would kill the process with no input saved. So the failing op parks its
 * thread, and the input's thread, which waits for every op before the input
 * ends, aborts in the input that ran the op. (An op kdp took from its queue
 * just as its call ended may enter only after the input is over, if its
 * thread is descheduled in between: a rare failure then shows in a later
 * input.) */
static pthread_t input_thread;
static atomic_int ops_running;
void __sanitizer_print_stack_trace(void) __attribute__((weak)); /* none in plain builds */
static atomic_bool op_failed;

static _Noreturn void check_failed(const char *file, int line, const char *what)
{
    if (pthread_equal(pthread_self(), input_thread)) {
        fprintf(stderr, "%s:%d: CHECK(%s) failed\n", file, line, what);
        abort();
    }
    fprintf(stderr, "%s:%d: CHECK(%s) failed on a worker thread\n", file, line, what);
    if (__sanitizer_print_stack_trace) {
        __sanitizer_print_stack_trace(); /* the input's thread waits for the op */
    }
    atomic_store(&op_failed, true);
    for (;;) {
        pause(); /* kdp's workers block every signal */
    }
}

static void abort_if_an_op_failed(void)
{
    if (atomic_load(&op_failed)) {
        fprintf(stderr, "fuzz_plugin_rpc: an op failed (above): aborting in this input\n");
        abort();
    }
}

static void op_enter(void)
{
    atomic_fetch_add(&ops_running, 1);
}

static int op_leave(int r)
{
    atomic_fetch_sub(&ops_running, 1);
    return r;
}

static char dir[64];
static kdp_ctx *ctx;
static kdp_plugin *plugins[N_PLUGINS];
static char long_id[256];

/* ---- the devices ---- */

static const char *const healthy_ids[] = {"a", "b", "d", "e", "sleep", "pct%2F\"q", long_id};
#define N_HEALTHY (sizeof(healthy_ids) / sizeof(healthy_ids[0]))
static const int64_t numa01[] = {1, 0, -1};

static size_t base_devices(kdp_device *d)
{
    size_t n = 0;
    for (size_t i = 0; i < N_HEALTHY; i++) {
        d[n++] = (kdp_device){.id = healthy_ids[i], .health = KDP_HEALTHY};
    }
    d[1].numa_nodes = numa01;
    d[1].n_numa_nodes = 3;
    d[3].host_path = "/dev/fuzz-e";
    d[3].container_path = "/dev/e";
    d[3].permissions = "rwm";
    d[2].host_path = "/dev/fuzz-d";
    d[n++] = (kdp_device){.id = "c", .health = KDP_UNHEALTHY};
    return n;
}

/* The churn: b goes Unhealthy, f appears, a goes. */
static size_t churn_devices(kdp_device *d)
{
    size_t n = base_devices(d);
    d[1].health = KDP_UNHEALTHY;
    d[0].id = "f";
    return n;
}

static bool is_healthy_id(const char *id)
{
    for (size_t i = 0; i < N_HEALTHY; i++) {
        if (strcmp(id, healthy_ids[i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool is_known_id(const char *id)
{
    return is_healthy_id(id) || strcmp(id, "c") == 0;
}

/* Whether a churn was ever started on plugin i: from then on, its loop may
 * have held the churned table when it checked a request. Never cleared: a
 * callback may start after its call has ended and the table was reset. */
static atomic_bool churned[N_PLUGINS];

static void start_churn(int pi)
{
    atomic_store(&churned[pi], true); /* before kdp can see the table */
    kdp_device devs[16];
    size_t n = churn_devices(devs);
    CHECK(kdp_plugin_set_devices(plugins[pi], devs, n) == 0);
}

static const kdp_device *find_in(const kdp_device *d, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(d[i].id, id) == 0) {
            return &d[i];
        }
    }
    return NULL;
}

/* kdp checks a request's IDs against the one table its loop holds when the
 * request comes: the base table, or once a churn is taken (until the reset
 * at the end of the input) the churned one, without "a" but with "f". So
 * the IDs a callback of plugin pi gets are all in one table it has held. */
static bool ids_in_one_table(int pi, const char *const *ids, size_t n)
{
    kdp_device base[16];
    kdp_device chd[16];
    size_t n_base = base_devices(base);
    size_t n_chd = churn_devices(chd);
    bool in_base = true;
    bool in_chd = atomic_load(&churned[pi]);
    for (size_t i = 0; i < n; i++) {
        in_base = in_base && find_in(base, n_base, ids[i]);
        in_chd = in_chd && find_in(chd, n_chd, ids[i]);
    }
    return in_base || in_chd;
}

static int index_of(const kdp_plugin *p)
{
    for (int i = 0; i < N_PLUGINS; i++) {
        if (plugins[i] == p) {
            return i;
        }
    }
    CHECK(!"a plugin of ours");
    return -1;
}

/* ---- the ops ---- */

static int all_allocate(kdp_plugin *p, const kdp_alloc_request *req, kdp_alloc_response *resp,
                        void *ud)
{
    (void)p;
    (void)ud;
    op_enter();
    int r = kdp_response_add_defaults(resp);
    for (size_t i = 0; r == 0 && i < req->n_ids; i++) {
        char buf[300];
        snprintf(buf, sizeof(buf), "fuzz.test/dev=%s", req->ids[i]);
        (void)kdp_response_add_cdi_device(resp, buf); /* -EINVAL for odd IDs */
        snprintf(buf, sizeof(buf), "/fuzz/%s", req->ids[i]);
        r = kdp_response_add_mount(resp, buf, "/tmp", i & 1);
        if (r == 0) {
            r = kdp_response_add_annotation(resp, req->ids[i], buf);
        }
        if (r == 0) {
            r = kdp_response_add_env(resp, "FUZZ_LAST", req->ids[i]);
        }
    }
    return op_leave(r);
}

static int all_preferred(kdp_plugin *p, const kdp_preferred_request *req, kdp_id_list *out,
                         void *ud)
{
    (void)p;
    (void)ud;
    op_enter();
    /* The kubelet's strings, unchecked by kdp: the builder checks them. */
    for (size_t i = 0; i < req->n_must_include; i++) {
        int r = kdp_id_list_add(out, req->must_include[i]);
        CHECK(r == 0 || r == -EINVAL);
    }
    for (size_t i = 0; i < req->n_available && i < req->size; i++) {
        int r = kdp_id_list_add(out, req->available[req->n_available - 1 - i]);
        CHECK(r == 0 || r == -EINVAL);
    }
    return op_leave(0);
}

static int all_prestart(kdp_plugin *p, const char *const *ids, size_t n, void *ud)
{
    (void)ud;
    op_enter();
    CHECK(ids_in_one_table(index_of(p), ids, n)); /* kdp checked them */
    return op_leave(0);
}

static int fail_allocate(kdp_plugin *p, const kdp_alloc_request *req, kdp_alloc_response *resp,
                         void *ud)
{
    (void)resp;
    (void)ud;
    op_enter();
    if (req->n_ids == 0) {
        return op_leave(-EIO); /* a container request without IDs: the kubelet never sends one */
    }
    const char *id = req->ids[0];
    kdp_plugin_set_error(p, "refused \"%s\"\n\x01\x7f\xc3\xa9 100%%", id);
    switch (id[0]) {
    case 'a':
        return op_leave(-EINVAL);
    case 'b':
        return op_leave(-ENOMEM);
    case 'd':
        return op_leave(-ETIMEDOUT);
    case 'e':
        return op_leave(-EPERM);
    case 's':
        usleep(10 * 1000); /* past the 5 ms deadline */
        return op_leave(0);
    default:
        return op_leave(-EIO);
    }
}

static int fail_preferred(kdp_plugin *p, const kdp_preferred_request *req, kdp_id_list *out,
                          void *ud)
{
    (void)out;
    (void)ud;
    op_enter();
    /* The kubelet's own bytes in the message: percent-encoded on the wire,
     * escaped in the log. */
    kdp_plugin_set_error(p, "no preference for \"%.100s\"",
                         req->n_available ? req->available[0] : "");
    return op_leave(-ENOENT);
}

static int fail_prestart(kdp_plugin *p, const char *const *ids, size_t n, void *ud)
{
    (void)p;
    (void)ids;
    (void)n;
    (void)ud;
    op_enter();
    return op_leave(-EBUSY);
}

/* ---- setup ---- */

static void check_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    /* no forged, hidden or reordered text: controls, line separators and
     * bidi controls escaped, valid UTF-8 (base/safetext) */
    CHECK(kdp__safetext_clean(msg));
}

static void cleanup(void)
{
    kdp_ctx_free(ctx); /* removes the sockets and lock files */
    (void)rmdir(dir);
}

static void run_once(int timeout_ms)
{
    abort_if_an_op_failed();
    struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
    if (timeout_ms) {
        (void)poll(&pfd, 1, timeout_ms);
    }
    CHECK(kdp_ctx_dispatch(ctx) == 0);
}

static bool all_serving(void)
{
    for (int i = 0; i < N_PLUGINS; i++) {
        if (kdp__lifecycle_state(&plugins[i]->lc) != KDP__LC_WAITING) {
            return false;
        }
    }
    return true;
}

/* Waits until the loop has taken the table last set. */
static void settle_tables(void)
{
    for (int i = 0; i < N_PLUGINS; i++) {
        uint64_t start = kdp__now_us();
        for (;;) {
            pthread_mutex_lock(&plugins[i]->table.shared.mu);
            bool taken = plugins[i]->table.shared.ver == plugins[i]->table.tab_ver;
            pthread_mutex_unlock(&plugins[i]->table.shared.mu);
            if (taken) {
                break;
            }
            CHECK(kdp__now_us() - start < CLOSE_MAX_US);
            run_once(1);
        }
    }
}

static void init(void)
{
    input_thread = pthread_self();
    memset(long_id, 'L', sizeof(long_id) - 1);
    kdp_log_set(KDP_LOG_DEBUG, check_log, NULL);
    snprintf(dir, sizeof(dir), "/tmp/kdpfz-XXXXXX");
    CHECK(mkdtemp(dir));
    CHECK(kdp_ctx_new(&ctx) == 0);
    static const kdp_ops ops[N_PLUGINS] = {
        {0},
        {.allocate = all_allocate, .preferred = all_preferred, .prestart = all_prestart},
        {.allocate = fail_allocate, .preferred = fail_preferred, .prestart = fail_prestart},
    };
    static const char *const names[N_PLUGINS] = {"fuzz.test/none", "fuzz.test/all",
                                                 "fuzz.test/fail"};
    static const char *const socks[N_PLUGINS] = {"none.sock", "all.sock", "fail.sock"};
    kdp_device devs[16];
    size_t n = base_devices(devs);
    for (int i = 0; i < N_PLUGINS; i++) {
        kdp_config cfg = {.resource_name = names[i],
                          .socket_name = socks[i],
                          .device_plugin_dir = dir,
                          .callback_timeout_ms = i == 2 ? 5 : 2000};
        CHECK(kdp_plugin_new(ctx, &cfg, &ops[i], NULL, &plugins[i]) == 0);
        CHECK(kdp_plugin_set_devices(plugins[i], devs, n) == 0);
    }
    atexit(cleanup);
    uint64_t start = kdp__now_us();
    while (!all_serving()) {
        CHECK(kdp__now_us() - start < CLOSE_MAX_US);
        run_once(1);
    }
    settle_tables();
}

/* ---- one call through kdp's client ---- */

typedef struct outcome {
    bool done;
    int status;
    char message[600];
    uint8_t *resp;
    size_t resp_len;
    unsigned msgs;
    unsigned want_msgs;
    kdp_plugin *p;
    bool churn;
} outcome;

static void on_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    outcome *o = ud;
    CHECK(!o->done);
    CHECK(message);
    CHECK(status >= 0 && status <= 16);
    CHECK((resp != NULL) == (status == KDP__ST_OK) || len == 0);
    o->done = true;
    o->status = status;
    snprintf(o->message, sizeof(o->message), "%s", message);
    if (resp) {
        o->resp = malloc(len ? len : 1);
        CHECK(o->resp);
        memcpy(o->resp, resp, len);
        o->resp_len = len;
    }
}

/* Whether a ListAndWatch message holds exactly the devices d, with their
 * health. */
static bool law_is_table(const V1beta1__ListAndWatchResponse *m, const kdp_device *d, size_t n)
{
    if (m->n_devices != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        size_t found = 0;
        for (size_t k = 0; k < m->n_devices; k++) {
            if (strcmp(m->devices[k]->id, d[i].id) != 0) {
                continue;
            }
            found++;
            const char *want = d[i].health == KDP_HEALTHY ? "Healthy" : "Unhealthy";
            if (strcmp(m->devices[k]->health, want) != 0) {
                return false;
            }
        }
        if (found != 1) {
            return false;
        }
    }
    return true;
}

static void on_law_msg(const uint8_t *msg, size_t len, void *ud)
{
    outcome *o = ud;
    V1beta1__ListAndWatchResponse *m = v1beta1__list_and_watch_response__unpack(NULL, len, msg);
    CHECK(m);
    /* The first message is the base table; with churn, set once it came,
     * the second is the churned one; nothing else changes the table. */
    CHECK(o->msgs < (o->churn ? 2U : 1U));
    kdp_device d[16];
    size_t n = o->msgs == 0 ? base_devices(d) : churn_devices(d);
    CHECK(law_is_table(m, d, n));
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    o->msgs++;
    if (o->msgs == 1 && o->churn) {
        start_churn(index_of(o->p));
    }
}

/* Known (and healthy if need be), and none listed twice. */
static bool ids_ok(char **ids, size_t n, bool need_healthy)
{
    for (size_t i = 0; i < n; i++) {
        if (!(need_healthy ? is_healthy_id(ids[i]) : is_known_id(ids[i]))) {
            return false;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(ids[k], ids[i]) == 0) {
                return false;
            }
        }
    }
    return true;
}

/* The status a request must get from plugin `pi`, or -1 if it depends on
 * timing. */
static int expected_status(int pi, int method, const uint8_t *msg, size_t len)
{
    switch (method) {
    case M_OPTIONS:
    case M_LAW:
        return KDP__ST_OK;
    case M_UNKNOWN:
        return KDP__ST_UNIMPLEMENTED;
    case M_PREFERRED: {
        if (pi == 0) {
            return KDP__ST_UNIMPLEMENTED;
        }
        V1beta1__PreferredAllocationRequest *r =
            v1beta1__preferred_allocation_request__unpack(NULL, len, msg);
        if (!r) {
            return KDP__ST_INVALID_ARGUMENT;
        }
        size_t n = r->n_container_requests;
        v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
        /* the op runs once per container: none, no call, an empty answer */
        return pi == 1 || n == 0 ? KDP__ST_OK : KDP__ST_NOT_FOUND;
    }
    case M_ALLOCATE: {
        V1beta1__AllocateRequest *r = v1beta1__allocate_request__unpack(NULL, len, msg);
        if (!r) {
            return KDP__ST_INVALID_ARGUMENT;
        }
        int st = pi < 2 ? KDP__ST_OK : -1;
        if (r->n_container_requests == 0) {
            st = KDP__ST_INVALID_ARGUMENT;
        }
        for (size_t i = 0; i < r->n_container_requests; i++) {
            V1beta1__ContainerAllocateRequest *c = r->container_requests[i];
            if (!ids_ok(c->devices_ids, c->n_devices_ids, true)) {
                st = KDP__ST_INVALID_ARGUMENT;
            }
        }
        v1beta1__allocate_request__free_unpacked(r, NULL);
        return st;
    }
    case M_PRESTART: {
        V1beta1__PreStartContainerRequest *r =
            v1beta1__pre_start_container_request__unpack(NULL, len, msg);
        if (!r) {
            return KDP__ST_INVALID_ARGUMENT;
        }
        bool ok = ids_ok(r->devices_ids, r->n_devices_ids, false);
        v1beta1__pre_start_container_request__free_unpacked(r, NULL);
        return !ok ? KDP__ST_INVALID_ARGUMENT : pi == 2 ? KDP__ST_UNAVAILABLE : KDP__ST_OK;
    }
    default:
        return -1;
    }
}

/* What plugin 2's allocate answers for its first container's first ID. */
static bool fail_status_ok(int st)
{
    return st == KDP__ST_INVALID_ARGUMENT || st == KDP__ST_RESOURCE_EXHAUSTED ||
           st == KDP__ST_DEADLINE_EXCEEDED || st == KDP__ST_PERMISSION_DENIED ||
           st == KDP__ST_UNKNOWN || st == KDP__ST_OK;
}

static void check_response(int pi, int method, const uint8_t *msg, size_t len, const outcome *o)
{
    if (method == M_OPTIONS) {
        V1beta1__DevicePluginOptions *m =
            v1beta1__device_plugin_options__unpack(NULL, o->resp_len, o->resp);
        CHECK(m);
        CHECK(m->pre_start_required == (pi != 0));
        CHECK(m->get_preferred_allocation_available == (pi != 0));
        v1beta1__device_plugin_options__free_unpacked(m, NULL);
    } else if (method == M_ALLOCATE) {
        V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, len, msg);
        V1beta1__AllocateResponse *m =
            v1beta1__allocate_response__unpack(NULL, o->resp_len, o->resp);
        CHECK(req && m);
        CHECK(m->n_container_responses == req->n_container_requests);
        for (size_t i = 0; pi == 0 && i < m->n_container_responses; i++) {
            /* the default env var: the IDs, comma-separated, in order */
            V1beta1__ContainerAllocateRequest *c = req->container_requests[i];
            char want[4096] = "";
            size_t off = 0;
            for (size_t k = 0; k < c->n_devices_ids && off < sizeof(want); k++) {
                off += (size_t)snprintf(want + off, sizeof(want) - off, "%s%s", k ? "," : "",
                                        c->devices_ids[k]);
            }
            CHECK(m->container_responses[i]->n_envs == 1);
            CHECK(!strcmp(m->container_responses[i]->envs[0]->key, "KDP_DEVICES_FUZZ_TEST_NONE"));
            if (off < sizeof(want)) {
                CHECK(!strcmp(m->container_responses[i]->envs[0]->value, want));
            }
        }
        v1beta1__allocate_request__free_unpacked(req, NULL);
        v1beta1__allocate_response__free_unpacked(m, NULL);
    } else if (method == M_PREFERRED) {
        V1beta1__PreferredAllocationRequest *req =
            v1beta1__preferred_allocation_request__unpack(NULL, len, msg);
        V1beta1__PreferredAllocationResponse *m =
            v1beta1__preferred_allocation_response__unpack(NULL, o->resp_len, o->resp);
        CHECK(req && m);
        CHECK(m->n_container_responses == req->n_container_requests);
        v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
        v1beta1__preferred_allocation_response__free_unpacked(m, NULL);
    } else if (method == M_PRESTART) {
        V1beta1__PreStartContainerResponse *m =
            v1beta1__pre_start_container_response__unpack(NULL, o->resp_len, o->resp);
        CHECK(m);
        v1beta1__pre_start_container_response__free_unpacked(m, NULL);
    }
}

static void call_with_client(int pi, int method, bool timeout, bool churn, const uint8_t *msg,
                             size_t len)
{
    kdp_plugin *p = plugins[pi];
    outcome o = {.p = p, .churn = churn, .want_msgs = churn ? 2 : 1};
    kdp__unary_opts opts = {.timeout_us = timeout ? 1000 : 0};
    kdp__client_call *c = NULL;
    int r;
    if (method == M_LAW) {
        r = kdp__client_stream(ctx->loop, p->socket_path, paths[method], msg, len, &opts,
                               on_law_msg, on_done, &o, &c);
    } else {
        r = kdp__client_unary(ctx->loop, p->socket_path, paths[method], msg, len, &opts, on_done,
                              &o, &c);
    }
    CHECK(r == 0);
    if (churn && method != M_LAW) {
        start_churn(pi);
    }
    uint64_t start = kdp__now_us();
    while (!o.done && !(method == M_LAW && o.msgs >= o.want_msgs)) {
        CHECK(kdp__now_us() - start < CALL_MAX_US);
        run_once(10);
    }
    if (!o.done) {
        kdp__client_call_cancel(c); /* a ListAndWatch, never ended by the server */
    }
    abort_if_an_op_failed(); /* before a status it may have made wrong */
    if (method == M_LAW) {
        CHECK(o.msgs >= 1 || (timeout && o.done && o.status == KDP__ST_DEADLINE_EXCEEDED));
        CHECK(!o.done || o.status != KDP__ST_OK);
    } else if (!timeout && !churn) {
        int want = expected_status(pi, method, msg, len);
        if (pi == 2 && o.status == KDP__ST_DEADLINE_EXCEEDED && want != KDP__ST_INVALID_ARGUMENT &&
            method != M_OPTIONS) {
            want = -1; /* plugin 2's 5 ms callback deadline, on a loaded machine */
        }
        if (want >= 0 && o.status != want) {
            fprintf(stderr, "plugin %d %s: status %d (%s), expected %d\n", pi, paths[method],
                    o.status, o.message, want);
            abort();
        }
        if (want < 0) {
            CHECK(fail_status_ok(o.status));
        }
        if (o.status == KDP__ST_OK) {
            check_response(pi, method, msg, len, &o);
        }
    } else {
        CHECK(o.status == KDP__ST_DEADLINE_EXCEEDED || o.status <= 16);
    }
    free(o.resp);
}

/* ---- raw HTTP/2, framed here ---- */

typedef struct buf {
    uint8_t *p;
    size_t len;
    size_t cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
    if (n == 0) {
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) {
            cap *= 2;
        }
        b->p = realloc(b->p, cap);
        CHECK(b->p);
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void frame(buf *b, uint8_t type, uint8_t flags, uint32_t stream, const void *payload,
                  size_t n)
{
    uint8_t h[9] = {(uint8_t)(n >> 16),
                    (uint8_t)(n >> 8),
                    (uint8_t)n,
                    type,
                    flags,
                    (uint8_t)(stream >> 24),
                    (uint8_t)(stream >> 16),
                    (uint8_t)(stream >> 8),
                    (uint8_t)stream};
    put(b, h, sizeof(h));
    put(b, payload, n);
}

/* HPACK integer with a 7-bit prefix, H = 0. */
static void hpack_len(buf *b, size_t n)
{
    uint8_t c;
    if (n < 127) {
        c = (uint8_t)n;
        put(b, &c, 1);
        return;
    }
    c = 127;
    put(b, &c, 1);
    n -= 127;
    while (n >= 128) {
        c = (uint8_t)(0x80 | (n & 0x7f));
        put(b, &c, 1);
        n >>= 7;
    }
    c = (uint8_t)n;
    put(b, &c, 1);
}

/* A literal header field without indexing, new name. */
static void header(buf *b, const char *name, const char *value)
{
    uint8_t zero = 0;
    put(b, &zero, 1);
    hpack_len(b, strlen(name));
    put(b, name, strlen(name));
    hpack_len(b, strlen(value));
    put(b, value, strlen(value));
}

static void request(buf *out, uint32_t stream, int method, bool timeout, uint8_t framing,
                    const uint8_t *msg, size_t len)
{
    static const size_t chunks[8] = {1, 3, 7, 16, 100, 1000, 16384, 16384};
    buf hb = {0};
    header(&hb, ":method", "POST");
    header(&hb, ":scheme", "http");
    header(&hb, ":path", paths[method]);
    header(&hb, ":authority", "localhost");
    header(&hb, "content-type", "application/grpc");
    header(&hb, "te", "trailers");
    if (timeout) {
        header(&hb, "grpc-timeout", "1m");
    }
    frame(out, 1 /* HEADERS */, 0x4 /* END_HEADERS */, stream, hb.p, hb.len);
    free(hb.p);

    buf body = {0};
    if (!(framing & 32)) {
        uint8_t prefix[KDP__FRAME_HEADER_LEN];
        kdp__frame_header(prefix, (uint32_t)len);
        put(&body, prefix, sizeof(prefix));
    }
    put(&body, msg, len);
    size_t chunk = chunks[framing & 7];
    bool end = !(framing & 8);
    size_t off = 0;
    do {
        size_t n = body.len - off < chunk ? body.len - off : chunk;
        bool last = off + n == body.len;
        frame(out, 0 /* DATA */, last && end ? 0x1 : 0, stream, body.p ? body.p + off : NULL, n);
        off += n;
    } while (off < body.len);
    free(body.p);
    if (framing & 16) {
        static const uint8_t cancel[4] = {0, 0, 0, 8};
        frame(out, 3 /* RST_STREAM */, 0, stream, cancel, sizeof(cancel));
    }
}

static uint8_t sink[64U << 10];

/* Returns false once the server has closed its end. */
static bool drain(int fd)
{
    for (;;) {
        ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (n > 0) {
            continue;
        }
        return !(n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR));
    }
}

static void call_raw(int pi, int method, bool timeout, bool churn, uint8_t framing,
                     const uint8_t *msg, size_t len)
{
    kdp_plugin *p = plugins[pi];
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    buf out = {0};
    put(&out, preface, sizeof(preface) - 1);
    frame(&out, 4 /* SETTINGS */, 0, 0, NULL, 0);
    request(&out, 1, method, timeout, framing, msg, len);
    if (framing & 64) {
        request(&out, 3, method, timeout, framing, msg, len);
    }
    int fd;
    CHECK(kdp__sock_connect(p->socket_path, &fd) == 0);
    if (churn) {
        start_churn(pi);
    }
    size_t off = 0;
    bool open = true;
    uint64_t start = kdp__now_us();
    while (open && off < out.len) {
        ssize_t w = send(fd, out.p + off, out.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            CHECK(kdp__now_us() - start < CALL_MAX_US); /* the server stopped reading */
            run_once(1);
            open = drain(fd);
        } else {
            open = false; /* the server hung up */
        }
    }
    free(out.p);
    if (!(framing & 128)) {
        for (int i = 0, quiet = 0; open && i < MAX_QUIET && quiet < 3; i++) {
            struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
            if (poll(&pfd, 1, QUIET_MS) == 0) {
                quiet++;
            } else {
                quiet = 0;
            }
            abort_if_an_op_failed();
            CHECK(kdp_ctx_dispatch(ctx) == 0);
            open = drain(fd);
        }
    }
    close(fd);
}

/* Waits for the ops still running, whose calls may be over (see
 * check_failed). */
static void wait_ops(void)
{
    uint64_t start = kdp__now_us();
    while (atomic_load(&ops_running) > 0) {
        CHECK(kdp__now_us() - start < CALL_MAX_US); /* an op hangs */
        run_once(1);
    }
    abort_if_an_op_failed();
}

/* Every connection of p's server is gone, with every call closed. */
static void wait_closed(kdp_plugin *p)
{
    uint64_t start = kdp__now_us();
    for (;;) {
        kdp__server_stats st;
        kdp__server_stats_get(p->lc.server, &st);
        if (st.connections == 0) {
            CHECK(st.active_calls == 0);
            CHECK(st.calls_cancelled <= st.calls_total);
            CHECK(p->lc.server->held == 0); /* every request byte counted was given back */
            return;
        }
        CHECK(kdp__now_us() - start < CLOSE_MAX_US); /* a connection outlived its client */
        run_once(1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        init();
    }
    abort_if_an_op_failed(); /* an op of an earlier input, entered late */
    if (size == 0) {
        return 0;
    }
    uint8_t flags = data[0];
    int method = method_of[flags & 7];
    int pi = (flags >> 3) & 3;
    if (pi >= N_PLUGINS) {
        pi = 1;
    }
    bool raw = flags & 32;
    bool timeout = flags & 64;
    bool churn = flags & 128;
    data++;
    size--;
    if (raw) {
        uint8_t framing = size ? data[0] : 0;
        if (size) {
            data++;
            size--;
        }
        call_raw(pi, method, timeout, churn, framing, data, size);
    } else {
        call_with_client(pi, method, timeout, churn, data, size);
    }
    kdp_plugin *p = plugins[pi];
    wait_closed(p);
    wait_ops();
    CHECK(kdp__lifecycle_state(&p->lc) ==
          KDP__LC_WAITING); /* nothing a client does restarts or stops it */
    if (churn) {
        kdp_device devs[16];
        size_t n = base_devices(devs);
        CHECK(kdp_plugin_set_devices(p, devs, n) == 0);
        settle_tables();
    }
    return 0;
}
