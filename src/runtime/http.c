/* SPDX-License-Identifier: MIT */
#include "runtime/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "runtime/mhdlib.h"
#include "runtime/mhdloop.h"

#ifdef KDP_HAVE_MHD
#include <microhttpd.h>
#endif

#define DEFAULT_MAX_CONNS 32U
/* Over it, a connection is closed at accept: well below the total, so that
 * a few addresses cannot fill the endpoint and the kubelet's probes and
 * Prometheus still get in. */
#define DEFAULT_PER_IP      4U
#define DEFAULT_TIMEOUT_S   10U
#define DEFAULT_DEADLINE_S  30U /* whatever the traffic, a connection's life */
#define DEFAULT_CONN_MEMORY ((size_t)32 * 1024)
#define BACKLOG             16
#define ADDR_MAX            128 /* the bound address as text; a socket path fits */
#define HOST_MAX            256

typedef struct parsed {
    bool is_unix;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char host[HOST_MAX]; /* "" = every interface */
    bool bracketed;      /* [IPv6] */
    char port[8];
} parsed;

/* An open connection, with its deadline. */
typedef struct tracked {
    struct tracked *prev;
    struct tracked *next;
    int fd; /* -1 once shut down */
    uint64_t due_us;
} tracked;

struct kdp__http {
    kdp__loop *loop;
    int fd; /* the listening socket; MHD closes it */
    char address[ADDR_MAX];
    char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* removed at free */
    kdp__http_handler handler;
    void *ud;
    unsigned conns;
#ifdef KDP_HAVE_MHD
    struct MHD_Daemon *d;
#endif
    /* The open connections, oldest first, each closed at its deadline
     * (a client that sends a byte now and then is not idle). */
    tracked *oldest;
    tracked *newest;
    kdp__timer *reaper;
    uint64_t deadline_us;
    kdp__mhdloop ml; /* the daemon on the loop */
};

/* ---- the address ---- */

static int bad(const char **why, const char *what)
{
    *why = what;
    return -EINVAL;
}

static int parse_port(const char *s, parsed *out, const char **why)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5 || strspn(s, "0123456789") != n) {
        return bad(why, "the port is not a number from 0 to 65535");
    }
    if (strtoul(s, NULL, 10) > 65535) {
        return bad(why, "the port is over 65535");
    }
    memcpy(out->port, s, n + 1);
    return 0;
}

static int parse(const char *address, parsed *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    if (!address || !*address) {
        return bad(why, "the address is empty");
    }
    const char *path = NULL;
    if (strncmp(address, "unix:", 5) == 0) {
        path = address + 5;
    } else if (address[0] == '/') {
        path = address;
    }
    if (path) {
        if (path[0] != '/') {
            return bad(why, "a unix socket path must be absolute");
        }
        if (strlen(path) >= sizeof(out->path)) {
            return bad(why, "the unix socket path is over 107 bytes");
        }
        out->is_unix = true;
        memcpy(out->path, path, strlen(path) + 1);
        return 0;
    }
    const char *colon = strrchr(address, ':');
    if (!colon) {
        return bad(why, "no port (HOST:PORT)");
    }
    size_t hlen = (size_t)(colon - address);
    if (address[0] == '[') {
        if (hlen < 3 || address[hlen - 1] != ']') {
            return bad(why, "an IPv6 address must be in brackets: [::1]:9400");
        }
        out->bracketed = true;
        address++;
        hlen -= 2;
    } else if (memchr(address, ':', hlen)) {
        return bad(why, "an IPv6 address must be in brackets: [::1]:9400");
    }
    if (hlen >= sizeof(out->host)) {
        return bad(why, "the host is too long");
    }
    memcpy(out->host, address, hlen);
    out->host[hlen] = '\0';
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)out->host[i];
        if (c <= ' ' || c >= 0x7f || c == '/' || c == '[' || c == ']') {
            return bad(why, "the host has a character no host name or address has");
        }
    }
    return parse_port(colon + 1, out, why);
}

int kdp__http_check_address(const char *address, const char **ret_why)
{
    parsed p;
    const char *why = NULL;
    int r = parse(address, &p, &why);
    if (ret_why) {
        *ret_why = why;
    }
    return r;
}

