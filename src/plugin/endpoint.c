/* SPDX-License-Identifier: MIT */
#include "plugin/endpoint.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "kdp.h"

#define MAX_METHODS 16
#define BIND_TRIES  3

/* A stale socket is removed; anything else in its place (a file, a
 * symlink) is refused. */
static int clear_socket_path(const char *resource, const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        log_error("%s: %s exists and is not a socket: refusing to replace it", resource, path);
        return -EEXIST;
    }
    /* ENOENT: a restarting kubelet removed it meanwhile, which is as good */
    return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

static int start_server(kdp__loop *loop, const char *path, kdp__svc *const *svcs, size_t n_svcs,
                        kdp__server **ret)
{
    kdp__method methods[MAX_METHODS];
    size_t n = 0;
    for (size_t i = 0; i < n_svcs; i++) {
        n += svcs[i]->ops->methods(svcs[i], methods + n, MAX_METHODS - n);
    }
    kdp__server_config cfg = {.max_recv_message = KDP_MAX_LIST_MESSAGE};
    kdp__server *s;
    int r = kdp__server_new(loop, methods, n, &cfg, &s);
    if (r < 0) {
        return r;
    }
    r = kdp__server_listen(s, path);
    if (r < 0) {
        kdp__server_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

int kdp__endpoint_open(kdp__loop *loop, const char *resource, const char *socket_path,
                       kdp__svc *const *svcs, size_t n_svcs, kdp__server **ret)
{
    int r = 0;
    for (int attempt = 0; attempt < BIND_TRIES; attempt++) {
        r = clear_socket_path(resource, socket_path);
        if (r == 0) {
            r = start_server(loop, socket_path, svcs, n_svcs, ret);
        }
        /* -ENOENT: the socket file went away between bind() and stat(): a
         * restarting kubelet cleaning the directory. Bind again at once (it
         * may also be the directory missing) rather than after the caller's
         * backoff, 50 ms and more. */
        if (r != -ENOENT) {
            break;
        }
    }
    return r;
}

bool kdp__endpoint_intact(const kdp__server *server, const char *socket_path)
{
    struct stat st;
    ino_t ours = server ? kdp__server_socket_ino(server) : 0;
    return lstat(socket_path, &st) == 0 && st.st_ino == ours;
}
