/* SPDX-License-Identifier: MIT */
/*
 * client: asynchronous unary gRPC calls over a unix socket, on the loop.
 *
 * Never blocks: the connect, the request and the response all run on the
 * loop (the kubelet calls our server back before it answers our Register, so
 * a blocking call would deadlock). One connection per call: the calls kdp
 * makes (Register) are rare, and a fresh connection never inherits a dead
 * kubelet's state.
 */
#ifndef KDP_CLIENT_H
#define KDP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "runtime/loop.h"

typedef struct kdp__client_call kdp__client_call;

/* status is a gRPC code. message is the server's grpc-message (decoded) or our
 * own explanation for a local failure ("" if none, never NULL). resp is the
 * response message when status is OK, else NULL. All valid only during the
 * callback. The call is freed when the callback returns. */
typedef void (*kdp__unary_done_fn)(int status, const char *message, const uint8_t *resp, size_t len,
                                   void *ud);

typedef struct kdp__unary_opts {
    const char *authority; /* NULL = "localhost" */
    uint64_t timeout_us;   /* 0 = no deadline; else also sent as grpc-timeout */
    size_t max_recv;       /* response size limit; 0 = 16 MiB */
} kdp__unary_opts;

/* Starts a call of method_path ("/pkg.Service/Method") with one request
 * message (copied). done runs exactly once, later, on the loop thread, unless
 * the call is cancelled first; it never runs from inside this function, even
 * when the socket does not exist. opts may be NULL. *ret (may be NULL) gets a
 * handle valid until done runs. Returns 0 or -errno (-EINVAL, -ENOMEM). */
int kdp__client_unary(kdp__loop *l, const char *socket_path, const char *method_path,
                      const uint8_t *req, size_t len, const kdp__unary_opts *opts,
                      kdp__unary_done_fn done, void *ud, kdp__client_call **ret);
/* The same, packing a protobuf-c message. */
int kdp__client_unary_pb(kdp__loop *l, const char *socket_path, const char *method_path,
                         const ProtobufCMessage *req, const kdp__unary_opts *opts,
                         kdp__unary_done_fn done, void *ud, kdp__client_call **ret);
/* Gets each message of a server-streaming call, on the loop thread, valid
 * only during the call. May cancel the call (kdp__client_call_cancel). */
typedef void (*kdp__stream_msg_fn)(const uint8_t *msg, size_t len, void *ud);

/* A server-streaming call: on_msg runs for each response message as it
 * arrives; done runs once at the end with the final status (resp NULL), unless
 * the call is cancelled. opts->timeout_us bounds the whole call (0 = none),
 * opts->max_recv each message. Returns 0 or -errno. */
int kdp__client_stream(kdp__loop *l, const char *socket_path, const char *method_path,
                       const uint8_t *req, size_t len, const kdp__unary_opts *opts,
                       kdp__stream_msg_fn on_msg, kdp__unary_done_fn done, void *ud,
                       kdp__client_call **ret);
/* Abandons the call: done is not called, the connection is closed (the server
 * sees the stream cancelled). Not from inside done; from inside on_msg is
 * fine. NULL is fine. */
void kdp__client_call_cancel(kdp__client_call *c);

#endif
