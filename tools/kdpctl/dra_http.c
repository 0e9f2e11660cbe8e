/* SPDX-License-Identifier: MIT */
/* dra_http: see dra_http.h. */
#include "dra_http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "print.h"
#include "runtime/mhdloop.h"

struct kd_hreq {
    kd_http *h;
    kd_hreq *next, *prev; /* every request alive */
    struct MHD_Connection *c;
    const char *method, *path; /* MHD's, valid while the connection lives */
    kc_buf body;
    bool too_big;
    bool answered;
    unsigned code; /* the answer's status */
    unsigned refs; /* the connection's, and a stream response's */
    /* a stream */
    bool streaming;
    bool suspended;
    bool ended;
    bool closed; /* the close callback has run */
    kc_buf q;
    size_t qpos;
    kd_http_close_fn close;
    void *close_ud;
};

struct kd_http {
    kdp__loop *loop;
    struct MHD_Daemon *d;
    kdp__mhdloop ml; /* the daemon on the loop */
    kd_http_fn fn;
    void *ud;
    unsigned port;
    char *cert, *key;
    kd_hreq *reqs;
};

/* ---- on the loop ---- */

static void mhd_run(void *daemon)
{
    (void)MHD_run(daemon);
}

static bool mhd_timeout(void *daemon, uint64_t *ret_ms)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout(daemon, &ms) != MHD_YES) {
        return false;
    }
    *ret_ms = ms;
    return true;
}

/* ---- requests ---- */

static void req_destroy(kd_hreq *r)
{
    kc_buf_free(&r->body);
    kc_buf_free(&r->q);
    free(r);
}

static void req_unref(kd_hreq *r)
{
    if (--r->refs > 0) {
        return;
    }
    if (r->prev) {
        r->prev->next = r->next;
    } else {
        r->h->reqs = r->next;
    }
    if (r->next) {
        r->next->prev = r->prev;
    }
    req_destroy(r);
}

static void req_close(kd_hreq *r)
{
    if (r->streaming && !r->closed) {
        r->closed = true;
        r->ended = true;
        if (r->close) {
            r->close(r, r->close_ud);
        }
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    kd_hreq *r = *con_cls;
    if (!r) {
        return;
    }
    *con_cls = NULL;
    req_close(r);
    r->c = NULL;
    req_unref(r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    kd_http *h = cls;
    kd_hreq *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof(*r));
        if (!r) {
            return MHD_NO;
        }
        r->h = h;
        r->c = c;
        r->method = method;
        r->path = url;
        r->refs = 1;
        r->next = h->reqs;
        if (h->reqs) {
            h->reqs->prev = r;
        }
        h->reqs = r;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!r->too_big && r->body.len + *upload_data_size <= KD_HTTP_MAX_BODY) {
            kc_buf_add(&r->body, upload_data, *upload_data_size);
        } else {
            r->too_big = true;
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (r->answered) {
        return MHD_YES;
    }
    h->fn(r, h->ud);
    if (!r->answered) {
        kd_http_reply(r, 500, "text/plain", "no answer\n", 10, NULL);
    }
    return MHD_YES;
}

const char *kd_http_method(const kd_hreq *r)
{
    return r->method;
}

unsigned kd_http_code(const kd_hreq *r)
{
    return r->code;
}

const char *kd_http_path(const kd_hreq *r)
{
    return r->path;
}

const char *kd_http_arg(const kd_hreq *r, const char *name)
{
    return r->c ? MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, name) : NULL;
}

const char *kd_http_header(const kd_hreq *r, const char *name)
{
    return r->c ? MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, name) : NULL;
}

const char *kd_http_body(const kd_hreq *r, size_t *len, bool *too_big)
{
    *len = r->body.len;
    *too_big = r->too_big || r->body.failed;
    return r->body.len ? r->body.s : "";
}

void kd_http_reply(kd_hreq *r, unsigned code, const char *content_type, const char *body,
                   size_t len, const char *extra_header)
{
    if (r->answered || !r->c) {
        return;
    }
    r->answered = true;
    r->code = code;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) {
        return;
    }
    (void)MHD_add_response_header(resp, "Content-Type", content_type);
    (void)MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    if (extra_header) {
        const char *colon = strchr(extra_header, ':');
        if (colon) {
            char name[64];
            snprintf(name, sizeof(name), "%.*s", (int)(colon - extra_header), extra_header);
            (void)MHD_add_response_header(resp, name, colon + 1 + (colon[1] == ' '));
        }
    }
    (void)MHD_queue_response(r->c, code, resp);
    MHD_destroy_response(resp);
}

/* ---- streams ---- */

static ssize_t on_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    kd_hreq *r = cls;
    size_t avail = r->q.len - r->qpos;
    if (avail) {
        size_t n = avail < max ? avail : max;
        memcpy(buf, r->q.s + r->qpos, n);
        r->qpos += n;
        if (r->qpos == r->q.len) {
            kc_buf_reset(&r->q);
            r->qpos = 0;
        }
        return (ssize_t)n;
    }
    if (r->ended || !r->c) {
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    MHD_suspend_connection(r->c);
    r->suspended = true;
    return 0;
}

static void on_response_free(void *cls)
{
    req_unref(cls);
}

