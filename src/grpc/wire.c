/* SPDX-License-Identifier: MIT */
#include "grpc/wire.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- status codes ---- */

static const char *const status_names[] = {
    [KDP__ST_OK] = "OK",
    [KDP__ST_CANCELLED] = "CANCELLED",
    [KDP__ST_UNKNOWN] = "UNKNOWN",
    [KDP__ST_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
    [KDP__ST_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
    [KDP__ST_NOT_FOUND] = "NOT_FOUND",
    [KDP__ST_ALREADY_EXISTS] = "ALREADY_EXISTS",
    [KDP__ST_PERMISSION_DENIED] = "PERMISSION_DENIED",
    [KDP__ST_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
    [KDP__ST_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
    [KDP__ST_ABORTED] = "ABORTED",
    [KDP__ST_OUT_OF_RANGE] = "OUT_OF_RANGE",
    [KDP__ST_UNIMPLEMENTED] = "UNIMPLEMENTED",
    [KDP__ST_INTERNAL] = "INTERNAL",
    [KDP__ST_UNAVAILABLE] = "UNAVAILABLE",
    [KDP__ST_DATA_LOSS] = "DATA_LOSS",
    [KDP__ST_UNAUTHENTICATED] = "UNAUTHENTICATED",
};

const char *kdp__status_name(int code)
{
    if (code < 0 || (size_t)code >= sizeof(status_names) / sizeof(status_names[0])) {
        return "UNKNOWN";
    }
    return status_names[code];
}

int kdp__status_parse(const char *s, size_t len)
{
    if (len == 0) {
        return KDP__ST_UNKNOWN;
    }
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return KDP__ST_UNKNOWN;
        }
        int digit = s[i] - '0';
        if (v > (INT_MAX - digit) / 10) {
            return KDP__ST_UNKNOWN;
        }
        v = v * 10 + digit;
    }
    return v;
}

int kdp__status_from_http(int http_status)
{
    switch (http_status) {
    case 400:
        return KDP__ST_INTERNAL;
    case 401:
        return KDP__ST_UNAUTHENTICATED;
    case 403:
        return KDP__ST_PERMISSION_DENIED;
    case 404:
        return KDP__ST_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return KDP__ST_UNAVAILABLE;
    default:
        return KDP__ST_UNKNOWN;
    }
}

int kdp__status_from_errno(int neg_errno)
{
    if (neg_errno >= 0) {
        return KDP__ST_OK;
    }
    switch (neg_errno) {
    case -ETIMEDOUT:
        return KDP__ST_DEADLINE_EXCEEDED;
    case -EINVAL:
        return KDP__ST_INVALID_ARGUMENT;
    case -ENOENT:
        return KDP__ST_NOT_FOUND;
    case -EEXIST:
        return KDP__ST_ALREADY_EXISTS;
    case -EPERM:
    case -EACCES:
        return KDP__ST_PERMISSION_DENIED;
    case -ENOMEM:
    case -EMSGSIZE:
        return KDP__ST_RESOURCE_EXHAUSTED;
    case -ECANCELED:
        return KDP__ST_CANCELLED;
    case -ENOTSUP: /* == EOPNOTSUPP on Linux */
    case -ENOSYS:
        return KDP__ST_UNIMPLEMENTED;
    case -ECONNREFUSED:
    case -ECONNRESET:
    case -EPIPE:
    case -ENOTCONN:
    case -EBUSY:
    case -EAGAIN: /* == EWOULDBLOCK on Linux */
        return KDP__ST_UNAVAILABLE;
    default:
        return KDP__ST_UNKNOWN;
    }
}

/* ---- grpc-timeout ---- */

#define TIMEOUT_MAX_DIGITS 8
#define TIMEOUT_MAX_VALUE  99999999U
#define US_PER_MS          UINT64_C(1000)
#define US_PER_S           UINT64_C(1000000)
#define US_PER_MIN         (60 * US_PER_S)
#define US_PER_H           (60 * US_PER_MIN)

/* The largest value in the largest unit cannot overflow, so no unit needs saturation. */
_Static_assert(TIMEOUT_MAX_VALUE <= UINT64_MAX / US_PER_H, "99999999H must fit in a uint64_t");

int kdp__timeout_parse(const char *s, size_t len, uint64_t *ret_us)
{
    assert(ret_us);
    if (len < 2 || len > TIMEOUT_MAX_DIGITS + 1) {
        return -EINVAL;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len - 1; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -EINVAL;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    uint64_t us;
    switch (s[len - 1]) {
    case 'H':
        us = v * US_PER_H;
        break;
    case 'M':
        us = v * US_PER_MIN;
        break;
    case 'S':
        us = v * US_PER_S;
        break;
    case 'm':
        us = v * US_PER_MS;
        break;
    case 'u':
        us = v;
        break;
    case 'n':
        us = v / 1000 + (v % 1000 != 0);
        break;
    default:
        return -EINVAL;
    }
    *ret_us = us;
    return 0;
}

/* ceil(a / b) without the overflow of (a + b - 1) / b. */
static uint64_t div_round_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

size_t kdp__timeout_format(uint64_t us, char buf[10])
{
    static const struct {
        char unit;
        uint64_t us;
    } units[] = {
        {'u', 1}, {'m', US_PER_MS}, {'S', US_PER_S}, {'M', US_PER_MIN}, {'H', US_PER_H},
    };
    size_t n = sizeof(units) / sizeof(units[0]);
    uint64_t v = TIMEOUT_MAX_VALUE; /* clamp: beyond 99999999H (11,400 years) */
    char unit = 'H';
    for (size_t i = 0; i < n; i++) {
        uint64_t x = div_round_up(us, units[i].us);
        if (x <= TIMEOUT_MAX_VALUE) {
            v = x;
            unit = units[i].unit;
            break;
        }
    }
    int r = snprintf(buf, 10, "%" PRIu64 "%c", v, unit);
    assert(r > 0 && r < 10);
    return (size_t)r;
}

/* ---- grpc-message percent-encoding ---- */

static const char hex_upper[] = "0123456789ABCDEF";

static bool needs_escape(unsigned char c)
{
    return c < 0x20 || c > 0x7E || c == '%';
}

char *kdp__percent_encode(const char *s, size_t len, size_t *ret_len)
{
    if (len > (SIZE_MAX - 1) / 3) {
        return NULL; /* cannot happen for a real object; refuse rather than wrap */
    }
    size_t out_len = 0;
    for (size_t i = 0; i < len; i++) {
        out_len += needs_escape((unsigned char)s[i]) ? 3 : 1;
    }
    char *out = malloc(out_len + 1);
    if (!out) {
        return NULL;
    }
    char *p = out;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (needs_escape(c)) {
            *p++ = '%';
            *p++ = hex_upper[c >> 4];
            *p++ = hex_upper[c & 0xF];
        } else {
            *p++ = (char)c;
        }
    }
    *p = '\0';
    assert((size_t)(p - out) == out_len);
    if (ret_len) {
        *ret_len = out_len;
    }
    return out;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

char *kdp__percent_decode(const char *s, size_t len, size_t *ret_len)
{
    if (len == SIZE_MAX) {
        return NULL;
    }
    char *out = malloc(len + 1); /* decoding never grows the text */
    if (!out) {
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%' && len - i >= 3) {
            int hi = hex_value(s[i + 1]);
            int lo = hex_value(s[i + 2]);
            if (hi >= 0 && lo >= 0) {
                out[o++] = (char)(hi << 4 | lo);
                i += 2;
                continue;
            }
        }
        out[o++] = s[i]; /* plain byte, or a malformed sequence kept literally */
    }
    out[o] = '\0';
    if (ret_len) {
        *ret_len = o;
    }
    return out;
}

/* ---- length-prefixed message framing ---- */

void kdp__frame_header(uint8_t out[KDP__FRAME_HEADER_LEN], uint32_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

void kdp__deframer_init(kdp__deframer *d, size_t max_message)
{
    assert(d);
    memset(d, 0, sizeof(*d));
    d->max = max_message;
}

void kdp__deframer_done(kdp__deframer *d)
{
    if (!d) {
        return;
    }
    free(d->buf);
    memset(d, 0, sizeof(*d));
}

/* The header is complete: check it and set up for the body. */
static int start_body(kdp__deframer *d)
{
    if (d->hdr[0] != 0) {
        return -ENOTSUP; /* 1 = compressed (we never negotiate a codec); others are invalid */
    }
    uint32_t n = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 | (uint32_t)d->hdr[3] << 8 |
                 (uint32_t)d->hdr[4];
    if (n > d->max) {
        return -EMSGSIZE;
    }
    d->need = n;
    d->len = 0;
    return 0;
}

/* Makes room for d->need body bytes (need <= max, checked by start_body()). */
static int reserve_body(kdp__deframer *d)
{
    if (d->need <= d->cap) {
        return 0;
    }
    uint8_t *p = realloc(d->buf, d->need);
    if (!p) {
        return -ENOMEM;
    }
    d->buf = p;
    d->cap = d->need;
    return 0;
}

/* A message is complete: reset for the next header, then hand it over. */
static int deliver(kdp__deframer *d, const uint8_t *msg, size_t len, kdp__deframer_cb cb, void *ud)
{
    static const uint8_t empty[1];
    d->hdr_len = 0;
    d->len = 0;
    d->need = 0;
    return cb(ud, len ? msg : empty, len);
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Takes header bytes from data[*off..len). Once the header is whole, a body
 * that is all here (or empty) is handed over with no copy. */
static int feed_header(kdp__deframer *d, const uint8_t *data, size_t len, size_t *off,
                       kdp__deframer_cb cb, void *ud)
{
    size_t n = min_size(KDP__FRAME_HEADER_LEN - d->hdr_len, len - *off);
    memcpy(d->hdr + d->hdr_len, data + *off, n);
    d->hdr_len += n;
    *off += n;
    if (d->hdr_len < KDP__FRAME_HEADER_LEN) {
        return 0; /* data ends inside the header */
    }
    int r = start_body(d);
    if (r < 0 || len - *off < d->need) {
        return r;
    }
    size_t need = d->need;
    r = deliver(d, data + *off, need, cb, ud);
    *off += need;
    return r;
}

/* A body split across feeds: assembles it in buf. */
static int feed_body(kdp__deframer *d, const uint8_t *data, size_t len, size_t *off,
                     kdp__deframer_cb cb, void *ud)
{
    int r = reserve_body(d);
    if (r < 0) {
        return r;
    }
    size_t n = min_size(d->need - d->len, len - *off);
    memcpy(d->buf + d->len, data + *off, n);
    d->len += n;
    *off += n;
    return d->len == d->need ? deliver(d, d->buf, d->need, cb, ud) : 0;
}

int kdp__deframer_feed(kdp__deframer *d, const uint8_t *data, size_t len, kdp__deframer_cb cb,
                       void *ud)
{
    assert(d && cb && (data || len == 0));
    if (d->failed) {
        return -EPROTO;
    }
    size_t off = 0;
    while (off < len) {
        int r = d->hdr_len < KDP__FRAME_HEADER_LEN ? feed_header(d, data, len, &off, cb, ud)
                                                   : feed_body(d, data, len, &off, cb, ud);
        if (r < 0) {
            d->failed = true;
            return r;
        }
    }
    return 0;
}

bool kdp__deframer_partial(const kdp__deframer *d)
{
    assert(d);
    return d->hdr_len > 0;
}
