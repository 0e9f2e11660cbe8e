/* SPDX-License-Identifier: MIT */
/* The rules of binding conditions on their own (what slicebuild and
 * kdpctl dra apiserver see; the describe call's log lines are in
 * test_describe_bind.c): the order of the checks, the fields named. */
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

#include "k8s/bindcheck.h"

/* The sizes before any item, as validateSlice reports them. */
static void test_bindcheck(void **state)
{
    (void)state;
    kdp__bind_err e;
    const char *c[] = {"a"};
    const char *f[] = {"b"};
    assert_int_equal(kdp__bindcheck(NULL, 0, NULL, 0, &e), 0);
    assert_int_equal(kdp__bindcheck(c, 1, f, 1, &e), 0);
    const char *five[] = {"a", "b", "c", "d", "e"};
    /* the sizes first, before any item */
    const char *five_bad[] = {"-", "-", "-", "-", "-"};
    assert_int_equal(kdp__bindcheck(c, 1, five_bad, 5, &e), -EINVAL);
    assert_string_equal(e.field, "bindingFailureConditions");
    assert_int_equal(kdp__bindcheck(five, 5, f, 1, &e), -EINVAL);
    assert_string_equal(e.field, "bindingConditions");
}

static void test_fields(void **state)
{
    (void)state;
    kdp__bind_err e;
    const char *c[] = {"a", "example.com/b"};
    const char *f[] = {"x", "a"};
    assert_int_equal(kdp__bindcheck(c, 2, f, 2, &e), -EINVAL);
    assert_string_equal(e.field, "bindingFailureConditions[1]");
    assert_non_null(strstr(e.why, "must not overlap"));
    const char *bad[] = {"a/b/c"};
    assert_int_equal(kdp__bindcheck(bad, 1, f, 1, &e), -EINVAL);
    assert_string_equal(e.field, "bindingConditions[0]");
    assert_int_equal(strncmp(e.why, "Invalid value: \"a/b/c\"", 22), 0);
    assert_int_equal(kdp__bindcheck(NULL, 0, f, 1, &e), -EINVAL);
    assert_string_equal(e.field, "bindingConditions");
    assert_int_equal(kdp__bindcheck(c, 1, NULL, 0, &e), -EINVAL);
    assert_string_equal(e.field, "bindingFailureConditions");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bindcheck),
        cmocka_unit_test(test_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
