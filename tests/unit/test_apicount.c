/* SPDX-License-Identifier: MIT */
/* apicount: requests counted by verb and code, the table's bound. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <string.h>

#include "k8s/apicount.h"

static void test_counts(void **state)
{
    (void)state;
    kdp__api_counts c = {0};
    kdp__api_counts_add(&c, "GET", 200);
    kdp__api_counts_add(&c, "GET", 200);
    kdp__api_counts_add(&c, "PUT", 409);
    kdp__api_counts_add(&c, "WATCH", 0);
    kdp__api_counts_add(&c, "GET", -5);   /* not a status: no answer */
    kdp__api_counts_add(&c, "GET", 1200); /* the same */
    assert_int_equal(c.n, 4);
    assert_string_equal(c.v[0].verb, "GET");
    assert_int_equal(c.v[0].code, 200);
    assert_int_equal(c.v[0].n, 2);
    assert_int_equal(c.v[1].code, 409);
    assert_string_equal(c.v[3].verb, "GET");
    assert_int_equal(c.v[3].code, 0);
    assert_int_equal(c.v[3].n, 2);
    assert_int_equal(c.dropped, 0);
}

static void test_bounded(void **state)
{
    (void)state;
    kdp__api_counts c = {0};
    for (int code = 100; code < 100 + KDP__API_COUNTS + 5; code++) {
        kdp__api_counts_add(&c, "GET", code);
    }
    kdp__api_counts_add(&c, "GET", 100); /* a pair in the table still counts */
    assert_int_equal(c.n, KDP__API_COUNTS);
    assert_int_equal(c.dropped, 5);
    assert_int_equal(c.v[0].n, 2);
    kdp__api_counts_add(&c, "A-VERB-TOO-LONG", 1); /* cut to fit, dropped (full) */
    assert_int_equal(c.dropped, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
