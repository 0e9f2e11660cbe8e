/* SPDX-License-Identifier: MIT */
#include "grpc/client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "grpc/conn.h"
#include "grpc/wire.h"
#include "runtime/sock.h"

#define DEFAULT_MAX_RECV ((size_t)16 * 1024 * 1024)
#define STREAM_WINDOW    (1U << 20)
#define MESSAGE_MAX      256

struct kdp__client_call {
    kdp__loop *loop;
    kdp__conn *conn;
    kdp__timer *timer; /* the deadline, then the deferred completion */
    int32_t stream_id;
    kdp__unary_done_fn done;
    kdp__stream_msg_fn on_msg; /* server-streaming calls only */
    void *ud;
    uint64_t timeout_us;
    bool in_msg_cb; /* on_msg is running: a cancel must be deferred */
    bool cancelled;

    uint8_t *req; /* framed request */
    size_t req_len;
    size_t req_off;

    int http_status;
    int grpc_status; /* -1 until seen */
    char *grpc_message;
    kdp__deframer df;
    uint8_t *resp;
    size_t resp_len;
    unsigned n_msgs;

    bool completed;
    int status;
    char message[MESSAGE_MAX];
};

static void complete(kdp__client_call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void complete(kdp__client_call *c, int status, const char *fmt, ...)
{
    if (c->completed) {
        return;
    }
    c->completed = true;
    c->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof(c->message), fmt, ap);
    va_end(ap);
    /* done runs from the timer: never inside nghttp2 or the caller's frame. */
    kdp__timer_start(c->timer, 0);
}

static void call_free(kdp__client_call *c)
{
    kdp__conn_free(c->conn);
    kdp__timer_free(c->timer);
    kdp__deframer_done(&c->df);
    free(c->req);
    free(c->resp);
    free(c->grpc_message);
    free(c);
}

static void on_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__client_call *c = ud;
    if (c->cancelled) {
        call_free(c); /* cancelled from inside on_msg */
        return;
    }
    if (!c->completed) {
        complete(c, KDP__ST_DEADLINE_EXCEEDED, "deadline exceeded after %llu ms",
                 (unsigned long long)(c->timeout_us / 1000));
        return;
    }
    bool ok = c->status == KDP__ST_OK;
    c->done(c->status, c->message, ok ? c->resp : NULL, ok ? c->resp_len : 0, c->ud);
    call_free(c);
}

