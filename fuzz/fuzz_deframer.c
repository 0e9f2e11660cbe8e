/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for src/grpc/wire.c: the deframer (fed in chunks whose sizes
 * come from the input, and compared with one whole feed), grpc-timeout
 * parsing and grpc-message percent-decoding. abort()s on a broken invariant.
 *
 * Input: byte 0 & 7 = k, bytes 1..k = chunk sizes (0 means 256), the rest =
 * the stream.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/wire.h"

#define MAX_MESSAGE (64U << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Every message delivered, re-framed: must be a prefix of the stream. */
typedef struct record {
    uint8_t *out;
    size_t len;
    size_t cap;
    size_t calls;
} record;

static int on_msg(void *ud, const uint8_t *msg, size_t len)
{
    record *r = ud;
    CHECK(msg);
    CHECK(len <= MAX_MESSAGE);
    CHECK(len <= r->cap - r->len - KDP__FRAME_HEADER_LEN);
    kdp__frame_header(r->out + r->len, (uint32_t)len);
    memcpy(r->out + r->len + KDP__FRAME_HEADER_LEN, msg, len);
    r->len += KDP__FRAME_HEADER_LEN + len;
    r->calls++;
    return 0;
}

static int deframe(const uint8_t *s, size_t n, const uint8_t *sizes, size_t k, record *r,
                   bool *ret_partial)
{
    kdp__deframer d;
    kdp__deframer_init(&d, MAX_MESSAGE);
    int err = 0;
    size_t off = 0;
    for (size_t i = 0; off < n; i++) {
        size_t chunk = k ? (sizes[i % k] ? sizes[i % k] : 256) : n;
        if (chunk > n - off) {
            chunk = n - off;
        }
        err = kdp__deframer_feed(&d, s + off, chunk, on_msg, r);
        off += chunk;
        if (err < 0) {
            CHECK(err == -EMSGSIZE || err == -ENOTSUP);
            CHECK(kdp__deframer_feed(&d, s, n, on_msg, r) == -EPROTO); /* stays failed */
            break;
        }
    }
    *ret_partial = kdp__deframer_partial(&d);
    kdp__deframer_done(&d);
    return err;
}

static void fuzz_deframer(const uint8_t *data, size_t size)
{
    size_t k = data[0] & 7;
    if (size < 1 + k) {
        return;
    }
    const uint8_t *sizes = data + 1;
    const uint8_t *s = data + 1 + k;
    size_t n = size - 1 - k;

    record whole = {.cap = n + KDP__FRAME_HEADER_LEN};
    record split = {.cap = n + KDP__FRAME_HEADER_LEN};
    whole.out = malloc(whole.cap);
    split.out = malloc(split.cap);
    if (!whole.out || !split.out) {
        free(whole.out);
        free(split.out);
        return;
    }
    bool whole_partial = false;
    bool split_partial = false;
    int whole_err = deframe(s, n, NULL, 0, &whole, &whole_partial);
    int split_err = deframe(s, n, sizes, k, &split, &split_partial);

    /* how the input is split changes nothing */
    CHECK(whole_err == split_err);
    CHECK(whole.calls == split.calls);
    CHECK(whole.len == split.len);
    CHECK(memcmp(whole.out, split.out, whole.len) == 0);
    /* the messages, framed again, are exactly the start of the stream */
    CHECK(whole.len <= n);
    CHECK(memcmp(whole.out, s, whole.len) == 0);
    if (whole_err == 0) {
        CHECK(whole_partial == split_partial);
        CHECK(whole_partial == (whole.len < n));
    } else {
        /* the failing header starts right after the last good message */
        CHECK(n - whole.len >= KDP__FRAME_HEADER_LEN);
        const uint8_t *h = s + whole.len;
        uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
        CHECK(whole_err == (h[0] != 0 ? -ENOTSUP : -EMSGSIZE));
        CHECK(h[0] != 0 || len > MAX_MESSAGE);
    }
    free(whole.out);
    free(split.out);
}

static void fuzz_timeout(const uint8_t *data, size_t size)
{
    uint64_t us = 12345;
    int r = kdp__timeout_parse((const char *)data, size, &us);
    if (r < 0) {
        CHECK(r == -EINVAL);
        CHECK(us == 12345);
        return;
    }
    CHECK(r == 0);
    CHECK(size >= 2 && size <= 9);
    char buf[10];
    size_t n = kdp__timeout_format(us, buf);
    CHECK(n >= 2 && n <= 9 && buf[n] == '\0');
    uint64_t back = 0;
    CHECK(kdp__timeout_parse(buf, n, &back) == 0);
    CHECK(back >= us); /* parsed values never exceed 99999999H: no clamping */
}

static void fuzz_percent(const uint8_t *data, size_t size)
{
    size_t dlen = 0;
    char *d = kdp__percent_decode((const char *)data, size, &dlen);
    if (!d) {
        return;
    }
    CHECK(dlen <= size && d[dlen] == '\0');
    size_t elen = 0;
    char *e = kdp__percent_encode(d, dlen, &elen);
    if (!e) {
        free(d);
        return;
    }
    CHECK(elen >= dlen && e[elen] == '\0');
    for (size_t i = 0; i < elen; i++) {
        CHECK(e[i] >= 0x20 && e[i] <= 0x7E);
    }
    size_t d2len = 0;
    char *d2 = kdp__percent_decode(e, elen, &d2len);
    if (d2) {
        CHECK(d2len == dlen && memcmp(d2, d, dlen) == 0);
    }
    free(d2);
    free(e);
    free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    fuzz_deframer(data, size);
    fuzz_timeout(data, size);
    fuzz_percent(data, size);
    return 0;
}
