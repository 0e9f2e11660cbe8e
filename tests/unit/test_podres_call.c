/* SPDX-License-Identifier: MIT */
/* PodResources calls without a kubelet: the blocking calls' errors (no
 * socket, a socket that never answers), a plugin's queries cancelled and
 * bounded. The snapshots they build are test_podres.c's. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kdp.h"

static char last_log[1024];

static void keep_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    snprintf(last_log, sizeof(last_log), "%s", msg);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_call_errors(void **state)
{
    (void)state;
    char dir[] = "/tmp/kdp-podres-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof(path), "%s/kubelet.sock", dir);
    kdp_pods *s = NULL;
    /* No socket. */
    assert_int_equal(kdp_pods_get(path, NULL, 1000, &s), -ENOENT);
    assert_null(s);
    assert_non_null(strstr(last_log, "is the kubelet's pod-resources directory mounted"));
    /* A socket nobody listens on. */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(kdp_allocatable_get(path, NULL, 1000, &s), -ECONNREFUSED);
    /* Listening, never answering: the deadline. */
    assert_int_equal(listen(fd, 4), 0);
    double t0 = now_s();
    assert_int_equal(kdp_pods_get(path, "r.io/x", 200, &s), -ETIMEDOUT);
    double took = now_s() - t0;
    assert_true(took >= 0.15 && took < 2.0);
    assert_non_null(strstr(last_log, "no answer in time"));
    close(fd);
    unlink(path);
    rmdir(dir);
    /* Bad arguments. */
    assert_int_equal(kdp_pods_get(path, NULL, 0, NULL), -EINVAL);
    assert_int_equal(kdp_pods_get_pod(path, NULL, "p", NULL, 0, &s), -EINVAL);
    assert_int_equal(kdp_pods_get_pod(path, "ns", "", NULL, 0, &s), -EINVAL);
    assert_int_equal(kdp_plugin_get_pods(NULL, 0, &s), -EINVAL);
    assert_int_equal(kdp_plugin_query_pods(NULL, NULL, NULL), -EINVAL);
}

typedef struct done_rec {
    int calls;
    int err;
    kdp_pods *pods;
} done_rec;

static void on_done(int err, kdp_pods *pods, void *ud)
{
    done_rec *d = ud;
    d->calls++;
    d->err = err;
    kdp_pods_free(pods);
}

/* A plugin on a temp kubelet root (its socket a listener that never
 * answers) and device-plugin dir. */
static kdp_plugin *plugin_at(char *dir, kdp_ctx **ret_ctx, int *ret_lfd)
{
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/dp", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/pod-resources", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/pod-resources/kubelet.sock", dir);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 8), 0);
    *ret_lfd = fd;
    snprintf(path, sizeof(path), "%s/dp", dir);
    kdp_config cfg = {.resource_name = "kdp.test/dev",
                      .socket_name = "dev.sock",
                      .device_plugin_dir = path,
                      .kubelet_root = dir};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_ctx_new(ret_ctx), 0);
    assert_int_equal(kdp_plugin_new(*ret_ctx, &cfg, NULL, NULL, &p), 0);
    return p;
}

static void cleanup_dir(const char *dir)
{
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_queue_cancelled_and_bounded(void **state)
{
    (void)state;
    char dir[] = "/tmp/kdp-podres-q-XXXXXX";
    kdp_ctx *ctx = NULL;
    int lfd = -1;
    kdp_plugin *p = plugin_at(dir, &ctx, &lfd);
    /* The context never runs: the queries wait, up to the cap. */
    done_rec d = {0};
    for (unsigned i = 0; i < KDP_PODS_MAX_QUERIES; i++) {
        assert_int_equal(kdp_plugin_query_pods(p, on_done, &d), 0);
    }
    assert_int_equal(kdp_plugin_query_pods(p, on_done, &d), -EAGAIN);
    assert_non_null(strstr(last_log, "queries are pending already"));
    assert_int_equal(kdp_plugin_query_pods(p, NULL, &d), -EINVAL);
    assert_int_equal(d.calls, 0);
    /* Freed first: every one fails with -ECANCELED, here. */
    kdp_plugin_free(p);
    assert_int_equal(d.calls, KDP_PODS_MAX_QUERIES);
    assert_int_equal(d.err, -ECANCELED);
    kdp_ctx_free(ctx);
    close(lfd);
    cleanup_dir(dir);
}

static void test_running_query_cancelled(void **state)
{
    (void)state;
    char dir[] = "/tmp/kdp-podres-r-XXXXXX";
    kdp_ctx *ctx = NULL;
    int lfd = -1;
    kdp_plugin *p = plugin_at(dir, &ctx, &lfd);
    done_rec d = {0};
    assert_int_equal(kdp_plugin_query_pods(p, on_done, &d), 0);
    /* Embedded: dispatch until the call has connected (the listener sees
     * it), without ever answering. */
    int conn = -1;
    for (int i = 0; i < 200 && conn < 0; i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        conn = accept(lfd, NULL, NULL);
        if (conn < 0) {
            usleep(5000);
        }
    }
    assert_true(conn >= 0);
    assert_int_equal(d.calls, 0);
    kdp_plugin_free(p); /* the running call: cancelled, done told */
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, -ECANCELED);
    kdp_ctx_free(ctx);
    close(conn);
    close(lfd);
    cleanup_dir(dir);
}

int main(void)
{
    kdp_log_set(KDP_LOG_WARNING, keep_log, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_errors),
        cmocka_unit_test(test_queue_cancelled_and_bounded),
        cmocka_unit_test(test_running_query_cancelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
