/* SPDX-License-Identifier: MIT */
#include "base/safetext.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

/* The code point of the valid sequence s of len bytes. */
static uint32_t code_point(const unsigned char *s, size_t len)
{
    static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t cp = s[0] & lead_mask[len];
    for (size_t i = 1; i < len; i++) {
        cp = cp << 6 | (s[i] & 0x3fU);
    }
    return cp;
}

static bool hidden(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || cp == 0x061c ||
           cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

/* The escape of the character at s (its length in *len), into esc[8];
 * 0 if it is kept as it is. */
static size_t escape_at(const unsigned char *s, size_t *len, char esc[8])
{
    size_t n = kdp__utf8_len(s);
    *len = n ? n : 1;
    if (n == 0 || s[0] < 0x20 || s[0] == 0x7f) {
        return (size_t)snprintf(esc, 8, "\\x%02x", s[0]);
    }
    uint32_t cp = n > 1 ? code_point(s, n) : s[0];
    return hidden(cp) ? (size_t)snprintf(esc, 8, "\\u%04x", (unsigned)cp) : 0;
}

bool kdp__safetext_clean(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len;
        char esc[8];
        if (escape_at(p, &len, esc) > 0) {
            return false;
        }
        p += len;
    }
    return true;
}

size_t kdp__safetext(char *dst, size_t cap, const char *src)
{
    const unsigned char *p = (const unsigned char *)src;
    size_t o = 0;
    while (*p) {
        size_t len;
        char esc[8];
        size_t e = escape_at(p, &len, esc);
        const char *out = e ? esc : (const char *)p;
        size_t n = e ? e : len;
        if (o + n >= cap) {
            break;
        }
        memcpy(dst + o, out, n);
        o += n;
        p += len;
    }
    dst[o] = '\0';
    return o;
}
