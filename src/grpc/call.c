/* SPDX-License-Identifier: MIT */
/* call: the response side of one server call: message queue, data provider,
 * trailers, trailers-only errors, deadlines and cancellation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "grpc/server_int.h"

#define NV(n, v, f)                                                                                \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), (f)                              \
    }
#define NV_STATIC (NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE)

static nghttp2_session *session_of(const kdp__call *call)
{
    return kdp__conn_session(call->sc->conn);
}

/* What a call waiting on its peer holds: the response bytes it has
 * queued and, while it has some, its own memory (a stream the peer reads
 * holds none for long). */
static size_t unsent_of(const kdp__call *call)
{
    return call->q_bytes ? call->q_bytes + KDP__CALL_COST : 0;
}

/* The bytes the call has queued change: counted for its connection and its
 * server (as recv.c counts the requests held). */
static void q_add(kdp__call *call, size_t add, size_t sub)
{
    kdp__sconn *sc = call->sc;
    size_t was = unsent_of(call);
    call->q_bytes = call->q_bytes + add - sub;
    sc->unsent = sc->unsent - was + unsent_of(call);
    sc->srv->unsent = sc->srv->unsent - was + unsent_of(call);
}

kdp__call *kdp__call_new(kdp__sconn *sc, int32_t stream_id, size_t max_recv)
{
    kdp__call *call = calloc(1, sizeof(*call));
    if (!call) {
        return NULL;
    }
    kdp__link_init(&call->link);
    call->sc = sc;
    call->stream_id = stream_id;
    call->encoding_ok = true;
    kdp__deframer_init(&call->df, max_recv);
    return call;
}

void kdp__call_free(kdp__call *call)
{
    if (!call) {
        return;
    }
    kdp__timer_free(call->deadline_timer);
    kdp__deframer_done(&call->df);
    free(call->req);
    q_add(call, 0, call->q_bytes);
    for (kdp__outmsg *m = call->q_head, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    free(call->message);
    free(call);
}

const char *kdp__call_path(const kdp__call *call)
{
    return call->path;
}

const char *kdp__call_authority(const kdp__call *call)
{
    return call->authority;
}

uint64_t kdp__call_deadline(const kdp__call *call)
{
    return call->deadline;
}

void kdp__call_set_cancel(kdp__call *call, kdp__cancel_fn cb, void *ud)
{
    call->cancel_cb = cb;
    call->cancel_ud = ud;
}

static void submit_trailer(kdp__call *call)
{
    char code[12];
    snprintf(code, sizeof(code), "%d", call->status);
    nghttp2_nv nva[2] = {NV("grpc-status", code, NGHTTP2_NV_FLAG_NO_COPY_NAME)};
    size_t n = 1;
    if (call->message) {
        nva[n++] = (nghttp2_nv)NV("grpc-message", call->message, NGHTTP2_NV_FLAG_NO_COPY_NAME);
    }
    int r = nghttp2_submit_trailer(session_of(call), call->stream_id, nva, n);
    if (r != 0) {
        log_debug("stream %d: submit_trailer: %s", call->stream_id, nghttp2_strerror(r));
    }
}

/* nghttp2 pulls response bytes from the call's queue. */
static ssize_t read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *ud)
{
    (void)session;
    (void)stream_id;
    (void)ud;
    kdp__call *call = source->ptr;
    size_t copied = 0;
    while (call->q_head && copied < length) {
        kdp__outmsg *m = call->q_head;
        size_t take = m->len - m->off;
        if (take > length - copied) {
            take = length - copied;
        }
        memcpy(buf + copied, m->data + m->off, take);
        copied += take;
        m->off += take;
        q_add(call, 0, take);
        if (m->off == m->len) {
            call->q_head = m->next;
            if (!call->q_head) {
                call->q_tail = NULL;
            }
            free(m);
        }
    }
    if (!call->q_head && call->finished) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        submit_trailer(call);
        return (ssize_t)copied;
    }
    if (copied == 0) {
        call->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)copied;
}

static int submit_headers(kdp__call *call)
{
    static const nghttp2_nv nva[] = {
        NV(":status", "200", NV_STATIC),
        NV("content-type", "application/grpc", NV_STATIC),
    };
    nghttp2_data_provider prd = {.source.ptr = call, .read_callback = read_body};
    int r = nghttp2_submit_response(session_of(call), call->stream_id, nva, 2, &prd);
    if (r != 0) {
        return r == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
    }
    call->responded = true;
    return 0;
}

/* A final status with no message before it: one HEADERS frame. */
static int submit_trailers_only(kdp__call *call, int http_status)
{
    char hs[12];
    char code[12];
    snprintf(hs, sizeof(hs), "%d", http_status);
    snprintf(code, sizeof(code), "%d", call->status);
    nghttp2_nv nva[4] = {
        NV(":status", hs, NGHTTP2_NV_FLAG_NO_COPY_NAME),
        NV("content-type", "application/grpc", NV_STATIC),
        NV("grpc-status", code, NGHTTP2_NV_FLAG_NO_COPY_NAME),
    };
    size_t n = 3;
    if (call->message) {
        nva[n++] = (nghttp2_nv)NV("grpc-message", call->message, NGHTTP2_NV_FLAG_NO_COPY_NAME);
    }
    int r = nghttp2_submit_response(session_of(call), call->stream_id, nva, n, NULL);
    if (r != 0) {
        return r == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
    }
    call->responded = true;
    return 0;
}