/* ---- binding ---- */

static int new_socket(int family)
{
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/* The address fd is bound to, as text: "127.0.0.1:9400", "[::1]:9400". */
static int bound_address(int fd, char *out, size_t cap)
{
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } u;
    memset(&u, 0, sizeof(u));
    socklen_t len = sizeof(u);
    if (getsockname(fd, &u.sa, &len) < 0) {
        return -errno;
    }
    char ip[INET6_ADDRSTRLEN] = "?";
    if (u.sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &u.in.sin_addr, ip, sizeof(ip));
        snprintf(out, cap, "%s:%u", ip, (unsigned)ntohs(u.in.sin_port));
    } else {
        inet_ntop(AF_INET6, &u.in6.sin6_addr, ip, sizeof(ip));
        snprintf(out, cap, "[%s]:%u", ip, (unsigned)ntohs(u.in6.sin6_port));
    }
    return 0;
}

static int bind_one(const struct sockaddr *sa, socklen_t len, bool dual, int *ret_fd)
{
    int fd = new_socket(sa->sa_family);
    if (fd < 0) {
        return -errno;
    }
    /* A unix socket's file takes the socket's mode less the umask: 0600
     * from the moment it exists, whatever the umask (as the gRPC sockets) */
    if (sa->sa_family == AF_UNIX && fchmod(fd, 0600) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (dual) {
        int zero = 0;
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd, sa, len) < 0 || listen(fd, BACKLOG) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

static int listen_tcp(kdp__http *h, const parsed *p)
{
    int r;
    int fd = -1;
    if (!p->host[0]) {
        /* every interface: IPv6 and IPv4 on one socket, else IPv4 alone */
        struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
        in6.sin6_port = htons((uint16_t)strtoul(p->port, NULL, 10));
        r = bind_one((struct sockaddr *)&in6, sizeof(in6), true, &fd);
        if (r == -EAFNOSUPPORT || r == -EADDRNOTAVAIL) {
            struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
            in.sin_port = in6.sin6_port;
            r = bind_one((struct sockaddr *)&in, sizeof(in), false, &fd);
        }
    } else {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
        if (p->bracketed) {
            hints.ai_family = AF_INET6;
            hints.ai_flags |= AI_NUMERICHOST;
        }
        struct addrinfo *res = NULL;
        int g = getaddrinfo(p->host, p->port, &hints, &res);
        if (g != 0) {
            log_error("metrics address: cannot resolve \"%s\": %s", p->host, gai_strerror(g));
            return g == EAI_MEMORY ? -ENOMEM : -ENOENT;
        }
        r = -EADDRNOTAVAIL;
        for (struct addrinfo *ai = res; ai && r < 0; ai = ai->ai_next) {
            if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) {
                r = bind_one(ai->ai_addr, ai->ai_addrlen, false, &fd);
            }
        }
        freeaddrinfo(res);
    }
    if (r < 0) {
        return r;
    }
    r = bound_address(fd, h->address, sizeof(h->address));
    if (r < 0) {
        close(fd);
        return r;
    }
    h->fd = fd;
    return 0;
}

/* A socket file left by a process gone (nobody accepts on it) is removed;
 * a live one, or any other file, is in use. */
static int clear_unix_path(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        return -EADDRINUSE;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1); /* fits: checked by parse() */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int err = errno;
    close(fd);
    if (r == 0 || err != ECONNREFUSED) {
        return -EADDRINUSE;
    }
    return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

static int listen_unix(kdp__http *h, const parsed *p)
{
    int r = clear_unix_path(p->path);
    if (r < 0) {
        return r;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, p->path, sizeof(sa.sun_path));
    int fd = -1;
    r = bind_one((struct sockaddr *)&sa, sizeof(sa), false, &fd);
    if (r < 0) {
        return r;
    }
    snprintf(h->address, sizeof(h->address), "%s", p->path);
    memcpy(h->unix_path, p->path, sizeof(h->unix_path));
    h->fd = fd;
    return 0;
}

#ifdef KDP_HAVE_MHD

/* ---- libmicrohttpd on the loop ---- */

static void mhd_run(void *daemon)
{
    (void)kdp__mhd.run(daemon);
}

static bool mhd_timeout(void *daemon, uint64_t *ret_ms)
{
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (kdp__mhd.get_timeout(daemon, &ms) != MHD_YES) {
        return false;
    }
    *ret_ms = ms;
    return true;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n') {
        msg[--n] = '\0';
    }
    log_debug("metrics: http: %s", msg);
}

