/* SPDX-License-Identifier: MIT */
/* The context's endpoint through the public calls: serving, the address,
 * the errors, the handler's answers, and the listener's end at free. */
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
#include <unistd.h>

#include "kdp.h"
#include "plugin/observe.h"

static void test_serve_and_address(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    char buf[128];
    assert_int_equal(kdp_ctx_get_metrics_address(ctx, buf, sizeof(buf)), -ENOTCONN);
    assert_int_equal(kdp_ctx_get_metrics_address(NULL, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(kdp_ctx_serve_metrics(ctx, NULL), -EINVAL);
    assert_int_equal(kdp_ctx_serve_metrics(NULL, ":0"), -EINVAL);
    assert_int_equal(kdp_ctx_serve_metrics(ctx, "no-port"), -EINVAL);
    assert_int_equal(kdp_ctx_get_metrics_address(ctx, buf, sizeof(buf)), -ENOTCONN);
    assert_int_equal(kdp_ctx_serve_metrics(ctx, "127.0.0.1:0"), 0);
    int n = kdp_ctx_get_metrics_address(ctx, buf, sizeof(buf));
    assert_true(n > (int)strlen("127.0.0.1:"));
    assert_int_equal((size_t)n, strlen(buf));
    assert_int_equal(strncmp(buf, "127.0.0.1:", 10), 0);
    assert_int_equal(kdp_ctx_get_metrics_address(ctx, buf, 5), -ENOSPC);
    assert_int_equal(kdp_ctx_serve_metrics(ctx, "127.0.0.1:0"), -EALREADY);
    kdp_ctx_free(ctx);

    /* a unix socket, removed at kdp_ctx_free */
    char path[64];
    snprintf(path, sizeof(path), "/tmp/kdp-test-observe-%d.sock", (int)getpid());
    char addr[80];
    snprintf(addr, sizeof(addr), "unix:%s", path);
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    assert_int_equal(kdp_ctx_serve_metrics(ctx, addr), 0);
    assert_int_equal(kdp_ctx_get_metrics_address(ctx, buf, sizeof(buf)), (int)strlen(path));
    assert_string_equal(buf, path);
    assert_int_equal(access(path, F_OK), 0);
    kdp_ctx *other;
    assert_int_equal(kdp_ctx_new(&other), 0);
    assert_int_equal(kdp_ctx_serve_metrics(other, path), -EADDRINUSE);
    kdp_ctx_free(other);
    kdp_ctx_free(ctx);
    assert_int_equal(access(path, F_OK), -1);
}

static char *answer(kdp_ctx *ctx, const char *method, const char *path, int *status)
{
    kdp__http_resp resp = {0};
    kdp__observe_handle(ctx, method, path, &resp);
    *status = resp.status;
    assert_non_null(resp.body);
    return resp.body;
}

static void test_handler(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    int st = 0;
    char *b = answer(ctx, "GET", "/healthz", &st);
    assert_int_equal(st, 503);
    assert_string_equal(b, "no plugins\n");
    free(b);
    b = answer(ctx, "GET", "/nope", &st);
    assert_int_equal(st, 404);
    free(b);
    kdp__http_resp resp = {0};
    kdp__observe_handle(ctx, "PUT", "/metrics", &resp);
    assert_int_equal(resp.status, 405);
    assert_string_equal(resp.allow, "GET, HEAD");
    free(resp.body);

    kdp_config cfg = {
        .resource_name = "example.com/obs", .socket_name = "obs.sock", .device_plugin_dir = "/tmp"};
    kdp_plugin *p;
    assert_int_equal(kdp_plugin_new(ctx, &cfg, NULL, NULL, &p), 0);
    assert_ptr_equal(kdp_plugin_get_ctx(p), ctx);
    assert_null(kdp_plugin_get_ctx(NULL));
    kdp_metric *m;
    assert_int_equal(kdp_metric_new(ctx, KDP_METRIC_GAUGE, "obs_temp", "A gauge.", NULL, 0, &m), 0);
    assert_int_equal(kdp_metric_set(m, NULL, 21.5), 0);
    b = answer(ctx, "GET", "/healthz", &st);
    assert_int_equal(st, 503);
    assert_string_equal(b, "example.com/obs: not started\n");
    free(b);
    resp = (kdp__http_resp){0};
    kdp__observe_handle(ctx, "HEAD", "/metrics", &resp);
    assert_int_equal(resp.status, 200);
    assert_string_equal(resp.content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(strstr(resp.body, "kdp_plugin_up{resource=\"example.com/obs\"} 0\n"));
    assert_non_null(strstr(resp.body, "# TYPE obs_temp gauge\nobs_temp 21.5\n"));
    /* the author's metrics come after kdp's */
    assert_true(strstr(resp.body, "obs_temp") > strstr(resp.body, "kdp_health_transitions"));
    free(resp.body);
    kdp_plugin_free(p);
    kdp_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_and_address),
        cmocka_unit_test(test_handler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
