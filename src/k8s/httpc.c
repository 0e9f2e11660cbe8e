/* SPDX-License-Identifier: MIT */
#include "k8s/httpc.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/list.h"
#include "base/secret.h"
#include "k8s/lines.h"

struct kdp__httpc_client {
    kdp__loop *loop;
    CURLM *multi;
    kdp__timer *timer;
    kdp__link calls; /* kdp__httpc_call.node */
    size_t ncalls;   /* in calls */
    size_t nwatched; /* kdp__io registered for curl's sockets */
    int in_curl;     /* > 0 inside curl_multi_socket_action() */
    int in_drain;    /* > 0 while drain() runs done callbacks */
    bool reap;       /* a call was cancelled inside curl: remove it after */
};

struct kdp__httpc_call {
    kdp__link node;
    kdp__httpc_client *c;
    CURL *easy;
    struct curl_slist *headers;
    kdp__httpc_done_cb done;
    kdp__httpc_line_cb on_line;
    void *ud;
    size_t max;
    bool cancelled;
    bool streaming; /* on_line and a 2xx answer: lines, not a body */
    bool decided;   /* streaming decided (first body bytes seen) */
    int status;     /* our own failure (-EMSGSIZE, -ENOMEM), 0 if none */
    char *body;
    size_t len, cap;
    kdp__lines lines;
    char msg[CURL_ERROR_SIZE + 64]; /* the message for status */
    char err[CURL_ERROR_SIZE];      /* curl's */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

size_t kdp__httpc_active(const kdp__httpc_client *c)
{
    return c->ncalls;
}

size_t kdp__httpc_watched(const kdp__httpc_client *c)
{
    return c->nwatched;
}

/* --- calls --- */

/* Takes the call out of curl and of its client (no more callbacks for it). */
static void call_detach(kdp__httpc_call *call)
{
    if (!call->c) {
        return;
    }
    curl_multi_remove_handle(call->c->multi, call->easy);
    kdp__link_remove(&call->node);
    call->c->ncalls--;
    call->c = NULL;
}

static void call_free(kdp__httpc_call *call)
{
    if (!call) {
        return;
    }
    call_detach(call);
    curl_easy_cleanup(call->easy);
    for (struct curl_slist *s = call->headers; s; s = s->next) {
        explicit_bzero(s->data, strlen(s->data)); /* the Authorization line among them */
    }
    curl_slist_free_all(call->headers);
    kdp__lines_free(&call->lines);
    free(call->body);
    free(call);
}

static void fail(kdp__httpc_call *call, int status, const char *msg)
{
    if (call->status == 0) {
        call->status = status;
        snprintf(call->msg, sizeof(call->msg), "%s", msg);
    }
}

/* Appends to the body, within call->max. */
static int body_append(kdp__httpc_call *call, const char *data, size_t n)
{
    if (n > call->max - call->len) {
        char m[sizeof(call->msg)];
        snprintf(m, sizeof(m), "response body over its bound of %zu bytes", call->max);
        fail(call, -EMSGSIZE, m);
        return -1;
    }
    if (call->len + n + 1 > call->cap) {
        size_t cap = call->cap ? call->cap : 4096;
        while (cap < call->len + n + 1) {
            cap *= 2;
        }
        char *b = realloc(call->body, cap);
        if (!b) {
            fail(call, -ENOMEM, "out of memory for the response body");
            return -1;
        }
        call->body = b;
        call->cap = cap;
    }
    memcpy(call->body + call->len, data, n);
    call->len += n;
    call->body[call->len] = '\0';
    return 0;
}

static int line_cb(const char *line, size_t len, void *ud)
{
    kdp__httpc_call *call = ud;
    call->on_line(call, line, len, call->ud);
    return call->cancelled ? 1 : 0;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    kdp__httpc_call *call = ud;
    size_t n = size * nmemb;
    if (call->cancelled || call->status < 0) {
        return 0;
    }
    if (!call->decided) {
        call->decided = true;
        long code = 0;
        curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &code);
        call->streaming = call->on_line && code >= 200 && code < 300;
    }
    if (!call->streaming) {
        return body_append(call, data, n) < 0 ? 0 : n;
    }
    int r = kdp__lines_feed(&call->lines, data, n, line_cb, call);
    if (r == -EMSGSIZE) {
        char m[sizeof(call->msg)];
        snprintf(m, sizeof(m), "a line of the stream is over its bound of %zu bytes", call->max);
        fail(call, -EMSGSIZE, m);
    } else if (r < 0) {
        fail(call, r, "out of memory for a line of the stream");
    }
    return r == 0 ? n : 0;
}

