/* SPDX-License-Identifier: MIT */
#include "grpc/conn.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"

/* Gather at most this much before a send(): one syscall for many frames,
 * while a large message is still streamed rather than copied whole. */
#define OUT_GATHER   ((size_t)64 * 1024)
#define READ_CHUNK   (16U * 1024U)
#define READS_PER_IO 16

struct kdp__conn {
    kdp__loop *loop;
    int fd;
    kdp__io *io;
    kdp__timer *timer; /* linger bound, then deferred close notification */
    nghttp2_session *session;
    kdp__conn_closed_fn closed;
    void *ud;

    uint8_t *out;
    size_t out_len; /* bytes in out */
    size_t out_off; /* bytes of out already sent */
    size_t out_cap;
    uint32_t events;

    unsigned busy;   /* nghttp2 is running our callbacks, or the owner holds us */
    bool want_flush; /* a flush was asked for meanwhile */
    bool closing;    /* GOAWAY sent: close once drained */
    bool dead;       /* closed callback scheduled */
    int dead_err;
};

static void mark_dead(kdp__conn *c, int err)
{
    if (c->dead) {
        return;
    }
    c->dead = true;
    c->dead_err = err;
    (void)kdp__io_modify(c->io, 0);
    kdp__timer_start(c->timer, 0);
}

static void set_events(kdp__conn *c, uint32_t events)
{
    if (c->dead || c->events == events) {
        return;
    }
    if (kdp__io_modify(c->io, events) < 0) {
        mark_dead(c, -EIO);
        return;
    }
    c->events = events;
}

static int out_reserve(kdp__conn *c, size_t extra)
{
    if (c->out_len + extra <= c->out_cap) {
        return 0;
    }
    size_t cap = c->out_cap ? c->out_cap : OUT_GATHER;
    while (cap < c->out_len + extra) {
        cap *= 2;
    }
    uint8_t *p = realloc(c->out, cap);
    if (!p) {
        return -ENOMEM;
    }
    c->out = p;
    c->out_cap = cap;
    return 0;
}

/* Sends the unsent tail. Returns 1 if everything went, 0 if the kernel is
 * full (EPOLLOUT armed), or -errno. */
static int send_tail(kdp__conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_events(c, EPOLLIN | EPOLLOUT);
                return 0;
            }
            return -errno;
        }
        c->out_off += (size_t)n;
    }
    c->out_off = 0;
    c->out_len = 0;
    return 1;
}

/* Moves frames from nghttp2 into the out buffer, up to OUT_GATHER. */
static int gather(kdp__conn *c)
{
    while (c->out_len < OUT_GATHER) {
        const uint8_t *data = NULL;
        c->busy++;
        ssize_t n = nghttp2_session_mem_send(c->session, &data);
        c->busy--;
        if (n < 0) {
            log_debug("nghttp2_session_mem_send: %s", nghttp2_strerror((int)n));
            return -EPROTO;
        }
        if (n == 0) {
            break;
        }
        if (out_reserve(c, (size_t)n) < 0) {
            return -ENOMEM;
        }
        memcpy(c->out + c->out_len, data, (size_t)n);
        c->out_len += (size_t)n;
    }
    return 0;
}

static void do_flush(kdp__conn *c)
{
    c->want_flush = false;
    for (;;) {
        int r = send_tail(c);
        if (r < 0) {
            mark_dead(c, r);
            return;
        }
        if (r == 0) {
            return; /* EPOLLOUT will call us again */
        }
        r = gather(c);
        if (r < 0) {
            mark_dead(c, r);
            return;
        }
        if (c->out_len == 0) {
            break;
        }
    }
    set_events(c, EPOLLIN);
    bool wr = nghttp2_session_want_write(c->session);
    bool rd = nghttp2_session_want_read(c->session);
    if ((!wr && !rd) || (c->closing && !wr)) {
        mark_dead(c, 0);
    }
}

void kdp__conn_flush(kdp__conn *c)
{
    if (c->dead) {
        return;
    }
    if (c->busy) {
        c->want_flush = true;
        return;
    }
    do_flush(c);
}

void kdp__conn_hold(kdp__conn *c)
{
    c->busy++;
}

void kdp__conn_release(kdp__conn *c)
{
    assert(c->busy > 0);
    if (--c->busy == 0 && c->want_flush) {
        kdp__conn_flush(c);
    }
}

static int do_read(kdp__conn *c)
{
    uint8_t buf[READ_CHUNK];
    for (int i = 0; i < READS_PER_IO; i++) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 0;
            }
            return -errno;
        }
        if (n == 0) {
            return -ECONNRESET; /* peer closed: every open stream is gone */
        }
        c->busy++;
        ssize_t used = nghttp2_session_mem_recv(c->session, buf, (size_t)n);
        c->busy--;
        if (used < 0) {
            log_debug("nghttp2_session_mem_recv: %s", nghttp2_strerror((int)used));
            /* nghttp2 may have queued a GOAWAY explaining why: try to send it. */
            do_flush(c);
            return -EPROTO;
        }
        if ((size_t)n < sizeof(buf)) {
            return 0;
        }
    }
    return 0;
}

static void on_io(kdp__io *io, uint32_t events, void *ud)
{
    (void)io;
    kdp__conn *c = ud;
    if (c->dead) {
        return;
    }
    if (events & EPOLLOUT) {
        do_flush(c);
    }
    if (!c->dead && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
        int r = do_read(c);
        if (r < 0) {
            mark_dead(c, r == -ECONNRESET && c->closing ? 0 : r);
            return;
        }
        do_flush(c);
    }
}

static void on_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__conn *c = ud;
    if (!c->dead) {
        /* the linger bound of terminate() ran out */
        mark_dead(c, -ETIMEDOUT);
        return;
    }
    c->closed(c, c->dead_err, c->ud); /* may free c */
}

int kdp__conn_new(kdp__loop *l, int fd, nghttp2_session *session, kdp__conn_closed_fn closed,
                  void *ud, kdp__conn **ret)
{
    if (!l || fd < 0 || !session || !closed || !ret) {
        return -EINVAL;
    }
    kdp__conn *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    c->loop = l;
    c->fd = fd;
    c->closed = closed;
    c->ud = ud;
    c->events = EPOLLIN;
    int r = kdp__timer_new(l, on_timer, c, &c->timer);
    if (r < 0) {
        goto fail;
    }
    r = kdp__io_add(l, fd, c->events, on_io, c, &c->io);
    if (r < 0) {
        goto fail;
    }
    c->session = session;
    *ret = c;
    return 0;
fail:
    kdp__timer_free(c->timer);
    free(c);
    return r;
}

nghttp2_session *kdp__conn_session(const kdp__conn *c)
{
    return c->session;
}

size_t kdp__conn_pending_out(const kdp__conn *c)
{
    return c->out_len - c->out_off;
}

void kdp__conn_terminate(kdp__conn *c, uint32_t error_code, uint64_t linger_us)
{
    if (c->dead || c->closing) {
        return;
    }
    c->closing = true;
    int32_t last = nghttp2_session_get_last_proc_stream_id(c->session);
    if (nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE, last, error_code, NULL, 0) != 0) {
        mark_dead(c, -EPROTO);
        return;
    }
    kdp__timer_start(c->timer, linger_us);
    kdp__conn_flush(c);
}

void kdp__conn_free(kdp__conn *c)
{
    if (!c) {
        return;
    }
    kdp__io_del(c->io);
    kdp__timer_free(c->timer);
    if (c->fd >= 0) {
        close(c->fd);
    }
    nghttp2_session_del(c->session);
    free(c->out);
    free(c);
}
