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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/validate.h"
#include "kdp.h"

typedef struct name_case {
    const char *s;
    bool ok;
} name_case;

typedef int (*check_fn)(const char *s, const char **why);

/* Runs fn on every case; on a wrong verdict, names the case before failing. */
static void run_cases(check_fn fn, const char *what, const name_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *why = NULL;
        int r = fn(cases[i].s, &why);
        if ((r == 0) != cases[i].ok || (r != 0 && r != -EINVAL)) {
            print_error("%s(\"%s\") = %d (%s), expected %s\n", what,
                        cases[i].s ? cases[i].s : "(null)", r, why ? why : "-",
                        cases[i].ok ? "ok" : "-EINVAL");
            fail();
        }
        if (r < 0) {
            /* Every rejection explains itself. */
            assert_non_null(why);
            assert_true(strlen(why) > 5);
        }
    }
}

/* A string of n copies of c (caller frees). */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static char *concat(const char *a, const char *b)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    char *s = malloc(la + lb + 1);
    assert_non_null(s);
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

/* A valid DNS subdomain of exactly len chars: labels of 50 'a's joined by
 * '.' (so no label is long, whatever the rule on labels). */
static char *subdomain(size_t len)
{
    char *s = repeat('a', len);
    for (size_t i = 50; i + 1 < len; i += 51) {
        s[i] = '.';
    }
    return s;
}

/* --- resource names: the kubelet's IsExtendedResourceName --- */

static const name_case resource_cases[] = {
    {"example.com/gpu", true},
    {"nvidia.com/gpu", true},
    {"example.com/GPU", true}, /* upper case is fine after the '/' */
    {"example.com/a", true},
    {"example.com/0", true},
    {"example.com/a.b_c-d", true},
    {"example.com/A-1_b.C", true},
    {"a/b", true},
    {"1.2.3/x", true},
    {"my-vendor.example.com/dev", true},
    {"k8s.io/foo", true},
    {"kubernetes.io.example.com/foo", true}, /* no "kubernetes.io/" substring */
    {"example.com/kubernetes.io", true},     /* idem */
    {"xkubernetes.io-x.com/foo", true},
    {"requests/foo", true}, /* only the "requests." prefix is reserved */
    {"requestsx.example.com/foo", true},
    {"requests.example.com/x", false},
    {"requests.x/y", false},
    {"", false},
    {NULL, false},
    {"gpu", false}, /* no '/' */
    {"example.com", false},
    {"kubernetes.io/foo", false},
    {"foo.kubernetes.io/bar", false},
    {"example.com/kubernetes.io/x", false},
    {"Example.com/gpu", false}, /* upper-case prefix */
    {"EXAMPLE.COM/gpu", false},
    {"example.com/a/b", false}, /* two slashes */
    {"example.com//b", false},
    {"example.com/gpu/", false},
    {"/gpu", false}, /* empty prefix: "requests./gpu" */
    {"example.com/", false},
    {"example.com/gpu-", false}, /* trailing '-' */
    {"example.com/-gpu", false},
    {"example.com/.gpu", false},
    {"example.com/gpu_", false},
    {"example.com/gpu.", false},
    {"example.com/g pu", false},
    {"example.com/gpu@1", false},
    {"example.com/gp\xc3\xbc", false}, /* non-ASCII */
    {"-example.com/gpu", false},
    {"example-.com/gpu", false},
    {"example.-com/gpu", false},
    {"example..com/gpu", false},
    {".example.com/gpu", false},
    {"example.com./gpu", false},
    {"exa_mple.com/gpu", false},
    {"exa mple.com/gpu", false},
    {"example.com:80/gpu", false},
};

static void test_resource_name_table(void **state)
{
    (void)state;
    size_t n = sizeof(resource_cases) / sizeof(resource_cases[0]);
    assert_true(n >= 30);
    run_cases(kdp__validate_resource_name, "resource", resource_cases, n);
    run_cases(kdp_validate_resource_name, "public resource", resource_cases, n);
}

static void expect_resource(const char *name, bool ok)
{
    const char *why = NULL;
    int r = kdp__validate_resource_name(name, &why);
    if ((r == 0) != ok) {
        print_error("resource \"%s\" (%zu chars): %d %s\n", name, strlen(name), r, why ? why : "");
        fail();
    }
}

