/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the config and name checks (src/base/validate.c) and the
 * places that rely on them: kdp_validate_resource_name, socket names, device
 * IDs, permissions, absolute paths, CDI names, env keys; kdp_plugin_new with
 * a fuzzed config; the allocation-response and preferred-ID builders; the
 * default env name. Each validator is compared with a reference written here
 * from the rule as the kubelet (and the CDI parser) state it, so a verdict
 * that differs is a bug on one side or the other. abort()s on any mismatch.
 *
 * Input: up to MAX_STRS strings separated by NUL bytes. Every validator runs
 * on every string; the builders and kdp_plugin_new take consecutive strings
 * as their arguments.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/safetext.h"
#include "base/validate.h"
#include "deviceplugin.pb-c.h"
#include "kdp.h"
#include "plugin/response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #x);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_STRS 16

/* ---- references, written from the rules rather than from validate.c ---- */

static bool lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool alnum(char c)
{
    return alpha(c) || (c >= '0' && c <= '9');
}

/* DNS-1123 subdomain: [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*,
 * at most 253 characters. */
static bool ref_dns1123_subdomain(const char *s, size_t len)
{
    if (len == 0 || len > 253) {
        return false;
    }
    size_t i = 0;
    for (;;) {
        /* one label */
        if (i >= len || !lower_alnum(s[i])) {
            return false;
        }
        size_t start = i;
        while (i < len && (lower_alnum(s[i]) || s[i] == '-')) {
            i++;
        }
        if (s[i - 1] == '-' || i == start) {
            return false;
        }
        if (i == len) {
            return true;
        }
        if (s[i] != '.') {
            return false;
        }
        i++;
    }
}

/* Qualified name part: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, 1-63. */
static bool ref_qname_name(const char *s, size_t len)
{
    if (len == 0 || len > 63 || !alnum(s[0]) || !alnum(s[len - 1])) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') {
            return false;
        }
    }
    return true;
}

/* The kubelet's IsExtendedResourceName, as kubelet-protocol.md states it. */
static bool ref_resource_name(const char *s)
{
    if (!strchr(s, '/') || strstr(s, "kubernetes.io/") || strncmp(s, "requests.", 9) == 0) {
        return false;
    }
    char q[4200];
    int n = snprintf(q, sizeof(q), "requests.%s", s);
    if (n < 0 || (size_t)n >= sizeof(q)) {
        return false;
    }
    char *slash = strchr(q, '/');
    if (strchr(slash + 1, '/')) {
        return false;
    }
    return ref_dns1123_subdomain(q, (size_t)(slash - q)) &&
           ref_qname_name(slash + 1, strlen(slash + 1));
}

static bool ref_ctl(char c)
{
    return (unsigned char)c < 0x20 || c == 0x7f;
}

static bool ref_socket_name(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > 100 || !strcmp(s, ".") || !strcmp(s, "..") ||
        !strcmp(s, "kubelet.sock")) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '/' || ref_ctl(s[i])) {
            return false;
        }
    }
    return true;
}

static bool ref_device_id(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > 255) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7f || c == '/' || c == ',') {
            return false;
        }
    }
    return true;
}

static bool ref_permissions(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > 3) {
        return false;
    }
    int r = 0;
    int w = 0;
    int m = 0;
    for (size_t i = 0; i < len; i++) {
        r += s[i] == 'r';
        w += s[i] == 'w';
        m += s[i] == 'm';
    }
    return r <= 1 && w <= 1 && m <= 1 && (size_t)(r + w + m) == len;
}

static bool ref_abs_path(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || s[0] != '/' || len > 4095) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (ref_ctl(s[i])) {
            return false;
        }
    }
    return true;
}

/* CDI: vendor and class start with a letter, end with a letter or digit,
 * and hold [A-Za-z0-9_.-]; the device name starts and ends with a letter or
 * digit and holds [A-Za-z0-9_.:-]. Split at the first '/', then at the first
 * '=' after it (the CDI parser's order). */
static bool ref_cdi_part(const char *s, size_t len, bool device)
{
    if (len == 0 || !(device ? alnum(s[0]) : alpha(s[0])) || !alnum(s[len - 1])) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!alnum(s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.' && !(device && s[i] == ':')) {
            return false;
        }
    }
    return true;
}

static bool ref_cdi_name(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash) {
        return false;
    }
    const char *eq = strchr(slash + 1, '=');
    if (!eq) {
        return false;
    }
    return ref_cdi_part(s, (size_t)(slash - s), false) &&
           ref_cdi_part(slash + 1, (size_t)(eq - slash - 1), false) &&
           ref_cdi_part(eq + 1, strlen(eq + 1), true);
}

