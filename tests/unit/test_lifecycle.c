/* SPDX-License-Identifier: MIT */
/*
 * The plugin lifecycle in one process: a fake kubelet built on kdp's own
 * gRPC server and client, on the plugin's loop, driven by this thread
 * through kdp_ctx_dispatch(). No Go, no second process: every step is an
 * event on one loop, and every wait is bounded.
 *
 * The fake kubelet does what a modern kubelet does: it serves Registration
 * on <dir>/kubelet.sock; on Register it dials the plugin back, calls
 * GetDevicePluginOptions, answers Register, then opens ListAndWatch and
 * keeps it open. A restart frees its server (the streams end, kubelet.sock
 * goes), deletes the plugins' sockets and serves again.
 */
/* cmocka needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "deviceplugin.pb-c.h"
#include "grpc/client.h"
#include "grpc/server.h"
#include "grpc/wire.h"
#include "plugin/plugin_int.h"

#define RES  "kdp.test/life"
#define SOCK "life.sock"
#define WAIT 10000 /* ms: bound of one wait */

static char dir[128];

/* ---- the fake kubelet ---- */

typedef struct fake_kubelet {
    kdp__loop *loop;
    kdp__server *server;
    char sock[256];
    int refuse;               /* Register calls still to refuse */
    int registers;            /* Register calls seen */
    int registered;           /* answered OK */
    int options_calls;        /* GetDevicePluginOptions before answering */
    int lists;                /* ListAndWatch messages received */
    size_t last_n;            /* devices in the last one */
    int streams_ended;        /* by the plugin */
    kdp__call *pending;       /* the Register being answered */
    kdp__client_call *dial;   /* GetDevicePluginOptions in flight */
    kdp__client_call *stream; /* the open ListAndWatch */
    char endpoint[128];
    bool end_at_first_list; /* a kubelet that fails every stream */
} fake_kubelet;

static fake_kubelet fk;

static void on_law_msg(const uint8_t *msg, size_t len, void *ud)
{
    fake_kubelet *k = ud;
    V1beta1__ListAndWatchResponse *r = v1beta1__list_and_watch_response__unpack(NULL, len, msg);
    assert_non_null(r);
    k->lists++;
    k->last_n = r->n_devices;
    v1beta1__list_and_watch_response__free_unpacked(r, NULL);
    if (k->end_at_first_list) {
        kdp__client_call_cancel(k->stream); /* allowed from on_msg */
        k->stream = NULL;
    }
}

static void on_law_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)status;
    (void)message;
    (void)resp;
    (void)len;
    fake_kubelet *k = ud;
    k->stream = NULL;
    k->streams_ended++;
}

static void on_options(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)message;
    (void)resp;
    (void)len;
    fake_kubelet *k = ud;
    k->dial = NULL;
    kdp__call *call = k->pending;
    k->pending = NULL;
    if (!call) {
        return; /* the Register call went away meanwhile */
    }
    kdp__call_set_cancel(call, NULL, NULL);
    if (status != KDP__ST_OK) {
        (void)kdp__call_finish(call, KDP__ST_UNKNOWN, "cannot get the plugin's options");
        return;
    }
    k->options_calls++;
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    (void)kdp__call_reply_pb(call, &empty.base);
    k->registered++;
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, k->endpoint);
    assert_int_equal(kdp__client_stream(k->loop, path, "/v1beta1.DevicePlugin/ListAndWatch",
                                        (const uint8_t *)"", 0, NULL, on_law_msg, on_law_done, k,
                                        &k->stream),
                     0);
}

static void on_register_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    fake_kubelet *k = ud;
    k->pending = NULL;
}

static void h_register(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    fake_kubelet *k = ud;
    V1beta1__RegisterRequest *r = v1beta1__register_request__unpack(NULL, len, req);
    assert_non_null(r);
    k->registers++;
    assert_string_equal(r->version, KDP_KUBELET_API_VERSION);
    assert_string_equal(r->resource_name, RES);
    snprintf(k->endpoint, sizeof(k->endpoint), "%s", r->endpoint);
    v1beta1__register_request__free_unpacked(r, NULL);
    if (k->refuse > 0) {
        k->refuse--;
        (void)kdp__call_finish(call, KDP__ST_UNKNOWN, "not now");
        return;
    }
    /* Modern kubelets: dial back and get the options before answering. */
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, k->endpoint);
    k->pending = call;
    kdp__call_set_cancel(call, on_register_cancel, k);
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    assert_int_equal(kdp__client_unary_pb(k->loop, path,
                                          "/v1beta1.DevicePlugin/GetDevicePluginOptions",
                                          &empty.base, NULL, on_options, k, &k->dial),
                     0);
}

static void fk_serve(fake_kubelet *k)
{
    static const kdp__method methods[] = {
        {"/v1beta1.Registration/Register", KDP__UNARY, h_register, &fk, NULL},
    };
    assert_int_equal(kdp__server_new(k->loop, methods, 1, NULL, &k->server), 0);
    assert_int_equal(kdp__server_listen(k->server, k->sock), 0);
}

