/* SPDX-License-Identifier: MIT */
/* base/safetext: a peer's text escaped for one log or terminal line. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "base/safetext.h"

static void check(const char *in, const char *want)
{
    char out[256];
    size_t n = kdp__safetext(out, sizeof(out), in);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
    assert_int_equal(kdp__safetext_clean(in), strcmp(in, want) == 0);
}

static void test_kept(void **state)
{
    (void)state;
    check("", "");
    check("plain ASCII: a-z, ~!@#$%^&*()", "plain ASCII: a-z, ~!@#$%^&*()");
    check("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xb9", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xb9");
    check("U+00A0\xc2\xa0 U+200B\xe2\x80\x8b", "U+00A0\xc2\xa0 U+200B\xe2\x80\x8b");
}

static void test_escaped(void **state)
{
    (void)state;
    /* C0 and DEL: a forged line, a colour, a rubbed-out character */
    check("a\nE0101 forged\r\t\x1b[31m\x7f", "a\\x0aE0101 forged\\x0d\\x09\\x1b[31m\\x7f");
    /* C1 (NEL), the separators, every bidi control */
    check("\xc2\x85|\xc2\x9b|\xe2\x80\xa8|\xe2\x80\xa9", "\\u0085|\\u009b|\\u2028|\\u2029");
    check("\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f", "\\u061c\\u200e\\u200f");
    check("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
          "\\u202a\\u202b\\u202c\\u202d\\u202e");
    check("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "\\u2066\\u2067\\u2068\\u2069");
    /* not UTF-8: a stray continuation, a cut sequence, an overlong '/' */
    check("\x80x\xe2\x80y\xc0\xaf", "\\x80x\\xe2\\x80y\\xc0\\xaf");
}

static void test_cut_whole(void **state)
{
    (void)state;
    char out[8];
    /* "ab\u202e" needs 9 bytes with the NUL: cut before the escape */
    assert_int_equal(kdp__safetext(out, sizeof(out), "ab\xe2\x80\xae"), 2);
    assert_string_equal(out, "ab");
    assert_int_equal(kdp__safetext(out, sizeof(out), "abcdef\xc3\xa9"), 6);
    assert_string_equal(out, "abcdef");
    assert_int_equal(kdp__safetext(out, 1, "abc"), 0);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept),
        cmocka_unit_test(test_escaped),
        cmocka_unit_test(test_cut_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