static void arm_reaper(kdp__http *h)
{
    if (h->oldest) {
        kdp__timer_start_at(h->reaper, h->oldest->due_us);
    } else {
        kdp__timer_stop(h->reaper);
    }
}

/* Past its deadline, a connection's socket is shut down: MHD sees the end
 * and closes it (NOTIFY_CLOSED unlinks it). */
static void reap(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__http *h = ud;
    uint64_t now = kdp__now_us();
    for (tracked *c = h->oldest; c && c->due_us <= now; c = c->next) {
        if (c->fd >= 0) {
            log_debug("metrics: a connection reached its deadline: closed");
            (void)shutdown(c->fd, SHUT_RDWR);
            c->fd = -1; /* once */
        }
    }
    for (tracked *c = h->oldest; c; c = c->next) {
        if (c->fd >= 0) {
            kdp__timer_start_at(h->reaper, c->due_us);
            return;
        }
    }
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    kdp__http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        h->conns++;
        const union MHD_ConnectionInfo *info =
            kdp__mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        tracked *t = info ? calloc(1, sizeof(*t)) : NULL;
        if (t) { /* out of memory: the idle timeout still bounds it */
            t->fd = info->connect_fd;
            t->due_us = kdp__now_us() + h->deadline_us;
            t->prev = h->newest;
            *(h->newest ? &h->newest->next : &h->oldest) = t;
            h->newest = t;
            *socket_context = t;
            arm_reaper(h);
        }
        return;
    }
    h->conns -= h->conns > 0;
    tracked *t = *socket_context;
    if (t) {
        *(t->prev ? &t->prev->next : &h->oldest) = t->next;
        *(t->next ? &t->next->prev : &h->newest) = t->prev;
        free(t);
        *socket_context = NULL;
        arm_reaper(h);
    }
}

static enum MHD_Result respond(struct MHD_Connection *c, kdp__http_resp *resp)
{
    struct MHD_Response *r =
        resp->body
            ? kdp__mhd.create_response_from_buffer(resp->len, resp->body, MHD_RESPMEM_MUST_FREE)
            : kdp__mhd.create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(resp->body);
        return MHD_NO; /* MHD closes the connection */
    }
    (void)kdp__mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                       resp->content_type ? resp->content_type
                                                          : "text/plain; charset=utf-8");
    if (resp->allow) {
        (void)kdp__mhd.add_response_header(r, MHD_HTTP_HEADER_ALLOW, resp->allow);
    }
    enum MHD_Result ok = kdp__mhd.queue_response(c, (unsigned)resp->status, r);
    kdp__mhd.destroy_response(r);
    return ok;
}

static char body_marker; /* *con_cls once the request has been answered */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    (void)upload_data;
    kdp__http *h = cls;
    if (*con_cls) {
        *upload_data_size = 0; /* a body after the answer: dropped */
        return MHD_YES;
    }
    *con_cls = &body_marker;
    kdp__http_resp resp = {0};
    const char *cl = kdp__mhd.lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    const char *te = kdp__mhd.lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    if ((cl && strcmp(cl, "0") != 0) || te) {
        resp.status = 413;
        resp.body = strdup("a request body is not accepted here\n");
        resp.len = resp.body ? strlen(resp.body) : 0;
        return respond(c, &resp);
    }
    h->handler(method, url, &resp, h->ud);
    return respond(c, &resp);
}