/* curl's result as -errno, with a message in call->msg. */
static int map_result(kdp__httpc_call *call, CURLcode rc)
{
    const char *what = call->err[0] ? call->err : curl_easy_strerror(rc);
    int r;
    switch (rc) {
    case CURLE_OK:
        return 0;
    case CURLE_COULDNT_CONNECT: {
        long os = 0;
        curl_easy_getinfo(call->easy, CURLINFO_OS_ERRNO, &os);
        r = os > 0 ? -(int)os : -ECONNREFUSED;
        break;
    }
    case CURLE_OPERATION_TIMEDOUT:
        r = -ETIMEDOUT;
        break;
    case CURLE_PEER_FAILED_VERIFICATION:
        snprintf(call->msg, sizeof(call->msg), "certificate verify failed: %s", what);
        return -EPERM;
    case CURLE_SSL_CONNECT_ERROR:
        r = -EPROTO;
        break;
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_FUNCTION_ARGUMENT:
        r = -EINVAL;
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        r = -EHOSTUNREACH;
        break;
    case CURLE_FILESIZE_EXCEEDED:
        snprintf(call->msg, sizeof(call->msg),
                 "response body over its bound of %zu bytes (Content-Length)", call->max);
        return -EMSGSIZE;
    case CURLE_OUT_OF_MEMORY:
        r = -ENOMEM;
        break;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        r = -ECONNRESET;
        break;
    case CURLE_WEIRD_SERVER_REPLY:
        r = -EPROTO;
        break;
    default:
        r = -EIO;
        break;
    }
    snprintf(call->msg, sizeof(call->msg), "%s", what);
    return r;
}

static void complete(kdp__httpc_call *call, CURLcode rc)
{
    long code = 0;
    curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &code);
    int status = call->status;
    if (status == 0) {
        status = map_result(call, rc);
    }
    if (status == 0 && call->streaming && kdp__lines_pending(&call->lines) > 0) {
        snprintf(call->msg, sizeof(call->msg), "the stream ended inside a line (%zu bytes)",
                 kdp__lines_pending(&call->lines));
        status = -EPROTO;
    }
    /* out of the client first: done may start a call in its place, and a
     * kdp__httpc_cancel() of this one from done does nothing */
    call_detach(call);
    call->cancelled = true;
    bool body = status == 0 && call->len > 0;
    call->done(call, status, code, body ? call->body : NULL, body ? call->len : 0,
               status == 0 ? NULL : call->msg, call->ud);
    call_free(call);
}

/* Every finished transfer, and the calls cancelled while curl ran. */
static void drain(kdp__httpc_client *c)
{
    if (c->reap) {
        c->reap = false;
        kdp__link *l;
        kdp__link *tmp;
        kdp__list_for_each_safe(l, tmp, &c->calls)
        {
            kdp__httpc_call *call = KDP__CONTAINER_OF(l, kdp__httpc_call, node);
            if (call->cancelled) {
                call_free(call);
            }
        }
    }
    CURLMsg *m;
    int left;
    c->in_drain++;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE) {
            continue;
        }
        kdp__httpc_call *call = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&call);
        CURLcode rc = m->data.result;
        assert(call);
        complete(call, rc);
    }
    c->in_drain--;
}

static void socket_action(kdp__httpc_client *c, curl_socket_t s, int flags)
{
    int running = 0;
    c->in_curl++;
    curl_multi_socket_action(c->multi, s, flags, &running);
    c->in_curl--;
    drain(c);
}

/* --- curl's sockets and timer on the loop --- */

static void io_cb(kdp__io *io, uint32_t events, void *ud)
{
    kdp__httpc_client *c = ud;
    int flags = 0;
    if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) {
        flags |= CURL_CSELECT_IN;
    }
    if (events & EPOLLOUT) {
        flags |= CURL_CSELECT_OUT;
    }
    if (events & EPOLLERR) {
        flags |= CURL_CSELECT_ERR;
    }
    socket_action(c, kdp__io_fd(io), flags);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    kdp__httpc_client *c = userp;
    kdp__io *io = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (io) {
            kdp__io_del(io);
            c->nwatched--;
            curl_multi_assign(c->multi, s, NULL);
        }
        return 0;
    }
    uint32_t events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) {
        events |= EPOLLIN;
    }
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) {
        events |= EPOLLOUT;
    }
    if (io) {
        return kdp__io_modify(io, events) < 0 ? -1 : 0;
    }
    if (kdp__io_add(c->loop, s, events, io_cb, c, &io) < 0) {
        return -1;
    }
    c->nwatched++;
    curl_multi_assign(c->multi, s, io);
    return 0;
}

