/* SPDX-License-Identifier: MIT */
/* The one JSON string escaper: what jansson reads back is what went in,
 * for valid UTF-8; anything else becomes U+FFFD, never invalid JSON. */
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

#include "base/jsonstr.h"

typedef struct buf {
    char s[512];
    size_t n;
} buf;

static void put(const char *s, size_t len, void *ud)
{
    buf *b = ud;
    assert_true(len > 0 && b->n + len < sizeof(b->s));
    memcpy(b->s + b->n, s, len);
    b->n += len;
    b->s[b->n] = '\0';
}

static const char *lit(buf *b, const char *s)
{
    b->n = 0;
    b->s[0] = '\0';
    kdp__json_string(s, put, b);
    return b->s;
}

static void test_escapes(void **state)
{
    (void)state;
    buf b;
    assert_string_equal(lit(&b, ""), "\"\"");
    assert_string_equal(lit(&b, "/dev/gpu0"), "\"/dev/gpu0\"");
    assert_string_equal(lit(&b, "a\"b\\c"), "\"a\\\"b\\\\c\"");
    assert_string_equal(lit(&b, "l1\nl2\r\t"), "\"l1\\nl2\\r\\t\"");
    assert_string_equal(lit(&b, "\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\"");
    /* valid UTF-8 as it is */
    assert_string_equal(lit(&b, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    /* not UTF-8: one U+FFFD per byte */
    assert_string_equal(lit(&b, "a\xff"
                                "b"),
                        "\"a\\ufffdb\"");
    assert_string_equal(lit(&b, "\xc3"), "\"\\ufffd\"");                       /* cut short */
    assert_string_equal(lit(&b, "\xc0\xaf"), "\"\\ufffd\\ufffd\"");            /* overlong */
    assert_string_equal(lit(&b, "\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\""); /* surrogate */
    assert_string_equal(lit(&b, "\xf4\x90\x80\x80"),
                        "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* over U+10FFFF */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
