/* SPDX-License-Identifier: MIT */
/* mhdloop: a libmicrohttpd daemon driven by kdp's loop (see mhdloop.h). */
#include "runtime/mhdloop.h"

#include <string.h>
#include <sys/epoll.h>

static void rearm(kdp__mhdloop *m)
{
    uint64_t ms = 0;
    if (m->fns.timeout(m->daemon, &ms)) {
        kdp__timer_start(m->timer, ms > UINT64_MAX / 1000U ? UINT64_MAX : ms * 1000U);
    } else {
        kdp__timer_stop(m->timer);
    }
}

void kdp__mhdloop_run(kdp__mhdloop *m)
{
    m->fns.run(m->daemon);
    rearm(m);
}

static void on_io(kdp__io *io, uint32_t events, void *ud)
{
    (void)io;
    (void)events;
    kdp__mhdloop_run(ud);
}

static void on_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__mhdloop_run(ud);
}

int kdp__mhdloop_start(kdp__mhdloop *m, kdp__loop *l, void *daemon, int epoll_fd,
                       const kdp__mhdloop_fns *fns)
{
    memset(m, 0, sizeof(*m));
    m->daemon = daemon;
    m->fns = *fns;
    int r = kdp__io_add(l, epoll_fd, EPOLLIN, on_io, m, &m->io);
    if (r == 0) {
        r = kdp__timer_new(l, on_timer, m, &m->timer);
    }
    if (r < 0) {
        kdp__mhdloop_stop(m);
        return r;
    }
    rearm(m);
    return 0;
}

void kdp__mhdloop_poke(kdp__mhdloop *m)
{
    if (m->timer) {
        kdp__timer_start(m->timer, 0);
    }
}

void kdp__mhdloop_stop(kdp__mhdloop *m)
{
    kdp__io_del(m->io);
    kdp__timer_free(m->timer);
    m->io = NULL;
    m->timer = NULL;
}