static void timer_cb(kdp__timer *t, void *ud)
{
    (void)t;
    socket_action(ud, CURL_SOCKET_TIMEOUT, 0);
}

static int timer_fn(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    kdp__httpc_client *c = userp;
    if (timeout_ms < 0) {
        kdp__timer_stop(c->timer);
    } else {
        kdp__timer_start(c->timer, (uint64_t)timeout_ms * 1000);
    }
    return 0;
}

/* --- client --- */

int kdp__httpc_client_new(kdp__loop *l, kdp__httpc_client **ret)
{
    if (!l || !ret) {
        return -EINVAL;
    }
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) {
        return -EIO;
    }
    kdp__httpc_client *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    c->loop = l;
    kdp__link_init(&c->calls);
    int r = kdp__timer_new(l, timer_cb, c, &c->timer);
    if (r < 0) {
        goto fail;
    }
    c->multi = curl_multi_init();
    if (!c->multi) {
        r = -ENOMEM;
        goto fail;
    }
    if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_fn) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK) {
        r = -EIO;
        goto fail;
    }
    *ret = c;
    return 0;
fail:
    kdp__httpc_client_free(c);
    return r;
}

void kdp__httpc_client_free(kdp__httpc_client *c)
{
    if (!c) {
        return;
    }
    assert(c->in_curl == 0 && c->in_drain == 0); /* not from a callback */
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &c->calls)
    {
        call_free(KDP__CONTAINER_OF(l, kdp__httpc_call, node));
    }
    if (c->multi) {
        /* closes the cached connections: their sockets come back through
         * socket_cb (CURL_POLL_REMOVE) while c is still whole */
        curl_multi_cleanup(c->multi);
    }
    kdp__timer_free(c->timer);
    free(c);
}

void kdp__httpc_cancel(kdp__httpc_call *call)
{
    if (!call || call->cancelled) {
        return;
    }
    call->cancelled = true;
    if (!call->c) {
        return; /* finished: its done callback is running */
    }
    if (call->c->in_curl > 0) {
        call->c->reap = true; /* curl is running it: remove it after */
        return;
    }
    call_free(call);
}

/* --- starting a call --- */

static int add_header(kdp__httpc_call *call, const char *line)
{
    struct curl_slist *l = curl_slist_append(call->headers, line);
    if (!l) {
        return -ENOMEM;
    }
    call->headers = l;
    return 0;
}

static int add_header2(kdp__httpc_call *call, const char *name, const char *value)
{
    if (strpbrk(value, "\r\n")) {
        return -EINVAL;
    }
    size_t n = strlen(name) + strlen(value) + 1;
    char *line = malloc(n);
    if (!line) {
        return -ENOMEM;
    }
    snprintf(line, n, "%s%s", name, value);
    int r = add_header(call, line);
    kdp__secret_free(line, n); /* the bearer token's line */
    return r;
}

static int set_headers(kdp__httpc_call *call, const kdp__httpc_request *req)
{
    int r = add_header(call, "Expect:"); /* no 100-continue round trip */
    for (const char *const *h = req->headers; r == 0 && h && *h; h++) {
        r = strpbrk(*h, "\r\n") ? -EINVAL : add_header(call, *h);
    }
    if (r == 0 && req->bearer_token) {
        r = add_header2(call, "Authorization: Bearer ", req->bearer_token);
    }
    if (r == 0 && req->body && req->content_type) {
        r = add_header2(call, "Content-Type: ", req->content_type);
    }
    return r;
}

/* Sets an option; bad records a failure (checked once at the end). */
#define SET(opt, val) (bad |= curl_easy_setopt(e, opt, val) != CURLE_OK)

