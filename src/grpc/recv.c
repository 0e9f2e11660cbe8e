/* SPDX-License-Identifier: MIT */
/* recv: a request's way in, as nghttp2 callbacks of a server session: its
 * headers, their validation, dispatch to the method table, its body through
 * the deframer under the buffering caps, the stream's end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "grpc/server_int.h"

static kdp__call *call_of(nghttp2_session *session, int32_t stream_id)
{
    return nghttp2_session_get_stream_user_data(session, stream_id);
}

static void copy_header(char *dst, size_t cap, const uint8_t *v, size_t len, bool *too_long)
{
    if (len >= cap) {
        if (too_long) {
            *too_long = true;
        }
        len = cap - 1;
    }
    memcpy(dst, v, len);
    dst[len] = '\0';
}

static bool has_prefix(const uint8_t *s, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

/* application/grpc, application/grpc+proto, application/grpc;charset=... */
static bool content_type_ok(const uint8_t *v, size_t len)
{
    static const char ct[] = "application/grpc";
    if (!has_prefix(v, len, ct)) {
        return false;
    }
    return len == sizeof(ct) - 1 || v[sizeof(ct) - 1] == '+' || v[sizeof(ct) - 1] == ';';
}

static void take_header(kdp__call *call, const uint8_t *name, size_t nlen, const uint8_t *v,
                        size_t vlen)
{
#define IS(lit) (nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0)
    if (IS(":path")) {
        copy_header(call->path, sizeof(call->path), v, vlen, &call->path_too_long);
    } else if (IS(":method")) {
        call->is_post = vlen == 4 && memcmp(v, "POST", 4) == 0;
    } else if (IS(":authority")) {
        copy_header(call->authority, sizeof(call->authority), v, vlen, NULL);
    } else if (IS("content-type")) {
        call->content_type_ok = content_type_ok(v, vlen);
    } else if (IS("grpc-encoding")) {
        call->encoding_ok = vlen == 8 && memcmp(v, "identity", 8) == 0;
    } else if (IS("grpc-timeout")) {
        call->has_timeout = true;
        call->timeout_bad = kdp__timeout_parse((const char *)v, vlen, &call->timeout_us) < 0;
    }
#undef IS
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0; /* client trailers carry nothing we use */
    }
    kdp__call *call = call_of(session, frame->hd.stream_id);
    if (call) {
        take_header(call, name, nlen, value, vlen);
    }
    return 0;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    kdp__sconn *sc = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    kdp__call *call = kdp__call_new(sc, frame->hd.stream_id, sc->srv->cfg.max_recv_message);
    if (!call) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM for this one only */
    }
    if (nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, call) != 0) {
        kdp__call_free(call);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    kdp__list_insert_after(&sc->calls, &call->link);
    sc->srv->stats.active_calls++;
    sc->srv->stats.calls_total++;
    return 0;
}

static const kdp__method *find_method(const kdp__server *s, const char *path)
{
    for (size_t i = 0; i < s->n_methods; i++) {
        if (strcmp(s->methods[i].path, path) == 0) {
            return &s->methods[i];
        }
    }
    return NULL;
}

