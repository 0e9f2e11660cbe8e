/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the server side of a connection: server.c, call.c and
 * conn.c on nghttp2, fed a client's bytes through a socketpair. One loop and
 * one server (created on the first input) serve every input; each input gets
 * a fresh connection, which must be gone, with every call closed and every
 * held call cancelled, once the client has hung up. abort()s otherwise: that
 * is a leak or a hang.
 *
 * Input: byte 0 = flags, the rest = the client's bytes.
 *   bit 0 clear: the HTTP/2 client preface is sent first (the rest is frames);
 *         set: the rest is sent as is.
 *   bit 1 set: the rest is written in pieces of ((byte0 >> 6) + 1) * 32 bytes,
 *         with the loop run between them, so the server answers in between;
 *         clear: all at once.
 *   bit 2 set: before hanging up, the loop runs until it has been idle for
 *         IDLE_MS, so that short deadlines (grpc-timeout) expire while the
 *         client is still connected; the client reads nothing meanwhile.
 *   bit 3 set: the server's socket gets the smallest send buffer, so that
 *         its writes fill it and wait for EPOLLOUT.
 *   bit 4 set: a server of its own serves the input and is shut down
 *         (kdp__server_shutdown) before the client hangs up; its done
 *         callback must run once. With bit 2 too, while the client still
 *         reads nothing: the shutdown must end within its linger anyway.
 *   bit 5 set: a server of its own serves the input and is freed
 *         (kdp__server_free) before the client hangs up (right after the
 *         shutdown if bit 4 is set too).
 * The seeds in fuzz/corpus/server_conn/ are a flags byte (mostly 0x00) + what
 * a real client (grpc-go, grpcio, kdp's own) sent to kdp-echo-server after
 * the preface.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "grpc/server.h"
#include "grpc/server_int.h"
#include "grpc/wire.h"
#include "kdp.h"
#include "runtime/loop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #x);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_RECV    (64U << 10)
#define FILLER_LEN  20000U /* more than one DATA frame (16 KiB) */
#define MAX_STALLS  2000   /* loop turns without the server reading: a hang */
#define MAX_QUIET   200    /* loop turns to settle after the client's EOF */
#define MAX_CLOSING 500    /* 10 ms loop turns for the connection to go */
#define IDLE_MS     2
#define LINGER_US   1000U /* kdp__server_shutdown's bound */
/* For it to be over: 5 s of wall time, a bound for a loaded machine (a 1 s
 * bound failed once while a fuzzer at nice 15 shared 2 cores with a build and
 * three other fuzzers; the input ran in 13 ms alone). A real hang is caught
 * all the same, here or by libFuzzer's -timeout. */
#define MAX_LINGER_US (5000U * 1000U)

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static kdp__loop *loop;
static kdp__server *server;
static uint8_t filler[FILLER_LEN];
static uint8_t sink[64U << 10];
static unsigned held;      /* calls a handler keeps, until their cancel callback */
static unsigned done_runs; /* of kdp__server_shutdown's done callback */

static void check_call(kdp__call *call, const char *path)
{
    CHECK(strcmp(kdp__call_path(call), path) == 0);
    CHECK(strlen(kdp__call_authority(call)) < 256);
}

static void on_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)ud;
    CHECK(status == KDP__ST_CANCELLED || status == KDP__ST_DEADLINE_EXCEEDED ||
          status == KDP__ST_UNAVAILABLE);
    CHECK(held > 0);
    held--;
}

/* Unary: answers with the request's bytes. */
static void handle_echo(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    check_call(call, ud);
    CHECK(req && len <= MAX_RECV);
    CHECK(kdp__call_send(call, req, len) == 0);
    CHECK(kdp__call_finish(call, KDP__ST_OK, NULL) == 0);
}

/* Unary: fails, with a message that needs percent-encoding. */
static void handle_fail(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    check_call(call, ud);
    CHECK(kdp__call_finish(call, KDP__ST_INVALID_ARGUMENT,
                           "bad request: 100% \"wrong\"\n\xc3\xa9") == 0);
}

/* Server-streaming: the request back, then a message of several frames. */
static void handle_stream(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    check_call(call, ud);
    CHECK(kdp__call_send(call, req, len) == 0);
    CHECK(kdp__call_send(call, filler, sizeof(filler)) == 0);
    CHECK(kdp__call_finish(call, KDP__ST_OK, NULL) == 0);
}

/* Server-streaming: nothing until cancelled. */
static void handle_hang(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    (void)req;
    (void)len;
    check_call(call, ud);
    kdp__call_set_cancel(call, on_cancel, NULL);
    held++;
}

/* Server-streaming: one message, then kept open (queued data at cancel). */
static void handle_push(kdp__call *call, const uint8_t *req, size_t len, void *ud)
{
    check_call(call, ud);
    CHECK(kdp__call_send(call, req, len) == 0);
    kdp__call_set_cancel(call, on_cancel, NULL);
    held++;
}

static void discard_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    CHECK(msg);
}

#define M(name, kind, fn)                                                                          \
    {                                                                                              \
        "/kdptest.Echo/" name, kind, fn, (void *)"/kdptest.Echo/" name, NULL                       \
    }
