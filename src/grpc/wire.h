/* SPDX-License-Identifier: MIT */
/*
 * wire: the gRPC-over-HTTP/2 details that nghttp2 does not know about.
 * Pure functions and a deframer with no I/O, so every one is unit-tested and
 * fuzzed on its own: status codes, 5-byte message framing, grpc-timeout,
 * grpc-message percent-encoding.
 */
#ifndef KDP_WIRE_H
#define KDP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gRPC status codes (the numbers are wire facts). */
enum {
    KDP__ST_OK = 0,
    KDP__ST_CANCELLED = 1,
    KDP__ST_UNKNOWN = 2,
    KDP__ST_INVALID_ARGUMENT = 3,
    KDP__ST_DEADLINE_EXCEEDED = 4,
    KDP__ST_NOT_FOUND = 5,
    KDP__ST_ALREADY_EXISTS = 6,
    KDP__ST_PERMISSION_DENIED = 7,
    KDP__ST_RESOURCE_EXHAUSTED = 8,
    KDP__ST_FAILED_PRECONDITION = 9,
    KDP__ST_ABORTED = 10,
    KDP__ST_OUT_OF_RANGE = 11,
    KDP__ST_UNIMPLEMENTED = 12,
    KDP__ST_INTERNAL = 13,
    KDP__ST_UNAVAILABLE = 14,
    KDP__ST_DATA_LOSS = 15,
    KDP__ST_UNAUTHENTICATED = 16,
};

/* "OK", "CANCELLED", ... "UNAUTHENTICATED"; "UNKNOWN" for any other value. */
const char *kdp__status_name(int code);
/* Parses a grpc-status header value (decimal, no sign, no spaces). A value
 * that is not a number (or is too big for an int) gives UNKNOWN; a number out
 * of 0..16 is returned as is (peers may send new codes). */
int kdp__status_parse(const char *s, size_t len);
/* The gRPC code for a non-200 HTTP :status, per gRPC's HTTP-to-gRPC mapping
 * (400 INTERNAL, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 UNIMPLEMENTED,
 * 429/502/503/504 UNAVAILABLE, anything else UNKNOWN). */
int kdp__status_from_http(int http_status);
/* A status for a negative errno from our own code (-ETIMEDOUT ->
 * DEADLINE_EXCEEDED, -EINVAL -> INVALID_ARGUMENT, -ENOENT -> NOT_FOUND,
 * -EEXIST -> ALREADY_EXISTS, -EPERM/-EACCES -> PERMISSION_DENIED, -ENOMEM and
 * -EMSGSIZE -> RESOURCE_EXHAUSTED, -ECANCELED -> CANCELLED, -ENOTSUP/-ENOSYS ->
 * UNIMPLEMENTED, -ECONNREFUSED/-ECONNRESET/-EPIPE/-ENOTCONN -> UNAVAILABLE,
 * -EBUSY/-EAGAIN -> UNAVAILABLE, 0 or positive -> OK, other -> UNKNOWN). */
int kdp__status_from_errno(int neg_errno);

/* grpc-timeout: 1-8 ASCII digits then one unit of H M S m u n. Stores the
 * timeout in microseconds (n rounds up to 1 us if non-zero; even 99999999H
 * fits in 64 bits, so nothing overflows). Returns 0 or -EINVAL. */
int kdp__timeout_parse(const char *s, size_t len, uint64_t *ret_us);
/* Formats us as a grpc-timeout value with at most 8 digits, in the finest
 * unit that fits (u, m, S, M, H), rounding up so a deadline is never made
 * shorter (except that values beyond 99999999H, about 11,400 years, are
 * clamped to it). buf needs 10 bytes; returns the length written
 * (NUL-terminated). */
size_t kdp__timeout_format(uint64_t us, char buf[10]);

/* grpc-message percent-encoding: bytes outside 0x20..0x7E and '%' become
 * %XX (upper-case hex). Returns a malloc'ed NUL-terminated string or NULL on
 * allocation failure; *ret_len (if not NULL) gets its length. */
char *kdp__percent_encode(const char *s, size_t len, size_t *ret_len);
/* Decodes %XX sequences; a malformed sequence is kept as is (as gRPC asks).
 * Returns a malloc'ed NUL-terminated string or NULL on allocation failure. */
char *kdp__percent_decode(const char *s, size_t len, size_t *ret_len);

/* Length-prefixed messages: 1 byte compressed flag, 4 bytes big-endian length. */
#define KDP__FRAME_HEADER_LEN 5
void kdp__frame_header(uint8_t out[KDP__FRAME_HEADER_LEN], uint32_t len);

/* Called once per complete message. msg is valid only during the call.
 * Returns 0 to go on, or a negative errno that feed() returns at once. */
typedef int (*kdp__deframer_cb)(void *ud, const uint8_t *msg, size_t len);

typedef struct kdp__deframer {
    uint8_t hdr[KDP__FRAME_HEADER_LEN];
    size_t hdr_len; /* bytes of hdr received so far */
    uint8_t *buf;   /* body being assembled */
    size_t len;     /* bytes of body received */
    size_t need;    /* body length announced by the header */
    size_t cap;     /* allocated size of buf, reused between messages */
    size_t max;     /* receive limit on one message body */
    bool failed;    /* a previous feed() failed: every later one fails too */
} kdp__deframer;

void kdp__deframer_init(kdp__deframer *d, size_t max_message);
/* Frees the buffer; the deframer may be init'ed again. */
void kdp__deframer_done(kdp__deframer *d);
/* Consumes bytes, calling cb for each complete message (including
 * zero-length ones). The length is checked against max as soon as the header
 * is complete, BEFORE any body is buffered. Returns 0, -EMSGSIZE (over the
 * limit), -ENOTSUP (compressed flag set, or flag byte not 0/1), -ENOMEM, or
 * the callback's error. After an error the deframer stays failed: later calls
 * return -EPROTO. */
int kdp__deframer_feed(kdp__deframer *d, const uint8_t *data, size_t len, kdp__deframer_cb cb,
                       void *ud);
/* True if bytes of an unfinished message are pending (the stream ended in the
 * middle of a message: a protocol error). */
bool kdp__deframer_partial(const kdp__deframer *d);

#endif