static bool ref_env_key(const char *s)
{
    return *s && !strchr(s, '=');
}

/* ---- the target ---- */

static void check_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    /* no forged, hidden or reordered text: controls, line separators and
     * bidi controls escaped, valid UTF-8 (base/safetext) */
    CHECK(kdp__safetext_clean(msg));
}

/* One validator against its reference; a refusal explains itself. */
static void verdict(int (*fn)(const char *, const char **), bool (*ref)(const char *),
                    const char *s)
{
    const char *why = NULL;
    int r = fn(s, &why);
    CHECK(r == 0 || r == -EINVAL);
    if ((r == 0) != ref(s)) {
        fprintf(stderr, "verdict mismatch on \"%s\": kdp %d (%s)\n", s, r, why ? why : "-");
        abort();
    }
    CHECK(r == 0 || (why && strlen(why) > 5));
    CHECK(fn(s, NULL) == r);
}

/* The reference for one node or mount per container path: what was added,
 * and the verdict on one more (0 added, 1 the same again, -EEXIST). */
typedef struct ref_path {
    const char *cp, *hp, *extra;
} ref_path;

static int ref_one_per_path(ref_path *added, size_t *n, const char *cp, const char *hp,
                            const char *extra)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(added[i].cp, cp) == 0) {
            return strcmp(added[i].hp, hp) == 0 && strcmp(added[i].extra, extra) == 0 ? 1 : -EEXIST;
        }
    }
    added[(*n)++] = (ref_path){cp, hp, extra};
    return 0;
}

static void check_builders(char **s, size_t n)
{
    kdp__devtab tab;
    kdp__devtab_init(&tab);
    const char *ids[MAX_STRS];
    size_t n_ids = 0;
    for (size_t i = 0; i < n; i++) {
        kdp_device d = {.id = s[i], .host_path = s[(i + 1) % n]};
        int r = kdp__devtab_add(&tab, &d, NULL);
        if (r == 0) {
            ids[n_ids++] = s[i];
        }
    }
    char *env = kdp__default_env_name(s[0]);
    CHECK(env);
    CHECK(kdp__validate_env_key(env, NULL) == 0);
    for (const char *c = env; *c; c++) {
        CHECK((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_');
    }

    kdp_alloc_response r;
    kdp__response_init(&r, &tab, ids, NULL, n_ids, env);
    size_t want_envs = 0;
    size_t want_mounts = 0;
    size_t want_devs = 0;
    size_t want_cdi = 0;
    size_t want_ann = 0;
    ref_path mounts[MAX_STRS];
    ref_path nodes[MAX_STRS];
    size_t n_mounts = 0;
    size_t n_nodes = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        const char *a = s[i];
        const char *b = s[i + 1];
        int rc = kdp_response_add_env(&r, a, b);
        CHECK((rc == 0) == ref_env_key(a));
        rc = kdp_response_add_mount(&r, a, b, i & 1);
        int want = !(ref_abs_path(a) && ref_abs_path(b))
                       ? -EINVAL
                       : ref_one_per_path(mounts, &n_mounts, a, b, i & 1 ? "ro" : "rw");
        CHECK(rc == (want == 1 ? 0 : want));
        want_mounts += want == 0;
        const char *perm = i & 1 ? NULL : s[(i + 2) % n];
        rc = kdp_response_add_device(&r, a, b, perm);
        want = !(ref_abs_path(a) && ref_abs_path(b) && (!perm || ref_permissions(perm)))
                   ? -EINVAL
                   : ref_one_per_path(nodes, &n_nodes, a, b, perm ? perm : "rw");
        CHECK(rc == (want == 1 ? 0 : want));
        want_devs += want == 0;
        rc = kdp_response_add_cdi_device(&r, a);
        CHECK((rc == 0) == ref_cdi_name(a));
        want_cdi += rc == 0;
        rc = kdp_response_add_annotation(&r, a, b);
        CHECK((rc == 0) == (*a != '\0'));
    }
    /* The defaults: each requested device's node, until one conflicts. */
    int want_def = 0;
    for (size_t k = 0; k < n_ids && want_def >= 0; k++) {
        const kdp__dev *d = kdp__devtab_find(&tab, ids[k]);
        if (d && d->host_path) {
            want_def = ref_one_per_path(nodes, &n_nodes,
                                        d->container_path ? d->container_path : d->host_path,
                                        d->host_path, d->permissions ? d->permissions : "rw");
            want_devs += want_def == 0;
        }
    }
    CHECK(kdp_response_add_defaults(&r) == (want_def < 0 ? want_def : 0));
    want_envs = r.n_envs;
    want_ann = r.n_annotations;
    CHECK(r.n_mounts == want_mounts && r.n_devices == want_devs && r.n_cdi == want_cdi);

    /* To protobuf and back: what the kubelet would read. */
    V1beta1__ContainerAllocateResponse pb = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
    CHECK(kdp__response_to_pb(&r, &pb) == 0);
    size_t len = protobuf_c_message_get_packed_size(&pb.base);
    uint8_t *buf = malloc(len ? len : 1);
    CHECK(buf);
    CHECK(protobuf_c_message_pack(&pb.base, buf) == len);
    V1beta1__ContainerAllocateResponse *back =
        v1beta1__container_allocate_response__unpack(NULL, len, buf);
    CHECK(back);
    CHECK(back->n_envs == want_envs && back->n_annotations == want_ann);
    CHECK(back->n_mounts == want_mounts && back->n_devices == want_devs);
    CHECK(back->n_cdi_devices == want_cdi);
    for (size_t i = 0; i < back->n_envs; i++) {
        CHECK(ref_env_key(back->envs[i]->key));
        for (size_t k = 0; k < i; k++) {
            CHECK(strcmp(back->envs[i]->key, back->envs[k]->key) != 0); /* one per key */
        }
    }
    for (size_t i = 0; i < back->n_devices; i++) {
        CHECK(ref_permissions(back->devices[i]->permissions));
    }
    v1beta1__container_allocate_response__free_unpacked(back, NULL);
    free(buf);
    kdp__response_pb_done(&pb);
    kdp__response_done(&r);

    kdp_id_list l;
    kdp__id_list_init(&l);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = kdp_id_list_add(&l, s[i]);
        CHECK((rc == 0) == ref_device_id(s[i]));
        ok += rc == 0;
    }
    CHECK(l.n == ok);
    kdp__id_list_done(&l);
    free(env);
    kdp__devtab_clear(&tab);
}