static const kdp__method methods[] = {
    M("Unary", KDP__UNARY, handle_echo),
    M("Fail", KDP__UNARY, handle_fail),
    M("Stream", KDP__SERVER_STREAMING, handle_stream),
    M("Hang", KDP__SERVER_STREAMING, handle_hang),
    M("Push", KDP__SERVER_STREAMING, handle_push),
};
#undef M
static const kdp__server_config cfg = {.max_recv_message = MAX_RECV, .max_streams = 8};

static kdp__server *server_new(void)
{
    kdp__server *s = NULL;
    CHECK(kdp__server_new(loop, methods, sizeof(methods) / sizeof(methods[0]), &cfg, &s) == 0);
    return s;
}

static void init(void)
{
    memset(filler, 'x', sizeof(filler));
    /* Debug lines carry the peer's bytes: format them, then drop them. */
    kdp_log_set(KDP_LOG_DEBUG, discard_log, NULL);
    CHECK(kdp__loop_new(&loop) == 0);
    server = server_new();
}

static void drain(int fd)
{
    while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
    }
}

/* One loop turn, then whatever the server wrote is read and dropped. */
static int pump(int fd, int timeout_ms)
{
    int n = kdp__loop_dispatch(loop, timeout_ms);
    CHECK(n >= 0);
    drain(fd);
    return n;
}

/* Writes p (in pieces of piece bytes, the loop run after each). Returns false
 * once the server has closed its end. */
static bool feed(int fd, const uint8_t *p, size_t n, size_t piece)
{
    size_t off = 0;
    unsigned stalls = 0;
    while (off < n) {
        size_t want = n - off < piece ? n - off : piece;
        ssize_t w = send(fd, p + off, want, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            stalls = 0;
            if (piece < n) {
                (void)pump(fd, 0);
            }
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            CHECK(++stalls < MAX_STALLS); /* the server stopped reading */
            (void)pump(fd, stalls > 10 ? 1 : 0);
        } else {
            return false; /* EPIPE, ECONNRESET: the server hung up */
        }
    }
    return true;
}

static void on_done(kdp__server *s, void *ud)
{
    (void)s;
    (void)ud;
    done_runs++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!loop) {
        init();
    }
    if (size == 0) {
        return 0;
    }
    uint8_t flags = data[0];
    data++;
    size--;

    kdp__server *s = flags & (16 | 32) ? server_new() : server;
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    if (flags & 8) {
        int one = 1; /* the kernel rounds it up to its minimum */
        CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one)) == 0);
    }
    CHECK(kdp__server_adopt(s, sv[0]) == 0);
    int fd = sv[1];
    size_t piece = flags & 2 ? (size_t)((flags >> 6) + 1) * 32 : SIZE_MAX;
    bool open = true;
    if (!(flags & 1)) {
        open = feed(fd, (const uint8_t *)preface, sizeof(preface) - 1, piece);
    }
    if (open) {
        (void)feed(fd, data, size, piece);
    }
    for (int i = 0; (flags & 4) && i < MAX_QUIET; i++) {
        int n = kdp__loop_dispatch(loop, IDLE_MS);
        CHECK(n >= 0);
        if (n == 0) {
            break;
        }
    }

    done_runs = 0;
    if (flags & 16) {
        kdp__server_shutdown(s, LINGER_US, on_done, NULL);
        int late[2]; /* refused, and closed as the contract says */
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, late) == 0);
        CHECK(kdp__server_adopt(s, late[0]) == -EINVAL);
        CHECK(fcntl(late[0], F_GETFD) < 0 && errno == EBADF);
        close(late[1]);
        CHECK(held == 0);      /* every open call was finished, handlers told */
        CHECK(done_runs == 0); /* never from inside */
        uint64_t start = kdp__now_us();
        while ((flags & 4) && done_runs == 0) {
            CHECK(kdp__now_us() - start < MAX_LINGER_US); /* it outlived its linger */
            CHECK(kdp__loop_dispatch(loop, 10) >= 0);
        }
    }
    if (flags & 32) {
        kdp__server_free(s);
        s = NULL;
        CHECK(held == 0);
    }
    (void)shutdown(fd, SHUT_WR);
    for (int i = 0; i < MAX_QUIET && pump(fd, 0) > 0; i++) {
    }
    close(fd);

    /* Every connection goes once its client has: no leak, no hang. */
    kdp__server_stats st = {0};
    for (int i = 0; s; i++) {
        kdp__server_stats_get(s, &st);
        if (st.connections == 0 && (done_runs > 0 || !(flags & 16))) {
            break;
        }
        CHECK(i < MAX_CLOSING); /* a connection outlived its socket */
        (void)kdp__loop_dispatch(loop, 10);
    }
    CHECK(st.active_calls == 0);
    CHECK(st.calls_cancelled <= st.calls_total);
    CHECK(held == 0);
    CHECK(!s || s->held == 0); /* the request bytes counted against the caps, all given back */
    /* once after a shutdown, unless the server was freed first */
    CHECK(done_runs == ((flags & 16) && (!(flags & 32) || (flags & 4))));
    if (s != server) {
        kdp__server_free(s);
    }
    return 0;
}
