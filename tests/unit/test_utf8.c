/* SPDX-License-Identifier: MIT */
/* UTF-8 as the peers check it: valid sequences kept, each invalid byte
 * U+FFFD, a bounded copy cut at a whole sequence, always NUL-terminated. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "base/utf8.h"

#define FFFD "\xef\xbf\xbd"

static void test_len(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {
        {"a", 1},
        {"\xc3\xa9", 2},         /* é */
        {"\xe2\x82\xac", 3},     /* € */
        {"\xf0\x9f\x98\x80", 4}, /* U+1F600 */
        {"\x80", 0},             /* a stray continuation byte */
        {"\xc3", 0},             /* cut short by the NUL */
        {"\xc0\xaf", 0},         /* overlong '/' */
        {"\xed\xa0\x80", 0},     /* a surrogate */
        {"\xf4\x90\x80\x80", 0}, /* over U+10FFFF */
        {"\xff", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(kdp__utf8_len((const unsigned char *)cases[i].s), cases[i].want);
    }
}

static void test_copy(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(kdp__utf8_copy(out, sizeof(out),
                                    "temp 95\xc2\xb0"
                                    "C"),
                     10);
    assert_string_equal(out, "temp 95\xc2\xb0"
                             "C");
    kdp__utf8_copy(out, sizeof(out),
                   "a\xff"
                   "b\xc3");
    assert_string_equal(out, "a" FFFD "b" FFFD);
    /* cut at a whole sequence: "ab" fits with its NUL, the euro does not */
    assert_int_equal(kdp__utf8_copy(out, 5, "ab\xe2\x82\xac"), 2);
    assert_string_equal(out, "ab");
    assert_int_equal(kdp__utf8_copy(out, 6, "ab\xe2\x82\xac"), 5);
    assert_string_equal(out, "ab\xe2\x82\xac");
    assert_int_equal(kdp__utf8_copy(out, 1, "abc"), 0);
    assert_string_equal(out, "");
    /* a replacement that does not fit is left out whole */
    assert_int_equal(kdp__utf8_copy(out, 3, "a\xff"), 1);
    assert_string_equal(out, "a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_len),
        cmocka_unit_test(test_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