static int start_mhd(kdp__http *h, const kdp__http_cfg *cfg)
{
    int r = kdp__mhd_ready();
    if (r < 0) {
        return r;
    }
    unsigned max = cfg && cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNS;
    unsigned timeout = cfg && cfg->timeout_s ? cfg->timeout_s : DEFAULT_TIMEOUT_S;
    size_t mem = cfg && cfg->conn_memory ? cfg->conn_memory : DEFAULT_CONN_MEMORY;
    /* At the total limit MHD stops accepting (the kernel's backlog, 16, waits);
     * over the per-address one it closes the new connection at once. */
    unsigned per_ip = max / 4 < DEFAULT_PER_IP ? (max + 3) / 4 : DEFAULT_PER_IP;
    unsigned deadline = cfg && cfg->deadline_s ? cfg->deadline_s : DEFAULT_DEADLINE_S;
    h->deadline_us = (uint64_t)deadline * 1000000U;
    r = kdp__timer_new(h->loop, reap, h, &h->reaper);
    if (r < 0) {
        return r;
    }
    h->d = kdp__mhd.start_daemon(
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)h->fd, MHD_OPTION_CONNECTION_LIMIT, max, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        per_ip, MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, mem,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_END);
    if (!h->d) {
        log_error("metrics: libmicrohttpd did not start on %s", h->address);
        return -EIO;
    }
    h->fd = -1; /* MHD's now: closed by MHD_stop_daemon */
    const union MHD_DaemonInfo *info = kdp__mhd.get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD);
    if (!info) {
        return -EIO;
    }
    static const kdp__mhdloop_fns fns = {.run = mhd_run, .timeout = mhd_timeout};
    return kdp__mhdloop_start(&h->ml, h->loop, h->d, info->epoll_fd, &fns);
}

int kdp__http_adopt(kdp__http *h, int fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (kdp__mhd.add_connection(h->d, fd, (struct sockaddr *)&sa, sizeof(sa_family_t)) != MHD_YES) {
        return -EIO; /* MHD closed fd */
    }
    kdp__mhdloop_run(&h->ml);
    return 0;
}

#else /* !KDP_HAVE_MHD */

static int start_mhd(kdp__http *h, const kdp__http_cfg *cfg)
{
    (void)h;
    (void)cfg;
    log_error("metrics: this build of kdp has no HTTP endpoint (built without libmicrohttpd, "
              "as the fully static tools are: KDP_STATIC_TOOLS)");
    return -ENOTSUP;
}

int kdp__http_adopt(kdp__http *h, int fd)
{
    (void)h;
    close(fd);
    return -ENOTSUP;
}

#endif

int kdp__http_listen(kdp__loop *l, const char *address, const kdp__http_cfg *cfg,
                     kdp__http_handler handler, void *ud, kdp__http **ret)
{
    parsed p;
    const char *why = NULL;
    if (!l || !handler || !ret) {
        return -EINVAL;
    }
    if (parse(address, &p, &why) < 0) {
        log_error("metrics: invalid address \"%.200s\": %s; the accepted forms: %s",
                  address ? address : "(null)", why, KDP__HTTP_ADDRESS_FORMS);
        return -EINVAL;
    }
    kdp__http *h = calloc(1, sizeof(*h));
    if (!h) {
        return -ENOMEM;
    }
    h->loop = l;
    h->fd = -1;
    h->handler = handler;
    h->ud = ud;
    int r = p.is_unix ? listen_unix(h, &p) : listen_tcp(h, &p);
    if (r < 0) {
        log_error("metrics: cannot listen on %s: %s", address, strerror(-r));
        kdp__http_free(h);
        return r;
    }
    r = start_mhd(h, cfg);
    if (r < 0) {
        kdp__http_free(h);
        return r;
    }
    *ret = h;
    return 0;
}

const char *kdp__http_address(const kdp__http *h)
{
    return h->address;
}

unsigned kdp__http_connections(const kdp__http *h)
{
    return h->conns;
}

void kdp__http_free(kdp__http *h)
{
    if (!h) {
        return;
    }
    kdp__mhdloop_stop(&h->ml);
#ifdef KDP_HAVE_MHD
    if (h->d) {
        kdp__mhd.stop_daemon(h->d); /* closes the connections and the listening socket */
    }
#endif
    kdp__timer_free(h->reaper);
    while (h->oldest) { /* NOTIFY_CLOSED came for each, unless MHD never started */
        tracked *t = h->oldest;
        h->oldest = t->next;
        free(t);
    }
    if (h->fd >= 0) {
        close(h->fd);
    }
    if (h->unix_path[0]) {
        (void)unlink(h->unix_path);
    }
    free(h);
}
