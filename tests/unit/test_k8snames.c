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
#include <stdio.h>
#include <string.h>

#include "base/k8snames.h"

typedef int (*check_fn)(const char *, const char **);

static void good(check_fn f, const char *s)
{
    const char *why = NULL;
    int r = f(s, &why);
    if (r != 0) {
        print_error("refused \"%s\": %s\n", s, why ? why : "(no why)");
    }
    assert_int_equal(r, 0);
}

static void bad(check_fn f, const char *s)
{
    const char *why = NULL;
    int r = f(s, &why);
    if (r != -EINVAL) {
        print_error("accepted \"%s\"\n", s ? s : "(null)");
    }
    assert_int_equal(r, -EINVAL);
    assert_non_null(why);
    assert_true(strlen(why) > 5);
    assert_int_equal(f(s, NULL), -EINVAL); /* why is optional */
}

static char *repeat(char *buf, char c, size_t n)
{
    memset(buf, c, n);
    buf[n] = '\0';
    return buf;
}

static void test_dns_label(void **state)
{
    (void)state;
    char buf[300];
    good(kdp__k8snames_dns_label, "gpu0");
    good(kdp__k8snames_dns_label, "a");
    good(kdp__k8snames_dns_label, "0");
    good(kdp__k8snames_dns_label, "gpu-0-a");
    good(kdp__k8snames_dns_label, repeat(buf, 'a', 63));
    bad(kdp__k8snames_dns_label, repeat(buf, 'a', 64));
    bad(kdp__k8snames_dns_label, "");
    bad(kdp__k8snames_dns_label, NULL);
    bad(kdp__k8snames_dns_label, "GPU0");
    bad(kdp__k8snames_dns_label, "-gpu");
    bad(kdp__k8snames_dns_label, "gpu-");
    bad(kdp__k8snames_dns_label, "gpu.0");
    bad(kdp__k8snames_dns_label, "gpu_0");
    bad(kdp__k8snames_dns_label, "gpu 0");
}

static void test_dns_subdomain(void **state)
{
    (void)state;
    char buf[300];
    good(kdp__k8snames_dns_subdomain, "gpu.example.com");
    good(kdp__k8snames_dns_subdomain, "a");
    good(kdp__k8snames_dns_subdomain, "a-b.c-d");
    /* 253 characters of labels */
    repeat(buf, 'a', 253);
    for (size_t i = 50; i < 253; i += 51) {
        buf[i] = '.';
    }
    good(kdp__k8snames_dns_subdomain, buf);
    repeat(buf, 'a', 254);
    for (size_t i = 50; i < 254; i += 51) {
        buf[i] = '.';
    }
    bad(kdp__k8snames_dns_subdomain, buf);
    bad(kdp__k8snames_dns_subdomain, "");
    bad(kdp__k8snames_dns_subdomain, ".a");
    bad(kdp__k8snames_dns_subdomain, "a.");
    bad(kdp__k8snames_dns_subdomain, "a..b");
    bad(kdp__k8snames_dns_subdomain, "a.-b");
    bad(kdp__k8snames_dns_subdomain, "Example.com");
    bad(kdp__k8snames_dns_subdomain, "a/b");
}

static void test_driver_name(void **state)
{
    (void)state;
    char buf[100];
    good(kdp__k8snames_driver_name, "gpu.example.com");
    good(kdp__k8snames_driver_name, repeat(buf, 'd', 63));
    bad(kdp__k8snames_driver_name, repeat(buf, 'd', 64));
    bad(kdp__k8snames_driver_name, "gpu.Example.com");
    bad(kdp__k8snames_driver_name, "");
}

static void test_qualified_name(void **state)
{
    (void)state;
    char buf[200];
    good(kdp__k8snames_qualified_name, "model");
    good(kdp__k8snames_qualified_name, "_x9");
    good(kdp__k8snames_qualified_name, "driverVersion");
    good(kdp__k8snames_qualified_name, "resource.kubernetes.io/pcieRoot");
    good(kdp__k8snames_qualified_name, "gpu.example.com/memory_GB");
    good(kdp__k8snames_qualified_name, repeat(buf, 'x', 32));
    bad(kdp__k8snames_qualified_name, repeat(buf, 'x', 33));
    snprintf(buf, sizeof(buf), "%063d/x", 0);
    memset(buf, 'a', 63);
    good(kdp__k8snames_qualified_name, buf);
    snprintf(buf, sizeof(buf), "%064d/x", 0);
    memset(buf, 'a', 64);
    bad(kdp__k8snames_qualified_name, buf);
    bad(kdp__k8snames_qualified_name, "");
    bad(kdp__k8snames_qualified_name, "9lives");
    bad(kdp__k8snames_qualified_name, "a-b");
    bad(kdp__k8snames_qualified_name, "a.b");
    bad(kdp__k8snames_qualified_name, "/x");
    bad(kdp__k8snames_qualified_name, "example.com/");
    bad(kdp__k8snames_qualified_name, "Example.com/x");
    bad(kdp__k8snames_qualified_name, "a/b/c");
}

