/* SPDX-License-Identifier: MIT */
/* jsonstr: see jsonstr.h. */
#include "base/jsonstr.h"

#include <stdbool.h>
#include <string.h>

#include "base/utf8.h"

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
    *len = kdp__utf8_len(s);
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