static void resume(kdp__call *call)
{
    if (call->deferred) {
        call->deferred = false;
        (void)nghttp2_session_resume_data(session_of(call), call->stream_id);
    }
    kdp__conn_flush(call->sc->conn);
}

/* The peer does not take what it is sent: the stream is reset (its queue
 * dropped); the stream's close tells the handler, from the loop. */
static int refuse_unsent(kdp__call *call, kdp__outmsg *m, const char *which, size_t bound)
{
    kdp__sconn *sc = call->sc;
    free(m);
    if (!sc->warned) {
        sc->warned = true;
        log_warn("a peer does not read its responses: %zu bytes queued for it, %zu for every "
                 "peer (%s bound %zu): stream %d reset",
                 sc->unsent, sc->srv->unsent, which, bound, call->stream_id);
    }
    q_add(call, 0, call->q_bytes);
    for (kdp__outmsg *x = call->q_head, *next; x; x = next) {
        next = x->next;
        free(x);
    }
    call->q_head = call->q_tail = NULL;
    sc->srv->stats.unsent_resets++;
    if (!call->rst_sent) {
        call->rst_sent = true;
        (void)nghttp2_submit_rst_stream(session_of(call), NGHTTP2_FLAG_NONE, call->stream_id,
                                        NGHTTP2_ENHANCE_YOUR_CALM);
        kdp__conn_flush(sc->conn);
    }
    return -ENOBUFS;
}

/* The connection holding the most unsent bytes, other than mine (NULL:
 * mine holds the most). */
static kdp__sconn *largest_other(kdp__sconn *mine)
{
    kdp__sconn *best = mine;
    kdp__link *l;
    kdp__list_for_each(l, &mine->srv->conns)
    {
        kdp__sconn *sc = KDP__CONTAINER_OF(l, kdp__sconn, link);
        best = !sc->dropping && sc->unsent > best->unsent ? sc : best;
    }
    return best == mine ? NULL : best;
}

/* The bounds on what peers have not taken (kdp__server_config). */
static int check_unsent(kdp__call *call, kdp__outmsg *m)
{
    kdp__sconn *sc = call->sc;
    kdp__server *s = sc->srv;
    size_t cost = m->len + (call->q_bytes ? 0 : KDP__CALL_COST);
    if (sc->unsent + cost > s->cfg.max_conn_unsent) {
        return refuse_unsent(call, m, "connection", s->cfg.max_conn_unsent);
    }
    if (s->unsent + cost > s->cfg.max_unsent) {
        kdp__sconn *victim = largest_other(sc);
        if (!victim) {
            return refuse_unsent(call, m, "server", s->cfg.max_unsent);
        }
        /* closed from the loop: its calls end there, not inside this send */
        if (!s->unsent_warned) {
            s->unsent_warned = true;
            log_warn("peers do not read their responses: %zu bytes held for them (bound %zu): "
                     "closing the connection that holds the most (%zu), and the next ones so",
                     s->unsent, s->cfg.max_unsent, victim->unsent);
        }
        victim->dropping = true;
        s->stats.unsent_closes++;
        kdp__conn_terminate(victim->conn, NGHTTP2_ENHANCE_YOUR_CALM, 0);
    }
    return 0;
}

static int enqueue(kdp__call *call, kdp__outmsg *m)
{
    if (call->rst_sent) {
        free(m);
        return -ENOBUFS;
    }
    int u = check_unsent(call, m);
    if (u < 0) {
        return u;
    }
    if (!call->responded) {
        int r = submit_headers(call);
        if (r < 0) {
            free(m);
            return r;
        }
    }
    if (call->q_tail) {
        call->q_tail->next = m;
    } else {
        call->q_head = m;
    }
    call->q_tail = m;
    q_add(call, m->len, 0);
    resume(call);
    return 0;
}

static kdp__outmsg *outmsg_new(size_t body_len)
{
    if (body_len > UINT32_MAX) {
        errno = EMSGSIZE;
        return NULL;
    }
    kdp__outmsg *m = malloc(sizeof(*m) + KDP__FRAME_HEADER_LEN + body_len);
    if (!m) {
        errno = ENOMEM;
        return NULL;
    }
    m->next = NULL;
    m->off = 0;
    m->len = KDP__FRAME_HEADER_LEN + body_len;
    kdp__frame_header(m->data, (uint32_t)body_len);
    return m;
}

