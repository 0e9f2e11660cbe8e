/* SPDX-License-Identifier: MIT */
/* Private to server.c and call.c: the structures behind kdp__server/kdp__call. */
#ifndef KDP_SERVER_INT_H
#define KDP_SERVER_INT_H

#include <stdbool.h>

#include "base/list.h"
#include "grpc/conn.h"
#include "grpc/server.h"
#include "grpc/wire.h"

#define KDP__CALL_PATH_MAX      256
#define KDP__CALL_AUTHORITY_MAX 256

typedef struct kdp__outmsg {
    struct kdp__outmsg *next;
    size_t len; /* framed length: 5-byte prefix + body */
    size_t off; /* bytes already handed to nghttp2 */
    uint8_t data[];
} kdp__outmsg;

typedef struct kdp__sconn kdp__sconn;

struct kdp__call {
    kdp__sconn *sc;
    kdp__link link; /* in sc->calls */
    int32_t stream_id;
    const kdp__method *method; /* set once the headers validated */

    /* request headers */
    char path[KDP__CALL_PATH_MAX];
    char authority[KDP__CALL_AUTHORITY_MAX];
    bool path_too_long;
    bool is_post;
    bool content_type_ok;
    bool encoding_ok;
    bool timeout_bad;
    uint64_t timeout_us; /* 0 = none */
    bool has_timeout;

    /* request body */
    kdp__deframer df;
    uint8_t *req;
    size_t req_len;
    unsigned n_msgs;
    size_t held; /* df.cap + req_len, as counted in sc->held and srv->held */

    /* response */
    uint64_t deadline;
    kdp__timer *deadline_timer;
    kdp__outmsg *q_head, *q_tail;
    size_t q_bytes;
    bool responded;  /* response HEADERS submitted with a data provider */
    bool finished;   /* final status decided; trailers queued or sent */
    bool deferred;   /* the data provider is waiting for more */
    bool user_owned; /* handler got the handle and has not finished it */
    bool rst_sent;
    int status;
    char *message; /* percent-encoded, or NULL */
    kdp__cancel_fn cancel_cb;
    void *cancel_ud;
};

struct kdp__sconn {
    kdp__server *srv;
    kdp__link link; /* in srv->conns */
    kdp__conn *conn;
    kdp__link calls; /* its open calls, newest first */
    size_t held;     /* request bytes its calls hold (max_conn_buffered) */
    size_t unsent;   /* what its calls waiting on the peer hold (max_conn_unsent) */
    bool warned;     /* the unsent bound was logged for it */
    bool dropping;   /* being closed for max_unsent */
};

struct kdp__server {
    kdp__loop *loop;
    kdp__method *methods;
    size_t n_methods;
    kdp__server_config cfg;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;

    int listen_fd;
    kdp__io *listen_io;
    kdp__timer *accept_timer; /* accepting paused after EMFILE and the like */
    char *path;
    ino_t ino;

    kdp__link conns; /* its connections, newest first */
    kdp__server_stats stats;
    size_t held;   /* request bytes every call holds (max_buffered) */
    size_t unsent; /* what every call waiting on its peer holds (max_unsent) */
    bool unsent_warned;

    bool shutting_down;
    kdp__timer *done_timer;
    kdp__server_done_fn done;
    void *done_ud;
};

/* call.c */
kdp__call *kdp__call_new(kdp__sconn *sc, int32_t stream_id, size_t max_recv);
void kdp__call_free(kdp__call *call);
/* Ends the call from the server's side (deadline, bad request, shutdown):
 * the final status goes out, and the handler, if it holds the handle, gets
 * its cancel callback with that status. */
void kdp__call_abort(kdp__call *call, int status, const char *message);
/* The stream closed or the connection died: the handler (if it holds the
 * handle) is told, the call is counted as cancelled if it was not finished. */
void kdp__call_closed(kdp__call *call);
int kdp__call_start_deadline(kdp__call *call);
/* Rejects a request before any handler ran, with an HTTP status other than
 * 200 if need be (e.g. 415 for a content-type that is not gRPC). */
int kdp__call_reject_http(kdp__call *call, int http_status, int status, const char *message);

/* recv.c: takes call out of its connection's list, the buffered-bytes
 * counts and the active calls. */
void kdp__call_unlink(kdp__call *call);
/* recv.c: s->cbs and s->opt, the session callbacks of every connection.
 * Returns 0 or -ENOMEM. */
int kdp__server_make_callbacks(kdp__server *s);

#endif
