/* SPDX-License-Identifier: MIT */
/*
 * server: a gRPC server on a unix socket, on top of conn.
 *
 * A method table maps paths ("/pkg.Service/Method") to unary or
 * server-streaming handlers. Requests are validated by us (nghttp2's HTTP
 * messaging checks are off, so any :authority, a socket path included, is
 * accepted): :method POST, a known :path (else UNIMPLEMENTED), content-type
 * application/grpc[+proto|;...] (else HTTP 415), no compressed messages
 * (UNIMPLEMENTED), the receive limit (RESOURCE_EXHAUSTED), grpc-timeout
 * (enforced: DEADLINE_EXCEEDED). Everything runs on the loop thread.
 *
 * A call handle is valid from the handler's start until the call is finished
 * (kdp__call_finish / kdp__call_reply) or until its cancel callback has run
 * (client cancel, connection loss, deadline, server shutdown), whichever comes
 * first. A handler that keeps the handle past its return MUST set a cancel
 * callback and drop the handle there.
 */
#ifndef KDP_SERVER_H
#define KDP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "runtime/loop.h"

typedef struct kdp__server kdp__server;
typedef struct kdp__call kdp__call;

typedef enum kdp__method_kind {
    KDP__UNARY = 0,
    KDP__SERVER_STREAMING = 1,
} kdp__method_kind;

/* Runs once the whole request (exactly one message) has arrived. req is valid
 * only during the call. */
typedef void (*kdp__handler_fn)(kdp__call *call, const uint8_t *req, size_t len, void *ud);
/* The call is over without the handler having finished it. status says why
 * (CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE). The handle is invalid after. */
typedef void (*kdp__cancel_fn)(kdp__call *call, int status, void *ud);

typedef struct kdp__method {
    const char *path; /* borrowed: must outlive the server */
    kdp__method_kind kind;
    kdp__handler_fn handler;
    void *ud;
    /* May be NULL: runs once per call of this method when its final status
     * is decided (finished by the handler, or ended by a cancel, a deadline
     * or the server's shutdown: CANCELLED when the client went away), with
     * the same ud. For counting outcomes; it must not touch the call. */
    void (*ended)(int status, void *ud);
} kdp__method;

/* What a call waiting on its peer costs beside its response bytes: the
 * call and the HTTP/2 stream (counted in max_conn_unsent, max_unsent). */
#define KDP__CALL_COST 2048U

typedef struct kdp__server_config {
    size_t max_recv_message;  /* 0 = 16 MiB */
    uint32_t max_streams;     /* concurrent streams per connection; 0 = 1000 */
    uint32_t max_connections; /* 0 = 1024; more are closed at accept */
    /* Bytes of unfinished requests (a message being assembled, or complete
     * but not yet ended by END_STREAM) held for one connection, and for the
     * whole server. Past the first, the call whose data crossed it ends with
     * RESOURCE_EXHAUSTED; past the second, the calls holding the most do.
     * Their bytes are dropped. 0 = 2 and 4 times max_recv_message. */
    size_t max_conn_buffered;
    size_t max_buffered;
    /* Bytes of responses queued and not yet taken by the peer (which reads
     * nothing, or slowly), each such call's own memory counted too
     * (KDP__CALL_COST), for one connection, and for the whole server.
     * A message past the first is refused (the send returns -ENOBUFS)
     * and its stream reset (ENHANCE_YOUR_CALM); past the second, the
     * connection holding the most is closed (or, if it is the sender's,
     * the stream reset). 0 = 2 and 4 times max_recv_message. */
    size_t max_conn_unsent;
    size_t max_unsent;
} kdp__server_config;

typedef struct kdp__server_stats {
    uint64_t active_calls;    /* begun and not yet closed */
    uint64_t connections;     /* open now */
    uint64_t calls_total;     /* ever begun */
    uint64_t calls_cancelled; /* ended by cancel, connection loss or shutdown */
    uint64_t unsent_resets;   /* streams reset for max_conn_unsent / max_unsent */
    uint64_t unsent_closes;   /* connections closed for max_unsent */
} kdp__server_stats;

typedef void (*kdp__server_done_fn)(kdp__server *s, void *ud);

/* The method table is copied (paths are borrowed). cfg may be NULL.
 * Returns 0 or -errno. */
int kdp__server_new(kdp__loop *l, const kdp__method *methods, size_t n_methods,
                    const kdp__server_config *cfg, kdp__server **ret);
/* Binds path (owner-only permissions) and starts accepting. -EADDRINUSE if
 * path exists. Returns 0 or -errno. */
int kdp__server_listen(kdp__server *s, const char *path);
/* Serves one already connected stream socket (e.g. from socket activation,
 * or one end of a socketpair in tests). Takes fd in every case: closed on
 * failure. Returns 0 or -errno (-EMFILE over max_connections). */
int kdp__server_adopt(kdp__server *s, int fd);
/* Stops accepting and removes the socket file (only if it is still ours),
 * finishes open calls with UNAVAILABLE (their cancel callbacks run), sends
 * GOAWAY on every connection and closes them once flushed, within linger_us.
 * done (may be NULL) runs on the loop once every connection is closed. */
void kdp__server_shutdown(kdp__server *s, uint64_t linger_us, kdp__server_done_fn done, void *ud);
/* Closes everything at once; cancel callbacks of open calls run first. Removes
 * the socket file if it is still ours. NULL is fine. */
void kdp__server_free(kdp__server *s);
void kdp__server_stats_get(const kdp__server *s, kdp__server_stats *ret);
/* The socket's inode, or 0 when not listening (lets the owner notice its
 * socket being deleted or replaced). */
ino_t kdp__server_socket_ino(const kdp__server *s);

void kdp__call_set_cancel(kdp__call *call, kdp__cancel_fn cb, void *ud);
const char *kdp__call_path(const kdp__call *call);
/* The :authority the client sent ("" if none). */
const char *kdp__call_authority(const kdp__call *call);
/* Absolute kdp__now_us() deadline from grpc-timeout, or 0 if none. */
uint64_t kdp__call_deadline(const kdp__call *call);

/* Queues one response message (framed here). Server-streaming calls may send
 * any number, at any later time; unary calls exactly one before finishing.
 * Returns 0 or -errno (-EALREADY after finish, -ENOMEM, -EMSGSIZE over 4 GiB). */
int kdp__call_send(kdp__call *call, const uint8_t *msg, size_t len);
/* Like kdp__call_send, for streams where each message replaces the ones
 * before (ListAndWatch): queued messages not started yet are dropped first,
 * so the queue of a client that does not read stays bounded. */
int kdp__call_send_latest(kdp__call *call, const uint8_t *msg, size_t len);
/* Packs pb straight into the send queue (no intermediate copy). */
int kdp__call_send_pb(kdp__call *call, const ProtobufCMessage *pb);
/* Ends the call with status and message (may be NULL; percent-encoded here).
 * The handle is invalid after this. Returns 0 or -errno. */
int kdp__call_finish(kdp__call *call, int status, const char *message);
/* kdp__call_send_pb + kdp__call_finish(OK), in one write to the socket. */
int kdp__call_reply_pb(kdp__call *call, const ProtobufCMessage *m);
/* kdp__call_send + kdp__call_finish(OK), in one write to the socket (HEADERS,
 * DATA and trailers together). If the message cannot be queued, the call
 * ends with RESOURCE_EXHAUSTED instead and the error is returned. */
int kdp__call_reply(kdp__call *call, const uint8_t *msg, size_t len);

#endif
