/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka 1.1.5 needs these first, in this order */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "grpc/wire.h"

#define STR(s) (s), strlen(s)

/* ---- status ---- */

static void test_status_names(void **state)
{
    (void)state;
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    for (int i = 0; i <= KDP__ST_UNAUTHENTICATED; i++) {
        assert_string_equal(kdp__status_name(i), names[i]);
    }
    assert_string_equal(kdp__status_name(-1), "UNKNOWN");
    assert_string_equal(kdp__status_name(17), "UNKNOWN");
    assert_string_equal(kdp__status_name(INT_MIN), "UNKNOWN");
    assert_string_equal(kdp__status_name(INT_MAX), "UNKNOWN");
}

static void test_status_parse(void **state)
{
    (void)state;
    for (int i = 0; i <= 16; i++) {
        char buf[8];
        int n = snprintf(buf, sizeof(buf), "%d", i);
        assert_int_equal(kdp__status_parse(buf, (size_t)n), i);
    }
    assert_int_equal(kdp__status_parse(STR("17")), 17); /* new codes pass through */
    assert_int_equal(kdp__status_parse(STR("007")), 7);
    assert_int_equal(kdp__status_parse(STR("2147483647")), INT_MAX);
    /* only len bytes are read */
    assert_int_equal(kdp__status_parse("14xyz", 2), 14);
    /* garbage */
    assert_int_equal(kdp__status_parse(STR("abc")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse(STR("1a")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse(STR("-1")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse(STR("+1")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse(STR(" 1")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse(STR("1 ")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse("1\0", 2), KDP__ST_UNKNOWN);
    /* empty */
    assert_int_equal(kdp__status_parse(STR("")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse(NULL, 0), KDP__ST_UNKNOWN);
    /* huge */
    assert_int_equal(kdp__status_parse(STR("2147483648")), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_parse(STR("99999999999999999999999")), KDP__ST_UNKNOWN);
}

static void test_status_from_http(void **state)
{
    (void)state;
    assert_int_equal(kdp__status_from_http(400), KDP__ST_INTERNAL);
    assert_int_equal(kdp__status_from_http(401), KDP__ST_UNAUTHENTICATED);
    assert_int_equal(kdp__status_from_http(403), KDP__ST_PERMISSION_DENIED);
    assert_int_equal(kdp__status_from_http(404), KDP__ST_UNIMPLEMENTED);
    assert_int_equal(kdp__status_from_http(429), KDP__ST_UNAVAILABLE);
    assert_int_equal(kdp__status_from_http(502), KDP__ST_UNAVAILABLE);
    assert_int_equal(kdp__status_from_http(503), KDP__ST_UNAVAILABLE);
    assert_int_equal(kdp__status_from_http(504), KDP__ST_UNAVAILABLE);
    static const int others[] = {0, 100, 200, 204, 301, 402, 405, 418, 500, 501, 505, -1};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        assert_int_equal(kdp__status_from_http(others[i]), KDP__ST_UNKNOWN);
    }
}

static void test_status_from_errno(void **state)
{
    (void)state;
    static const struct {
        int err;
        int code;
    } map[] = {
        {ETIMEDOUT, KDP__ST_DEADLINE_EXCEEDED},
        {EINVAL, KDP__ST_INVALID_ARGUMENT},
        {ENOENT, KDP__ST_NOT_FOUND},
        {EEXIST, KDP__ST_ALREADY_EXISTS},
        {EPERM, KDP__ST_PERMISSION_DENIED},
        {EACCES, KDP__ST_PERMISSION_DENIED},
        {ENOMEM, KDP__ST_RESOURCE_EXHAUSTED},
        {EMSGSIZE, KDP__ST_RESOURCE_EXHAUSTED},
        {ECANCELED, KDP__ST_CANCELLED},
        {ENOTSUP, KDP__ST_UNIMPLEMENTED},
        {EOPNOTSUPP, KDP__ST_UNIMPLEMENTED},
        {ENOSYS, KDP__ST_UNIMPLEMENTED},
        {ECONNREFUSED, KDP__ST_UNAVAILABLE},
        {ECONNRESET, KDP__ST_UNAVAILABLE},
        {EPIPE, KDP__ST_UNAVAILABLE},
        {ENOTCONN, KDP__ST_UNAVAILABLE},
        {EBUSY, KDP__ST_UNAVAILABLE},
        {EAGAIN, KDP__ST_UNAVAILABLE},
        {EWOULDBLOCK, KDP__ST_UNAVAILABLE},
        {EIO, KDP__ST_UNKNOWN},
        {EPROTO, KDP__ST_UNKNOWN},
        {EBADF, KDP__ST_UNKNOWN},
        {INT_MAX, KDP__ST_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        assert_int_equal(kdp__status_from_errno(-map[i].err), map[i].code);
    }
    assert_int_equal(kdp__status_from_errno(INT_MIN), KDP__ST_UNKNOWN);
    assert_int_equal(kdp__status_from_errno(0), KDP__ST_OK);
    assert_int_equal(kdp__status_from_errno(5), KDP__ST_OK);
}

/* ---- grpc-timeout ---- */

static int parse(const char *s, uint64_t *us)
{
    return kdp__timeout_parse(s, strlen(s), us);
}

static void test_timeout_parse_units(void **state)
{
    (void)state;
    uint64_t us = 0;
    assert_int_equal(parse("2H", &us), 0);
    assert_true(us == UINT64_C(7200000000));
    assert_int_equal(parse("3M", &us), 0);
    assert_true(us == UINT64_C(180000000));
    assert_int_equal(parse("5S", &us), 0);
    assert_true(us == UINT64_C(5000000));
    assert_int_equal(parse("250m", &us), 0);
    assert_true(us == UINT64_C(250000));
    assert_int_equal(parse("42u", &us), 0);
    assert_true(us == 42);
    assert_int_equal(parse("5000n", &us), 0);
    assert_true(us == 5);
    assert_int_equal(parse("1n", &us), 0); /* rounds up */
    assert_true(us == 1);
    assert_int_equal(parse("1001n", &us), 0);
    assert_true(us == 2);
    assert_int_equal(parse("999n", &us), 0);
    assert_true(us == 1);
    assert_int_equal(parse("0n", &us), 0);
    assert_true(us == 0);
    assert_int_equal(parse("0S", &us), 0); /* zero: already expired, but well-formed */
    assert_true(us == 0);
    assert_int_equal(parse("00000001m", &us), 0);
    assert_true(us == 1000);
}

static void test_timeout_parse_digits(void **state)
{
    (void)state;
    uint64_t us = 0;
    assert_int_equal(parse("12345678u", &us), 0);
    assert_true(us == 12345678);
    assert_int_equal(parse("99999999u", &us), 0);
    assert_true(us == 99999999);
    /* 99999999H is the largest value: it fits (3.6e17 < 2^64), no wrap */
    assert_int_equal(parse("99999999H", &us), 0);
    assert_true(us == UINT64_C(99999999) * UINT64_C(3600000000));
    assert_true(us > UINT64_C(99999998) * UINT64_C(3600000000));
    assert_int_equal(parse("99999999n", &us), 0);
    assert_true(us == 100000);

    /* errors never touch *ret_us */
    static const char *const bad[] = {
        "123456789u",                             /* 9 digits */
        "000000000S",                             /* 9 digits, even if zeros */
        "10",                                     /* missing unit */
        "S",                                      /* missing value */
        "",                                       /* empty */
        "10s",                                    /* bad units */
        "10h",        "10x", "10U", "10N", "1 S", /* non-digits */
        " 1S",        "-1S", "+1S", "a1S", "1.5S", "0x1S", "1SS", "1S ",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        us = 777;
        assert_int_equal(parse(bad[i], &us), -EINVAL);
        assert_true(us == 777);
    }
    us = 777;
    assert_int_equal(kdp__timeout_parse(NULL, 0, &us), -EINVAL);
    assert_int_equal(kdp__timeout_parse("1S\0", 3, &us), -EINVAL);
    assert_true(us == 777);
    /* only len bytes are read */
    assert_int_equal(kdp__timeout_parse("7SXYZ", 2, &us), 0);
    assert_true(us == 7000000);
}

static void check_format(uint64_t in)
{
    char buf[10];
    memset(buf, 'x', sizeof(buf));
    size_t n = kdp__timeout_format(in, buf);
    assert_true(n >= 2 && n <= 9);
    assert_int_equal(strlen(buf), n);
    uint64_t out = 0;
    assert_int_equal(kdp__timeout_parse(buf, n, &out), 0);
    const uint64_t max = UINT64_C(99999999) * UINT64_C(3600000000);
    if (in <= max) {
        assert_true(out >= in); /* never shorter */
        /* and not needlessly longer: by at most one step of the unit used */
        uint64_t step = 1;
        switch (buf[n - 1]) {
        case 'u':
            step = 1;
            break;
        case 'm':
            step = 1000;
            break;
        case 'S':
            step = 1000000;
            break;
        case 'M':
            step = 60000000;
            break;
        case 'H':
            step = UINT64_C(3600000000);
            break;
        default:
            fail_msg("unexpected unit in %s", buf);
        }
        assert_true(out - in < step);
        if (in <= 99999999) {
            assert_int_equal(buf[n - 1], 'u'); /* finest unit that fits */
            assert_true(out == in);
        }
    } else {
        assert_true(out == max); /* clamped */
    }
}

static void test_timeout_format(void **state)
{
    (void)state;
    char buf[10];
    assert_int_equal(kdp__timeout_format(0, buf), 2);
    assert_string_equal(buf, "0u");
    assert_int_equal(kdp__timeout_format(1, buf), 2);
    assert_string_equal(buf, "1u");
    kdp__timeout_format(99999999, buf);
    assert_string_equal(buf, "99999999u");
    kdp__timeout_format(100000000, buf);
    assert_string_equal(buf, "100000m");
    kdp__timeout_format(100000001, buf);
    assert_string_equal(buf, "100001m");
    kdp__timeout_format(UINT64_C(1000000000000), buf); /* 10^12 us */
    assert_string_equal(buf, "1000000S");
    kdp__timeout_format(UINT64_MAX, buf);
    assert_string_equal(buf, "99999999H");

    static const uint64_t values[] = {
        0,
        1,
        2,
        999,
        1000,
        1001,
        999999,
        1000000,
        99999999,
        100000000,
        100000001,
        UINT64_C(99999999999),
        UINT64_C(100000000000),
        UINT64_C(1000000000000),
        UINT64_C(99999999000000),
        UINT64_C(99999999000001),
        UINT64_C(6000000000000000),
        UINT64_C(99999999) * UINT64_C(3600000000) - 1,
        UINT64_C(99999999) * UINT64_C(3600000000),
        UINT64_C(99999999) * UINT64_C(3600000000) + 1,
        UINT64_MAX / 2,
        UINT64_MAX - 1,
        UINT64_MAX,
    };
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        check_format(values[i]);
    }
    /* every power of ten and its neighbours */
    for (uint64_t p = 1; p <= UINT64_C(10000000000000000000); p *= 10) {
        check_format(p - 1);
        check_format(p);
        check_format(p + 1);
        if (p == UINT64_C(10000000000000000000)) {
            break;
        }
    }
    /* a pseudo-random sweep over all magnitudes */
    uint64_t x = UINT64_C(0x9E3779B97F4A7C15);
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        check_format(x >> (i % 64));
    }
}

/* ---- grpc-message percent-encoding ---- */

static void check_roundtrip(const char *s, size_t len)
{
    size_t elen = 0;
    char *e = kdp__percent_encode(s, len, &elen);
    assert_non_null(e);
    assert_int_equal(strlen(e), elen);
    for (size_t i = 0; i < elen; i++) {
        unsigned char c = (unsigned char)e[i];
        assert_true(c >= 0x20 && c <= 0x7E);
    }
    size_t dlen = 0;
    char *d = kdp__percent_decode(e, elen, &dlen);
    assert_non_null(d);
    assert_int_equal(dlen, len);
    assert_memory_equal(d, s, len);
    assert_int_equal(d[dlen], '\0');
    free(e);
    free(d);
}

static void check_decode(const char *in, const char *want)
{
    size_t n = 0;
    char *d = kdp__percent_decode(in, strlen(in), &n);
    assert_non_null(d);
    assert_int_equal(n, strlen(want));
    assert_string_equal(d, want);
    free(d);
}

static void test_percent_encode(void **state)
{
    (void)state;
    size_t n = 99;
    char *e = kdp__percent_encode(STR("hello world"), &n);
    assert_non_null(e);
    assert_string_equal(e, "hello world");
    assert_int_equal(n, 11);
    free(e);

    e = kdp__percent_encode(STR("100%\n\t~\x7f"), &n);
    assert_string_equal(e, "100%25%0A%09~%7F");
    assert_int_equal(n, strlen(e));
    free(e);

    e = kdp__percent_encode(STR("caf\xc3\xa9 \xe2\x82\xac"), NULL); /* "café €" */
    assert_string_equal(e, "caf%C3%A9 %E2%82%AC");
    free(e);

    e = kdp__percent_encode("a\0b", 3, &n);
    assert_string_equal(e, "a%00b");
    assert_int_equal(n, 5);
    free(e);

    e = kdp__percent_encode(NULL, 0, &n);
    assert_non_null(e);
    assert_string_equal(e, "");
    assert_int_equal(n, 0);
    free(e);

    /* every byte on its own */
    for (int c = 0; c < 256; c++) {
        char in = (char)c;
        e = kdp__percent_encode(&in, 1, &n);
        assert_non_null(e);
        if (c >= 0x20 && c <= 0x7E && c != '%') {
            assert_int_equal(n, 1);
            assert_int_equal(e[0], c);
        } else {
            char want[4];
            snprintf(want, sizeof(want), "%%%02X", c);
            assert_string_equal(e, want);
        }
        free(e);
    }
}

static void test_percent_roundtrip(void **state)
{
    (void)state;
    char all[256];
    for (int i = 0; i < 256; i++) {
        all[i] = (char)i;
    }
    check_roundtrip(all, sizeof(all));
    for (int i = 0; i < 256; i++) {
        check_roundtrip(&all[i], 1);
    }
    check_roundtrip(STR("%"));
    check_roundtrip(STR("%%%"));
    check_roundtrip(STR("%41"));
    check_roundtrip(STR("100% sure"));
    check_roundtrip(STR("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80")); /* 日本語 😀 */
    check_roundtrip(STR(""));
}

static void test_percent_decode(void **state)
{
    (void)state;
    check_decode("", "");
    check_decode("plain", "plain");
    check_decode("%41%42c", "ABc");
    check_decode("%e2%82%ac", "\xe2\x82\xac"); /* lower-case hex accepted */
    check_decode("%E2%82%AC", "\xe2\x82\xac");
    check_decode("%25", "%");
    check_decode("%2541", "%41"); /* decoded once only */
    /* malformed: kept literally */
    check_decode("%", "%");
    check_decode("%4", "%4");
    check_decode("%zz", "%zz");
    check_decode("%%41", "%A");
    check_decode("a%", "a%");
    check_decode("a%4", "a%4");
    check_decode("%4g", "%4g");
    check_decode("%g4", "%g4");
    check_decode("%%", "%%");
    check_decode("% 41", "% 41");
    check_decode("100%", "100%");

    size_t n = 9;
    char *d = kdp__percent_decode("a%00b", 5, &n);
    assert_non_null(d);
    assert_int_equal(n, 3);
    assert_memory_equal(d, "a\0b", 4);
    free(d);

    d = kdp__percent_decode(NULL, 0, NULL);
    assert_non_null(d);
    assert_string_equal(d, "");
    free(d);

    /* only len bytes are read */
    d = kdp__percent_decode("%41%42", 5, &n);
    assert_string_equal(d, "A%4");
    free(d);
}

/* ---- framing ---- */

#define MAX_MSGS 16

typedef struct collector {
    int calls;
    size_t lens[MAX_MSGS];
    uint8_t *msgs[MAX_MSGS];
    int fail_at; /* return fail_err on this call (1-based), 0 = never */
    int fail_err;
} collector;

static int collect(void *ud, const uint8_t *msg, size_t len)
{
    collector *c = ud;
    assert_non_null(msg);
    assert_true(c->calls < MAX_MSGS);
    c->lens[c->calls] = len;
    c->msgs[c->calls] = malloc(len ? len : 1);
    assert_non_null(c->msgs[c->calls]);
    memcpy(c->msgs[c->calls], msg, len);
    c->calls++;
    if (c->fail_at == c->calls) {
        return c->fail_err;
    }
    return 0;
}

static void collector_clear(collector *c)
{
    for (int i = 0; i < c->calls; i++) {
        free(c->msgs[i]);
    }
    memset(c, 0, sizeof(*c));
}

static int must_not_be_called(void *ud, const uint8_t *msg, size_t len)
{
    (void)ud;
    (void)msg;
    (void)len;
    fail_msg("callback called");
    return 0;
}

static size_t put_msg(uint8_t *out, const void *body, uint32_t len)
{
    kdp__frame_header(out, len);
    if (len) {
        memcpy(out + KDP__FRAME_HEADER_LEN, body, len);
    }
    return KDP__FRAME_HEADER_LEN + len;
}

static void test_frame_header(void **state)
{
    (void)state;
    uint8_t h[KDP__FRAME_HEADER_LEN];
    kdp__frame_header(h, 0x01020304);
    assert_memory_equal(h, "\x00\x01\x02\x03\x04", 5);
    kdp__frame_header(h, 0);
    assert_memory_equal(h, "\x00\x00\x00\x00\x00", 5);
    kdp__frame_header(h, UINT32_MAX);
    assert_memory_equal(h, "\x00\xff\xff\xff\xff", 5);
}

static void test_deframe_one(void **state)
{
    (void)state;
    kdp__deframer d;
    kdp__deframer_init(&d, 1024);
    collector c = {0};
    uint8_t buf[64];
    size_t n = put_msg(buf, "hello", 5);
    assert_int_equal(kdp__deframer_feed(&d, buf, n, collect, &c), 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.lens[0], 5);
    assert_memory_equal(c.msgs[0], "hello", 5);
    assert_false(kdp__deframer_partial(&d));
    assert_null(d.buf); /* contiguous: delivered without a copy */
    collector_clear(&c);
    kdp__deframer_done(&d);
}

static void test_deframe_several(void **state)
{
    (void)state;
    kdp__deframer d;
    kdp__deframer_init(&d, 1024);
    collector c = {0};
    uint8_t buf[128];
    size_t n = put_msg(buf, "one", 3);
    n += put_msg(buf + n, NULL, 0);
    n += put_msg(buf + n, "three33", 7);
    n += put_msg(buf + n, "4", 1);
    assert_int_equal(kdp__deframer_feed(&d, buf, n, collect, &c), 0);
    assert_int_equal(c.calls, 4);
    assert_int_equal(c.lens[0], 3);
    assert_memory_equal(c.msgs[0], "one", 3);
    assert_int_equal(c.lens[1], 0);
    assert_int_equal(c.lens[2], 7);
    assert_memory_equal(c.msgs[2], "three33", 7);
    assert_int_equal(c.lens[3], 1);
    assert_memory_equal(c.msgs[3], "4", 1);
    assert_false(kdp__deframer_partial(&d));
    collector_clear(&c);
    kdp__deframer_done(&d);
}

static size_t three_messages(uint8_t *buf)
{
    static const char big[] = "a somewhat longer third message body, 50 bytes ok.";
    size_t n = put_msg(buf, "first", 5);
    n += put_msg(buf + n, NULL, 0);
    n += put_msg(buf + n, big, (uint32_t)strlen(big));
    return n;
}

static void check_three(const collector *c)
{
    assert_int_equal(c->calls, 3);
    assert_int_equal(c->lens[0], 5);
    assert_memory_equal(c->msgs[0], "first", 5);
    assert_int_equal(c->lens[1], 0);
    assert_int_equal(c->lens[2], 50);
    assert_memory_equal(c->msgs[2], "a somewhat longer third message body, 50 bytes ok.", 50);
}

static void test_deframe_split_everywhere(void **state)
{
    (void)state;
    uint8_t buf[128];
    size_t n = three_messages(buf);

    /* one split point anywhere (including empty first or second chunk) */
    for (size_t i = 0; i <= n; i++) {
        kdp__deframer d;
        kdp__deframer_init(&d, 64);
        collector c = {0};
        assert_int_equal(kdp__deframer_feed(&d, buf, i, collect, &c), 0);
        assert_int_equal(kdp__deframer_feed(&d, buf + i, n - i, collect, &c), 0);
        check_three(&c);
        assert_false(kdp__deframer_partial(&d));
        collector_clear(&c);
        kdp__deframer_done(&d);
    }
    /* two split points anywhere */
    for (size_t i = 0; i <= n; i++) {
        for (size_t j = i; j <= n; j++) {
            kdp__deframer d;
            kdp__deframer_init(&d, 64);
            collector c = {0};
            assert_int_equal(kdp__deframer_feed(&d, buf, i, collect, &c), 0);
            assert_int_equal(kdp__deframer_feed(&d, buf + i, j - i, collect, &c), 0);
            assert_int_equal(kdp__deframer_feed(&d, buf + j, n - j, collect, &c), 0);
            check_three(&c);
            assert_false(kdp__deframer_partial(&d));
            collector_clear(&c);
            kdp__deframer_done(&d);
        }
    }
    /* one byte at a time; partial() is true exactly inside a message */
    kdp__deframer d;
    kdp__deframer_init(&d, 64);
    collector c = {0};
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(kdp__deframer_feed(&d, buf + i, 1, collect, &c), 0);
        assert_int_equal(kdp__deframer_partial(&d), c.calls == seen);
        seen = c.calls;
    }
    check_three(&c);
    assert_false(kdp__deframer_partial(&d));
    collector_clear(&c);
    kdp__deframer_done(&d);
}

static void test_deframe_buffer_reuse(void **state)
{
    (void)state;
    kdp__deframer d;
    kdp__deframer_init(&d, 64);
    collector c = {0};
    uint8_t buf[64];
    size_t n = put_msg(buf, "0123456789", 10);
    /* split in the body: must be buffered */
    assert_int_equal(kdp__deframer_feed(&d, buf, 7, collect, &c), 0);
    assert_non_null(d.buf);
    uint8_t *first = d.buf;
    size_t cap = d.cap;
    assert_int_equal(kdp__deframer_feed(&d, buf + 7, n - 7, collect, &c), 0);
    /* a smaller one reuses the buffer */
    n = put_msg(buf, "abc", 3);
    assert_int_equal(kdp__deframer_feed(&d, buf, 6, collect, &c), 0);
    assert_int_equal(kdp__deframer_feed(&d, buf + 6, n - 6, collect, &c), 0);
    assert_ptr_equal(d.buf, first);
    assert_int_equal(d.cap, cap);
    /* a bigger one grows it */
    n = put_msg(buf, "0123456789abcdefghij", 20);
    assert_int_equal(kdp__deframer_feed(&d, buf, 6, collect, &c), 0);
    assert_int_equal(kdp__deframer_feed(&d, buf + 6, n - 6, collect, &c), 0);
    assert_true(d.cap >= 20);
    assert_int_equal(c.calls, 3);
    assert_memory_equal(c.msgs[0], "0123456789", 10);
    assert_memory_equal(c.msgs[1], "abc", 3);
    assert_memory_equal(c.msgs[2], "0123456789abcdefghij", 20);
    collector_clear(&c);
    kdp__deframer_done(&d);
    assert_null(d.buf);
    /* may be init'ed again */
    kdp__deframer_init(&d, 8);
    kdp__deframer_done(&d);
    kdp__deframer_done(&d);
}

static void test_deframe_zero_length(void **state)
{
    (void)state;
    kdp__deframer d;
    kdp__deframer_init(&d, 0); /* max 0 still allows empty messages */
    collector c = {0};
    uint8_t h[KDP__FRAME_HEADER_LEN];
    kdp__frame_header(h, 0);
    /* the message completes with the header's last byte, with no data after it */
    assert_int_equal(kdp__deframer_feed(&d, h, 4, collect, &c), 0);
    assert_int_equal(c.calls, 0);
    assert_true(kdp__deframer_partial(&d));
    assert_int_equal(kdp__deframer_feed(&d, h + 4, 1, collect, &c), 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.lens[0], 0);
    assert_false(kdp__deframer_partial(&d));
    assert_int_equal(kdp__deframer_feed(&d, h, 5, collect, &c), 0);
    assert_int_equal(c.calls, 2);
    /* empty feeds are no-ops */
    assert_int_equal(kdp__deframer_feed(&d, NULL, 0, collect, &c), 0);
    assert_int_equal(c.calls, 2);
    assert_null(d.buf);
    /* and max 0 refuses one byte */
    kdp__frame_header(h, 1);
    assert_int_equal(kdp__deframer_feed(&d, h, 5, collect, &c), -EMSGSIZE);
    collector_clear(&c);
    kdp__deframer_done(&d);
}

static void test_deframe_over_limit(void **state)
{
    (void)state;
    kdp__deframer d;
    kdp__deframer_init(&d, 16);
    uint8_t h[KDP__FRAME_HEADER_LEN];
    kdp__frame_header(h, UINT32_C(1) << 31);
    /* header alone, a byte at a time: the error comes with its last byte */
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(kdp__deframer_feed(&d, h + i, 1, must_not_be_called, NULL), 0);
    }
    assert_int_equal(kdp__deframer_feed(&d, h + 4, 1, must_not_be_called, NULL), -EMSGSIZE);
    assert_null(d.buf); /* nothing allocated */
    assert_int_equal(d.cap, 0);
    kdp__deframer_done(&d);

    /* exactly max is fine, max + 1 is not */
    kdp__deframer_init(&d, 16);
    collector c = {0};
    uint8_t buf[64];
    memset(buf, 0, sizeof(buf));
    size_t n = put_msg(buf, "0123456789abcdef", 16);
    assert_int_equal(kdp__deframer_feed(&d, buf, n, collect, &c), 0);
    assert_int_equal(c.calls, 1);
    kdp__frame_header(buf, 17);
    assert_int_equal(kdp__deframer_feed(&d, buf, 5 + 17, collect, &c), -EMSGSIZE);
    assert_int_equal(c.calls, 1);
    collector_clear(&c);
    kdp__deframer_done(&d);
}

static void test_deframe_flags(void **state)
{
    (void)state;
    static const uint8_t flags[] = {1, 2, 7, 0x80, 0xff};
    for (size_t i = 0; i < sizeof(flags); i++) {
        kdp__deframer d;
        kdp__deframer_init(&d, 1024);
        uint8_t buf[16];
        size_t n = put_msg(buf, "abc", 3);
        buf[0] = flags[i];
        assert_int_equal(kdp__deframer_feed(&d, buf, n, must_not_be_called, NULL), -ENOTSUP);
        kdp__deframer_done(&d);
    }
    /* the flag is checked before the length (a compressed over-limit message) */
    kdp__deframer d;
    kdp__deframer_init(&d, 1);
    uint8_t h[5] = {1, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(kdp__deframer_feed(&d, h, 5, must_not_be_called, NULL), -ENOTSUP);
    kdp__deframer_done(&d);
}

static void test_deframe_stays_failed(void **state)
{
    (void)state;
    kdp__deframer d;
    kdp__deframer_init(&d, 1024);
    uint8_t buf[32];
    size_t n = put_msg(buf, "abc", 3);
    buf[0] = 7;
    assert_int_equal(kdp__deframer_feed(&d, buf, n, must_not_be_called, NULL), -ENOTSUP);
    assert_true(d.failed);
    /* a good message afterwards is refused too */
    n = put_msg(buf, "abc", 3);
    assert_int_equal(kdp__deframer_feed(&d, buf, n, must_not_be_called, NULL), -EPROTO);
    assert_int_equal(kdp__deframer_feed(&d, NULL, 0, must_not_be_called, NULL), -EPROTO);
    kdp__deframer_done(&d);
    /* init again: usable */
    kdp__deframer_init(&d, 1024);
    collector c = {0};
    assert_int_equal(kdp__deframer_feed(&d, buf, n, collect, &c), 0);
    assert_int_equal(c.calls, 1);
    collector_clear(&c);
    kdp__deframer_done(&d);
}

static void test_deframe_callback_error(void **state)
{
    (void)state;
    uint8_t buf[128];
    size_t n = three_messages(buf);
    /* fail on each message, fed whole (no copy) or a byte at a time (buffered) */
    static const size_t chunks[] = {1, 3, 128};
    for (int fail_at = 1; fail_at <= 3; fail_at++) {
        for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
            kdp__deframer d;
            kdp__deframer_init(&d, 64);
            collector c = {.fail_at = fail_at, .fail_err = -ECANCELED};
            int r = 0;
            size_t off = 0;
            while (off < n && r == 0) {
                size_t k = n - off < chunks[i] ? n - off : chunks[i];
                r = kdp__deframer_feed(&d, buf + off, k, collect, &c);
                off += k;
            }
            assert_int_equal(r, -ECANCELED);
            assert_int_equal(c.calls, fail_at); /* feed() returned at once */
            assert_int_equal(kdp__deframer_feed(&d, buf, n, collect, &c), -EPROTO);
            assert_int_equal(c.calls, fail_at);
            collector_clear(&c);
            kdp__deframer_done(&d);
        }
    }
}

static void test_deframe_partial(void **state)
{
    (void)state;
    kdp__deframer d;
    kdp__deframer_init(&d, 64);
    collector c = {0};
    uint8_t buf[32];
    size_t n = put_msg(buf, "hello", 5);
    assert_false(kdp__deframer_partial(&d));
    assert_int_equal(kdp__deframer_feed(&d, buf, 1, collect, &c), 0);
    assert_true(kdp__deframer_partial(&d)); /* part of a header */
    assert_int_equal(kdp__deframer_feed(&d, buf + 1, 4, collect, &c), 0);
    assert_true(kdp__deframer_partial(&d)); /* header, no body */
    assert_int_equal(kdp__deframer_feed(&d, buf + 5, 2, collect, &c), 0);
    assert_true(kdp__deframer_partial(&d)); /* part of a body */
    assert_int_equal(kdp__deframer_feed(&d, buf + 7, n - 7, collect, &c), 0);
    assert_false(kdp__deframer_partial(&d)); /* complete */
    assert_int_equal(c.calls, 1);
    /* a complete message followed by the start of the next */
    assert_int_equal(kdp__deframer_feed(&d, buf, n, collect, &c), 0);
    assert_int_equal(kdp__deframer_feed(&d, buf, 3, collect, &c), 0);
    assert_true(kdp__deframer_partial(&d));
    assert_int_equal(c.calls, 2);
    collector_clear(&c);
    kdp__deframer_done(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_status_parse),
        cmocka_unit_test(test_status_from_http),
        cmocka_unit_test(test_status_from_errno),
        cmocka_unit_test(test_timeout_parse_units),
        cmocka_unit_test(test_timeout_parse_digits),
        cmocka_unit_test(test_timeout_format),
        cmocka_unit_test(test_percent_encode),
        cmocka_unit_test(test_percent_roundtrip),
        cmocka_unit_test(test_percent_decode),
        cmocka_unit_test(test_frame_header),
        cmocka_unit_test(test_deframe_one),
        cmocka_unit_test(test_deframe_several),
        cmocka_unit_test(test_deframe_split_everywhere),
        cmocka_unit_test(test_deframe_buffer_reuse),
        cmocka_unit_test(test_deframe_zero_length),
        cmocka_unit_test(test_deframe_over_limit),
        cmocka_unit_test(test_deframe_flags),
        cmocka_unit_test(test_deframe_stays_failed),
        cmocka_unit_test(test_deframe_callback_error),
        cmocka_unit_test(test_deframe_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
