/* SPDX-License-Identifier: MIT */
/*
 * dra_http: an HTTPS server on kdp's loop for `kdpctl dra apiserver`:
 * libmicrohttpd in external-epoll mode (no thread), TLS with a key and
 * certificate held in memory, request bodies (bounded) and streamed
 * responses (chunked; the connection suspended while nothing is queued and
 * resumed when something is).
 */
#ifndef KDPCTL_DRA_HTTP_H
#define KDPCTL_DRA_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/loop.h"

#define KD_HTTP_MAX_BODY  ((size_t)4 << 20) /* one request body */
#define KD_HTTP_MAX_QUEUE ((size_t)8 << 20) /* one stream's unsent bytes */
#define KD_HTTP_MAX_CONNS 128U
#define KD_HTTP_TIMEOUT_S 120U /* an idle connection */

typedef struct kd_http kd_http;
typedef struct kd_hreq kd_hreq;

/* A whole request (body included) has arrived: the handler answers it with
 * kd_http_reply or kd_http_stream before it returns. */
typedef void (*kd_http_fn)(kd_hreq *r, void *ud);
/* A stream's connection has ended (the client went, or the server stops). */
typedef void (*kd_http_close_fn)(kd_hreq *r, void *ud);

/* Listens on host:port (IPv4 or IPv6 literal, or "localhost"; port 0 = any)
 * with TLS (cert_pem, key_pem: copied). Returns 0 or -errno (-EIO: the TLS
 * setup failed, e.g. libmicrohttpd built without TLS). */
int kd_http_new(kdp__loop *l, const char *host, const char *port, const char *cert_pem,
                const char *key_pem, kd_http_fn fn, void *ud, kd_http **ret);
/* The bound port. */
unsigned kd_http_port(const kd_http *h);
/* Ends every stream (their close callbacks run) and frees. NULL is fine. */
void kd_http_free(kd_http *h);

const char *kd_http_method(const kd_hreq *r);
const char *kd_http_path(const kd_hreq *r);
/* The status answered (0 = not yet). */
unsigned kd_http_code(const kd_hreq *r);
/* A query argument (decoded) or a header, NULL if absent. */
const char *kd_http_arg(const kd_hreq *r, const char *name);
const char *kd_http_header(const kd_hreq *r, const char *name);
/* The body (NUL-terminated; "" if none). *too_big: over KD_HTTP_MAX_BODY. */
const char *kd_http_body(const kd_hreq *r, size_t *len, bool *too_big);
/* Answers with a whole body (copied). extra_header "Name: value" or NULL. */
void kd_http_reply(kd_hreq *r, unsigned code, const char *content_type, const char *body,
                   size_t len, const char *extra_header);
/* Starts a chunked response; writes go out as kd_http_write queues them.
 * close runs once when the connection ends. Returns 0 or -ENOMEM. */
int kd_http_stream(kd_hreq *r, const char *content_type, kd_http_close_fn close, void *ud);
/* Queues bytes on a stream. Returns 0, -ENOBUFS (over KD_HTTP_MAX_QUEUE:
 * the stream is ended) or -EPIPE (ended). */
int kd_http_write(kd_hreq *r, const char *data, size_t len);
/* Ends a stream once what is queued has gone. */
void kd_http_end(kd_hreq *r);
/* Ends the streams whose client has gone while nothing was queued for it
 * (libmicrohttpd does not watch a suspended connection). Returns how many. */
size_t kd_http_reap(kd_http *h);

#endif
