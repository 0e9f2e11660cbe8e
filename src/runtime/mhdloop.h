/* SPDX-License-Identifier: MIT */
/*
 * mhdloop: a libmicrohttpd daemon in external epoll mode (MHD_USE_EPOLL)
 * driven by kdp's loop, with no thread of its own: the daemon's epoll fd
 * watched, MHD_run when it is readable and when the daemon's timeout comes,
 * the timer armed again from MHD_get_timeout after each run. The one
 * adapter of the metrics endpoint (runtime/http, which dlopen()s
 * libmicrohttpd) and kdpctl dra apiserver (which links it): libmicrohttpd
 * is called through the two functions given, so this module uses no MHD
 * symbol.
 *
 * Loop thread.
 */
#ifndef KDP_RUNTIME_MHDLOOP_H
#define KDP_RUNTIME_MHDLOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/loop.h"

typedef struct kdp__mhdloop_fns {
    /* MHD_run(daemon). */
    void (*run)(void *daemon);
    /* MHD_get_timeout(daemon): true and *ret_ms, or false (no timeout). */
    bool (*timeout)(void *daemon, uint64_t *ret_ms);
} kdp__mhdloop_fns;

typedef struct kdp__mhdloop {
    void *daemon; /* the caller's (started and stopped by it) */
    kdp__mhdloop_fns fns;
    kdp__io *io;
    kdp__timer *timer;
} kdp__mhdloop;

/* Drives daemon (its MHD_DAEMON_INFO_EPOLL_FD is epoll_fd) from the loop.
 * Returns 0 or -errno (m is then as after kdp__mhdloop_stop). */
int kdp__mhdloop_start(kdp__mhdloop *m, kdp__loop *l, void *daemon, int epoll_fd,
                       const kdp__mhdloop_fns *fns);
/* MHD_run now (a connection added), the timer armed again. */
void kdp__mhdloop_run(kdp__mhdloop *m);
/* MHD_run soon, from the loop (a connection resumed). */
void kdp__mhdloop_poke(kdp__mhdloop *m);
/* No more runs from the loop (before the caller stops the daemon). NULL
 * members are fine: idempotent. */
void kdp__mhdloop_stop(kdp__mhdloop *m);

#endif
