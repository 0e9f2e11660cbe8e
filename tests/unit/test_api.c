/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "k8s/api.h"
#include "runtime/loop.h"

static void test_errno(void **state)
{
    (void)state;
    assert_int_equal(kdp__api_errno(200, NULL), 0);
    assert_int_equal(kdp__api_errno(201, NULL), 0);
    assert_int_equal(kdp__api_errno(400, NULL), -EINVAL);
    assert_int_equal(kdp__api_errno(422, "Invalid"), -EINVAL);
    assert_int_equal(kdp__api_errno(401, NULL), -EACCES);
    assert_int_equal(kdp__api_errno(403, "Forbidden"), -EACCES);
    assert_int_equal(kdp__api_errno(404, "NotFound"), -ENOENT);
    assert_int_equal(kdp__api_errno(409, "AlreadyExists"), -EEXIST);
    assert_int_equal(kdp__api_errno(409, "Conflict"), -ESTALE);
    assert_int_equal(kdp__api_errno(409, NULL), -ESTALE);
    assert_int_equal(kdp__api_errno(410, "Expired"), -EIDRM);
    assert_int_equal(kdp__api_errno(429, NULL), -EAGAIN);
    assert_int_equal(kdp__api_errno(503, NULL), -EAGAIN);
    assert_int_equal(kdp__api_errno(302, NULL), -EIO);
}

struct result {
    int n;
    int err;
    char why[1024];
};

static void done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    (void)obj;
    struct result *r = ud;
    r->n++;
    r->err = err;
    snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
}

static void never(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)err;
    (void)code;
    (void)obj;
    (void)why;
    (void)ud;
    fail_msg("a cancelled call's callback ran");
}

static void never_event(const char *type, json_t *obj, void *ud)
{
    (void)type;
    (void)obj;
    (void)ud;
}

/* A port nothing listens on (bound, then closed). */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void test_unreachable_cancel_free(void **state)
{
    (void)state;
    kdp__loop *l = NULL;
    assert_int_equal(kdp__loop_new(&l), 0);
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%d", dead_port());
    char token[] = "t";
    char source[] = "test";
    kdp__kconfig kc = {.server = server, .token = token, .source = source};
    kdp__api *a = NULL;
    assert_int_equal(kdp__api_new(NULL, &kc, &a), -EINVAL);
    assert_int_equal(kdp__api_new(l, &kc, &a), 0);
    assert_string_equal(kdp__api_server(a), server);

    struct result r = {0};
    assert_int_equal(kdp__api_call(a, "GET", "no-slash", NULL, done, &r, NULL), -EINVAL);
    assert_int_equal(kdp__api_call(a, "GET", "/a b", NULL, done, &r, NULL), -EINVAL);
    const char *const none[] = {NULL};
    assert_int_equal(kdp__api_discover(a, "resource.k8s.io", none, NULL, NULL, NULL), -EINVAL);

    /* refused: a line naming the server */
    assert_int_equal(kdp__api_call(a, "GET", "/api/v1/nodes/n1", NULL, done, &r, NULL), 0);
    /* cancelled at once: no callback */
    kdp__api_req *c = NULL;
    assert_int_equal(kdp__api_call(a, "DELETE", "/x", NULL, never, NULL, &c), 0);
    kdp__api_cancel(c);
    for (int i = 0; i < 500 && r.n == 0; i++) {
        kdp__loop_dispatch(l, 10);
    }
    assert_int_equal(r.n, 1);
    assert_int_equal(r.err, -ECONNREFUSED);
    assert_non_null(strstr(r.why, "unreachable"));
    assert_non_null(strstr(r.why, server));
    assert_non_null(strstr(r.why, "GET /api/v1/nodes/n1"));

    /* freed with a call and a watch in flight: no callback */
    assert_int_equal(kdp__api_call(a, "GET", "/y", NULL, never, NULL, NULL), 0);
    assert_int_equal(kdp__api_watch(a, "/z?x=1", never_event, never, NULL, NULL), 0);
    kdp__api_stats st;
    kdp__api_get_stats(a, &st);
    assert_true(st.calls >= 2);
    kdp__api_free(a);
    kdp__loop_dispatch(l, 0);
    kdp__loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errno),
        cmocka_unit_test(test_unreachable_cancel_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