/* The kubelet goes away: its streams and calls end, kubelet.sock goes. */
static void fk_stop(fake_kubelet *k)
{
    kdp__client_call_cancel(k->dial);
    k->dial = NULL;
    kdp__client_call_cancel(k->stream);
    k->stream = NULL;
    kdp__server_free(k->server); /* ends a pending Register */
    k->server = NULL;
    k->pending = NULL;
}

/* What a starting kubelet does to the directory: every socket but its own. */
static void delete_sockets(void)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            (void)unlink(path);
        }
    }
    closedir(d);
}

static void fk_restart(fake_kubelet *k)
{
    fk_stop(k);
    delete_sockets();
    fk_serve(k);
}

/* ---- the plugin under test ---- */

static atomic_int refreshes, destroys, lists;
static atomic_bool hold_refresh, hold_list; /* the callback waits while set */
static atomic_bool in_refresh, in_list;

static void hold(atomic_bool *flag, atomic_bool *inside)
{
    atomic_store(inside, true);
    for (int i = 0; i < WAIT && atomic_load(flag); i++) {
        usleep(1000);
    }
    atomic_store(inside, false);
}

static int op_refresh(kdp_plugin *p, void *ud)
{
    (void)p;
    (void)ud;
    hold(&hold_refresh, &in_refresh);
    atomic_fetch_add(&refreshes, 1);
    return 0;
}

static void op_destroy(kdp_plugin *p, void *ud)
{
    (void)p;
    (void)ud;
    atomic_fetch_add(&destroys, 1);
}

static int op_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    (void)ud;
    hold(&hold_list, &in_list);
    atomic_fetch_add(&lists, 1);
    kdp_device d = {.id = "dev0"};
    int r = kdp_device_list_add(out, &d);
    d.id = "dev1";
    return r < 0 ? r : kdp_device_list_add(out, &d);
}

static kdp_ctx *ctx;
static kdp_plugin *plugin;

static void run_for_ms(int ms);

static int setup(void **state)
{
    (void)state;
    atomic_store(&refreshes, 0);
    atomic_store(&destroys, 0);
    atomic_store(&lists, 0);
    atomic_store(&hold_refresh, false);
    atomic_store(&hold_list, false);
    snprintf(dir, sizeof(dir), "/tmp/kdp-life-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    memset(&fk, 0, sizeof(fk));
    fk.loop = ctx->loop;
    snprintf(fk.sock, sizeof(fk.sock), "%s/%s", dir, KDP_KUBELET_SOCKET);
    kdp_config cfg = {.resource_name = RES,
                      .socket_name = SOCK,
                      .device_plugin_dir = dir,
                      .callback_timeout_ms = 5000};
    kdp_ops ops = {.refresh = op_refresh, .destroy = op_destroy, .list = op_list};
    assert_int_equal(kdp_plugin_new(ctx, &cfg, &ops, NULL, &plugin), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    atomic_store(&hold_refresh, false);
    atomic_store(&hold_list, false);
    if (plugin && kdp__lifecycle_state(&plugin->lc) != KDP__LC_STOPPED &&
        kdp__lifecycle_state(&plugin->lc) != KDP__LC_IDLE) {
        kdp_plugin_stop(plugin);
        for (int i = 0; i < WAIT / 5 && kdp_ctx_dispatch(ctx) == 0; i++) {
            run_for_ms(5);
        }
    }
    fk_stop(&fk);
    kdp_ctx_free(ctx);
    ctx = NULL;
    plugin = NULL;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)!system(cmd);
    return 0;
}

/* Dispatches the context for about ms milliseconds. */
static void run_for_ms(int ms)
{
    uint64_t until = kdp__now_us() + (uint64_t)ms * 1000U;
    struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
    for (;;) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        uint64_t now = kdp__now_us();
        if (now >= until) {
            return;
        }
        (void)poll(&pfd, 1, (int)((until - now) / 1000U) + 1);
    }
}

/* Dispatches until cond() holds; fails after WAIT ms. */
#define RUN_UNTIL(cond)                                                                            \
    do {                                                                                           \
        uint64_t until_ = kdp__now_us() + (uint64_t)WAIT * 1000U;                                  \
        while (!(cond)) {                                                                          \
            if (kdp__now_us() > until_) {                                                          \
                fail_msg("not within %d ms: %s (state %d)", WAIT, #cond,                           \
                         (int)kdp__lifecycle_state(&plugin->lc));                                  \
            }                                                                                      \
            run_for_ms(2);                                                                         \
        }                                                                                          \
    } while (0)

static kdp_plugin_state state_of(void)
{
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(plugin, &st), 0);
    return st.state;
}

static bool registered_with_list(int n_registered)
{
    return fk.registered >= n_registered && fk.lists >= n_registered && fk.stream &&
           state_of() == KDP_PLUGIN_REGISTERED;
}

/* ---- the tests ---- */

