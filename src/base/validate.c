/* SPDX-License-Identifier: MIT */
#include "base/validate.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kdp.h"

/* The kubelet checks "requests." + name as a Kubernetes qualified name. */
#define REQUESTS_PREFIX     "requests."
#define REQUESTS_PREFIX_LEN (sizeof(REQUESTS_PREFIX) - 1)
#define QNAME_PREFIX_MAX    253 /* DNS-1123 subdomain */
#define QNAME_NAME_MAX      63
#define DEVICE_ID_MAX       255
#define ABS_PATH_MAX        4095

static int fail(const char **why, const char *msg)
{
    if (why) {
        *why = msg;
    }
    return -EINVAL;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_upper(char c)
{
    return c >= 'A' && c <= 'Z';
}

static bool is_lower(char c)
{
    return c >= 'a' && c <= 'z';
}

static bool is_alpha(char c)
{
    return is_lower(c) || is_upper(c);
}

static bool is_alnum(char c)
{
    return is_alpha(c) || is_digit(c);
}

static bool is_lower_alnum(char c)
{
    return is_lower(c) || is_digit(c);
}

static bool is_ctl(char c)
{
    return (unsigned char)c < 0x20 || c == 0x7f;
}

/* The part before '/': "requests." + it must be a DNS-1123 subdomain of at
 * most 253 characters. Labels have no length limit of their own there
 * (apimachinery's IsDNS1123Subdomain checks only the total length). */
static int check_prefix(const char *p, size_t len, const char **why)
{
    if (len == 0) {
        return fail(why, "the part before '/' is empty (e.g. example.com/foo)");
    }
    if (len > QNAME_PREFIX_MAX - REQUESTS_PREFIX_LEN) {
        return fail(why, "the part before '/' is longer than 244 characters (the kubelet "
                         "checks it with \"requests.\" prepended against a 253-character limit)");
    }
    for (size_t i = 0; i < len; i++) {
        if (is_upper(p[i])) {
            return fail(why, "the part before '/' must be lower-case (a DNS subdomain such as "
                             "example.com)");
        }
        if (!is_lower_alnum(p[i]) && p[i] != '-' && p[i] != '.') {
            return fail(why, "the part before '/' may contain only lower-case letters, digits, "
                             "'-' and '.'");
        }
    }
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && p[i] != '.') {
            continue;
        }
        if (i == start) {
            return fail(why, "the part before '/' has an empty label (a leading, trailing or "
                             "doubled '.')");
        }
        if (p[start] == '-' || p[i - 1] == '-') {
            return fail(why, "each '.'-separated label of the part before '/' must start and "
                             "end with a letter or digit");
        }
        start = i + 1;
    }
    return 0;
}

/* The part after '/': [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, 1-63 chars. */
static int check_name_part(const char *n, const char **why)
{
    size_t len = strlen(n);
    if (len == 0) {
        return fail(why, "the part after '/' is empty (e.g. example.com/foo)");
    }
    if (len > QNAME_NAME_MAX) {
        return fail(why, "the part after '/' is longer than 63 characters");
    }
    for (size_t i = 0; i < len; i++) {
        if (!is_alnum(n[i]) && n[i] != '-' && n[i] != '_' && n[i] != '.') {
            return fail(why, "the part after '/' may contain only letters, digits, '-', '_' "
                             "and '.'");
        }
    }
    if (!is_alnum(n[0]) || !is_alnum(n[len - 1])) {
        return fail(why, "the part after '/' must start and end with a letter or digit");
    }
    return 0;
}

int kdp__validate_resource_name(const char *name, const char **why)
{
    if (!name || !*name) {
        return fail(why, "is empty (e.g. example.com/foo)");
    }
    const char *slash = strchr(name, '/');
    if (!slash) {
        return fail(why, "must contain a '/' (e.g. example.com/foo)");
    }
    if (strstr(name, "kubernetes.io/")) {
        return fail(why, "must not contain \"kubernetes.io/\" (reserved for Kubernetes' own "
                         "resources)");
    }
    if (strncmp(name, REQUESTS_PREFIX, REQUESTS_PREFIX_LEN) == 0) {
        return fail(why, "must not start with \"requests.\" (reserved for resource quotas)");
    }
    if (strchr(slash + 1, '/')) {
        return fail(why, "must contain exactly one '/' (e.g. example.com/foo)");
    }
    int r = check_prefix(name, (size_t)(slash - name), why);
    if (r < 0) {
        return r;
    }
    return check_name_part(slash + 1, why);
}

KDP_EXPORT int kdp_validate_resource_name(const char *name, const char **why)
{
    return kdp__validate_resource_name(name, why);
}

KDP_EXPORT int kdp_validate_socket_name(const char *name, const char **why)
{
    return kdp__validate_socket_name(name, why);
}

