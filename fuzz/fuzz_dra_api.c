/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for `kdpctl dra apiserver`'s request handling
 * (tools/kdpctl/dra_route.c, dra_rest.c, dra_check.c, dra_store.c): a
 * sequence of requests on one fresh store, through a stand-in for
 * dra_http.c (the kd_http_* request functions below; no sockets, no TLS).
 *
 * Input: requests separated by 0xff bytes, at most 16. Each: a flags byte
 * (bits 0-2: the method, GET POST PUT PATCH DELETE GET GET GET; bit 3: no
 * bearer token; bit 4: a json-patch content type; bit 5: Accept a Table, as
 * kubectl get; bit 6: Accept aggregated discovery), then the path up to
 * '\n', the query up to '\n' ("a=b&c=d", not decoded), and the body.
 *
 * Oracle, abort()s on any breach: every request gets exactly one answer
 * with a status from 200 to 599; a JSON answer parses as an object; an
 * error (>= 400) is a Status with that code; a watch writes whole lines,
 * each a JSON object with a type; without a token, only /version and the
 * health paths are answered 200. Streams end (their close callback runs)
 * right after the handler, as if the client went.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "fuzz_dra_api: check failed: %s (line %d)\n", #x, __LINE__);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_REQUESTS 16
#define TOKEN        "fuzz-token"

/* ---- the stand-in for dra_http.c ---- */

struct kd_hreq {
    const char *method;
    char *path;
    char *query;
    bool token;
    bool json_patch;
    unsigned accept; /* 0, 1 = a Table, 2 = aggregated discovery, 3 = both */
    const char *body;
    size_t len;
    unsigned answers;
    unsigned code;
    bool streaming, ended;
    kd_http_close_fn close;
    void *close_ud;
    size_t written;
    char *line; /* a stream's partial line */
    size_t line_len;
};

const char *kd_http_method(const kd_hreq *r)
{
    return r->method;
}

const char *kd_http_path(const kd_hreq *r)
{
    return r->path;
}

unsigned kd_http_code(const kd_hreq *r)
{
    return r->code;
}

const char *kd_http_arg(const kd_hreq *r, const char *name)
{
    static char values[4][512]; /* a few answers stay valid at once */
    static unsigned next;
    char *value = values[next++ % 4];
    size_t n = strlen(name);
    for (const char *p = r->query; p && *p;) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
            size_t vlen = len - n - 1 < sizeof(values[0]) - 1 ? len - n - 1 : sizeof(values[0]) - 1;
            memcpy(value, p + n + 1, vlen);
            value[vlen] = '\0';
            return value;
        }
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

const char *kd_http_header(const kd_hreq *r, const char *name)
{
    if (strcmp(name, "Authorization") == 0) {
        return r->token ? "Bearer " TOKEN : NULL;
    }
    if (strcmp(name, "Content-Type") == 0) {
        return r->json_patch ? "application/json-patch+json" : "application/json";
    }
    static const char *const accepts[4] = {
        NULL, "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;g=apidiscovery.k8s.io;v=v2;"
        "as=APIGroupDiscoveryList"};
    if (strcmp(name, "Accept") == 0) {
        return accepts[r->accept & 3];
    }
    return NULL;
}

const char *kd_http_body(const kd_hreq *r, size_t *len, bool *too_big)
{
    *len = r->len;
    *too_big = r->len > KD_HTTP_MAX_BODY;
    return r->body;
}

static void check_object(const char *s, size_t len, json_t **ret)
{
    json_error_t e;
    json_t *o = json_loadb(s, len, 0, &e);
    CHECK(json_is_object(o));
    *ret = o;
}

void kd_http_reply(kd_hreq *r, unsigned code, const char *content_type, const char *body,
                   size_t len, const char *extra_header)
{
    (void)extra_header;
    r->answers++;
    r->code = code;
    CHECK(code >= 200 && code <= 599);
    if (strncmp(content_type, "application/json", 16) != 0) {
        return;
    }
    json_t *o;
    check_object(body, len, &o);
    if (code >= 400) {
        CHECK(strcmp(json_string_value(json_object_get(o, "kind")), "Status") == 0);
        CHECK(json_integer_value(json_object_get(o, "code")) == (json_int_t)code);
        CHECK(json_is_string(json_object_get(o, "message")));
    }
    json_decref(o);
}