static void test_resource_name_lengths(void **state)
{
    (void)state;
    /* The part after '/': 63 characters at most. */
    char *n63 = repeat('x', 63);
    char *n64 = repeat('x', 64);
    char *s = concat("example.com/", n63);
    expect_resource(s, true);
    free(s);
    s = concat("example.com/", n64);
    expect_resource(s, false);
    free(s);
    free(n63);
    free(n64);

    /* The prefix: "requests." + prefix at most 253, so 244 for the user. */
    char *p244 = subdomain(244);
    char *p245 = subdomain(245);
    s = concat(p244, "/x");
    expect_resource(s, true);
    free(s);
    s = concat(p245, "/x");
    expect_resource(s, false);
    free(s);
    free(p244);
    free(p245);

    /* The kubelet's DNS-1123 subdomain check limits the total only, not
     * each label (apimachinery checks labels "except max length"). */
    char *label100 = repeat('a', 100);
    s = concat(label100, ".com/x");
    expect_resource(s, true);
    free(s);
    free(label100);
}

static void expect_why(const char *name, const char *fragment)
{
    const char *why = NULL;
    assert_int_equal(kdp__validate_resource_name(name, &why), -EINVAL);
    assert_non_null(why);
    if (!strstr(why, fragment)) {
        print_error("\"%s\": why \"%s\" lacks \"%s\"\n", name, why, fragment);
        fail();
    }
}

static void test_resource_name_why(void **state)
{
    (void)state;
    expect_why("gpu", "must contain a '/'");
    expect_why("foo.kubernetes.io/bar", "kubernetes.io/");
    expect_why("requests.example.com/x", "requests.");
    expect_why("a.com/b/c", "exactly one '/'");
    expect_why("Example.com/x", "lower-case");
    expect_why("example.com/gpu-", "the part after '/' must start and end");
    expect_why("example.com/g@", "the part after '/' may contain only");
    expect_why("example..com/gpu", "empty label");
    expect_why("example-.com/gpu", "label");
    expect_why("/gpu", "the part before '/' is empty");
    expect_why("example.com/", "the part after '/' is empty");
    char *n64 = repeat('x', 64);
    char *s = concat("example.com/", n64);
    expect_why(s, "the part after '/' is longer than 63 characters");
    free(s);
    free(n64);
    char *p245 = subdomain(245);
    s = concat(p245, "/x");
    expect_why(s, "longer than 244");
    free(s);
    free(p245);

    /* why may be NULL; the public wrapper gives the same answer. */
    assert_int_equal(kdp__validate_resource_name("gpu", NULL), -EINVAL);
    assert_int_equal(kdp_validate_resource_name("gpu", NULL), -EINVAL);
    assert_int_equal(kdp_validate_resource_name("example.com/gpu", NULL), 0);
    const char *why = "untouched";
    assert_int_equal(kdp_validate_resource_name("example.com/gpu", &why), 0);
    assert_string_equal(why, "untouched");
}

/* --- socket names --- */

static void test_socket_names(void **state)
{
    (void)state;
    char *s100 = repeat('s', 100);
    char *s101 = repeat('s', 101);
    const name_case cases[] = {
        {"foo.sock", true},
        {"foo", true}, /* ".sock" is not required */
        {"kubelet.sock2", true},
        {"my-plugin_1.sock", true},
        {".hidden", true},
        {"...", true},
        {s100, true},
        {s101, false},
        {"", false},
        {NULL, false},
        {"a/b", false},
        {"/abs.sock", false},
        {".", false},
        {"..", false},
        {"kubelet.sock", false},
        {"foo\n.sock", false},
        {"foo\x7f", false},
        {"\t", false},
    };
    run_cases(kdp__validate_socket_name, "socket", cases, sizeof(cases) / sizeof(cases[0]));
    free(s100);
    free(s101);
}

/* --- device IDs --- */

