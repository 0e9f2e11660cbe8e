/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/expfmt.h"

static char *page(kdp__expfmt *w)
{
    size_t len = 0;
    char *s = kdp__expfmt_take(w, &len);
    assert_non_null(s);
    assert_int_equal(strlen(s), len);
    return s;
}

static void test_values(void **state)
{
    (void)state;
    char v[40];
    const struct {
        double in;
        const char *out;
    } cases[] = {
        {0, "0"},          {1, "1"},           {-3, "-3"},   {42, "42"},
        {0.25, "0.25"},    {1e-05, "1e-05"},   {0.1, "0.1"}, {1.5e15, "1.5e+15"},
        {1e300, "1e+300"}, {0.0001, "0.0001"}, {2.5, "2.5"}, {123456789012345, "123456789012345"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kdp__expfmt_value(cases[i].in, v, sizeof(v));
        assert_string_equal(v, cases[i].out);
    }
    kdp__expfmt_value(INFINITY, v, sizeof(v));
    assert_string_equal(v, "+Inf");
    kdp__expfmt_value(-INFINITY, v, sizeof(v));
    assert_string_equal(v, "-Inf");
    kdp__expfmt_value(NAN, v, sizeof(v));
    assert_string_equal(v, "NaN");
    /* the shortest text that reads back exactly */
    kdp__expfmt_value(0.1 + 0.2, v, sizeof(v));
    assert_true(strtod(v, NULL) == 0.1 + 0.2);
}

static void test_escaping(void **state)
{
    (void)state;
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    kdp__expfmt_family(&w, "x_total", "counter", "a \\ back\nslash \"q\"");
    kdp__label l[2] = {{"a", "q\"uo\\te\nnl"}, {"b", ""}};
    kdp__expfmt_sample(&w, "x_total", l, 2, 3);
    kdp__expfmt_sample_u64(&w, "x_total", NULL, 0, 18446744073709551615ULL);
    char *s = page(&w);
    assert_string_equal(s, "# HELP x_total a \\\\ back\\nslash \"q\"\n"
                           "# TYPE x_total counter\n"
                           "x_total{a=\"q\\\"uo\\\\te\\nnl\",b=\"\"} 3\n"
                           "x_total 18446744073709551615\n");
    free(s);
}

static void test_histogram(void **state)
{
    (void)state;
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    const double bounds[] = {0.001, 0.5, 1};
    const uint64_t counts[] = {2, 0, 3, 4}; /* 4 above the last bound */
    kdp__label l = {"op", "list"};
    kdp__expfmt_histogram(&w, "d_seconds", &l, 1, bounds, counts, 3, 12.5);
    char *s = page(&w);
    assert_string_equal(s, "d_seconds_bucket{op=\"list\",le=\"0.001\"} 2\n"
                           "d_seconds_bucket{op=\"list\",le=\"0.5\"} 2\n"
                           "d_seconds_bucket{op=\"list\",le=\"1\"} 5\n"
                           "d_seconds_bucket{op=\"list\",le=\"+Inf\"} 9\n"
                           "d_seconds_sum{op=\"list\"} 12.5\n"
                           "d_seconds_count{op=\"list\"} 9\n");
    free(s);
    /* no labels, no bounds: only +Inf */
    kdp__expfmt_init(&w);
    const uint64_t one[] = {7};
    kdp__expfmt_histogram(&w, "h", NULL, 0, NULL, one, 0, 0);
    s = page(&w);
    assert_string_equal(s, "h_bucket{le=\"+Inf\"} 7\nh_sum 0\nh_count 7\n");
    free(s);
}

static void test_grows_and_empty(void **state)
{
    (void)state;
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    size_t len = 99;
    char *s = kdp__expfmt_take(&w, &len);
    assert_non_null(s);
    assert_int_equal(len, 0);
    assert_string_equal(s, "");
    free(s);
    kdp__expfmt_init(&w);
    for (int i = 0; i < 10000; i++) {
        kdp__label l = {"i", "some value"};
        kdp__expfmt_sample(&w, "m", &l, 1, i);
    }
    s = page(&w);
    assert_int_equal(strlen(s), 10000 * strlen("m{i=\"some value\"} ") + 48890);
    free(s);
    /* nothing written to a fresh writer (no buffer yet): still nothing */
    kdp__expfmt_init(&w);
    kdp__expfmt_raw(&w, "", 0);
    s = kdp__expfmt_take(&w, &len);
    assert_non_null(s);
    assert_int_equal(len, 0);
    free(s);
    /* done without take frees */
    kdp__expfmt_init(&w);
    kdp__expfmt_raw(&w, "abc", 3);
    kdp__expfmt_done(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_grows_and_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