/* The request headers are complete: decide whether this call may go on. */
static void validate(kdp__call *call)
{
    char msg[KDP__CALL_PATH_MAX + 64];
    if (!call->is_post) {
        (void)kdp__call_reject_http(call, 405, KDP__ST_INTERNAL, "gRPC requires :method POST");
        return;
    }
    if (!call->content_type_ok) {
        (void)kdp__call_reject_http(call, 415, KDP__ST_INTERNAL,
                                    "invalid gRPC request content-type");
        return;
    }
    call->method = call->path_too_long ? NULL : find_method(call->sc->srv, call->path);
    if (!call->method) {
        snprintf(msg, sizeof(msg), "unknown method %s%s", call->path,
                 call->path_too_long ? "..." : "");
        kdp__call_abort(call, KDP__ST_UNIMPLEMENTED, msg);
        return;
    }
    if (!call->encoding_ok) {
        kdp__call_abort(call, KDP__ST_UNIMPLEMENTED,
                        "compression is not supported: send grpc-encoding identity");
        return;
    }
    if (call->timeout_bad) {
        kdp__call_abort(call, KDP__ST_INTERNAL, "malformed grpc-timeout");
        return;
    }
    if (call->has_timeout && call->timeout_us == 0) {
        kdp__call_abort(call, KDP__ST_DEADLINE_EXCEEDED, "deadline exceeded");
        return;
    }
    if (kdp__call_start_deadline(call) < 0) {
        kdp__call_abort(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
    }
}

/* Counts the request bytes a call holds (allocated for it) in its
 * connection's and server's totals: the caps on what peers make us buffer. */
static void set_held(kdp__call *call, size_t now)
{
    kdp__sconn *sc = call->sc;
    sc->held = sc->held - call->held + now;
    sc->srv->held = sc->srv->held - call->held + now;
    call->held = now;
}

/* The call is answered: the bytes of its request are not needed any more. */
static void drop_request(kdp__call *call)
{
    kdp__deframer_done(&call->df);
    free(call->req);
    call->req = NULL;
    call->req_len = 0;
    set_held(call, 0);
}

static void dispatch(kdp__call *call)
{
    if (call->finished) {
        return;
    }
    if (kdp__deframer_partial(&call->df)) {
        kdp__call_abort(call, KDP__ST_INTERNAL, "request ended in the middle of a message");
        return;
    }
    if (call->n_msgs != 1) {
        kdp__call_abort(call, KDP__ST_INTERNAL, "expected exactly one request message, got none");
        return;
    }
    uint8_t *req = call->req;
    size_t len = call->req_len;
    call->req = NULL;
    call->req_len = 0;
    set_held(call, 0);
    call->user_owned = true;
    call->method->handler(call, req ? req : (const uint8_t *)"", len, call->method->ud);
    free(req);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    (void)ud;
    kdp__call *call = call_of(session, frame->hd.stream_id);
    if (!call) {
        return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        validate(call);
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        dispatch(call);
    }
    return 0;
}

static int on_message(void *ud, const uint8_t *msg, size_t len)
{
    kdp__call *call = ud;
    if (++call->n_msgs > 1) {
        return -E2BIG;
    }
    call->req = malloc(len ? len : 1);
    if (!call->req) {
        return -ENOMEM;
    }
    memcpy(call->req, msg, len);
    call->req_len = len;
    return 0;
}

/* Over the server-wide cap, the calls holding the most are ended (with
 * RESOURCE_EXHAUSTED) until it holds again: many connections that never
 * complete their large requests lose them, the small requests of others
 * (a kubelet's Allocate) go on. */
static void enforce_max_buffered(kdp__server *s)
{
    while (s->held > s->cfg.max_buffered) {
        kdp__call *victim = NULL;
        const kdp__link *ls;
        kdp__list_for_each(ls, &s->conns)
        {
            const kdp__sconn *sc = KDP__CONTAINER_OF(ls, kdp__sconn, link);
            kdp__link *lc;
            kdp__list_for_each(lc, &sc->calls)
            {
                kdp__call *c = KDP__CONTAINER_OF(lc, kdp__call, link);
                if (!victim || c->held > victim->held) {
                    victim = c;
                }
            }
        }
        if (!victim || victim->held == 0) {
            return;
        }
        kdp__conn *conn = victim->sc->conn;
        kdp__conn_hold(conn); /* the victim is not freed under our feet */
        drop_request(victim);
        char msg[96];
        snprintf(msg, sizeof(msg), "too many request bytes buffered by the server (%zu at most)",
                 s->cfg.max_buffered);
        kdp__call_abort(victim, KDP__ST_RESOURCE_EXHAUSTED, msg);
        kdp__conn_release(conn); /* may flush and free the victim */
    }
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data,
                   size_t len, void *ud)
{
    (void)flags;
    (void)ud;
    kdp__call *call = call_of(session, stream_id);
    if (!call || call->finished) {
        return 0; /* answered already: discard the rest */
    }
    char msg[160];
    int r = kdp__deframer_feed(&call->df, data, len, on_message, call);
    if (r == 0 && call->req && call->df.hdr_len == 0 && call->df.cap > 0) {
        /* The message was copied out: its assembly buffer can go. */
        size_t max = call->df.max;
        kdp__deframer_done(&call->df);
        kdp__deframer_init(&call->df, max);
    }
    /* What the request holds now: the deframer's buffer (sized from the
     * announced length) and a complete message waiting for END_STREAM. */
    set_held(call, call->df.cap + call->req_len);
    kdp__server *s = call->sc->srv;
    if (r == 0 && call->sc->held > s->cfg.max_conn_buffered) {
        /* A peer that sends but never completes its requests. */
        drop_request(call);
        snprintf(msg, sizeof(msg),
                 "too many request bytes buffered on this connection (%zu at most)",
                 s->cfg.max_conn_buffered);
        kdp__call_abort(call, KDP__ST_RESOURCE_EXHAUSTED, msg);
        return 0;
    }
    if (r == 0) {
        enforce_max_buffered(s); /* may end this call too */
        return 0;
    }
    drop_request(call);
    switch (r) {
    case -EMSGSIZE:
        snprintf(msg, sizeof(msg), "received message larger than max (%zu bytes)",
                 call->sc->srv->cfg.max_recv_message);
        kdp__call_abort(call, KDP__ST_RESOURCE_EXHAUSTED, msg);
        break;
    case -ENOTSUP:
        kdp__call_abort(call, KDP__ST_UNIMPLEMENTED, "compressed messages are not supported");
        break;
    case -E2BIG:
        kdp__call_abort(call, KDP__ST_INTERNAL, "expected exactly one request message, got more");
        break;
    default:
        kdp__call_abort(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
        break;
    }
    return 0;
}

/* After a final HEADERS went out while the client is still sending, tell it
 * to stop with RST_STREAM(NO_ERROR); doing so before the HEADERS is sent would
 * make nghttp2 drop them, and the client would see INTERNAL. */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        return 0;
    }
    kdp__call *call = call_of(session, frame->hd.stream_id);
    if (call && !call->rst_sent &&
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0) {
        call->rst_sent = true;
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                        NGHTTP2_NO_ERROR);
    }
    return 0;
}

void kdp__call_unlink(kdp__call *call)
{
    kdp__sconn *sc = call->sc;
    kdp__link_remove(&call->link);
    set_held(call, 0);
    sc->srv->stats.active_calls--;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *ud)
{
    (void)error_code;
    (void)ud;
    kdp__call *call = call_of(session, stream_id);
    if (!call) {
        return 0;
    }
    kdp__call_closed(call);
    kdp__call_unlink(call);
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    kdp__call_free(call);
    return 0;
}

int kdp__server_make_callbacks(kdp__server *s)
{
    if (nghttp2_session_callbacks_new(&s->cbs) != 0 || nghttp2_option_new(&s->opt) != 0) {
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(s->cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(s->cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(s->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s->cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_send_callback(s->cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(s->cbs, on_stream_close);
    /* Our own checks: nghttp2's would reject a socket path as :authority. */
    nghttp2_option_set_no_http_messaging(s->opt, 1);
    return 0;
}