static void test_device_ids(void **state)
{
    (void)state;
    char *i255 = repeat('d', 255);
    char *i256 = repeat('d', 256);
    const name_case cases[] = {
        {"gpu0", true},
        {"0000:01:00.0", true},
        {"GPU-3f2a1b4c-0000-1111-2222-333344445555", true},
        {"a", true},
        {"~!@#$%^&*()_+-=[]{}|;':\"<>?.", true},
        {i255, true},
        {i256, false},
        {"", false},
        {NULL, false},
        {"a b", false},
        {"a/b", false},
        {"a,b", false},
        {"a\tb", false},
        {"dev\x7f", false},
        {"d\xc3\xa9v", false},
    };
    run_cases(kdp__validate_device_id, "device id", cases, sizeof(cases) / sizeof(cases[0]));
    free(i255);
    free(i256);
}

/* --- permissions --- */

static void test_permissions(void **state)
{
    (void)state;
    const name_case cases[] = {
        {"r", true},    {"w", true},     {"m", true},     {"rw", true},    {"wr", true},
        {"rwm", true},  {"mrw", true},   {"wm", true},    {"", false},     {NULL, false},
        {"rr", false},  {"x", false},    {"rwmx", false}, {"R", false},    {"rwmr", false},
        {"r w", false}, {"rw\n", false}, {"mm", false},   {"rwm ", false},
    };
    run_cases(kdp__validate_permissions, "permissions", cases, sizeof(cases) / sizeof(cases[0]));
}

/* --- absolute paths --- */

static void test_abs_paths(void **state)
{
    (void)state;
    char *p4095 = repeat('p', 4095);
    char *p4096 = repeat('p', 4096);
    p4095[0] = '/';
    p4096[0] = '/';
    const name_case cases[] = {
        {"/dev/null", true}, {"/", true},    {"/dev/ttyUSB0", true}, {"/a b/c", true},
        {p4095, true},       {p4096, false}, {"dev/null", false},    {"./dev", false},
        {"", false},         {NULL, false},  {"/dev/\n", false},     {"/dev\x1b", false},
        {"/dev\x7f", false},
    };
    run_cases(kdp__validate_abs_path, "path", cases, sizeof(cases) / sizeof(cases[0]));
    free(p4095);
    free(p4096);
}

/* --- CDI device names --- */

static void test_cdi_names(void **state)
{
    (void)state;
    const name_case cases[] = {
        {"example.com/gpu=gpu0", true},
        {"nvidia.com/gpu=all", true},
        {"vendor.com/class=0", true},
        {"Vendor.com/Class_x=dev:1.2", true},
        {"example.com/gpu=a:b", true},
        {"example.com/my-class.v1=dev-0_1", true},
        {"vendor.io/c1=d", true},
        {"", false},
        {NULL, false},
        {"gpu0", false},
        {"example.com/gpu", false},
        {"example.com=gpu0", false},
        {"/gpu=x", false},
        {"example.com/=x", false},
        {"example.com/gpu=", false},
        {"1example.com/gpu=x", false}, /* vendor starts with a letter */
        {"example.com-/gpu=x", false},
        {"example.com/1gpu=x", false},
        {"example.com/gpu/x=y", false},
        {"example.com/gpu=a=b", false},
        {"example.com/gpu=:a", false},
        {"example.com/gpu=a:", false},
        {"example.com/gpu=a b", false},
        {"ex ample.com/gpu=x", false},
        {"example.com/g@u=x", false},
    };
    run_cases(kdp__validate_cdi_name, "cdi", cases, sizeof(cases) / sizeof(cases[0]));
}

/* --- env var names --- */

static void test_env_keys(void **state)
{
    (void)state;
    const name_case cases[] = {
        {"FOO", true}, {"foo.bar", true}, {"_", true},  {"KDP_DEVICES_X", true}, {"", false},
        {NULL, false}, {"A=B", false},    {"=", false}, {"A=", false},
    };
    run_cases(kdp__validate_env_key, "env", cases, sizeof(cases) / sizeof(cases[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_name_table),
        cmocka_unit_test(test_resource_name_lengths),
        cmocka_unit_test(test_resource_name_why),
        cmocka_unit_test(test_socket_names),
        cmocka_unit_test(test_device_ids),
        cmocka_unit_test(test_permissions),
        cmocka_unit_test(test_abs_paths),
        cmocka_unit_test(test_cdi_names),
        cmocka_unit_test(test_env_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
