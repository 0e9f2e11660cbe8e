/* SPDX-License-Identifier: MIT */
/* The line of an API server's error answer: the RBAC rule a 403 lacks read
 * from the method and path, the hints of the other statuses, the API
 * server's own message. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "k8s/apierr.h"

static const char *line(const char *method, const char *path, bool watch, long code, json_t *status)
{
    static char why[1024];
    kdp__apierr_call c = {.method = method,
                          .path = path,
                          .watch = watch,
                          .source = "kubeconfig /etc/kc",
                          .token_file = true};
    kdp__apierr_line(&c, code, status, why, sizeof(why));
    return why;
}

static void test_forbidden_names_the_rule(void **state)
{
    (void)state;
    json_t *st = json_pack("{s:s, s:s}", "reason", "Forbidden", "message", "no");
    assert_string_equal(line("POST", "/apis/resource.k8s.io/v1/resourceslices", false, 403, st),
                        "POST /apis/resource.k8s.io/v1/resourceslices: HTTP 403 Forbidden: grant "
                        "create on resourceslices in resource.k8s.io (deploy/rbac); the API "
                        "server says: no");
    json_decref(st);
    assert_string_equal(
        line("GET", "/apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims/c1", false, 403, NULL),
        "GET /apis/resource.k8s.io/v1/namespaces/ns1/resourceclaims/c1: HTTP 403: grant get on "
        "resourceclaims in resource.k8s.io (deploy/rbac)");
    assert_string_equal(line("GET", "/apis/resource.k8s.io/v1/resourceclaims", false, 403, NULL),
                        "GET /apis/resource.k8s.io/v1/resourceclaims: HTTP 403: grant list on "
                        "resourceclaims in resource.k8s.io (deploy/rbac)");
    assert_string_equal(line("GET", "/api/v1/nodes?watch=true", true, 403, NULL),
                        "GET /api/v1/nodes?watch=true: HTTP 403: grant watch on nodes in the core "
                        "API group (deploy/rbac)");
    assert_string_equal(
        line("PATCH", "/apis/resource.k8s.io/v1/resourceclaims/c1/status", false, 403, NULL),
        "PATCH /apis/resource.k8s.io/v1/resourceclaims/c1/status: HTTP 403: grant patch on "
        "resourceclaims/status in resource.k8s.io (deploy/rbac)");
    assert_string_equal(line("DELETE", "/healthz", false, 403, NULL),
                        "DELETE /healthz: HTTP 403: check the RBAC rules of /healthz");
}

static void test_other_statuses(void **state)
{
    (void)state;
    assert_string_equal(line("GET", "/api/v1/nodes/n1", false, 401, NULL),
                        "GET /api/v1/nodes/n1: HTTP 401: the token or client certificate was "
                        "refused: check the credentials of kubeconfig /etc/kc (its token file was "
                        "re-read and tried once more)");
    json_t *st = json_pack("{s:s}", "reason", "Expired");
    assert_string_equal(line("GET", "/api/v1/pods", false, 410, st),
                        "GET /api/v1/pods: HTTP 410 Expired: the resourceVersion is too old: list "
                        "again");
    json_decref(st);
    assert_non_null(strstr(line("PUT", "/api/v1/x", false, 503, NULL), "retrying later"));
    /* a create that finds the object there, and a write that lost a race,
     * are told apart (a user found "re-read and try again" for the first) */
    st = json_pack("{s:s,s:s}", "reason", "AlreadyExists", "message", "x exists");
    assert_string_equal(line("POST", "/apis/resource.k8s.io/v1/resourceslices", false, 409, st),
                        "POST /apis/resource.k8s.io/v1/resourceslices: HTTP 409 AlreadyExists: it "
                        "exists already; the API server says: x exists");
    json_decref(st);
    st = json_pack("{s:s}", "reason", "Conflict");
    assert_non_null(strstr(line("PUT", "/apis/resource.k8s.io/v1/resourceslices/s", false, 409, st),
                           "HTTP 409 Conflict: changed by someone else: re-read and try again"));
    json_decref(st);
    assert_string_equal(line("GET", "/api/v1/x", false, 418, NULL),
                        "GET /api/v1/x: HTTP 418: unexpected answer");
    char small[16];
    kdp__apierr_call c = {.method = "GET", .path = "/api/v1/x", .source = "s"};
    kdp__apierr_line(&c, 404, NULL, small, sizeof(small));
    assert_string_equal(small, "GET /api/v1/x: "); /* truncated, terminated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forbidden_names_the_rule),
        cmocka_unit_test(test_other_statuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
