/* SPDX-License-Identifier: MIT */
/*
 * kdp-echo-server: the test-only Echo service (echo.proto) on kdp's gRPC
 * server, for driving the transport from real grpc-go and grpcio clients.
 * Unary answers after delay_ms from a timer, Stream pushes from a timer,
 * so both prove that a handler can answer at any later time.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "echo.pb-c.h"
#include "grpc/server.h"
#include "grpc/wire.h"
#include "runtime/loop.h"

typedef struct pending {
    kdp__call *call;
    kdp__timer *timer;
    Kdptest__EchoRequest *req;
    int64_t seq;
} pending;

static kdp__server *server;
static kdp__loop *loop;

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pending_free(pending *p)
{
    kdp__timer_free(p->timer);
    kdptest__echo_request__free_unpacked(p->req, NULL);
    free(p);
}

static void on_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    pending_free(ud);
}

static void reply(kdp__call *call, const Kdptest__EchoRequest *req, int64_t seq)
{
    Kdptest__EchoReply rep = KDPTEST__ECHO_REPLY__INIT;
    uint8_t *fill = NULL;
    if (req->reply_size > 0) {
        fill = malloc((size_t)req->reply_size);
        if (!fill) {
            (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
            return;
        }
        memset(fill, 'x', (size_t)req->reply_size);
        rep.payload.data = fill;
        rep.payload.len = (size_t)req->reply_size;
    } else {
        rep.payload = req->payload;
    }
    rep.seq = seq;
    rep.request_bytes = (int64_t)req->payload.len;
    rep.authority = (char *)kdp__call_authority(call);
    rep.sent_unix_nanos = realtime_ns();
    (void)kdp__call_send_pb(call, &rep.base);
    free(fill);
}

static void unary_answer(kdp__call *call, const Kdptest__EchoRequest *req)
{
    if (req->status_code != 0) {
        (void)kdp__call_finish(call, req->status_code, req->status_message);
        return;
    }
    reply(call, req, 0);
    (void)kdp__call_finish(call, KDP__ST_OK, NULL);
}

static void on_unary_timer(kdp__timer *t, void *ud)
{
    (void)t;
    pending *p = ud;
    unary_answer(p->call, p->req);
    pending_free(p);
}

static void on_stream_timer(kdp__timer *t, void *ud)
{
    pending *p = ud;
    reply(p->call, p->req, p->seq++);
    if (p->req->count > 0 && p->seq >= p->req->count) {
        (void)kdp__call_finish(p->call, KDP__ST_OK, NULL);
        pending_free(p);
        return;
    }
    kdp__timer_start(t, (uint64_t)(p->req->interval_ms > 0 ? p->req->interval_ms : 0) * 1000);
}

static pending *pending_new(kdp__call *call, Kdptest__EchoRequest *req, kdp__timer_cb cb)
{
    pending *p = calloc(1, sizeof(*p));
    if (!p || kdp__timer_new(loop, cb, p, &p->timer) < 0) {
        free(p);
        kdptest__echo_request__free_unpacked(req, NULL);
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
        return NULL;
    }
    p->call = call;
    p->req = req;
    kdp__call_set_cancel(call, on_cancel, p);
    return p;
}

static Kdptest__EchoRequest *parse(kdp__call *call, const uint8_t *msg, size_t len)
{
    Kdptest__EchoRequest *req = kdptest__echo_request__unpack(NULL, len, msg);
    if (!req) {
        (void)kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT, "cannot parse EchoRequest");
    }
    return req;
}

static void handle_unary(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)ud;
    Kdptest__EchoRequest *req = parse(call, msg, len);
    if (!req) {
        return;
    }
    if (req->delay_ms <= 0) {
        unary_answer(call, req);
        kdptest__echo_request__free_unpacked(req, NULL);
        return;
    }
    pending *p = pending_new(call, req, on_unary_timer);
    if (p) {
        kdp__timer_start(p->timer, (uint64_t)req->delay_ms * 1000);
    }
}

static void handle_stream(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)ud;
    Kdptest__EchoRequest *req = parse(call, msg, len);
    if (!req) {
        return;
    }
    pending *p = pending_new(call, req, on_stream_timer);
    if (p) {
        kdp__timer_start(p->timer, 0);
    }
}

static void handle_stats(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    (void)msg;
    (void)len;
    (void)ud;
    kdp__server_stats st;
    kdp__server_stats_get(server, &st);
    Kdptest__EchoStats rep = KDPTEST__ECHO_STATS__INIT;
    rep.active_streams = (int64_t)st.active_calls - 1; /* this call excluded */
    rep.connections = (int64_t)st.connections;
    rep.streams_cancelled = (int64_t)st.calls_cancelled;
    rep.streams_total = (int64_t)st.calls_total;
    (void)kdp__call_reply_pb(call, &rep.base);
}

static void on_done(kdp__server *s, void *ud)
{
    (void)s;
    (void)ud;
    kdp__loop_quit(loop);
}

static void on_signal(kdp__signal *sig, int signo, void *ud)
{
    (void)sig;
    (void)ud;
    fprintf(stderr, "kdp-echo-server: signal %d, shutting down\n", signo);
    kdp__server_shutdown(server, 2000000, on_done, NULL);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    kdp__server_config cfg = {0};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--max-recv") == 0 && i + 1 < argc) {
            cfg.max_recv_message = strtoul(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: kdp-echo-server --socket PATH [--max-recv BYTES]\n");
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: kdp-echo-server --socket PATH [--max-recv BYTES]\n");
        return 2;
    }
    static const kdp__method methods[] = {
        {"/kdptest.Echo/Unary", KDP__UNARY, handle_unary, NULL, NULL},
        {"/kdptest.Echo/Stream", KDP__SERVER_STREAMING, handle_stream, NULL, NULL},
        {"/kdptest.Echo/Stats", KDP__UNARY, handle_stats, NULL, NULL},
    };
    kdp__signal *sigterm = NULL;
    kdp__signal *sigint = NULL;
    int r = kdp__loop_new(&loop);
    if (r == 0) {
        r = kdp__signal_add(loop, SIGTERM, on_signal, NULL, &sigterm);
    }
    if (r == 0) {
        r = kdp__signal_add(loop, SIGINT, on_signal, NULL, &sigint);
    }
    if (r == 0) {
        r = kdp__server_new(loop, methods, 3, &cfg, &server);
    }
    if (r == 0) {
        r = kdp__server_listen(server, path);
    }
    if (r == 0) {
        fprintf(stderr, "kdp-echo-server: listening on %s\n", path);
        r = kdp__loop_run(loop);
    }
    if (r < 0) {
        fprintf(stderr, "kdp-echo-server: %s: %s\n", path, strerror(-r));
    }
    kdp__server_free(server);
    kdp__signal_free(sigterm);
    kdp__signal_free(sigint);
    kdp__loop_free(loop);
    return r < 0 ? 1 : 0;
}
