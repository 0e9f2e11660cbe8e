/* SPDX-License-Identifier: MIT */
/* devstatus: a prepared device's status as JSON (see devstatus.h). */
#include "dra/devstatus.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/k8snames.h"

enum { MAX_REASON = 1024, MAX_MESSAGE = 32768, MAX_IFNAME = 256, MAX_HWADDR = 128 };

/* why gets the text; the value is -EINVAL. */
#define BAD(...) (snprintf(why, cap, __VA_ARGS__), -EINVAL)

/* A condition reason: [A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])? */
static bool reason_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_REASON ||
        !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) {
        return false;
    }
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '_' && !((c == ',' || c == ':') && i + 1 < n)) {
            return false;
        }
    }
    return true;
}

/* Condition i checked against the rules and the ones before it. */
static int check_condition(const kdp_dra_device_status *st, size_t i, char *why, size_t cap)
{
    const kdp_dra_condition *c = &st->conditions[i];
    const char *w = NULL;
    if (!c->type || kdp__k8snames_label_name(c->type, &w) != 0) {
        return BAD("conditions[%zu].type %s", i,
                   c->type ? "is not a qualified name ([prefix/]name)" : "is NULL");
    }
    if (!c->status || (strcmp(c->status, "True") != 0 && strcmp(c->status, "False") != 0 &&
                       strcmp(c->status, "Unknown") != 0)) {
        return BAD("conditions[%zu].status must be \"True\", \"False\" or \"Unknown\"", i);
    }
    if (!c->reason || !reason_ok(c->reason)) {
        return BAD("conditions[%zu].reason must be CamelCase: a letter, then letters, digits, "
                   "'_', ',' or ':', at most %d, ending in a letter, digit or '_'",
                   i, MAX_REASON);
    }
    if (c->message && strlen(c->message) > MAX_MESSAGE) {
        return BAD("conditions[%zu].message is longer than %d bytes", i, MAX_MESSAGE);
    }
    for (size_t j = 0; j < i; j++) {
        if (strcmp(st->conditions[j].type, c->type) == 0) {
            return BAD("conditions[%zu].type %s is conditions[%zu]'s too", i, c->type, j);
        }
    }
    return 0;
}

static json_t *conditions(const kdp_dra_device_status *st, int64_t now, char *why, size_t cap,
                          int *err)
{
    json_t *arr = json_array();
    char ts[32];
    time_t t = (time_t)now;
    struct tm tm;
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    *err = arr ? 0 : -ENOMEM;
    for (size_t i = 0; !*err && i < st->n_conditions; i++) {
        *err = check_condition(st, i, why, cap);
        if (*err) {
            break;
        }
        const kdp_dra_condition *c = &st->conditions[i];
        bool msg = c->message && *c->message;
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "type", c->type, "status", c->status,
                              "reason", c->reason, "lastTransitionTime", ts);
        json_t *m = msg ? json_string(c->message) : NULL;
        if (msg && !m) {
            *err = BAD("conditions[%zu].message is not valid UTF-8", i);
        } else if (!o || (m && json_object_set(o, "message", m) < 0) ||
                   json_array_append(arr, o) < 0) {
            *err = -ENOMEM;
        }
        json_decref(m);
        json_decref(o);
    }
    return arr;
}

/* One address: an IP in canonical form, '/', a prefix length in range. */
static bool cidr_ok(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || (size_t)(slash - s) >= INET6_ADDRSTRLEN || !slash[1]) {
        return false;
    }
    char addr[INET6_ADDRSTRLEN];
    snprintf(addr, sizeof(addr), "%.*s", (int)(slash - s), s);
    unsigned char bin[16];
    int af = strchr(addr, ':') ? AF_INET6 : AF_INET;
    if (inet_pton(af, addr, bin) != 1) {
        return false;
    }
    char canon[INET6_ADDRSTRLEN];
    if (!inet_ntop(af, bin, canon, sizeof(canon)) || strcmp(canon, addr) != 0) {
        return false;
    }
    unsigned long bits = 0;
    for (const char *p = slash + 1; *p; p++) {
        if (*p < '0' || *p > '9' || bits > 128) {
            return false;
        }
        bits = bits * 10 + (unsigned long)(*p - '0');
    }
    return bits <= (af == AF_INET ? 32U : 128U);
}

