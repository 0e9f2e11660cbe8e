/* SPDX-License-Identifier: MIT */
/* jsonstr: see jsonstr.h. */
#include "base/jsonstr.h"

#include <stdbool.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80) {
        return 1;
    }
    size_t n;
    unsigned min;
    unsigned cp;
    if ((s[0] & 0xe0) == 0xc0) {
        n = 2, min = 0x80, cp = s[0] & 0x1fU;
    } else if ((s[0] & 0xf0) == 0xe0) {
        n = 3, min = 0x800, cp = s[0] & 0x0fU;
    } else if ((s[0] & 0xf8) == 0xf0) {
        n = 4, min = 0x10000, cp = s[0] & 0x07U;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) { /* also stops at the NUL */
            return 0;
        }
        cp = (cp << 6) | (s[i] & 0x3fU);
    }
    bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
    return cp < min || cp > 0x10ffff || surrogate ? 0 : n;
}

/* The escape of the byte at s (written into buf if need be), or NULL when
 * the sequence at s (*len bytes) is copied as it is. */
static const char *escape(const unsigned char *s, char buf[8], size_t *len)
{
    *len = 1;
    switch (*s) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        break;
    }
    if (*s < 0x20 || *s == 0x7f) {
        (void)snprintf(buf, 8, "\\u%04x", *s);
        return buf;
    }
    *len = utf8_len(s);
    if (*len == 0) {
        *len = 1;
        return "\\ufffd"; /* not UTF-8: one replacement per byte */
    }
    return NULL;
}

void kdp__json_string(const char *str, kdp__json_put_fn put, void *ud)
{
    const unsigned char *s = (const unsigned char *)str;
    const unsigned char *run = s; /* copied as they are, not yet put */
    put("\"", 1, ud);
    while (*s) {
        char buf[8];
        size_t len;
        const char *esc = escape(s, buf, &len);
        if (esc) {
            if (s > run) {
                put((const char *)run, (size_t)(s - run), ud);
            }
            put(esc, strlen(esc), ud);
            run = s + len;
        }
        s += len;
    }
    if (s > run) {
        put((const char *)run, (size_t)(s - run), ud);
    }
    put("\"", 1, ud);
}

static void put_file(const char *s, size_t len, void *ud)
{
    (void)fwrite(s, 1, len, ud);
}

void kdp__json_string_file(FILE *f, const char *s)
{
    kdp__json_string(s, put_file, f);
}
