/* SPDX-License-Identifier: MIT */
/* The cost of decoding a JSON text, estimated before decoding: structure
 * outside strings counts, what is inside strings (escapes too) does not. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stdlib.h>
#include <string.h>

#include "k8s/jsonbudget.h"

static void test_cost(void **state)
{
    (void)state;
    const char *s = "{\"a\":[1,2,3]}"; /* { : [ , , */
    assert_int_equal(kdp__json_cost(s, strlen(s)), strlen(s) + 6 * 64);
    /* inside strings: nothing counts, an escaped quote does not end one */
    const char *t = "[\"{,:[\\\",]}\"]";
    assert_int_equal(kdp__json_cost(t, strlen(t)), strlen(t) + 2 * 64);
    assert_int_equal(kdp__json_cost("", 0), 64);
    /* 1 MiB of [0,0,...]: over 32 MiB; 1 MiB of one string: about 1 MiB */
    size_t n = 1U << 20;
    char *dense = malloc(n);
    char *flat = malloc(n);
    assert_non_null(dense);
    assert_non_null(flat);
    dense[0] = '[';
    for (size_t i = 1; i + 1 < n; i += 2) {
        dense[i] = '0';
        dense[i + 1] = ',';
    }
    dense[n - 1] = ']';
    memset(flat, 'x', n);
    flat[0] = flat[n - 1] = '"';
    assert_true(kdp__json_cost(dense, n) > 32U << 20);
    assert_true(kdp__json_cost(flat, n) < n + 1024);
    free(dense);
    free(flat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cost)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