static int check_network(const kdp_dra_device_status *st, char *why, size_t cap)
{
    if (st->interface_name && strlen(st->interface_name) > MAX_IFNAME) {
        return BAD("interface_name is longer than %d bytes", MAX_IFNAME);
    }
    if (st->hardware_address && strlen(st->hardware_address) > MAX_HWADDR) {
        return BAD("hardware_address is longer than %d bytes", MAX_HWADDR);
    }
    if (st->n_ips > KDP__DRA_STATUS_MAX_IPS || (st->n_ips && !st->ips)) {
        return BAD("%zu ips: at most %d", st->n_ips, KDP__DRA_STATUS_MAX_IPS);
    }
    for (size_t i = 0; i < st->n_ips; i++) {
        if (!st->ips[i] || !cidr_ok(st->ips[i])) {
            return BAD("ips[%zu] %s is not an address in canonical CIDR form (10.9.8.7/24, "
                       "2001:db8::1/64)",
                       i, st->ips[i] ? st->ips[i] : "(null)");
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(st->ips[i], st->ips[j]) == 0) {
                return BAD("ips[%zu] %s is ips[%zu] too", i, st->ips[i], j);
            }
        }
    }
    return 0;
}

static json_t *network(const kdp_dra_device_status *st, char *why, size_t cap, int *err)
{
    if (!st->interface_name && !st->hardware_address && !st->n_ips) {
        return NULL;
    }
    *err = check_network(st, why, cap);
    if (*err) {
        return NULL;
    }
    json_t *o = json_object();
    json_t *ips = json_array();
    for (size_t i = 0; o && ips && i < st->n_ips; i++) {
        (void)json_array_append_new(ips, json_string(st->ips[i]));
    }
    json_t *ifname = st->interface_name ? json_string(st->interface_name) : NULL;
    json_t *hw = st->hardware_address ? json_string(st->hardware_address) : NULL;
    if ((st->interface_name && !ifname) || (st->hardware_address && !hw)) {
        *err = BAD("interface_name or hardware_address is not valid UTF-8");
    } else if (!o || !ips || json_array_size(ips) != st->n_ips ||
               (ifname && json_object_set(o, "interfaceName", ifname) < 0) ||
               (hw && json_object_set(o, "hardwareAddress", hw) < 0) ||
               (st->n_ips && json_object_set(o, "ips", ips) < 0)) {
        *err = -ENOMEM;
    }
    json_decref(ifname);
    json_decref(hw);
    json_decref(ips);
    return o;
}

static json_t *data(const kdp_dra_device_status *st, char *why, size_t cap, int *err)
{
    if (!st->data) {
        return NULL;
    }
    json_error_t je;
    json_t *d = json_loads(st->data, JSON_REJECT_DUPLICATES, &je);
    if (!d || !json_is_object(d)) {
        *err = BAD("data %s", d ? "must be a JSON object" : je.text);
        json_decref(d);
        return NULL;
    }
    char *text = json_dumps(d, JSON_COMPACT);
    size_t n = text ? strlen(text) : 0;
    free(text);
    if (n > KDP__DRA_STATUS_MAX_DATA) {
        *err = BAD("data is %zu bytes as JSON: at most %d", n, KDP__DRA_STATUS_MAX_DATA);
        json_decref(d);
        return NULL;
    }
    return d;
}

int kdp__dra_devstatus_json(const kdp_dra_device_status *st, int64_t now, char **ret, char *why,
                            size_t cap)
{
    *ret = NULL;
    if (!st) {
        return BAD("the status is NULL");
    }
    if (st->n_conditions > KDP__DRA_STATUS_MAX_CONDITIONS ||
        (st->n_conditions && !st->conditions)) {
        return BAD("%zu conditions: at most %d", st->n_conditions, KDP__DRA_STATUS_MAX_CONDITIONS);
    }
    int err = 0;
    json_t *o = json_object();
    json_t *c = st->n_conditions ? conditions(st, now, why, cap, &err) : NULL;
    json_t *d = err ? NULL : data(st, why, cap, &err);
    json_t *n = err ? NULL : network(st, why, cap, &err);
    if (!o) {
        err = -ENOMEM;
    }
    if (!err && ((c && json_object_set(o, "conditions", c) < 0) ||
                 (d && json_object_set(o, "data", d) < 0) ||
                 (n && json_object_set(o, "networkData", n) < 0))) {
        err = -ENOMEM;
    }
    if (!err) {
        *ret = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        err = *ret ? 0 : -ENOMEM;
    }
    json_decref(c);
    json_decref(d);
    json_decref(n);
    json_decref(o);
    return err;
}