/* kdp_plugin_new accepts exactly the configs every check accepts. */
static void check_plugin_new(char **s, size_t n)
{
    static kdp_ctx *ctx;
    if (!ctx) {
        CHECK(kdp_ctx_new(&ctx) == 0);
    }
    const char *dir = n > 2 && s[2][0] ? s[2] : "/tmp";
    kdp_config cfg = {
        .resource_name = s[0],
        .socket_name = n > 1 ? s[1] : "fuzz.sock",
        .device_plugin_dir = dir,
        .env_name = n > 3 && s[3][0] ? s[3] : NULL,
    };
    /* the directory as kdp uses it: trailing slashes dropped ("/" stays) */
    size_t dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/') {
        dir_len--;
    }
    bool want = ref_resource_name(cfg.resource_name) && ref_socket_name(cfg.socket_name) &&
                ref_abs_path(dir) && (!cfg.env_name || ref_env_key(cfg.env_name)) &&
                dir_len + (dir_len == 1 ? 0 : 1) + strlen(cfg.socket_name) <= 107;
    kdp_plugin *p = NULL;
    int r = kdp_plugin_new(ctx, &cfg, NULL, NULL, &p);
    CHECK(r == 0 || r == -EINVAL || r == -ENAMETOOLONG || r == -EADDRINUSE);
    CHECK((r == 0) == want || r == -EADDRINUSE);
    if (r == 0) {
        CHECK(strcmp(kdp_plugin_resource(p), cfg.resource_name) == 0);
        kdp_plugin_free(p);
    } else {
        CHECK(p == NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool init;
    if (!init) {
        init = true;
        kdp_log_set(KDP_LOG_DEBUG, check_log, NULL);
    }
    char *copy = malloc(size + 1);
    CHECK(copy);
    memcpy(copy, data, size);
    copy[size] = '\0';
    char *s[MAX_STRS];
    size_t n = 0;
    for (char *p = copy; n < MAX_STRS && p <= copy + size; p += strlen(p) + 1) {
        s[n++] = p;
    }

    for (size_t i = 0; i < n; i++) {
        verdict(kdp_validate_resource_name, ref_resource_name, s[i]);
        verdict(kdp__validate_socket_name, ref_socket_name, s[i]);
        verdict(kdp__validate_device_id, ref_device_id, s[i]);
        verdict(kdp__validate_permissions, ref_permissions, s[i]);
        verdict(kdp__validate_abs_path, ref_abs_path, s[i]);
        verdict(kdp__validate_cdi_name, ref_cdi_name, s[i]);
        verdict(kdp__validate_env_key, ref_env_key, s[i]);
    }
    CHECK(kdp_validate_resource_name(NULL, NULL) == -EINVAL);
    check_builders(s, n);
    check_plugin_new(s, n);
    free(copy);
    return 0;
}
