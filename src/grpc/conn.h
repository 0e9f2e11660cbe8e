/* SPDX-License-Identifier: MIT */
/*
 * conn: one HTTP/2 connection over a non-blocking socket, either side.
 *
 * The owner (server or client) creates the nghttp2 session with its own
 * callbacks and user data; conn moves bytes between the socket and the
 * session: reads until EAGAIN and feeds nghttp2_session_mem_recv, gathers
 * every frame nghttp2_session_mem_send has into one buffer per send(), keeps
 * the unsent tail and waits for EPOLLOUT. Flushes requested while nghttp2 is
 * running our callbacks are deferred until it returns.
 *
 * When the connection is over (peer EOF, socket error, protocol error, or a
 * terminate() that has been flushed) the owner's closed callback runs once,
 * never from inside an nghttp2 callback; the owner then tears down its
 * streams (nghttp2_session_del calls no on_stream_close) and frees the conn.
 */
#ifndef KDP_CONN_H
#define KDP_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "runtime/loop.h"

typedef struct kdp__conn kdp__conn;

/* err is 0 for an orderly close, else -errno (-ECONNRESET, -EPROTO ...). */
typedef void (*kdp__conn_closed_fn)(kdp__conn *c, int err, void *ud);

/* Takes ownership of fd and session on success (on failure the caller still
 * owns both). Returns 0 or -errno. */
int kdp__conn_new(kdp__loop *l, int fd, nghttp2_session *session, kdp__conn_closed_fn closed,
                  void *ud, kdp__conn **ret);
nghttp2_session *kdp__conn_session(const kdp__conn *c);
/* Sends whatever the session has queued. Safe to call anywhere on the loop
 * thread, inside nghttp2 callbacks included (then deferred). A send error
 * schedules the closed callback; it is never called from here directly. */
void kdp__conn_flush(kdp__conn *c);
/* Defers every flush until the matching release, so the owner can walk its
 * streams while submitting frames without any of them closing (and being
 * freed) under its feet. Holds nest. */
void kdp__conn_hold(kdp__conn *c);
void kdp__conn_release(kdp__conn *c);
/* Sends GOAWAY(error_code) after what is already queued, then closes once
 * everything is flushed and no stream wants to write any more; bounded by
 * linger_us, after which the socket is closed anyway. */
void kdp__conn_terminate(kdp__conn *c, uint32_t error_code, uint64_t linger_us);
/* Closes at once (owner's closed callback is NOT called). Must not be called
 * from inside this conn's nghttp2 callbacks. NULL is fine. */
void kdp__conn_free(kdp__conn *c);
/* Bytes accepted from the session but not yet taken by the kernel. */
size_t kdp__conn_pending_out(const kdp__conn *c);

#endif
