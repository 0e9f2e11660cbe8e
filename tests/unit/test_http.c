/* SPDX-License-Identifier: MIT */
/* The HTTP server on the loop: the address forms, a request over a real
 * socket, and the timer that is armed only while a connection is open. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "runtime/http.h"
#include "runtime/loop.h"

static void test_addresses(void **state)
{
    (void)state;
    const char *good[] = {"127.0.0.1:9400",   ":9400",       "[::1]:0",           "localhost:80",
                          "unix:/run/x.sock", "/run/x.sock", "host.example:65535"};
    const char *bad[] = {
        "",         "9400",      "127.0.0.1", "127.0.0.1:", "1.2.3.4:x", ":65536",
        "::1:9400", "[::1]9400", "unix:rel",  "a b:80",     "[]:80",     ":123456"};
    const char *why = NULL;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        if (kdp__http_check_address(good[i], &why) != 0) {
            fail_msg("%s refused: %s", good[i], why);
        }
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        if (kdp__http_check_address(bad[i], &why) != -EINVAL || !why) {
            fail_msg("%s accepted", bad[i]);
        }
    }
    char longpath[200];
    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    assert_int_equal(kdp__http_check_address(longpath, &why), -EINVAL);
    assert_int_equal(kdp__http_check_address(NULL, &why), -EINVAL);
}

static int handled;

static void handler(const char *method, const char *path, kdp__http_resp *resp, void *ud)
{
    (void)ud;
    handled++;
    resp->status = strcmp(path, "/x") == 0 ? 200 : 404;
    char buf[64];
    snprintf(buf, sizeof(buf), "%s %s\n", method, path);
    resp->body = strdup(buf);
    resp->len = strlen(buf);
}

static void test_request_on_the_loop(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__http *h;
    assert_int_equal(kdp__http_listen(l, "127.0.0.1:0", NULL, handler, NULL, &h), 0);
    assert_non_null(strstr(kdp__http_address(h), "127.0.0.1:"));
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1); /* idle: no timer armed */
    kdp__http *again;
    char addr[64];
    snprintf(addr, sizeof(addr), "%s", kdp__http_address(h));
    assert_int_equal(kdp__http_listen(l, addr, NULL, handler, NULL, &again), -EADDRINUSE);
    assert_int_equal(kdp__http_listen(l, "nonsense", NULL, handler, NULL, &again), -EINVAL);

    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(kdp__http_adopt(h, sv[0]), 0);
    assert_int_equal(kdp__http_connections(h), 1);
    assert_true(kdp__loop_next_timeout_ms(l) >= 0); /* the connection's timeout */
    const char req[] = "GET /x?q=1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    assert_int_equal(write(sv[1], req, strlen(req)), (ssize_t)strlen(req));
    char out[2048] = "";
    size_t got = 0;
    for (int i = 0; i < 200 && !strstr(out, "GET /x\n"); i++) {
        (void)kdp__loop_dispatch(l, 10);
        ssize_t n = recv(sv[1], out + got, sizeof(out) - 1 - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            out[got] = '\0';
        }
    }
    assert_int_equal(handled, 1);
    assert_non_null(strstr(out, "HTTP/1.1 200"));
    assert_non_null(strstr(out, "Content-Type: text/plain; charset=utf-8"));
    assert_non_null(strstr(out, "GET /x\n"));
    for (int i = 0; i < 100 && kdp__http_connections(h) > 0; i++) {
        (void)kdp__loop_dispatch(l, 10);
    }
    assert_int_equal(kdp__http_connections(h), 0);
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1); /* idle again: no timer */
    close(sv[1]);
    kdp__http_free(h);

    /* a unix socket: bound, its file removed at free; a stale one replaced */
    char path[64];
    snprintf(path, sizeof(path), "/tmp/kdp-test-http-%d.sock", (int)getpid());
    int stale = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    (void)unlink(path);
    assert_int_equal(bind(stale, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(stale); /* the file stays, nobody listens */
    char unix_addr[80];
    snprintf(unix_addr, sizeof(unix_addr), "unix:%s", path);
    assert_int_equal(kdp__http_listen(l, unix_addr, NULL, handler, NULL, &h), 0);
    assert_string_equal(kdp__http_address(h), path);
    assert_int_equal(kdp__http_listen(l, path, NULL, handler, NULL, &again), -EADDRINUSE);
    kdp__http_free(h);
    assert_int_equal(access(path, F_OK), -1);
    kdp__loop_free(l);
}

/* A keep-alive request (what Prometheus and the kubelet send) is answered
 * and its connection closed all the same: nothing stays open, so no timer
 * wakes the loop between two scrapes. */
static void test_answer_closes(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__http *h;
    assert_int_equal(kdp__http_listen(l, "127.0.0.1:0", NULL, handler, NULL, &h), 0);
    /* over TCP, as a scraper connects */
    int sv[2] = {-1, socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    in.sin_port = htons((uint16_t)atoi(strrchr(kdp__http_address(h), ':') + 1));
    assert_int_equal(connect(sv[1], (struct sockaddr *)&in, sizeof(in)), 0);
    const char req[] = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";
    assert_int_equal(write(sv[1], req, strlen(req)), (ssize_t)strlen(req));
    char out[2048] = "";
    size_t got = 0;
    bool eof = false;
    for (int i = 0; i < 100 && !eof; i++) {
        (void)kdp__loop_dispatch(l, 10);
        ssize_t n = recv(sv[1], out + got, sizeof(out) - 1 - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            out[got] = '\0';
        }
        eof = n == 0;
    }
    assert_non_null(strstr(out, "HTTP/1.1 200"));
    assert_non_null(strstr(out, "Connection: close"));
    assert_true(eof);
    assert_int_equal(kdp__http_connections(h), 0);
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1);
    close(sv[1]);
    kdp__http_free(h);
    kdp__loop_free(l);
}

/* A client that sends a byte now and then is never idle: its connection is
 * closed at its deadline all the same (finding: 16 such connections from
 * each of two addresses held /healthz for as long as they ran). */
static void test_deadline_closes_a_trickler(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    kdp__http *h;
    kdp__http_cfg cfg = {.timeout_s = 10, .deadline_s = 1};
    assert_int_equal(kdp__http_listen(l, "127.0.0.1:0", &cfg, handler, NULL, &h), 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    in.sin_port = htons((uint16_t)atoi(strrchr(kdp__http_address(h), ':') + 1));
    assert_int_equal(connect(fd, (struct sockaddr *)&in, sizeof(in)), 0);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const char req[] =
        "GET /xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    bool eof = false;
    size_t sent = 0;
    for (int i = 0; i < 400 && !eof; i++) { /* a byte every 20 ms: never idle */
        (void)kdp__loop_dispatch(l, 10);
        if (i % 2 == 0 && sent < sizeof(req) - 1) {
            (void)send(fd, req + sent++, 1, MSG_NOSIGNAL);
        }
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
        eof = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    }
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(eof);     /* closed by the server */
    assert_true(s > 0.9); /* at its deadline, not before */
    for (int i = 0; i < 100 && kdp__http_connections(h) > 0; i++) {
        (void)kdp__loop_dispatch(l, 10);
    }
    assert_int_equal(kdp__http_connections(h), 0);
    assert_int_equal(kdp__loop_next_timeout_ms(l), -1); /* the reaper disarmed */
    close(fd);
    kdp__http_free(h);
    kdp__loop_free(l);
}

/* The unix socket is the owner's only, whatever the umask (finding: 0777
 * under umask 000). */
static void test_unix_socket_mode(void **state)
{
    (void)state;
    kdp__loop *l;
    assert_int_equal(kdp__loop_new(&l), 0);
    char path[64];
    snprintf(path, sizeof(path), "/tmp/kdp-test-http-mode-%d.sock", (int)getpid());
    (void)unlink(path);
    mode_t old = umask(0);
    kdp__http *h;
    int r = kdp__http_listen(l, path, NULL, handler, NULL, &h);
    umask(old);
    assert_int_equal(r, 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    kdp__http_free(h);
    kdp__loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline_closes_a_trickler),
        cmocka_unit_test(test_unix_socket_mode),
        cmocka_unit_test(test_addresses),
        cmocka_unit_test(test_request_on_the_loop),
        cmocka_unit_test(test_answer_closes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
