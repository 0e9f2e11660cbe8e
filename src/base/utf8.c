/* SPDX-License-Identifier: MIT */
/* utf8: see utf8.h. */
#include "base/utf8.h"

#include <stdbool.h>
#include <string.h>

size_t kdp__utf8_len(const unsigned char *s)
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

size_t kdp__utf8_copy(char *dst, size_t cap, const char *src)
{
    static const char replacement[] = "\xef\xbf\xbd";
    const unsigned char *s = (const unsigned char *)src;
    size_t w = 0;
    while (*s) {
        size_t n = kdp__utf8_len(s);
        const char *from = n ? (const char *)s : replacement;
        size_t len = n ? n : 3;
        if (w + len >= cap) {
            break;
        }
        memcpy(dst + w, from, len);
        w += len;
        s += n ? n : 1;
    }
    dst[w] = '\0';
    return w;
}
