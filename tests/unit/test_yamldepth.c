/* SPDX-License-Identifier: MIT */
/* base/yamldepth: the flow nesting of YAML text, counted before libyaml
 * reads it. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/yamldepth.h"

static int depth_of(const char *text, unsigned max, size_t *line)
{
    *line = 0;
    return kdp__yaml_flow_depth(text, strlen(text), max, line);
}

static void test_counted(void **state)
{
    (void)state;
    size_t line;
    assert_int_equal(depth_of("a: [b, {c: [d]}]\n", 3, &line), 0);
    assert_int_equal(depth_of("a: [b, {c: [d]}]\n", 2, &line), -E2BIG);
    assert_int_equal(line, 1);
    /* closed levels do not add up */
    assert_int_equal(depth_of("a: [[x]]\nb: [[y]]\nc: [[[z]]]\n", 2, &line), -E2BIG);
    assert_int_equal(line, 3);
    /* quoted, commented: not counted; '' and \" inside quotes */
    assert_int_equal(depth_of("a: '[[[ it''s [[['\nb: \"[[[\\\"[[[\" # [[[[\n#[[[[[\n", 1, &line),
                     0);
    /* a # inside a word is not a comment */
    assert_int_equal(depth_of("a: x#[[\n", 1, &line), -E2BIG);
    assert_int_equal(line, 1);
    /* more closing than opening: never below 0 */
    assert_int_equal(depth_of("]]]]] [[\n", 1, &line), -E2BIG);
}

static void test_deep_is_linear(void **state)
{
    (void)state;
    size_t n = 1000000; /* 2 MB: libyaml alone would take hours */
    char *t = malloc(2 * n);
    assert_non_null(t);
    memset(t, '[', n);
    memset(t + n, ']', n);
    size_t line = 0;
    assert_int_equal(kdp__yaml_flow_depth(t, 2 * n, KDP__YAML_MAX_FLOW_DEPTH, &line), -E2BIG);
    assert_int_equal(line, 1);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counted),
        cmocka_unit_test(test_deep_is_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
