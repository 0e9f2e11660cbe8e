/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the metrics endpoint: each input is written, as the
 * bytes of a client, into one end of a socketpair whose other end is handed
 * to the endpoint's libmicrohttpd daemon (kdp__http_adopt: MHD_add_connection)
 * serving the real handler (kdp__observe_handle) of a context with one plugin
 * (not started) and one author metric. The loop runs until the server has
 * closed the connection or a bound of turns; then the client hangs up and the
 * loop runs until the connection is gone.
 *
 * Checked: every response starts with a well-formed status line
 * "HTTP/1.x NNN " whose code is one the endpoint or libmicrohttpd may give
 * (200, 400, 404, 405, 411, 413, 414, 417, 431, 500, 501, 503, 505); no
 * connection is left open once the client has hung up. abort()s otherwise.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kdp.h"
#include "plugin/ctx.h"
#include "plugin/observe.h"
#include "runtime/http.h"

#define TURNS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kdp_ctx *ctx;
static kdp__http *http;
static char dir[64];

static void handler(const char *method, const char *path, kdp__http_resp *resp, void *ud)
{
    (void)ud;
    kdp__observe_handle(ctx, method, path, resp);
}

static void quiet(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)msg;
    (void)ud;
}

static void setup(void)
{
    kdp_log_set(KDP_LOG_ERROR, quiet, NULL);
    snprintf(dir, sizeof(dir), "/tmp/kdp-fuzz-http-%d", (int)getpid());
    (void)mkdir(dir, 0700);
    if (kdp_ctx_new(&ctx) < 0) {
        abort();
    }
    kdp_config cfg = {
        .resource_name = "fuzz.test/http", .socket_name = "http.sock", .device_plugin_dir = dir};
    kdp_plugin *p;
    kdp_metric *m;
    const char *label = "l";
    const char *value = "v\"\\\n";
    if (kdp_plugin_new(ctx, &cfg, NULL, NULL, &p) < 0 ||
        kdp_metric_new(ctx, KDP_METRIC_GAUGE, "fuzz_gauge", "A gauge.", &label, 1, &m) < 0 ||
        kdp_metric_set(m, &value, 1.5) < 0) {
        abort();
    }
    char addr[128];
    snprintf(addr, sizeof(addr), "unix:%s/metrics.sock", dir);
    if (kdp__http_listen(ctx->loop, addr, NULL, handler, NULL, &http) < 0) {
        abort();
    }
}

static bool code_ok(int code)
{
    static const int ok[] = {200, 400, 404, 405, 411, 413, 414, 417, 431, 500, 501, 503, 505};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (code == ok[i]) {
            return true;
        }
    }
    return false;
}

/* Every "HTTP/1." at the start of the output or of a line is a status line. */
static void check(const char *out, size_t len)
{
    if (len == 0) {
        return; /* closed without an answer (MHD does so for some garbage) */
    }
    if (len < 13 || strncmp(out, "HTTP/1.", 7) != 0) {
        fprintf(stderr, "fuzz_http: not a status line: %.40s\n", out);
        abort();
    }
    for (const char *s = out; s && s < out + len; s = strstr(s + 1, "\nHTTP/1.")) {
        const char *line = *s == '\n' ? s + 1 : s;
        if ((line[7] != '0' && line[7] != '1') || line[8] != ' ' || line[12] != ' ' ||
            !code_ok(atoi(line + 9))) {
            fprintf(stderr, "fuzz_http: bad status line: %.40s\n", line);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        setup();
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
        abort();
    }
    if (kdp__http_adopt(http, sv[0]) < 0) {
        close(sv[1]);
        return 0;
    }
    size_t off = 0;
    static char out[1 << 17];
    size_t got = 0;
    for (int turn = 0; turn < TURNS && kdp__http_connections(http) > 0; turn++) {
        if (off < size) {
            ssize_t n = write(sv[1], data + off, size - off);
            off += n > 0 ? (size_t)n : 0;
        }
        (void)kdp__loop_dispatch(ctx->loop, 0);
        ssize_t n;
        while ((n = read(sv[1], out + got, sizeof(out) - 1 - got)) > 0) {
            got += (size_t)n;
        }
    }
    out[got] = '\0';
    close(sv[1]);
    for (int turn = 0; turn < TURNS && kdp__http_connections(http) > 0; turn++) {
        (void)kdp__loop_dispatch(ctx->loop, 0);
    }
    if (kdp__http_connections(http) > 0) {
        fprintf(stderr, "fuzz_http: a connection outlived its client\n");
        abort();
    }
    check(out, got);
    return 0;
}