int kdp__validate_socket_name(const char *name, const char **why)
{
    if (!name || !*name) {
        return fail(why, "is empty (e.g. foo.sock)");
    }
    size_t len = strlen(name);
    if (len > KDP_SOCKET_NAME_MAX) {
        return fail(why, "is longer than 100 bytes");
    }
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return fail(why, "must not be \".\" or \"..\"");
    }
    if (strcmp(name, KDP_KUBELET_SOCKET) == 0) {
        return fail(why, "must not be \"kubelet.sock\" (the kubelet's own socket)");
    }
    for (size_t i = 0; i < len; i++) {
        if (name[i] == '/') {
            return fail(why, "must be a file name, without '/' (e.g. foo.sock)");
        }
        if (is_ctl(name[i])) {
            return fail(why, "must not contain control characters");
        }
    }
    return 0;
}

int kdp__validate_device_id(const char *id, const char **why)
{
    if (!id || !*id) {
        return fail(why, "device ID is empty");
    }
    size_t len = strlen(id);
    if (len > DEVICE_ID_MAX) {
        return fail(why, "device ID is longer than 255 bytes");
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c < 0x21 || c > 0x7e) {
            return fail(why, "device ID may contain only printable ASCII characters, without "
                             "spaces");
        }
        if (c == '/' || c == ',') {
            return fail(why, "device ID must not contain '/' or ','");
        }
    }
    return 0;
}

int kdp__validate_permissions(const char *perm, const char **why)
{
    if (!perm || !*perm) {
        return fail(why, "permissions are empty (use a combination of 'r', 'w' and 'm')");
    }
    static const char letters[] = "rwm";
    unsigned seen = 0;
    for (const char *c = perm; *c; c++) {
        const char *pos = strchr(letters, *c);
        if (!pos) {
            return fail(why, "permissions may contain only 'r', 'w' and 'm'");
        }
        unsigned bit = 1U << (unsigned)(pos - letters);
        if (seen & bit) {
            return fail(why, "permissions repeat a letter (each of 'r', 'w', 'm' at most once)");
        }
        seen |= bit;
    }
    return 0;
}

int kdp__validate_abs_path(const char *path, const char **why)
{
    if (!path || !*path) {
        return fail(why, "path is empty");
    }
    if (path[0] != '/') {
        return fail(why, "path is not absolute (must start with '/')");
    }
    size_t len = strlen(path);
    if (len > ABS_PATH_MAX) {
        return fail(why, "path is longer than 4095 bytes");
    }
    for (size_t i = 0; i < len; i++) {
        if (is_ctl(path[i])) {
            return fail(why, "path contains control characters");
        }
    }
    return 0;
}

/* CDI vendor and class: a letter, then letters, digits, '_', '-', '.', and a
 * letter or digit at the end (the CDI parser's rule). */
static bool cdi_vendor_or_class_ok(const char *s, size_t len)
{
    if (len == 0 || !is_alpha(s[0]) || !is_alnum(s[len - 1])) {
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        if (!is_alnum(s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.') {
            return false;
        }
    }
    return true;
}

/* CDI device name: a letter or digit at both ends, letters, digits, '_', '-',
 * '.', ':' between. */
static bool cdi_device_ok(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || !is_alnum(s[0]) || !is_alnum(s[len - 1])) {
        return false;
    }
    for (size_t i = 1; i < len; i++) {
        if (!is_alnum(s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.' && s[i] != ':') {
            return false;
        }
    }
    return true;
}

int kdp__validate_cdi_name(const char *name, const char **why)
{
    if (!name || !*name) {
        return fail(why, "CDI device name is empty (e.g. example.com/gpu=gpu0)");
    }
    const char *eq = strchr(name, '=');
    const char *slash = strchr(name, '/');
    if (!eq || !slash || slash > eq) {
        return fail(why, "CDI device name is not fully qualified as vendor/class=name "
                         "(e.g. example.com/gpu=gpu0)");
    }
    if (!cdi_vendor_or_class_ok(name, (size_t)(slash - name))) {
        return fail(why, "CDI vendor (before '/') must start with a letter, end with a letter "
                         "or digit, and contain only letters, digits, '_', '-' and '.'");
    }
    if (!cdi_vendor_or_class_ok(slash + 1, (size_t)(eq - slash - 1))) {
        return fail(why, "CDI class (between '/' and '=') must start with a letter, end with a "
                         "letter or digit, and contain only letters, digits, '_', '-' and '.'");
    }
    if (!cdi_device_ok(eq + 1)) {
        return fail(why, "CDI device (after '=') must start and end with a letter or digit and "
                         "contain only letters, digits, '_', '-', '.' and ':'");
    }
    return 0;
}

int kdp__validate_env_key(const char *key, const char **why)
{
    if (!key || !*key) {
        return fail(why, "environment variable name is empty");
    }
    if (strchr(key, '=')) {
        return fail(why, "environment variable name must not contain '='");
    }
    return 0;
}
