/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the client side: client.c and conn.c on nghttp2, fed
 * a server's bytes. Each input makes one kdp__client_unary() call to a unix
 * socket of ours (in a per-process temp dir), takes the connection, reads and
 * drops what the client sends, answers with the input and hangs up. The done
 * callback must then run exactly once, with the contract's invariants; a
 * cancelled call must never run it. abort()s otherwise.
 *
 * Input: byte 0 = flags, the rest = the server's bytes.
 *   bit 0 clear: an empty SETTINGS frame (the server preface) is sent first;
 *         set: the rest is sent as is.
 *   bit 1 set: the call is cancelled after the bytes (if it has not ended).
 *   bit 2 set: the connection stays open until the call ends, so a short
 *         deadline (1 ms) ends it; clear: 50 ms, and we hang up at once.
 *   bit 3 set: the call goes to a socket path that does not exist (the rest
 *         is not used): done must still run, later, with UNAVAILABLE.
 * The seeds in fuzz/corpus/client_conn/ are 0x01 + what grpc-go's server sent
 * to kdp-echo-client.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpc/client.h"
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

#define MAX_RECV   1024U
#define MAX_STALLS 2000 /* loop turns without the client reading: a hang */
#define MAX_WAIT   300  /* 10 ms loop turns for done to run */

static const uint8_t empty_settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
/* An EchoRequest{payload: "fuzz"}. */
static const uint8_t request[] = {0x0a, 0x04, 'f', 'u', 'z', 'z'};

static kdp__loop *loop;
static int listen_fd = -1;
static char dir[PATH_MAX];
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static char missing_path[sizeof(sock_path)];
static int last_status;
static uint8_t sink[64U << 10];
static unsigned done_runs;

static void cleanup(void)
{
    if (listen_fd >= 0) {
        close(listen_fd);
    }
    (void)unlink(sock_path);
    (void)rmdir(dir);
}

static void discard_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    CHECK(msg);
}

static void init(void)
{
    const char *tmp = getenv("TMPDIR");
    CHECK(snprintf(dir, sizeof(dir), "%s/kdp-fuzz-client-XXXXXX", tmp && *tmp ? tmp : "/tmp") <
          (int)sizeof(dir));
    CHECK(mkdtemp(dir));
    CHECK(snprintf(sock_path, sizeof(sock_path), "%s/s", dir) < (int)sizeof(sock_path));
    CHECK(snprintf(missing_path, sizeof(missing_path), "%s/missing", dir) <
          (int)sizeof(missing_path));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(listen_fd >= 0);
    CHECK(bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CHECK(listen(listen_fd, 16) == 0);
    atexit(cleanup);
    kdp_log_set(KDP_LOG_DEBUG, discard_log, NULL);
    CHECK(kdp__loop_new(&loop) == 0);
}

static void on_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    (void)ud;
    done_runs++;
    last_status = status;
    CHECK(done_runs == 1);
    CHECK(status >= 0);
    CHECK(message);
    CHECK(strlen(message) < 256);
    /* a response exactly when the status is OK */
    CHECK((status == KDP__ST_OK) == (resp != NULL));
    CHECK(resp || len == 0);
    CHECK(len <= MAX_RECV);
    if (len) {
        volatile uint8_t last = resp[len - 1]; /* readable, for ASan */
        (void)last;
    }
}

static void drain(int fd)
{
    while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
    }
}

static void pump(int fd, int timeout_ms)
{
    CHECK(kdp__loop_dispatch(loop, timeout_ms) >= 0);
    drain(fd);
}

/* Writes p whole, running the loop whenever the socket is full. Returns false
 * once the client has closed its end. */
static bool feed(int fd, const uint8_t *p, size_t n)
{
    size_t off = 0;
    unsigned stalls = 0;
    while (off < n) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            stalls = 0;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            CHECK(++stalls < MAX_STALLS); /* the client stopped reading */
            pump(fd, stalls > 10 ? 1 : 0);
        } else {
            return false; /* EPIPE, ECONNRESET: the client hung up */
        }
    }
    return true;
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

    done_runs = 0;
    bool hold = flags & 4;
    const kdp__unary_opts opts = {.timeout_us = hold ? 1000 : 50000, .max_recv = MAX_RECV};
    kdp__client_call *call = NULL;
    CHECK(kdp__client_unary(loop, flags & 8 ? missing_path : sock_path, "/kdptest.Echo/Unary",
                            request, sizeof(request), &opts, on_done, NULL, &call) == 0);
    CHECK(call);
    CHECK(done_runs == 0); /* never from inside the call */
    if (flags & 8) {
        for (int i = 0; done_runs == 0; i++) {
            CHECK(i < MAX_WAIT);
            CHECK(kdp__loop_dispatch(loop, 10) >= 0);
        }
        CHECK(last_status == KDP__ST_UNAVAILABLE);
        return 0;
    }

    /* The connect went through at once (a unix socket with backlog room),
     * and the client has already sent its preface and request. */
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    CHECK(fd >= 0);
    drain(fd);
    bool open = true;
    if (!(flags & 1)) {
        open = feed(fd, empty_settings, sizeof(empty_settings));
    }
    if (open) {
        (void)feed(fd, data, size);
    }

    if ((flags & 2) && done_runs == 0) {
        pump(fd, 0);
        if (done_runs == 0) {
            kdp__client_call_cancel(call);
            close(fd);
            for (int i = 0; i < 4; i++) {
                CHECK(kdp__loop_dispatch(loop, 0) >= 0);
            }
            CHECK(done_runs == 0);
            return 0;
        }
    }
    for (int i = 0; hold && done_runs == 0; i++) {
        CHECK(i < MAX_WAIT); /* the deadline did not end the call */
        pump(fd, 10);
    }
    drain(fd);
    close(fd);
    for (int i = 0; done_runs == 0; i++) {
        CHECK(i < MAX_WAIT); /* done never ran */
        CHECK(kdp__loop_dispatch(loop, 10) >= 0);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(kdp__loop_dispatch(loop, 0) >= 0);
    }
    CHECK(done_runs == 1);
    return 0;
}
