/* SPDX-License-Identifier: MIT */
/*
 * httpc: an HTTP(S) client on kdp's loop, for the Kubernetes API server.
 * libcurl's multi-socket API: one curl multi handle per client, its sockets
 * watched with kdp__io, its timeout one kdp__timer (disarmed when curl has
 * nothing to wait for, so an idle client makes no wakeups). No thread.
 * HTTP/2 when the server offers it over TLS (curl decides), else HTTP/1.1.
 *
 * Threading: loop thread only. Callbacks run on the loop thread, never from
 * inside kdp__httpc_start() or kdp__httpc_client_free().
 */
#ifndef KDP_K8S_HTTPC_H
#define KDP_K8S_HTTPC_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/loop.h"

/* Calls in flight per client; kdp__httpc_start() answers -EAGAIN past it. */
#define KDP__HTTPC_MAX_CALLS 64
/* Default bound on a response body, and on one line of a stream. */
#define KDP__HTTPC_MAX_BODY (16u << 20)
/* Default connect timeout. */
#define KDP__HTTPC_CONNECT_TIMEOUT_MS 10000u

typedef struct kdp__httpc_client kdp__httpc_client;
typedef struct kdp__httpc_call kdp__httpc_call;

/*
 * The end of a call, exactly once unless it was cancelled.
 * status: 0 when an HTTP response arrived complete (whatever its code), else
 * -errno: -ECONNREFUSED, -ETIMEDOUT (connect or total timeout), -EPERM (the
 * server's certificate failed verification), -EPROTO (TLS handshake or
 * protocol failure; a stream that ended inside a line), -ECONNRESET (the
 * connection broke mid-response), -EMSGSIZE (body or line over its bound),
 * -EINVAL (bad URL, unreadable certificate or key), -EHOSTUNREACH (name not
 * resolved), -ENOMEM, -EIO (anything else).
 * http_code: the response's status code (0 if none arrived).
 * body, len: the response body when status is 0 (NUL-terminated; NULL/0 if
 * empty or on failure); in
 * streaming mode the body of a non-2xx response only, since a 2xx one went
 * out as lines. Valid during the call only.
 * error: NULL when status is 0, else a message for a log line (curl's, e.g.
 * "certificate verify failed: SSL certificate problem: ...").
 * call is already out of the client (cancelling it does nothing) and is
 * freed when done returns.
 */
typedef void (*kdp__httpc_done_cb)(kdp__httpc_call *call, int status, long http_code,
                                   const char *body, size_t len, const char *error, void *ud);
/* Streaming mode: one complete line of a 2xx response (without '\n'; not
 * NUL-terminated; valid during the call only). It may cancel the call. */
typedef void (*kdp__httpc_line_cb)(kdp__httpc_call *call, const char *line, size_t len, void *ud);

typedef struct kdp__httpc_request {
    const char *method; /* NULL = "GET" */
    const char *url;    /* http:// or https:// */
    /* NULL-terminated "Name: value" lines, or NULL */
    const char *const *headers;
    const char *bearer_token; /* sent as "Authorization: Bearer ..."; NULL = none */
    const char *body;         /* copied; NULL = none */
    size_t body_len;
    const char *content_type; /* of the body, e.g. "application/json" */
    /* TLS: the server's certificate is always verified (against ca_file, or
     * the system's CAs when NULL), and its name too. */
    const char *ca_file;
    const char *cert_file; /* client certificate (PEM); with key_file */
    const char *key_file;
    /* The same as PEM data in memory (a kubeconfig's *-data), used instead
     * of the file when non-NULL (copied by curl). */
    const char *ca_pem;
    size_t ca_pem_len;
    const char *cert_pem;
    size_t cert_pem_len;
    /* The private key: NOT copied (curl keeps a pointer to it: it must
     * live as long as the call; kdp's is the kubeconfig's, which outlives
     * the API client's calls and is wiped when freed). */
    const char *key_pem;
    size_t key_pem_len;
    uint32_t connect_timeout_ms; /* 0 = KDP__HTTPC_CONNECT_TIMEOUT_MS */
    uint32_t timeout_ms;         /* the whole call; 0 = none (watches) */
    size_t max_body;             /* body bound, or line bound when streaming; 0 = default */
    kdp__httpc_line_cb on_line;  /* non-NULL: streaming mode */
} kdp__httpc_request;

/* A client on loop l. Returns 0 or -errno (-ENOMEM, -EIO when libcurl does
 * not initialize); *ret untouched on failure. */
int kdp__httpc_client_new(kdp__loop *l, kdp__httpc_client **ret);
/* Cancels every call (their callbacks are not called) and frees. NULL is
 * fine. Not from inside one of its callbacks. */
void kdp__httpc_client_free(kdp__httpc_client *c);

/* Starts a call: done(…, ud) runs later, exactly once, unless cancelled.
 * Every string of req is copied. *ret (if ret is non-NULL) names the call
 * until done runs or it is cancelled. Returns 0, -EINVAL (no URL, a header
 * with a newline), -EAGAIN (KDP__HTTPC_MAX_CALLS in flight), -EBUSY (from a
 * line callback: curl takes no new transfer there; done callbacks may start
 * calls) or -ENOMEM. */
int kdp__httpc_start(kdp__httpc_client *c, const kdp__httpc_request *req, kdp__httpc_done_cb done,
                     void *ud, kdp__httpc_call **ret);
/* Cancels a call in flight: done is not called, and call is invalid after
 * this. Safe from any line callback (the call's own too); from its own done
 * callback it does nothing. NULL is fine. */
void kdp__httpc_cancel(kdp__httpc_call *call);

/* Calls in flight. */
size_t kdp__httpc_active(const kdp__httpc_client *c);
/* Sockets watched on the loop now (0 when idle). */
size_t kdp__httpc_watched(const kdp__httpc_client *c);

#endif