static void test_register(void **state)
{
    (void)state;
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(1));
    assert_int_equal(fk.registers, 1);
    assert_int_equal(fk.options_calls, 1); /* called back before the answer */
    assert_string_equal(fk.endpoint, SOCK);
    assert_int_equal(fk.last_n, 2);
    assert_int_equal(atomic_load(&refreshes), 1);
    assert_int_equal(atomic_load(&lists), 1);
    assert_int_equal(atomic_load(&destroys), 0);
}

static void test_kubelet_sock_recreated(void **state)
{
    (void)state;
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(1));
    for (int i = 2; i <= 4; i++) {
        fk_restart(&fk);
        RUN_UNTIL(registered_with_list(i));
    }
    assert_int_equal(atomic_load(&destroys), 3);
    assert_int_equal(atomic_load(&refreshes), 4);
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(plugin, &st), 0);
    assert_int_equal(st.restarts, 3);
}

static void test_own_socket_deleted(void **state)
{
    (void)state;
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(1));
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, SOCK);
    assert_int_equal(unlink(path), 0);
    RUN_UNTIL(registered_with_list(2));
    assert_int_equal(atomic_load(&destroys), 1);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0); /* served again */
    assert_true(S_ISSOCK(st.st_mode));
}

static void test_stream_ended(void **state)
{
    (void)state;
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(1));
    kdp__client_call_cancel(fk.stream); /* the kubelet's stream ends */
    fk.stream = NULL;
    RUN_UNTIL(registered_with_list(2));
    assert_int_equal(atomic_load(&destroys), 1);
    assert_int_equal(fk.registers, 2);
}

static void test_dir_removed_and_recreated(void **state)
{
    (void)state;
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(1));
    fk_stop(&fk);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    RUN_UNTIL(state_of() == KDP_PLUGIN_STARTING);
    kdp_plugin_status st;
    RUN_UNTIL(kdp_plugin_get_status(plugin, &st) == 0 && st.dir_error == -ENOENT);
    assert_int_equal(mkdir(dir, 0700), 0);
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(2));
    assert_int_equal(kdp_plugin_get_status(plugin, &st), 0);
    assert_int_equal(st.dir_error, 0);
    char lock[256];
    snprintf(lock, sizeof(lock), "%s/%s.lock", dir, SOCK);
    assert_int_equal(access(lock, F_OK), 0); /* locked in the new directory */
}

static void test_stop_during_refresh(void **state)
{
    (void)state;
    fk_serve(&fk);
    atomic_store(&hold_refresh, true);
    RUN_UNTIL(atomic_load(&in_refresh));
    assert_int_equal(kdp_plugin_stop(plugin), 0);
    run_for_ms(20);
    assert_int_equal(state_of(), KDP_PLUGIN_STARTING); /* still in refresh */
    atomic_store(&hold_refresh, false);
    RUN_UNTIL(state_of() == KDP_PLUGIN_STOPPED);
    assert_int_equal(fk.registers, 0);        /* never registered */
    assert_int_equal(atomic_load(&lists), 0); /* nor listed */
    assert_int_equal(atomic_load(&destroys), 1);
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, SOCK);
    assert_int_equal(access(path, F_OK), -1); /* no socket left */
}

static void test_restart_during_a_job(void **state)
{
    (void)state;
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(1));
    /* The next start's list blocks; the kubelet restarts meanwhile. */
    atomic_store(&hold_list, true);
    fk_restart(&fk);
    RUN_UNTIL(atomic_load(&in_list));
    fk_restart(&fk); /* again, while the list runs */
    run_for_ms(20);
    atomic_store(&hold_list, false);
    RUN_UNTIL(registered_with_list(2));
    run_for_ms(50);
    assert_int_equal(state_of(), KDP_PLUGIN_REGISTERED);
    assert_true(atomic_load(&destroys) >= 1);
    assert_true(atomic_load(&destroys) <= 2);
    assert_int_equal(atomic_load(&refreshes), atomic_load(&destroys) + 1);
}

static void test_register_fails_then_succeeds(void **state)
{
    (void)state;
    fk.refuse = 2;
    fk_serve(&fk);
    RUN_UNTIL(registered_with_list(1));
    assert_int_equal(fk.registers, 3);
    assert_int_equal(atomic_load(&destroys), 0); /* retried, not restarted */
}

static void test_kubelet_that_fails_every_stream(void **state)
{
    (void)state;
    fk.end_at_first_list = true;
    fk_serve(&fk);
    run_for_ms(1500);
    /* 0, 0, 50, 100, 200, 400, 800 ms (+-20 %): about 6 in 1.5 s, never more than 10 */
    assert_true(fk.registered >= 3);
    assert_true(fk.registered <= 10);
    fk.end_at_first_list = false;
    fk_restart(&fk); /* a new kubelet: no wait */
    uint64_t t0 = kdp__now_us();
    RUN_UNTIL(registered_with_list(fk.registered > 0 ? fk.registered : 1) && fk.stream);
    assert_true(kdp__now_us() - t0 < 5000000U);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    alarm(300);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_register, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubelet_sock_recreated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_socket_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_ended, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dir_removed_and_recreated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_during_refresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_during_a_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_fails_then_succeeds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubelet_that_fails_every_stream, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
