/* SPDX-License-Identifier: MIT */
/* k8snames: the Kubernetes API's syntax rules (see k8snames.h). */
#include "base/k8snames.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

static int bad(const char **why, const char *what)
{
    if (why) {
        *why = what;
    }
    return -EINVAL;
}

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* One label of n characters at s (no length bound here). */
static int label(const char *s, size_t n, const char **why)
{
    if (n == 0) {
        return bad(why, "has an empty label (two dots, or a dot at an end)");
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_lower_alnum(s[i]) && s[i] != '-') {
            return bad(why, "may hold only lower-case letters, digits, '-' and '.'");
        }
    }
    if (s[0] == '-' || s[n - 1] == '-') {
        return bad(why, "must start and end each label with a lower-case letter or digit");
    }
    return 0;
}

int kdp__k8snames_dns_label(const char *s, const char **why)
{
    if (!s || !*s) {
        return bad(why, "is empty");
    }
    size_t n = strlen(s);
    if (n > KDP__K8S_DNS_LABEL_MAX) {
        return bad(why, "is longer than 63 characters (a DNS label)");
    }
    if (memchr(s, '.', n)) {
        return bad(why, "may not hold '.' (a DNS label: lower-case letters, digits and '-')");
    }
    return label(s, n, why);
}

static int subdomain(const char *s, size_t n, size_t max, const char **why, const char *too_long)
{
    if (n == 0) {
        return bad(why, "is empty");
    }
    if (n > max) {
        return bad(why, too_long);
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            int r = label(s + start, i - start, why);
            if (r < 0) {
                return r;
            }
            start = i + 1;
        }
    }
    return 0;
}

int kdp__k8snames_dns_subdomain(const char *s, const char **why)
{
    if (!s) {
        return bad(why, "is empty");
    }
    return subdomain(s, strlen(s), KDP__K8S_DNS_SUBDOMAIN_MAX, why,
                     "is longer than 253 characters (a DNS subdomain)");
}

int kdp__k8snames_driver_name(const char *s, const char **why)
{
    if (!s) {
        return bad(why, "is empty");
    }
    return subdomain(s, strlen(s), KDP__K8S_DRIVER_NAME_MAX, why,
                     "is longer than 63 characters (a driver name)");
}

int kdp__k8snames_qualified_name(const char *s, const char **why)
{
    if (!s || !*s) {
        return bad(why, "is empty");
    }
    const char *id = s;
    const char *slash = strchr(s, '/');
    if (slash) {
        int r = subdomain(s, (size_t)(slash - s), KDP__K8S_ATTR_DOMAIN_MAX, why,
                          "has a domain longer than 63 characters");
        if (r < 0) {
            return r == -EINVAL && slash == s ? bad(why, "has an empty domain before '/'") : r;
        }
        id = slash + 1;
    }
    size_t n = strlen(id);
    if (n == 0) {
        return bad(why, "has no identifier after the domain");
    }
    if (n > KDP__K8S_ATTR_ID_MAX) {
        return bad(why, "has an identifier longer than 32 characters");
    }
    if (!is_alpha(id[0]) && id[0] != '_') {
        return bad(why, "must start its identifier with a letter or '_' (a C identifier)");
    }
    for (size_t i = 1; i < n; i++) {
        if (!is_alpha(id[i]) && !is_digit(id[i]) && id[i] != '_') {
            return bad(why, "may hold only letters, digits and '_' in its identifier "
                            "(a C identifier, after an optional \"domain/\")");
        }
    }
    return 0;
}

/* Digits at *p; returns how many. */
int kdp__k8snames_label_value(const char *s, const char **why)
{
    if (!s || !*s) {
        return 0;
    }
    size_t n = strlen(s);
    if (n > KDP__K8S_DNS_LABEL_MAX) {
        return bad(why, "is longer than 63 characters (a label value)");
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = is_alpha(c) || is_digit(c);
        if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.'))) {
            return bad(why, "is not a label value (letters, digits, '-', '_' and '.'; a letter "
                            "or digit at both ends)");
        }
    }
    return 0;
}

int kdp__k8snames_label_name(const char *s, const char **why)
{
    if (!s || !*s) {
        return bad(why, "is empty");
    }
    const char *name = s;
    const char *slash = strchr(s, '/');
    if (slash) {
        int r = subdomain(s, (size_t)(slash - s), KDP__K8S_DNS_SUBDOMAIN_MAX, why,
                          "has a prefix longer than 253 characters (a DNS subdomain)");
        if (r < 0) {
            return r;
        }
        name = slash + 1;
    }
    if (!*name) {
        return bad(why, "has an empty name after its prefix");
    }
    return kdp__k8snames_label_value(name, why);
}