static int set_method(kdp__httpc_call *call, const kdp__httpc_request *req)
{
    CURL *e = call->easy;
    bool bad = false;
    const char *method = req->method ? req->method : "GET";
    if (!*method || strpbrk(method, " \t\r\n")) {
        return -EINVAL;
    }
    if (req->body) {
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        SET(CURLOPT_COPYPOSTFIELDS, req->body); /* makes it a POST */
    }
    if (strcmp(method, "GET") == 0 && !req->body) {
        SET(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(method, "POST") != 0 || !req->body) {
        SET(CURLOPT_CUSTOMREQUEST, method);
    }
    SET(CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ? 1L : 0L);
    return bad ? -EINVAL : 0;
}

static int set_options(kdp__httpc_call *call, const kdp__httpc_request *req)
{
    CURL *e = call->easy;
    bool bad = false;
    uint32_t ct = req->connect_timeout_ms ? req->connect_timeout_ms : KDP__HTTPC_CONNECT_TIMEOUT_MS;
    SET(CURLOPT_URL, req->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_PRIVATE, call);
    SET(CURLOPT_ERRORBUFFER, call->err);
    SET(CURLOPT_WRITEFUNCTION, write_cb);
    SET(CURLOPT_WRITEDATA, call);
    SET(CURLOPT_HTTPHEADER, call->headers);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)ct);
    SET(CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
    /* a stream is bounded per line (write_cb), not in total */
    SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)(req->on_line ? 0 : call->max));
    /* TLS: always verified; a configured CA is the only one trusted (as in
     * client-go: curl's default bundle and CApath cleared, proxy too); none
     * configured: the system's CAs. */
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    SET(CURLOPT_PROXY_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_PROXY_SSL_VERIFYHOST, 2L);
    if (req->ca_file || req->ca_pem) {
        SET(CURLOPT_CAPATH, NULL);
        SET(CURLOPT_PROXY_CAPATH, NULL);
        SET(CURLOPT_CAINFO, req->ca_pem ? NULL : req->ca_file);
        SET(CURLOPT_PROXY_CAINFO, req->ca_pem ? NULL : req->ca_file);
    }
    if (req->ca_pem) {
        struct curl_blob b = {(void *)req->ca_pem, req->ca_pem_len, CURL_BLOB_COPY};
        SET(CURLOPT_CAINFO_BLOB, &b);
        SET(CURLOPT_PROXY_CAINFO_BLOB, &b);
    }
    SET(CURLOPT_SSLCERT, req->cert_file);
    SET(CURLOPT_SSLKEY, req->key_file);
    if (req->cert_pem) {
        struct curl_blob b = {(void *)req->cert_pem, req->cert_pem_len, CURL_BLOB_COPY};
        SET(CURLOPT_SSLCERT_BLOB, &b);
    }
    if (req->key_pem) {
        /* no copy per handle: the caller's buffer outlives the call */
        struct curl_blob b = {(void *)req->key_pem, req->key_pem_len, CURL_BLOB_NOCOPY};
        SET(CURLOPT_SSLKEY_BLOB, &b);
    }
    return bad ? -EINVAL : set_method(call, req);
}

int kdp__httpc_start(kdp__httpc_client *c, const kdp__httpc_request *req, kdp__httpc_done_cb done,
                     void *ud, kdp__httpc_call **ret)
{
    if (!c || !req || !req->url || !done) {
        return -EINVAL;
    }
    if (c->in_curl > 0) {
        return -EBUSY; /* curl takes no new transfer from inside its callbacks */
    }
    if (c->ncalls >= KDP__HTTPC_MAX_CALLS) {
        return -EAGAIN;
    }
    kdp__httpc_call *call = calloc(1, sizeof(*call));
    if (!call) {
        return -ENOMEM;
    }
    call->done = done;
    call->on_line = req->on_line;
    call->ud = ud;
    call->max = req->max_body ? req->max_body : KDP__HTTPC_MAX_BODY;
    kdp__lines_init(&call->lines, call->max);
    kdp__link_init(&call->node);
    int r = -ENOMEM;
    call->easy = curl_easy_init();
    if (!call->easy) {
        goto fail;
    }
    r = set_headers(call, req);
    if (r < 0) {
        goto fail;
    }
    r = set_options(call, req);
    if (r < 0) {
        goto fail;
    }
    if (curl_multi_add_handle(c->multi, call->easy) != CURLM_OK) {
        r = -ENOMEM;
        goto fail;
    }
    call->c = c;
    kdp__list_append(&c->calls, &call->node);
    c->ncalls++;
    if (ret) {
        *ret = call;
    }
    return 0;
fail:
    call_free(call);
    return r;
}
