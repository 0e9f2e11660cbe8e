/* SPDX-License-Identifier: MIT */
/*
 * kdp-echo-client: one unary Echo call through kdp's gRPC client, for the
 * interop tests against grpc-go and grpcio servers. Prints one line:
 *   status=NAME code=N message=MSG payload=PAYLOAD
 * With --stream N it calls Stream (N messages, --interval-ms apart) instead,
 * printing "message seq=S" for each, and with --cancel-after K it cancels the
 * call from inside the K-th message callback ("cancelled after K").
 * Exit 0 if the status is OK (or the call was cancelled as asked), 1 for any
 * other status, 2 on usage errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "echo.pb-c.h"
#include "grpc/client.h"
#include "grpc/wire.h"
#include "runtime/loop.h"

static kdp__loop *loop;
static int exit_code = 1;
static kdp__client_call *stream_call;
static int cancel_after;
static int received;
static int64_t next_seq;

static void on_stream_msg(const uint8_t *msg, size_t len, void *ud)
{
    (void)ud;
    Kdptest__EchoReply *rep = kdptest__echo_reply__unpack(NULL, len, msg);
    if (!rep || rep->seq != next_seq) {
        printf("bad message (seq %lld, want %lld)\n", rep ? (long long)rep->seq : -1LL,
               (long long)next_seq);
        exit_code = 1;
    }
    printf("message seq=%lld\n", rep ? (long long)rep->seq : -1LL);
    fflush(stdout);
    next_seq++;
    kdptest__echo_reply__free_unpacked(rep, NULL);
    if (cancel_after > 0 && ++received == cancel_after) {
        printf("cancelled after %d\n", received);
        fflush(stdout);
        kdp__client_call_cancel(stream_call); /* from inside the callback */
        exit_code = 0;
        kdp__loop_quit(loop);
    }
}

static void on_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)ud;
    Kdptest__EchoReply *rep = NULL;
    if (resp) {
        rep = kdptest__echo_reply__unpack(NULL, len, resp);
    }
    printf("status=%s code=%d message=%s payload=%.*s messages=%lld\n", kdp__status_name(status),
           status, message, rep ? (int)rep->payload.len : 0,
           rep ? (const char *)rep->payload.data : "", (long long)next_seq);
    fflush(stdout);
    exit_code = status == KDP__ST_OK && (resp == NULL || rep) ? 0 : 1;
    kdptest__echo_reply__free_unpacked(rep, NULL);
    kdp__loop_quit(loop);
}

static int usage(void)
{
    fprintf(stderr, "usage: kdp-echo-client --socket PATH [--method PATH] [--payload STR]\n"
                    "       [--status-code N] [--status-message STR] [--delay-ms N]\n"
                    "       [--timeout-ms N] [--authority STR]\n"
                    "       [--stream N [--interval-ms N] [--cancel-after K]]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *sock = NULL;
    const char *method = "/kdptest.Echo/Unary";
    bool stream = false;
    kdp__unary_opts opts = {0};
    Kdptest__EchoRequest req = KDPTEST__ECHO_REQUEST__INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            return usage();
        }
        const char *v = argv[++i];
        if (strcmp(a, "--socket") == 0) {
            sock = v;
        } else if (strcmp(a, "--method") == 0) {
            method = v;
        } else if (strcmp(a, "--payload") == 0) {
            req.payload.data = (uint8_t *)v;
            req.payload.len = strlen(v);
        } else if (strcmp(a, "--status-code") == 0) {
            req.status_code = atoi(v);
        } else if (strcmp(a, "--status-message") == 0) {
            req.status_message = (char *)v;
        } else if (strcmp(a, "--delay-ms") == 0) {
            req.delay_ms = atoi(v);
        } else if (strcmp(a, "--timeout-ms") == 0) {
            opts.timeout_us = strtoull(v, NULL, 10) * 1000;
        } else if (strcmp(a, "--authority") == 0) {
            opts.authority = v;
        } else if (strcmp(a, "--stream") == 0) {
            stream = true;
            req.count = atoi(v);
        } else if (strcmp(a, "--interval-ms") == 0) {
            req.interval_ms = atoi(v);
        } else if (strcmp(a, "--cancel-after") == 0) {
            cancel_after = atoi(v);
        } else {
            return usage();
        }
    }
    if (!sock) {
        return usage();
    }
    int r = kdp__loop_new(&loop);
    if (r == 0 && stream) {
        uint8_t buf[4096];
        size_t len = kdptest__echo_request__get_packed_size(&req);
        if (len > sizeof(buf)) {
            return usage();
        }
        kdptest__echo_request__pack(&req, buf);
        r = kdp__client_stream(loop, sock, "/kdptest.Echo/Stream", buf, len, &opts, on_stream_msg,
                               on_done, NULL, &stream_call);
    } else if (r == 0) {
        r = kdp__client_unary_pb(loop, sock, method, &req.base, &opts, on_done, NULL, NULL);
    }
    if (r == 0) {
        r = kdp__loop_run(loop);
    }
    if (r < 0) {
        fprintf(stderr, "kdp-echo-client: %s\n", strerror(-r));
        exit_code = 1;
    }
    kdp__loop_free(loop);
    return exit_code;
}