static ssize_t read_req(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *source, void *ud)
{
    (void)session;
    (void)stream_id;
    (void)source;
    kdp__client_call *c = ud;
    size_t n = c->req_len - c->req_off;
    if (n > length) {
        n = length;
    }
    memcpy(buf, c->req + c->req_off, n);
    c->req_off += n;
    if (c->req_off == c->req_len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nlen, const uint8_t *v, size_t vlen, uint8_t flags, void *ud)
{
    (void)session;
    (void)flags;
    kdp__client_call *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->hd.stream_id != c->stream_id) {
        return 0;
    }
#define IS(lit) (nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0)
    if (IS(":status")) {
        c->http_status = vlen == 3 ? (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0') : 0;
    } else if (IS("grpc-status")) {
        c->grpc_status = kdp__status_parse((const char *)v, vlen);
    } else if (IS("grpc-message")) {
        free(c->grpc_message);
        c->grpc_message = kdp__percent_decode((const char *)v, vlen, NULL);
    }
#undef IS
    return 0;
}

static int on_message(void *ud, const uint8_t *msg, size_t len)
{
    kdp__client_call *c = ud;
    if (c->on_msg) {
        c->n_msgs++;
        if (!c->completed && !c->cancelled) {
            c->in_msg_cb = true;
            c->on_msg(msg, len, c->ud);
            c->in_msg_cb = false;
        }
        return c->cancelled ? -ECANCELED : 0;
    }
    if (++c->n_msgs > 1) {
        return -E2BIG;
    }
    c->resp = malloc(len ? len : 1);
    if (!c->resp) {
        return -ENOMEM;
    }
    memcpy(c->resp, msg, len);
    c->resp_len = len;
    return 0;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data,
                   size_t len, void *ud)
{
    (void)flags;
    kdp__client_call *c = ud;
    if (stream_id != c->stream_id || c->completed) {
        return 0;
    }
    int r = kdp__deframer_feed(&c->df, data, len, on_message, c);
    if (r == 0) {
        return 0;
    }
    if (r == -ECANCELED) {
        c->completed = true; /* no done: the caller cancelled */
    } else if (r == -EMSGSIZE) {
        complete(c, KDP__ST_RESOURCE_EXHAUSTED, "response larger than max (%zu bytes)", c->df.max);
    } else if (r == -ENOTSUP) {
        complete(c, KDP__ST_INTERNAL, "compressed response, but no compression was asked for");
    } else if (r == -E2BIG) {
        complete(c, KDP__ST_INTERNAL, "more than one response message to a unary call");
    } else {
        complete(c, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
    }
    (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    return 0;
}

static void finish_from_headers(kdp__client_call *c, uint32_t error_code)
{
    const char *msg = c->grpc_message ? c->grpc_message : "";
    if (c->grpc_status >= 0) {
        if (c->grpc_status != KDP__ST_OK) {
            complete(c, c->grpc_status, "%s", msg);
        } else if (kdp__deframer_partial(&c->df) || (!c->on_msg && c->n_msgs != 1)) {
            complete(c, KDP__ST_INTERNAL, "expected one response message, got %u", c->n_msgs);
        } else {
            complete(c, KDP__ST_OK, "%s", msg);
        }
    } else if (c->http_status != 0 && c->http_status != 200) {
        complete(c, kdp__status_from_http(c->http_status), "unexpected HTTP status %d",
                 c->http_status);
    } else if (error_code == NGHTTP2_REFUSED_STREAM) {
        complete(c, KDP__ST_UNAVAILABLE, "stream refused by the server");
    } else if (error_code == NGHTTP2_CANCEL) {
        complete(c, KDP__ST_CANCELLED, "stream cancelled by the server");
    } else if (error_code != NGHTTP2_NO_ERROR) {
        complete(c, KDP__ST_INTERNAL, "stream reset by the server: %s",
                 nghttp2_http2_strerror(error_code));
    } else {
        complete(c, KDP__ST_INTERNAL, "server closed the stream without a grpc-status");
    }
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *ud)
{
    (void)session;
    kdp__client_call *c = ud;
    if (stream_id == c->stream_id) {
        finish_from_headers(c, error_code);
    }
    return 0;
}

static void on_conn_closed(kdp__conn *conn, int err, void *ud)
{
    (void)conn;
    kdp__client_call *c = ud;
    complete(c, KDP__ST_UNAVAILABLE, "connection closed before the response%s%s",
             err < 0 ? ": " : "", err < 0 ? strerror(-err) : "");
}

static int new_session(kdp__client_call *c, nghttp2_session **ret)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0) {
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cbs);
        return -ENOMEM;
    }
    nghttp2_option_set_no_http_messaging(opt, 1);
    nghttp2_session *session = NULL;
    int r = nghttp2_session_client_new2(&session, cbs, c, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (r != 0) {
        return -ENOMEM; /* nghttp2 freed what it had made: *ret stays NULL */
    }
    *ret = session;
    return 0;
}

static int submit(kdp__client_call *c, nghttp2_session *session, const char *path,
                  const char *authority)
{
    static const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
    };
    if (nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, iv, 2) != 0) {
        return -ENOMEM;
    }
    char tmo[10] = "";
    nghttp2_nv nva[8];
    size_t n = 0;
#define ADD(k, v)                                                                                  \
    nva[n++] =                                                                                     \
        (nghttp2_nv){(uint8_t *)(k), (uint8_t *)(v), strlen(k), strlen(v), NGHTTP2_NV_FLAG_NONE}
    ADD(":method", "POST");
    ADD(":scheme", "http");
    ADD(":path", path);
    ADD(":authority", authority);
    ADD("content-type", "application/grpc");
    ADD("te", "trailers");
    ADD("user-agent", "kdp/0.1.0");
    if (c->timeout_us) {
        kdp__timeout_format(c->timeout_us, tmo);
        ADD("grpc-timeout", tmo);
    }
#undef ADD
    nghttp2_data_provider prd = {.source.ptr = c, .read_callback = read_req};
    int32_t id = nghttp2_submit_request(session, NULL, nva, n, &prd, c);
    if (id < 0) {
        return -ENOMEM;
    }
    c->stream_id = id;
    return 0;
}

