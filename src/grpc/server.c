/* SPDX-License-Identifier: MIT */
/* server: listen, accept, one nghttp2 server session per connection, the
 * caps, shutdown. A request's way in (headers, validation, dispatch to the
 * method table, its body) is recv.c; the response side of a call, call.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "grpc/server_int.h"
#include "runtime/sock.h"

#define DEFAULT_MAX_RECV        ((size_t)16 * 1024 * 1024)
#define DEFAULT_MAX_STREAMS     1000U
#define DEFAULT_MAX_CONNECTIONS 1024U
#define STREAM_WINDOW           (1U << 20)  /* per stream */
#define CONN_WINDOW             (16U << 20) /* per connection */
#define LISTEN_BACKLOG          128
#define ACCEPT_PAUSE_US         ((uint64_t)100 * 1000) /* after accept() ran out of fds */

static void maybe_done(kdp__server *s)
{
    if (s->shutting_down && kdp__list_empty(&s->conns) && s->done) {
        kdp__timer_start(s->done_timer, 0);
    }
}

static void sconn_free(kdp__sconn *sc)
{
    kdp__server *s = sc->srv;
    kdp__link *first;
    while ((first = kdp__list_first(&sc->calls))) {
        kdp__call *call = KDP__CONTAINER_OF(first, kdp__call, link);
        kdp__call_closed(call);
        kdp__call_unlink(call);
        kdp__call_free(call);
    }
    kdp__conn_free(sc->conn);
    kdp__link_remove(&sc->link);
    s->stats.connections--;
    free(sc);
}

static void on_conn_closed(kdp__conn *c, int err, void *ud)
{
    (void)c;
    kdp__sconn *sc = ud;
    kdp__server *s = sc->srv;
    if (err < 0 && err != -ECONNRESET) {
        log_debug("connection closed: %s", strerror(-err));
    }
    sconn_free(sc);
    maybe_done(s);
}

static int session_new(kdp__server *s, kdp__sconn *sc, nghttp2_session **ret)
{
    nghttp2_session *session;
    if (nghttp2_session_server_new2(&session, s->cbs, sc, s->opt) != 0) {
        return -ENOMEM;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->cfg.max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    if (nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
        nghttp2_session_set_local_window_size(session, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0) {
        nghttp2_session_del(session);
        return -ENOMEM;
    }
    *ret = session;
    return 0;
}

int kdp__server_adopt(kdp__server *s, int fd)
{
    if (!s || fd < 0 || s->shutting_down) {
        if (fd >= 0) {
            close(fd); /* ours in every case, as the contract says */
        }
        return -EINVAL;
    }
    if (s->stats.connections >= s->cfg.max_connections) {
        log_warn("refusing a connection: %u connections already open", s->cfg.max_connections);
        close(fd);
        return -EMFILE;
    }
    kdp__sconn *sc = calloc(1, sizeof(*sc));
    nghttp2_session *session = NULL;
    if (sc) {
        kdp__link_init(&sc->link);
        kdp__link_init(&sc->calls);
    }
    if (!sc || session_new(s, sc, &session) < 0 ||
        kdp__conn_new(s->loop, fd, session, on_conn_closed, sc, &sc->conn) < 0) {
        log_warn("refusing a connection: out of memory");
        nghttp2_session_del(session);
        free(sc);
        close(fd);
        return -ENOMEM;
    }
    sc->srv = s;
    kdp__list_insert_after(&s->conns, &sc->link);
    s->stats.connections++;
    kdp__conn_flush(sc->conn); /* our SETTINGS */
    return 0;
}

static void on_accept_resume(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__server *s = ud;
    if (s->listen_io) {
        (void)kdp__io_modify(s->listen_io, EPOLLIN);
    }
}

static bool out_of_resources(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

/* accept() ran out of fds or memory. The connection stays in the backlog and
 * the socket readable: stop watching it for a while rather than spin (and
 * log) at full speed until an fd is free. */
static void pause_accepting(kdp__server *s, int err)
{
    log_warn("accept: %s: not accepting for %u ms", strerror(err),
             (unsigned)(ACCEPT_PAUSE_US / 1000));
    if (kdp__io_modify(s->listen_io, 0) == 0) {
        kdp__timer_start(s->accept_timer, ACCEPT_PAUSE_US);
    }
}

static void on_accept(kdp__io *io, uint32_t events, void *ud)
{
    (void)io;
    (void)events;
    kdp__server *s = ud;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            (void)kdp__server_adopt(s, fd);
        } else if (out_of_resources(errno)) {
            pause_accepting(s, errno);
            return;
        } else {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                log_warn("accept: %s", strerror(errno));
            }
            return;
        }
    }
}

static void on_done_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__server *s = ud;
    if (s->done) {
        kdp__server_done_fn done = s->done;
        s->done = NULL;
        done(s, s->done_ud);
    }
}