static void test_label_name_and_value(void **state)
{
    (void)state;
    assert_int_equal(kdp__k8snames_label_value("", NULL), 0); /* a value may be empty */
    assert_int_equal(kdp__k8snames_label_value(NULL, NULL), 0);
    assert_int_equal(kdp__k8snames_label_value("health-check_failed.2", NULL), 0);
    assert_int_equal(kdp__k8snames_label_value("Probe", NULL), 0);
    assert_int_equal(kdp__k8snames_label_value("-x", NULL), -EINVAL);
    assert_int_equal(kdp__k8snames_label_value("x.", NULL), -EINVAL);
    assert_int_equal(kdp__k8snames_label_value("a b", NULL), -EINVAL);
    char v[70];
    memset(v, 'a', 64);
    v[64] = '\0';
    assert_int_equal(kdp__k8snames_label_value(v, NULL), -EINVAL);
    v[63] = '\0';
    assert_int_equal(kdp__k8snames_label_value(v, NULL), 0);
    assert_int_equal(kdp__k8snames_label_name("gpu.example.com/unhealthy", NULL), 0);
    assert_int_equal(kdp__k8snames_label_name("maintenance", NULL), 0);
    const char *why = NULL;
    assert_int_equal(kdp__k8snames_label_name("", &why), -EINVAL);
    assert_int_equal(kdp__k8snames_label_name("gpu.example.com/", &why), -EINVAL);
    assert_int_equal(kdp__k8snames_label_name("GPU.example.com/x", &why), -EINVAL);
    assert_int_equal(kdp__k8snames_label_name("a/b/c", &why), -EINVAL);
    assert_non_null(why);
}

static void test_quantity(void **state)
{
    (void)state;
    const char *ok[] = {"80Gi", "4",   "500m", "1e3", "1E3", "1e-3", "1E+3",  "0",  "-1",
                        "+1",   "1.5", ".5",   "5.",  "1k",  "1M",   "2G",    "3T", "4P",
                        "5E",   "1Ki", "1Mi",  "1Ti", "1Pi", "1Ei",  "0.5Gi", "1."};
    const char *no[] = {"",   "Gi",  "1gi",  "1GB", "1 Gi", "1.2.3", "e3", "1e", "1e3Gi",
                        "1i", "--1", "1Gi ", "abc", "0x10", "1m1",   "+",  "."};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        good(kdp__k8snames_quantity, ok[i]);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        bad(kdp__k8snames_quantity, no[i]);
    }
    char buf[100];
    bad(kdp__k8snames_quantity, repeat(buf, '1', 65));
    good(kdp__k8snames_quantity, repeat(buf, '1', 64));
}

static void test_semver(void **state)
{
    (void)state;
    const char *ok[] = {"1.2.3",
                        "0.0.0",
                        "10.20.30",
                        "1.0.0-alpha",
                        "1.0.0-alpha.1",
                        "1.0.0-0.3.7",
                        "1.0.0-x.7.z.92",
                        "1.0.0-x-y-z.--",
                        "1.0.0+20130313144700",
                        "1.0.0-beta+exp.sha.5114f85",
                        "1.0.0+21AF26D3----117B344092BD",
                        "1.0.0+001"};
    const char *no[] = {"1",      "1.2",      "1.2.3.4", "01.2.3",   "1.02.3",     "1.2.03",
                        "v1.2.3", "1.2.3-",   "1.2.3+",  "1.2.3-01", "1.2.3-a..b", "1.2.3-a_b",
                        "1.2.3 ", "1.2.3-+b", "",        "1.2.-3",   "1.2.3+a+b"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        good(kdp__k8snames_semver, ok[i]);
    }
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        bad(kdp__k8snames_semver, no[i]);
    }
    char buf[100];
    snprintf(buf, sizeof(buf), "1.2.3-%s",
             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    good(kdp__k8snames_semver, buf); /* 64 */
    strcat(buf, "a");
    bad(kdp__k8snames_semver, buf);
}

static void test_uuid(void **state)
{
    (void)state;
    good(kdp__k8snames_uuid, "0f8a3b2c-1d4e-4f60-8a7b-9c0d1e2f3a4b");
    bad(kdp__k8snames_uuid, "0F8A3B2C-1D4E-4F60-8A7B-9C0D1E2F3A4B"); /* upper case */
    bad(kdp__k8snames_uuid, "0f8a3b2c1d4e4f608a7b9c0d1e2f3a4b");     /* no dashes */
    bad(kdp__k8snames_uuid, "0f8a3b2c-1d4e-4f60-8a7b-9c0d1e2f3a4");  /* short */
    bad(kdp__k8snames_uuid, "0f8a3b2c-1d4e-4f60-8a7b-9c0d1e2f3a4g"); /* not hex */
    bad(kdp__k8snames_uuid, "../../etc/passwd-aaaa-aaaa-aaaaaaaaaa");
    bad(kdp__k8snames_uuid, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dns_label),   cmocka_unit_test(test_dns_subdomain),
        cmocka_unit_test(test_driver_name), cmocka_unit_test(test_qualified_name),
        cmocka_unit_test(test_quantity),    cmocka_unit_test(test_semver),
        cmocka_unit_test(test_uuid),        cmocka_unit_test(test_label_name_and_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