static size_t digits(const char **p)
{
    size_t n = 0;
    while (is_digit(**p)) {
        (*p)++;
        n++;
    }
    return n;
}

int kdp__k8snames_quantity(const char *s, const char **why)
{
    static const char *const suffixes[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u",
                                           "m",  "k",  "M",  "G",  "T",  "P",  "E", ""};
    if (!s || !*s) {
        return bad(why, "is empty");
    }
    if (strlen(s) > KDP__K8S_QUANTITY_MAX) {
        return bad(why, "is longer than 64 characters");
    }
    const char *p = s;
    if (*p == '+' || *p == '-') {
        p++;
    }
    size_t whole = digits(&p);
    size_t frac = 0;
    if (*p == '.') {
        p++;
        frac = digits(&p);
    }
    if (whole + frac == 0) {
        return bad(why, "must start with a number (e.g. \"4\", \"1.5\", \"80Gi\", \"500m\")");
    }
    if (*p == 'e' || *p == 'E') {
        const char *e = p + 1;
        if (*e == '+' || *e == '-') {
            e++;
        }
        if (digits(&e) > 0 && *e == '\0') {
            return 0;
        }
        /* "E" alone is the exa suffix: checked below */
    }
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        if (strcmp(p, suffixes[i]) == 0) {
            return 0;
        }
    }
    return bad(why, "has an unknown suffix (binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P "
                    "E, or an exponent such as e3)");
}

/* A numeric identifier: digits, no leading zero (unless "0"). n > 0. */
static bool numeric_ok(const char *s, size_t n)
{
    return !(n > 1 && s[0] == '0');
}

/* Dot-separated identifiers of [0-9A-Za-z-] from s to the first stop
 * character or the end; numeric ones checked for leading zeros when
 * strict. Returns the characters used, or -1. */
static int idents(const char *s, const char *stop, bool strict, const char **why)
{
    const char *p = s;
    for (;;) {
        const char *start = p;
        bool numeric = true;
        while (*p && !strchr(stop, *p) && *p != '.') {
            if (!is_alpha(*p) && !is_digit(*p) && *p != '-') {
                bad(why, "may hold only letters, digits, '-' and '.' after its '-' or '+'");
                return -1;
            }
            numeric = numeric && is_digit(*p);
            p++;
        }
        if (p == start) {
            bad(why, "has an empty pre-release or build identifier");
            return -1;
        }
        if (strict && numeric && !numeric_ok(start, (size_t)(p - start))) {
            bad(why, "has a numeric pre-release identifier with a leading zero");
            return -1;
        }
        if (*p != '.') {
            return (int)(p - s);
        }
        p++;
    }
}

int kdp__k8snames_semver(const char *s, const char **why)
{
    if (!s || !*s) {
        return bad(why, "is empty");
    }
    if (strlen(s) > KDP__K8S_ATTR_STRING_MAX) {
        return bad(why, "is longer than 64 characters");
    }
    const char *p = s;
    for (int part = 0; part < 3; part++) {
        const char *start = p;
        size_t n = digits(&p);
        if (n == 0) {
            return bad(why, "must be MAJOR.MINOR.PATCH, three numbers (e.g. \"1.2.3\")");
        }
        if (!numeric_ok(start, n)) {
            return bad(why, "has a version number with a leading zero");
        }
        if (part < 2) {
            if (*p != '.') {
                return bad(why, "must be MAJOR.MINOR.PATCH, three numbers (e.g. \"1.2.3\")");
            }
            p++;
        }
    }
    if (*p == '-') {
        int n = idents(p + 1, "+", true, why);
        if (n < 0) {
            return -EINVAL;
        }
        p += 1 + n;
    }
    if (*p == '+') {
        int n = idents(p + 1, "", false, why);
        if (n < 0) {
            return -EINVAL;
        }
        p += 1 + n;
    }
    if (*p) {
        return bad(why, "has something after MAJOR.MINOR.PATCH that is neither \"-pre\" nor "
                        "\"+build\"");
    }
    return 0;
}

int kdp__k8snames_uuid(const char *s, const char **why)
{
    if (strlen(s) != 36) {
        return bad(why, "must be a lower-case UUID (36 characters)");
    }
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        bool hex = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
        if (dash ? s[i] != '-' : !hex) {
            return bad(why, "must be a lower-case UUID (8-4-4-4-12 hex digits)");
        }
    }
    return 0;
}