int kd_http_stream(kd_hreq *r, const char *content_type, kd_http_close_fn close, void *ud)
{
    if (r->answered || !r->c) {
        return -EINVAL;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, on_read, r, on_response_free);
    if (!resp) {
        return -ENOMEM;
    }
    r->refs++;
    r->answered = true;
    r->code = 200;
    r->streaming = true;
    r->close = close;
    r->close_ud = ud;
    (void)MHD_add_response_header(resp, "Content-Type", content_type);
    (void)MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
    (void)MHD_queue_response(r->c, 200, resp);
    MHD_destroy_response(resp);
    return 0;
}

static void wake(kd_hreq *r)
{
    if (r->suspended && r->c) {
        r->suspended = false;
        MHD_resume_connection(r->c);
        kdp__mhdloop_poke(&r->h->ml); /* MHD_run soon, from the loop */
    }
}

int kd_http_write(kd_hreq *r, const char *data, size_t len)
{
    if (r->ended) {
        return -EPIPE;
    }
    if (r->q.len - r->qpos + len > KD_HTTP_MAX_QUEUE) {
        r->ended = true; /* a client that does not read: cut off */
        wake(r);
        return -ENOBUFS;
    }
    kc_buf_add(&r->q, data, len);
    wake(r);
    return 0;
}

void kd_http_end(kd_hreq *r)
{
    r->ended = true;
    wake(r);
}

size_t kd_http_reap(kd_http *h)
{
    size_t n = 0;
    for (kd_hreq *r = h->reqs; r; r = r->next) {
        if (!r->streaming || !r->suspended || !r->c || r->ended) {
            continue;
        }
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(r->c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci) {
            continue;
        }
        /* a client sends nothing while it reads a stream: anything readable
         * (its TLS close_notify, EOF) or an error means it has gone */
        struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
        if (poll(&p, 1, 0) > 0) {
            r->ended = true;
            wake(r);
            n++;
        }
    }
    return n;
}

/* ---- the server ---- */

static int listen_on(const char *host, const char *port, int *ret_fd, unsigned *ret_port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai) {
        return -EINVAL;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int r = fd < 0 ? -errno : 0;
    int one = 1;
    if (r == 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) {
        r = -errno;
    }
    if (r == 0 && (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0)) {
        r = -errno;
    }
    freeaddrinfo(ai);
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
    } u;
    memset(&u, 0, sizeof(u));
    socklen_t sl = sizeof(u);
    if (r == 0 && getsockname(fd, &u.sa, &sl) < 0) {
        r = -errno;
    }
    if (r < 0) {
        if (fd >= 0) {
            close(fd);
        }
        return r;
    }
    *ret_port = u.sa.sa_family == AF_INET6 ? ntohs(u.in6.sin6_port) : ntohs(u.in.sin_port);
    *ret_fd = fd;
    return 0;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    (void)fmt;
    (void)ap; /* TLS handshakes of curious clients: not worth a line */
}

int kd_http_new(kdp__loop *l, const char *host, const char *port, const char *cert_pem,
                const char *key_pem, kd_http_fn fn, void *ud, kd_http **ret)
{
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        return -ENOTSUP;
    }
    kd_http *h = calloc(1, sizeof(*h));
    if (!h) {
        return -ENOMEM;
    }
    h->loop = l;
    h->fn = fn;
    h->ud = ud;
    h->cert = strdup(cert_pem);
    h->key = strdup(key_pem);
    int fd = -1;
    int r = h->cert && h->key ? listen_on(host, port, &fd, &h->port) : -ENOMEM;
    if (r == 0) {
        h->d = MHD_start_daemon(
            MHD_USE_EPOLL | MHD_USE_TLS | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL,
            NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_HTTPS_MEM_KEY,
            h->key, MHD_OPTION_HTTPS_MEM_CERT, h->cert, MHD_OPTION_CONNECTION_LIMIT,
            KD_HTTP_MAX_CONNS, MHD_OPTION_CONNECTION_TIMEOUT, KD_HTTP_TIMEOUT_S,
            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
            MHD_OPTION_END);
        if (!h->d) {
            close(fd);
            r = -EIO;
        }
    }
    const union MHD_DaemonInfo *info =
        r == 0 ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (r == 0 && !info) {
        r = -EIO;
    }
    static const kdp__mhdloop_fns fns = {.run = mhd_run, .timeout = mhd_timeout};
    if (r == 0) {
        r = kdp__mhdloop_start(&h->ml, l, h->d, info->epoll_fd, &fns);
    }
    if (r < 0) {
        kd_http_free(h);
        return r;
    }
    *ret = h;
    return 0;
}

unsigned kd_http_port(const kd_http *h)
{
    return h->port;
}

void kd_http_free(kd_http *h)
{
    if (!h) {
        return;
    }
    if (h->d) {
        /* every stream ended and resumed: MHD may not stop with a
         * connection suspended */
        for (kd_hreq *r = h->reqs; r; r = r->next) {
            req_close(r);
            if (r->suspended && r->c) {
                r->suspended = false;
                MHD_resume_connection(r->c);
            }
        }
        kdp__mhdloop_stop(&h->ml);
        (void)MHD_run(h->d);
        MHD_stop_daemon(h->d);
    }
    kdp__mhdloop_stop(&h->ml);
    while (h->reqs) { /* whatever MHD did not release */
        kd_hreq *r = h->reqs;
        h->reqs = r->next;
        req_destroy(r);
    }
    free(h->cert);
    free(h->key);
    free(h);
}
