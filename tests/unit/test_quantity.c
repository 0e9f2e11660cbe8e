/* SPDX-License-Identifier: MIT */
/* Quantities as numbers: every suffix, fractions, exponents, rounding past
 * the nano, the range kdp takes, and the plain decimal written back. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <string.h>

#include "base/quantity.h"

static const char *fmt(const char *s)
{
    static char out[64];
    kdp__qty v = 0;
    const char *why = NULL;
    if (kdp__qty_parse(s, &v, &why) < 0) {
        return why;
    }
    return kdp__qty_format(v, out, sizeof(out));
}

static void test_values(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"7", "7"},
        {"80Gi", "85899345920"},
        {"1Ki", "1024"},
        {"1Ei", "1152921504606846976"},
        {"500m", "0.5"},
        {"1.5", "1.5"},
        {".5", "0.5"},
        {"5.", "5"},
        {"+3", "3"},
        {"-3k", "-3000"},
        {"1n", "0.000000001"},
        {"2u", "0.000002"},
        {"1.5e3", "1500"},
        {"1E3", "1000"},
        {"1E", "1000000000000000000"},
        {"25e-2", "0.25"},
        {"0", "0"},
        {"0.0000000001", "0.000000001"}, /* past the nano: rounded up */
        {"0.5Ki", "512"},
        {"1e27", "1000000000000000000000000000"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_string_equal(fmt(cases[i].in), cases[i].want);
    }
}

static void test_refused(void **state)
{
    (void)state;
    kdp__qty v = 0;
    const char *why = NULL;
    assert_int_equal(kdp__qty_parse("", &v, &why), -EINVAL);
    assert_int_equal(kdp__qty_parse(NULL, &v, &why), -EINVAL);
    assert_int_equal(kdp__qty_parse("Gi", &v, &why), -EINVAL);
    assert_int_equal(kdp__qty_parse("1gi", &v, &why), -EINVAL);
    assert_non_null(strstr(why, "suffix"));
    assert_int_equal(kdp__qty_parse("1e", &v, &why), -EINVAL);
    assert_int_equal(kdp__qty_parse("1..2", &v, &why), -EINVAL);
    assert_int_equal(kdp__qty_parse("1e28", &v, &why), -ERANGE);
    assert_int_equal(kdp__qty_parse("9999999999999999999999999999", &v, &why), -ERANGE);
    assert_int_equal(kdp__qty_parse("1000000000Ei", &v, &why), -ERANGE);
    assert_int_equal(kdp__qty_parse("1e999999", &v, &why), -ERANGE);
    /* a tiny exponent is 0 rounded up to the nano */
    assert_int_equal(kdp__qty_parse("1e-999999", &v, &why), 0);
    assert_true(v == 1);
}

static void test_compare(void **state)
{
    (void)state;
    kdp__qty a = 0;
    kdp__qty b = 0;
    assert_int_equal(kdp__qty_parse("1Gi", &a, NULL), 0);
    assert_int_equal(kdp__qty_parse("1G", &b, NULL), 0);
    assert_int_equal(kdp__qty_cmp(a, b), 1);
    assert_int_equal(kdp__qty_cmp(b, a), -1);
    assert_int_equal(kdp__qty_parse("1000M", &a, NULL), 0);
    assert_int_equal(kdp__qty_cmp(a, b), 0);
    assert_int_equal(kdp__qty_parse("1e9", &a, NULL), 0);
    assert_int_equal(kdp__qty_cmp(a, b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
