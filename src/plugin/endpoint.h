/* SPDX-License-Identifier: MIT */
/*
 * endpoint: the plugin's socket and the gRPC server on it, serving the
 * methods of every service the lifecycle was given (v1beta1 DevicePlugin
 * today; a registration or DRA service tomorrow).
 */
#ifndef KDP_ENDPOINT_H
#define KDP_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "grpc/server.h"
#include "plugin/svc.h"
#include "runtime/loop.h"

/* Serves the methods of svcs[0..n_svcs) on socket_path: a stale socket there
 * (from a crashed run of ours: the caller holds the lock) is removed first;
 * anything else in its place is refused (-EEXIST, logged with resource).
 * When the socket file vanishes between bind() and stat() (a restarting
 * kubelet cleaning the directory) it binds again at once, three times at
 * most. Returns 0 with *ret listening, or -errno. */
int kdp__endpoint_open(kdp__loop *loop, const char *resource, const char *socket_path,
                       kdp__svc *const *svcs, size_t n_svcs, kdp__server **ret);

/* socket_path is still there and still the socket server listens on (false
 * for a NULL server). */
bool kdp__endpoint_intact(const kdp__server *server, const char *socket_path);

#endif
