/* SPDX-License-Identifier: MIT */
/* quantity: a resource.Quantity as a number (see quantity.h). */
#include "base/quantity.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* 10^27 in nano units is 10^36: below 2^127 (1.7 * 10^38), so a digit
 * more and a multiplication by 10 never overflow on the way. */
#define LIMIT_EXP 36

static int bad(const char **why, int err, const char *what)
{
    if (why) {
        *why = what;
    }
    return err;
}

static kdp__qty pow10q(int e)
{
    kdp__qty v = 1;
    while (e-- > 0) {
        v *= 10;
    }
    return v;
}

/* The suffix's multiplier: binary as a power of two (*two), decimal as a
 * power of ten (*ten). Returns false for an unknown suffix. */
static bool suffix(const char *p, int *two, int *ten)
{
    static const struct {
        const char *s;
        int two, ten;
    } table[] = {{"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0},
                 {"Pi", 50, 0}, {"Ei", 60, 0}, {"n", 0, -9},  {"u", 0, -6},
                 {"m", 0, -3},  {"", 0, 0},    {"k", 0, 3},   {"M", 0, 6},
                 {"G", 0, 9},   {"T", 0, 12},  {"P", 0, 15},  {"E", 0, 18}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcmp(p, table[i].s) == 0) {
            *two = table[i].two;
            *ten = table[i].ten;
            return true;
        }
    }
    return false;
}

/* An exponent "e[+-]digits" at p (the whole rest). */
static bool exponent(const char *p, int *ten)
{
    if (*p != 'e' && *p != 'E') {
        return false;
    }
    p++;
    int sign = 1;
    if (*p == '+' || *p == '-') {
        sign = *p == '-' ? -1 : 1;
        p++;
    }
    if (*p < '0' || *p > '9') {
        return false;
    }
    int e = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        e = e < 1000 ? e * 10 + (*p - '0') : e;
    }
    *ten = sign * e;
    return *p == '\0';
}

/* The number's digits from *pp: an integer *m and a power of ten,
 * m * 10^-(*frac); *lost: a non-zero digit past what m keeps. Returns how
 * many digits, or -ERANGE. */
static int digits(const char **pp, kdp__qty *m, int *frac, bool *lost)
{
    const char *p = *pp;
    int seen = 0;
    bool dot = false;
    for (;; p++) {
        if (*p == '.' && !dot) {
            dot = true;
            continue;
        }
        if (*p < '0' || *p > '9') {
            break;
        }
        seen++;
        if (*m < pow10q(LIMIT_EXP - 1)) {
            *m = *m * 10 + (*p - '0');
            *frac += dot;
        } else if (!dot) {
            return -ERANGE;
        } else {
            *lost |= *p != '0';
        }
    }
    *pp = p;
    return seen;
}

int kdp__qty_parse(const char *s, kdp__qty *ret, const char **why)
{
    if (!s || !*s) {
        return bad(why, -EINVAL, "is empty");
    }
    if (strlen(s) > 64) {
        return bad(why, -EINVAL, "is longer than 64 characters");
    }
    const char *p = s;
    bool neg = *p == '-';
    p += *p == '+' || *p == '-';
    kdp__qty m = 0;
    int frac = 0;
    bool lost = false;
    int seen = digits(&p, &m, &frac, &lost);
    if (seen < 0) {
        return bad(why, -ERANGE, "is too large (kdp takes up to 10^27)");
    }
    if (!seen) {
        return bad(why, -EINVAL,
                   "must start with a number (e.g. \"4\", \"1.5\", \"80Gi\", \"500m\")");
    }
    int two = 0;
    int ten = 0;
    if (!exponent(p, &ten) && !suffix(p, &two, &ten)) {
        return bad(why, -EINVAL,
                   "has an unknown suffix (binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P "
                   "E, or an exponent such as e3)");
    }
    /* value in nano units: m * 2^two * 10^(ten + 9 - frac) */
    int e = ten + 9 - frac;
    for (int i = 0; i < two; i++) {
        if (m >= pow10q(LIMIT_EXP)) {
            return bad(why, -ERANGE, "is too large (kdp takes up to 10^27)");
        }
        m *= 2;
    }
    for (; e > 0; e--) {
        if (m >= pow10q(LIMIT_EXP)) {
            return bad(why, -ERANGE, "is too large (kdp takes up to 10^27)");
        }
        m *= 10;
    }
    for (; e < 0; e++) {
        lost |= m % 10 != 0;
        m /= 10;
    }
    m += lost; /* past the nano: rounded up, as the API does */
    if (m > pow10q(LIMIT_EXP)) {
        return bad(why, -ERANGE, "is too large (kdp takes up to 10^27)");
    }
    *ret = neg ? -m : m;
    return 0;
}

int kdp__qty_cmp(kdp__qty a, kdp__qty b)
{
    return a < b ? -1 : a > b ? 1 : 0;
}

char *kdp__qty_format(kdp__qty v, char *out, size_t len)
{
    char digits[48];
    size_t n = 0;
    bool neg = v < 0;
    kdp__qty u = neg ? -v : v;
    do {
        digits[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u > 0 && n < sizeof(digits));
    while (n < 10) {
        digits[n++] = '0'; /* at least "0.000000000" */
    }
    /* digits[0..9) are the nano part, reversed */
    size_t cut = 0;
    while (cut < 9 && digits[cut] == '0') {
        cut++;
    }
    size_t w = 0;
    char buf[64];
    if (neg) {
        buf[w++] = '-';
    }
    for (size_t i = n; i > 9; i--) {
        buf[w++] = digits[i - 1];
    }
    if (cut < 9) {
        buf[w++] = '.';
        for (size_t i = 9; i > cut; i--) {
            buf[w++] = digits[i - 1];
        }
    }
    buf[w] = '\0';
    snprintf(out, len, "%s", buf);
    return out;
}