int kdp__server_new(kdp__loop *l, const kdp__method *methods, size_t n_methods,
                    const kdp__server_config *cfg, kdp__server **ret)
{
    if (!l || (!methods && n_methods) || !ret) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n_methods; i++) {
        if (!methods[i].path || methods[i].path[0] != '/' || !methods[i].handler) {
            return -EINVAL;
        }
    }
    kdp__server *s = calloc(1, sizeof(*s));
    if (!s) {
        return -ENOMEM;
    }
    kdp__link_init(&s->conns);
    s->loop = l;
    s->listen_fd = -1;
    if (cfg) {
        s->cfg = *cfg;
    }
    if (!s->cfg.max_recv_message) {
        s->cfg.max_recv_message = DEFAULT_MAX_RECV;
    }
    if (!s->cfg.max_streams) {
        s->cfg.max_streams = DEFAULT_MAX_STREAMS;
    }
    if (!s->cfg.max_connections) {
        s->cfg.max_connections = DEFAULT_MAX_CONNECTIONS;
    }
    if (!s->cfg.max_conn_buffered) {
        s->cfg.max_conn_buffered = 2 * s->cfg.max_recv_message;
    }
    if (!s->cfg.max_buffered) {
        s->cfg.max_buffered = 4 * s->cfg.max_recv_message;
    }
    if (!s->cfg.max_conn_unsent) {
        s->cfg.max_conn_unsent = 2 * s->cfg.max_recv_message;
    }
    if (!s->cfg.max_unsent) {
        s->cfg.max_unsent = 4 * s->cfg.max_recv_message;
    }
    int r = -ENOMEM;
    s->methods = calloc(n_methods ? n_methods : 1, sizeof(*methods));
    if (!s->methods || kdp__server_make_callbacks(s) < 0) {
        goto fail;
    }
    if (n_methods) {
        memcpy(s->methods, methods, n_methods * sizeof(*methods));
    }
    s->n_methods = n_methods;
    r = kdp__timer_new(l, on_done_timer, s, &s->done_timer);
    if (r < 0) {
        goto fail;
    }
    r = kdp__timer_new(l, on_accept_resume, s, &s->accept_timer);
    if (r < 0) {
        goto fail;
    }
    *ret = s;
    return 0;
fail:
    kdp__server_free(s);
    return r;
}

int kdp__server_listen(kdp__server *s, const char *path)
{
    if (!s || !path || s->listen_fd >= 0) {
        return -EINVAL;
    }
    char *copy = strdup(path);
    if (!copy) {
        return -ENOMEM;
    }
    int fd;
    ino_t ino;
    int r = kdp__sock_listen(path, LISTEN_BACKLOG, &fd, &ino);
    if (r < 0) {
        free(copy);
        return r;
    }
    r = kdp__io_add(s->loop, fd, EPOLLIN, on_accept, s, &s->listen_io);
    if (r < 0) {
        (void)kdp__sock_unlink_if_ours(path, ino);
        close(fd);
        free(copy);
        return r;
    }
    s->listen_fd = fd;
    s->path = copy;
    s->ino = ino;
    return 0;
}

static void stop_listening(kdp__server *s)
{
    kdp__io_del(s->listen_io);
    s->listen_io = NULL;
    if (s->listen_fd >= 0) {
        close(s->listen_fd);
        s->listen_fd = -1;
    }
    if (s->path) {
        (void)kdp__sock_unlink_if_ours(s->path, s->ino);
        free(s->path);
        s->path = NULL;
    }
    s->ino = 0;
}

void kdp__server_shutdown(kdp__server *s, uint64_t linger_us, kdp__server_done_fn done, void *ud)
{
    s->shutting_down = true;
    s->done = done;
    s->done_ud = ud;
    stop_listening(s);
    kdp__link *ls;
    kdp__link *next;
    kdp__list_for_each_safe(ls, next, &s->conns)
    {
        kdp__sconn *sc = KDP__CONTAINER_OF(ls, kdp__sconn, link);
        kdp__conn_hold(sc->conn); /* no stream may close while we walk them */
        kdp__link *lc;
        kdp__list_for_each(lc, &sc->calls)
        {
            kdp__call *call = KDP__CONTAINER_OF(lc, kdp__call, link);
            if (!call->finished) {
                s->stats.calls_cancelled++;
                kdp__call_abort(call, KDP__ST_UNAVAILABLE, "server is shutting down");
            }
        }
        kdp__conn_terminate(sc->conn, NGHTTP2_NO_ERROR, linger_us);
        kdp__conn_release(sc->conn);
    }
    maybe_done(s);
}

void kdp__server_free(kdp__server *s)
{
    if (!s) {
        return;
    }
    kdp__link *c;
    kdp__link *next;
    kdp__list_for_each_safe(c, next, &s->conns)
    {
        sconn_free(KDP__CONTAINER_OF(c, kdp__sconn, link)); /* unlinks itself only */
    }
    stop_listening(s);
    kdp__timer_free(s->done_timer);
    kdp__timer_free(s->accept_timer);
    nghttp2_session_callbacks_del(s->cbs);
    nghttp2_option_del(s->opt);
    free(s->methods);
    free(s);
}

void kdp__server_stats_get(const kdp__server *s, kdp__server_stats *ret)
{
    *ret = s->stats;
}

ino_t kdp__server_socket_ino(const kdp__server *s)
{
    return s->ino;
}