static int start(kdp__client_call *c, const char *socket_path, const char *path,
                 const char *authority)
{
    int fd;
    int r = kdp__sock_connect(socket_path, &fd);
    if (r < 0) {
        complete(c, KDP__ST_UNAVAILABLE, "connect %s: %s", socket_path, strerror(-r));
        return 0;
    }
    nghttp2_session *session = NULL;
    r = new_session(c, &session);
    if (r == 0) {
        r = submit(c, session, path, authority);
    }
    if (r == 0) {
        r = kdp__conn_new(c->loop, fd, session, on_conn_closed, c, &c->conn);
    }
    if (r < 0) {
        if (!c->conn) {
            nghttp2_session_del(session);
            close(fd);
        }
        return r;
    }
    kdp__conn_flush(c->conn);
    return 0;
}

static int start_call(kdp__loop *l, const char *socket_path, const char *method_path,
                      const uint8_t *req, size_t len, const kdp__unary_opts *opts,
                      kdp__stream_msg_fn on_msg, kdp__unary_done_fn done, void *ud,
                      kdp__client_call **ret);

int kdp__client_unary(kdp__loop *l, const char *socket_path, const char *method_path,
                      const uint8_t *req, size_t len, const kdp__unary_opts *opts,
                      kdp__unary_done_fn done, void *ud, kdp__client_call **ret)
{
    return start_call(l, socket_path, method_path, req, len, opts, NULL, done, ud, ret);
}

int kdp__client_stream(kdp__loop *l, const char *socket_path, const char *method_path,
                       const uint8_t *req, size_t len, const kdp__unary_opts *opts,
                       kdp__stream_msg_fn on_msg, kdp__unary_done_fn done, void *ud,
                       kdp__client_call **ret)
{
    if (!on_msg) {
        return -EINVAL;
    }
    return start_call(l, socket_path, method_path, req, len, opts, on_msg, done, ud, ret);
}

static int start_call(kdp__loop *l, const char *socket_path, const char *method_path,
                      const uint8_t *req, size_t len, const kdp__unary_opts *opts,
                      kdp__stream_msg_fn on_msg, kdp__unary_done_fn done, void *ud,
                      kdp__client_call **ret)
{
    if (!l || !socket_path || !method_path || method_path[0] != '/' || (!req && len) || !done ||
        len > UINT32_MAX) {
        return -EINVAL;
    }
    kdp__client_call *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    c->loop = l;
    c->done = done;
    c->on_msg = on_msg;
    c->ud = ud;
    c->grpc_status = -1;
    c->timeout_us = opts ? opts->timeout_us : 0;
    kdp__deframer_init(&c->df, opts && opts->max_recv ? opts->max_recv : DEFAULT_MAX_RECV);
    c->req_len = KDP__FRAME_HEADER_LEN + len;
    c->req = malloc(c->req_len);
    int r = c->req ? kdp__timer_new(l, on_timer, c, &c->timer) : -ENOMEM;
    if (r < 0) {
        goto fail;
    }
    kdp__frame_header(c->req, (uint32_t)len);
    if (len) {
        memcpy(c->req + KDP__FRAME_HEADER_LEN, req, len);
    }
    r = start(c, socket_path, method_path, opts && opts->authority ? opts->authority : "localhost");
    if (r < 0) {
        goto fail;
    }
    if (c->timeout_us && !c->completed) {
        kdp__timer_start(c->timer, c->timeout_us);
    }
    if (ret) {
        *ret = c;
    }
    return 0;
fail:
    call_free(c);
    return r;
}

int kdp__client_unary_pb(kdp__loop *l, const char *socket_path, const char *method_path,
                         const ProtobufCMessage *req, const kdp__unary_opts *opts,
                         kdp__unary_done_fn done, void *ud, kdp__client_call **ret)
{
    if (!req) {
        return -EINVAL;
    }
    size_t len = protobuf_c_message_get_packed_size(req);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        return -ENOMEM;
    }
    (void)protobuf_c_message_pack(req, buf);
    int r = kdp__client_unary(l, socket_path, method_path, buf, len, opts, done, ud, ret);
    free(buf);
    return r;
}

void kdp__client_call_cancel(kdp__client_call *c)
{
    if (!c) {
        return;
    }
    if (c->in_msg_cb) {
        /* inside nghttp2's callbacks: stop delivering, free from the loop */
        c->cancelled = true;
        kdp__timer_start(c->timer, 0);
        return;
    }
    call_free(c);
}
