/* SPDX-License-Identifier: MIT */
/*
 * rpc: one call to a plugin from a command line tool: a private loop run
 * until kdp's client (src/grpc/client.h) completes, and the failure explained
 * with its gRPC status and, where we know one, the fix.
 */
#ifndef KDPCTL_RPC_H
#define KDPCTL_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "kdpctl.h"
#include "runtime/loop.h"

#define KC_METHOD_OPTIONS        "/v1beta1.DevicePlugin/GetDevicePluginOptions"
#define KC_METHOD_LIST_AND_WATCH "/v1beta1.DevicePlugin/ListAndWatch"
#define KC_METHOD_PREFERRED      "/v1beta1.DevicePlugin/GetPreferredAllocation"
#define KC_METHOD_ALLOCATE       "/v1beta1.DevicePlugin/Allocate"
#define KC_METHOD_PRESTART       "/v1beta1.DevicePlugin/PreStartContainer"
#define KC_METHOD_REGISTER       "/v1beta1.Registration/Register"

/* The kubelet's grpc-go receive limit on one message. */
#define KC_KUBELET_MAX_RECV KDP_MAX_LIST_MESSAGE

typedef struct kc_reply {
    int status;    /* gRPC code */
    char *message; /* malloc'ed, never NULL after kc_unary succeeded */
    uint8_t *resp; /* the response message when status is OK */
    size_t len;
    uint64_t done_us; /* kdp__now_us() when the answer came */
} kc_reply;

/* What kdpctl saw of one call besides its answer, to explain a failure:
 * how long it ran against kdpctl's own bound, and the socket as it was when
 * the call began. */
typedef struct kc_call {
    const char *path;    /* borrowed */
    uint64_t timeout_us; /* kdpctl's own bound (also sent as grpc-timeout); 0 = none */
    uint64_t start_us;   /* kdp__now_us() before connecting */
    uint64_t elapsed_us; /* from start_us to the answer: set by the caller */
    bool existed;        /* path was there when the call began */
    dev_t dev;           /* and which file it was */
    ino_t ino;
} kc_call;

/* Notes the start of a call to the socket at path (borrowed) with kdpctl's
 * own bound timeout_us (0 = none). */
void kc_call_begin(kc_call *c, const char *path, uint64_t timeout_us);

/* Calls method on the socket at path with req and waits for the answer,
 * bounded by timeout_us (also sent as grpc-timeout). Returns 0 with *ret
 * filled (whatever the status), or -errno for a local failure. */
int kc_unary(const char *path, const char *method, const ProtobufCMessage *req, uint64_t timeout_us,
             kc_reply *ret);
void kc_reply_free(kc_reply *r);

/* Runs dispatches until no zero-delay timer is due: the deferred frees of
 * cancelled calls happen before the loop is freed. */
void kc_loop_drain(kdp__loop *l);

/* kc_unary with o's timeout (default 10 s) on the socket at path, which
 * also reports any failure. Returns KC_EXIT_OK with *ret holding an OK
 * reply, or the exit status (*ret untouched). */
int kc_call_plugin(const kc_opts *o, const char *path, const char *method,
                   const ProtobufCMessage *req, kc_reply *ret);
/* Reports an answer that does not decode as `what`; returns KC_EXIT_FAIL. */
int kc_fail_decode(const kc_opts *o, const char *what);

/* Reports a failed call c of command o->cmd (status, message and a hint
 * saying what happened) and returns KC_EXIT_FAIL. message is the client's
 * (the plugin's grpc-message or the client's own explanation); shown, if
 * not NULL, is printed instead of it. */
int kc_fail_call(const kc_opts *o, const kc_call *c, int status, const char *message,
                 const char *shown);
/* Reports a local failure (errno) and returns KC_EXIT_FAIL. */
int kc_fail_errno(const kc_opts *o, const char *what, int neg_errno);

/* A hint for a socket that cannot be used (missing, its directory missing,
 * not a socket, not ours, nobody listening, a full listen queue), in buf;
 * NULL if connecting works. Never blocks. */
const char *kc_socket_hint(const char *path, char *buf, size_t cap);

#endif
