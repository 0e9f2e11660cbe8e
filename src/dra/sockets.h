/* SPDX-License-Identifier: MIT */
/*
 * sockets: the DRA driver's two sockets. The service socket
 * (<root>/plugins/<driver>/dra[-<instance>].sock) serves the methods it is
 * given (the DRAPlugin services and the health stream); the registration
 * socket (<root>/plugins_registry/<driver>[-<instance>]-reg.sock) serves
 * pluginregistration.Registration through plugin/reg_watcher (GetInfo:
 * "DRAPlugin", the driver, the service socket's absolute path, the
 * versions). The service socket is made first, so that the kubelet finds
 * it when it acts on GetInfo. A socket that cannot be served is tried again
 * with backoff (200 ms .. 30 s); a refusal is logged by reg_watcher and
 * answered by re-creating the registration socket (the kubelet asks again
 * only for a new socket). Both are made when serving begins and removed
 * when it ends; a stale socket of ours (these names: this driver and
 * instance) is removed first, another instance's never touched, nor one a
 * live process serves.
 *
 * Knows nothing of the device-plugin side: a missing device-plugin
 * directory or kubelet.sock never holds it back. Loop thread.
 */
#ifndef KDP_DRA_SOCKETS_H
#define KDP_DRA_SOCKETS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/backoff.h"
#include "grpc/server.h"
#include "plugin/reg_watcher.h"
#include "runtime/loop.h"

#define KDP__DRA_SOCKETS_MAX_METHODS 12

typedef struct kdp__dra_sockets_cfg {
    const char *driver;   /* borrowed, as every string here */
    const char *reg_path; /* the registration socket */
    const char *svc_path; /* the service socket */
    const char *const *versions;
    size_t n_versions;
    const kdp__method *methods; /* copied */
    size_t n_methods;
    /* Where the registration stands (REGISTERED, WAITING ...), with why. */
    void (*state)(void *ud, kdp__reg_state s, const char *why);
    void *ud;
} kdp__dra_sockets_cfg;

typedef struct kdp__dra_sockets {
    kdp__loop *loop;
    kdp__dra_sockets_cfg cfg;
    kdp__method methods[KDP__DRA_SOCKETS_MAX_METHODS];
    bool serving;
    bool registered;
    kdp__reg_watcher reg;
    kdp__server *reg_server;
    kdp__server *svc_server;
    kdp__timer *reopen; /* re-create the registration socket */
    kdp__timer *retry;  /* serving could not begin: again */
    kdp__backoff retry_backoff;
    const char *failed_path; /* the socket that could not be served */
} kdp__dra_sockets;

/* Returns 0, -E2BIG (too many methods), -ENOMEM. */
int kdp__dra_sockets_init(kdp__dra_sockets *s, kdp__loop *l, const kdp__dra_sockets_cfg *cfg);
/* Closes the sockets (their calls end). */
void kdp__dra_sockets_done(kdp__dra_sockets *s);
/* Serving begins (the sockets made, registration waited for) or ends. */
void kdp__dra_sockets_serving(kdp__dra_sockets *s, bool on);

#endif