int kd_http_stream(kd_hreq *r, const char *content_type, kd_http_close_fn close, void *ud)
{
    CHECK(strcmp(content_type, "application/json") == 0);
    r->answers++;
    r->code = 200;
    r->streaming = true;
    r->close = close;
    r->close_ud = ud;
    return 0;
}

int kd_http_write(kd_hreq *r, const char *data, size_t len)
{
    CHECK(r->streaming);
    if (r->ended) {
        return -1;
    }
    /* whole lines, each an event */
    CHECK(len > 0 && data[len - 1] == '\n' && !memchr(data, '\n', len - 1));
    json_t *o;
    check_object(data, len - 1, &o);
    CHECK(json_is_string(json_object_get(o, "type")));
    CHECK(json_is_object(json_object_get(o, "object")));
    json_decref(o);
    r->written += len;
    return 0;
}

void kd_http_end(kd_hreq *r)
{
    r->ended = true;
}

/* ---- the target ---- */

static const char *const methods[8] = {"GET",    "POST", "PUT", "PATCH",
                                       "DELETE", "GET",  "GET", "GET"};

/* Splits s (len bytes, copied) at the first '\n': *head gets the part
 * before (NUL-terminated, malloc'ed), the rest follows. */
static const uint8_t *take_line(const uint8_t *s, size_t len, char **head, size_t *rest)
{
    const uint8_t *nl = memchr(s, '\n', len);
    size_t n = nl ? (size_t)(nl - s) : len;
    *head = strndup((const char *)s, n);
    *rest = nl ? len - n - 1 : 0;
    return nl ? nl + 1 : s + len;
}

/* A path the router takes for /version or a health path (empty segments
 * are skipped, as in "//version/"). */
static bool public_path(const char *p)
{
    char flat[64];
    size_t n = 0;
    for (; *p && n < sizeof(flat) - 1; p++) {
        if (*p != '/') {
            flat[n++] = *p;
        }
    }
    flat[n] = '\0';
    return strcmp(flat, "version") == 0 || strcmp(flat, "healthz") == 0 ||
           strcmp(flat, "livez") == 0 || strcmp(flat, "readyz") == 0;
}

static void one_request(kd_api *a, const uint8_t *d, size_t len)
{
    if (len == 0) {
        return;
    }
    kd_hreq r = {.method = methods[d[0] & 7],
                 .token = !(d[0] & 8),
                 .json_patch = d[0] & 16,
                 .accept = (d[0] >> 5) & 3};
    size_t rest;
    const uint8_t *p = take_line(d + 1, len - 1, &r.path, &rest);
    p = take_line(p, rest, &r.query, &rest);
    char *body = malloc(rest + 1);
    CHECK(r.path && r.query && body);
    memcpy(body, p, rest);
    body[rest] = '\0';
    r.body = body;
    r.len = rest;
    kd_api_request(&r, a);
    CHECK(r.answers == 1);
    if (!r.token && r.code < 400) {
        CHECK(public_path(r.path));
    }
    if (r.streaming && r.close) {
        r.close(&r, r.close_ud); /* the client goes */
    }
    free(body);
    free(r.path);
    free(r.query);
}

void kd_bookmark_cb(kdp__timer *t, void *ud);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kdp__loop *loop;
    static kd_opts opts = {.json = true};
    if (!loop) {
        CHECK(kdp__loop_new(&loop) == 0);
        CHECK(freopen("/dev/null", "w", stdout) != NULL); /* the slices printed */
    }
    kd_api *a = calloc(1, sizeof(*a));
    CHECK(a);
    a->o = &opts;
    a->loop = loop;
    a->creds.token = (char *)TOKEN;
    snprintf(a->server, sizeof(a->server), "https://127.0.0.1:6443");
    CHECK(kdp__timer_new(loop, kd_bookmark_cb, a, &a->bookmark) == 0);
    json_t *node = json_pack("{s:s, s:s, s:{s:s, s:s}}", "kind", "Node", "apiVersion", "v1",
                             "metadata", "name", "node-a", "uid", "u-node-a");
    CHECK(node && kd_store_put(a, KD_NODE, NULL, "node-a", node, NULL));
    size_t n = 0;
    for (size_t start = 0; start < size && n < MAX_REQUESTS; n++) {
        const uint8_t *end = memchr(data + start, 0xff, size - start);
        size_t len = end ? (size_t)(end - (data + start)) : size - start;
        one_request(a, data + start, len);
        start += len + 1;
    }
    CHECK(a->watches == NULL); /* every stream closed */
    kd_store_free(a);
    kdp__timer_free(a->bookmark);
    free(a);
    return 0;
}
