/* SPDX-License-Identifier: MIT */
/*
 * http: a small HTTP/1.1 server on the loop, for GET-style endpoints
 * (/metrics, /healthz). libmicrohttpd does the HTTP, with no thread of its
 * own: it runs in external-epoll mode, its epoll fd is one io watch of the
 * loop, MHD_run() is called when that fd is readable, and one loop timer is
 * re-armed after every run from MHD_get_timeout() (disarmed when MHD has no
 * timeout: with no connection open the server makes no wakeups).
 *
 * The listening socket is bound here (so unix sockets and port 0 work, and
 * bind errors come back to the caller) and handed to MHD. Requests with a
 * body are refused with 413; every other request goes to the handler, on the
 * loop thread, which fills the response.
 *
 * Loop thread only.
 */
#ifndef KDP_HTTP_H
#define KDP_HTTP_H

#include <stddef.h>

#include "runtime/loop.h"

typedef struct kdp__http kdp__http;

/* What a handler answers. body is malloc'd (taken by the server) or NULL
 * for none; allow (static) adds an Allow header (for 405). */
typedef struct kdp__http_resp {
    int status;
    const char *content_type; /* static; NULL = text/plain; charset=utf-8 */
    char *body;
    size_t len;
    const char *allow;
} kdp__http_resp;

/* method ("GET", "HEAD", ...) and path (no query string) of one request. */
typedef void (*kdp__http_handler)(const char *method, const char *path, kdp__http_resp *resp,
                                  void *ud);

typedef struct kdp__http_cfg {
    unsigned max_connections; /* 0 = 32; from one IP address, a quarter of that, at most 4 */
    unsigned timeout_s;       /* idle connection timeout; 0 = 10 */
    unsigned deadline_s;      /* a connection's whole life, busy or not; 0 = 30 */
    size_t conn_memory;       /* per connection; 0 = 32 KiB */
} kdp__http_cfg;

/* The forms an address may take, for error messages. */
#define KDP__HTTP_ADDRESS_FORMS                                                                    \
    "HOST:PORT (HOST an IPv4 address, [IPv6] or a name; empty for every interface, e.g. "          \
    "\":9400\"; PORT 0 = any free port), or a unix socket: unix:/abs/path or /abs/path"

/* Binds address and starts serving. Returns 0, -EINVAL (malformed: logged
 * with the accepted forms), -EADDRINUSE, -EACCES, -EADDRNOTAVAIL, -ENOENT
 * (a name that does not resolve), -ENOTSUP (built without libmicrohttpd),
 * -ENOMEM, -errno. */
int kdp__http_listen(kdp__loop *l, const char *address, const kdp__http_cfg *cfg,
                     kdp__http_handler handler, void *ud, kdp__http **ret);
/* The bound address: "127.0.0.1:41234", "[::1]:9400" or the socket's path. */
const char *kdp__http_address(const kdp__http *h);
/* Serves an already connected stream socket (tests, the fuzzer); takes fd
 * (closed on failure). Returns 0 or -errno. */
int kdp__http_adopt(kdp__http *h, int fd);
/* Connections open now. */
unsigned kdp__http_connections(const kdp__http *h);
/* Closes every connection and the listening socket (a unix socket's file
 * removed). NULL is fine. */
void kdp__http_free(kdp__http *h);

/* Parses address (see above) without binding: 0 or -EINVAL, *ret_why says
 * what is wrong. For tests. */
int kdp__http_check_address(const char *address, const char **ret_why);

#endif