int kdp__call_send(kdp__call *call, const uint8_t *msg, size_t len)
{
    if (call->finished) {
        return -EALREADY;
    }
    kdp__outmsg *m = outmsg_new(len);
    if (!m) {
        return -errno;
    }
    if (len) {
        memcpy(m->data + KDP__FRAME_HEADER_LEN, msg, len);
    }
    return enqueue(call, m);
}

/* Each message of such a stream replaces the ones before it (a
 * ListAndWatch device list): drop the queued messages nghttp2 has not taken
 * a byte of yet, so a client that never reads holds at most the one being
 * sent and this one, however many updates come. */
int kdp__call_send_latest(kdp__call *call, const uint8_t *msg, size_t len)
{
    if (call->finished) {
        return -EALREADY;
    }
    /* Only the head can have been started (off > 0): the queue is FIFO. */
    kdp__outmsg *keep = call->q_head && call->q_head->off > 0 ? call->q_head : NULL;
    for (kdp__outmsg *m = keep ? keep->next : call->q_head, *next; m; m = next) {
        next = m->next;
        q_add(call, 0, m->len);
        free(m);
    }
    if (keep) {
        keep->next = NULL;
    }
    call->q_head = call->q_tail = keep;
    return kdp__call_send(call, msg, len);
}

int kdp__call_send_pb(kdp__call *call, const ProtobufCMessage *pb)
{
    if (call->finished) {
        return -EALREADY;
    }
    size_t len = protobuf_c_message_get_packed_size(pb);
    kdp__outmsg *m = outmsg_new(len);
    if (!m) {
        return -errno;
    }
    (void)protobuf_c_message_pack(pb, m->data + KDP__FRAME_HEADER_LEN);
    return enqueue(call, m);
}

/* Sets the final status and queues it; does not touch user ownership. */
static int finish(kdp__call *call, int status, const char *message, int http_status)
{
    if (call->finished) {
        return -EALREADY;
    }
    call->finished = true;
    call->status = status;
    if (call->method && call->method->ended) {
        call->method->ended(status, call->method->ud);
    }
    if (message && *message) {
        call->message = kdp__percent_encode(message, strlen(message), NULL);
    }
    kdp__timer_stop(call->deadline_timer);
    if (!call->responded) {
        int r = submit_trailers_only(call, http_status);
        kdp__conn_flush(call->sc->conn);
        return r;
    }
    resume(call);
    return 0;
}

int kdp__call_finish(kdp__call *call, int status, const char *message)
{
    call->user_owned = false;
    return finish(call, status, message, 200);
}

/* Sends a message and the final status in one flush: the conn is held so
 * that the send does not write the message before the trailers are queued
 * (one write instead of two, and one wakeup of the peer). The release may
 * flush, close the stream and free the call: it comes last. */
static int reply(kdp__call *call, const uint8_t *msg, size_t len, const ProtobufCMessage *m)
{
    kdp__conn *conn = call->sc->conn;
    kdp__conn_hold(conn);
    int r = m ? kdp__call_send_pb(call, m) : kdp__call_send(call, msg, len);
    if (r < 0) {
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "cannot queue the response");
    } else {
        r = kdp__call_finish(call, KDP__ST_OK, NULL);
    }
    kdp__conn_release(conn);
    return r;
}

int kdp__call_reply_pb(kdp__call *call, const ProtobufCMessage *m)
{
    return reply(call, NULL, 0, m);
}

int kdp__call_reply(kdp__call *call, const uint8_t *msg, size_t len)
{
    return reply(call, msg, len, NULL);
}

static void notify_cancel(kdp__call *call, int status)
{
    if (!call->user_owned) {
        return;
    }
    call->user_owned = false;
    if (call->cancel_cb) {
        call->cancel_cb(call, status, call->cancel_ud);
    }
}

void kdp__call_abort(kdp__call *call, int status, const char *message)
{
    /* Tell the handler first: finishing may flush, close the stream and
     * free the call. */
    notify_cancel(call, status);
    (void)finish(call, status, message, 200);
}

int kdp__call_reject_http(kdp__call *call, int http_status, int status, const char *message)
{
    return finish(call, status, message, http_status);
}

void kdp__call_closed(kdp__call *call)
{
    if (!call->finished) {
        call->sc->srv->stats.calls_cancelled++;
        call->finished = true;
        if (call->method && call->method->ended) {
            call->method->ended(KDP__ST_CANCELLED, call->method->ud);
        }
        notify_cancel(call, KDP__ST_CANCELLED);
    }
}

static void on_deadline(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__call *call = ud;
    kdp__call_abort(call, KDP__ST_DEADLINE_EXCEEDED, "deadline exceeded");
}

int kdp__call_start_deadline(kdp__call *call)
{
    if (!call->has_timeout) {
        return 0;
    }
    int r = kdp__timer_new(call->sc->srv->loop, on_deadline, call, &call->deadline_timer);
    if (r < 0) {
        return r;
    }
    call->deadline = kdp__now_us() + call->timeout_us;
    kdp__timer_start_at(call->deadline_timer, call->deadline);
    return 0;
}
