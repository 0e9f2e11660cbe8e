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

#include "k8s/lines.h"

/* What the callback saw: the lines joined with '|'. */
struct seen {
    char text[8192];
    size_t n;
    size_t stop_after; /* non-zero: return 1 after this many lines */
};

static int collect(const char *line, size_t len, void *ud)
{
    struct seen *s = ud;
    size_t used = strlen(s->text);
    snprintf(s->text + used, sizeof(s->text) - used, "%.*s|", (int)len, line);
    s->n++;
    return s->stop_after && s->n >= s->stop_after ? 1 : 0;
}

static void feed_str(kdp__lines *lb, const char *str, struct seen *s, int want)
{
    assert_int_equal(kdp__lines_feed(lb, str, strlen(str), collect, s), want);
}

static void test_whole_lines_in_one_chunk(void **state)
{
    (void)state;
    kdp__lines lb;
    struct seen s = {0};
    kdp__lines_init(&lb, 100);
    feed_str(&lb, "a\nbb\n\nccc\r\n", &s, 0);
    assert_string_equal(s.text, "a|bb||ccc|");
    assert_int_equal(kdp__lines_pending(&lb), 0);
    kdp__lines_free(&lb);
}

static void test_every_split_of_a_stream(void **state)
{
    (void)state;
    const char *stream = "{\"n\":1}\n{\"n\":22}\r\n\n{\"type\":\"ADDED\"}\n";
    size_t len = strlen(stream);
    /* the stream cut in two and in three at every place */
    for (size_t i = 0; i <= len; i++) {
        for (size_t j = i; j <= len; j++) {
            kdp__lines lb;
            struct seen s = {0};
            kdp__lines_init(&lb, 64);
            assert_int_equal(kdp__lines_feed(&lb, stream, i, collect, &s), 0);
            assert_int_equal(kdp__lines_feed(&lb, stream + i, j - i, collect, &s), 0);
            assert_int_equal(kdp__lines_feed(&lb, stream + j, len - j, collect, &s), 0);
            assert_string_equal(s.text, "{\"n\":1}|{\"n\":22}||{\"type\":\"ADDED\"}|");
            assert_int_equal(kdp__lines_pending(&lb), 0);
            kdp__lines_free(&lb);
        }
    }
}

static void test_byte_by_byte(void **state)
{
    (void)state;
    kdp__lines lb;
    struct seen s = {0};
    kdp__lines_init(&lb, 1000);
    char big[900];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\n';
    for (size_t i = 0; i < sizeof(big); i++) {
        assert_int_equal(kdp__lines_feed(&lb, big + i, 1, collect, &s), 0);
    }
    assert_int_equal(s.n, 1);
    assert_int_equal(strlen(s.text), sizeof(big)); /* 899 x and '|' */
    kdp__lines_free(&lb);
}

static void test_pending_partial_line(void **state)
{
    (void)state;
    kdp__lines lb;
    struct seen s = {0};
    kdp__lines_init(&lb, 100);
    feed_str(&lb, "one\ntw", &s, 0);
    assert_int_equal(kdp__lines_pending(&lb), 2);
    feed_str(&lb, "o", &s, 0);
    assert_int_equal(kdp__lines_pending(&lb), 3);
    feed_str(&lb, "\n", &s, 0);
    assert_string_equal(s.text, "one|two|");
    assert_int_equal(kdp__lines_pending(&lb), 0);
    kdp__lines_free(&lb);
}

static void test_line_at_and_over_the_bound(void **state)
{
    (void)state;
    kdp__lines lb;
    struct seen s = {0};
    kdp__lines_init(&lb, 4);
    feed_str(&lb, "abcd\nab", &s, 0);
    feed_str(&lb, "cd\n", &s, 0); /* exactly 4, in two chunks */
    assert_string_equal(s.text, "abcd|abcd|");
    /* 5 bytes: whole in a chunk, then split */
    feed_str(&lb, "abcde\n", &s, -EMSGSIZE);
    feed_str(&lb, "a\n", &s, -EMSGSIZE); /* broken for good */
    assert_int_equal(s.n, 2);
    kdp__lines_free(&lb);

    kdp__lines_init(&lb, 4);
    feed_str(&lb, "abc", &s, 0);
    feed_str(&lb, "de", &s, -EMSGSIZE); /* no newline yet: the bound still holds */
    assert_int_equal(kdp__lines_pending(&lb), 0);
    kdp__lines_free(&lb);

    kdp__lines_init(&lb, 4);
    feed_str(&lb, "ab", &s, 0);
    feed_str(&lb, "cde\n", &s, -EMSGSIZE);
    kdp__lines_free(&lb);
}

static void test_callback_stops(void **state)
{
    (void)state;
    kdp__lines lb;
    struct seen s = {.stop_after = 2};
    kdp__lines_init(&lb, 100);
    feed_str(&lb, "a\nb\nc\n", &s, 1);
    assert_string_equal(s.text, "a|b|");
    kdp__lines_free(&lb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_lines_in_one_chunk),
        cmocka_unit_test(test_every_split_of_a_stream),
        cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_pending_partial_line),
        cmocka_unit_test(test_line_at_and_over_the_bound),
        cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
