/* SPDX-License-Identifier: MIT */
/*
 * kubelet: the DRA driver's two sockets. The service socket
 * (<root>/plugins/<driver>/dra[-<instance>].sock) serves the DRAPlugin
 * services (v1, v1beta1) and the health stream; the registration socket
 * (<root>/plugins_registry/<driver>[-<instance>]-reg.sock) serves
 * pluginregistration.Registration through plugin/reg_watcher (GetInfo:
 * "DRAPlugin", the driver, the service socket's absolute path, the
 * versions). The service socket is made first, so that the kubelet finds
 * it when it acts on GetInfo. A refusal is logged by reg_watcher and
 * answered by re-creating the registration socket after its backoff (the
 * kubelet asks again only for a new socket). Both are made when the plugin
 * begins serving and removed when it stops; a stale socket of ours (these
 * names: this driver and instance) is removed first, another instance's
 * never touched.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"
#include "dra/dra_int.h"

#define MAX_METHODS      12
#define RETRY_MIN_US     (200ULL * 1000ULL)
#define RETRY_MAX_US     (30ULL * 1000000ULL)
#define MAX_RECV_MESSAGE (4U << 20)

/* Whether a process listens on the socket at path (a connect succeeds, or
 * its backlog is full). */
static bool someone_listens(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return false; /* the listen fails anyway, with its own message */
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    int r = connect(fd, (const struct sockaddr *)&sa, sizeof(sa));
    bool live = r == 0 || errno == EAGAIN || errno == EINPROGRESS;
    close(fd);
    return live;
}

/* A stale socket of ours is removed; anything else there is refused, and
 * so is a socket another process serves (-EADDRINUSE: a second driver
 * process without an instance name of its own). */
static int clear_path(kdp__dra *d, const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        log_error("%s: %s exists and is not a socket: refusing to replace it", d->driver, path);
        return -EEXIST;
    }
    if (someone_listens(path)) {
        log_error("%s: another process serves %s: refusing to take it over (give each instance "
                  "its own name: $POD_UID or kdp_dra_config.instance)",
                  d->driver, path);
        return -EADDRINUSE;
    }
    log_debug("%s: removing the stale socket %s", d->driver, path);
    return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* A socket that cannot be served is tried again after this (logged). */
static uint64_t retry_delay(kdp__dra *d, const char *path, int err)
{
    uint64_t delay = kdp__backoff_next(&d->retry_backoff);
    log_error("%s: cannot serve %s: %s; trying again in %llu ms", d->driver, path, strerror(-err),
              (unsigned long long)(delay / 1000));
    return delay;
}

static int listen_on(kdp__dra *d, const char *path, const kdp__method *m, size_t n,
                     kdp__server **ret)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
    }
    int r = kdp__mkdir_p(dir, 0750);
    if (r == 0) {
        r = clear_path(d, path);
    }
    kdp__server_config cfg = {.max_recv_message = MAX_RECV_MESSAGE};
    kdp__server *s = NULL;
    if (r == 0) {
        r = kdp__server_new(d->loop, m, n, &cfg, &s);
    }
    if (r == 0) {
        r = kdp__server_listen(s, path);
    }
    if (r < 0) {
        kdp__server_free(s);
        d->failed_path = path;
        return r;
    }
    *ret = s;
    return 0;
}

static int open_reg(kdp__dra *d)
{
    kdp__method m[MAX_METHODS];
    size_t n = d->reg.svc.ops->methods(&d->reg.svc, m, MAX_METHODS);
    return listen_on(d, d->reg_path, m, n, &d->reg_server);
}

static int open_svc(kdp__dra *d)
{
    kdp__method m[MAX_METHODS];
    size_t n = kdp__dra_prepare_methods(d, m, MAX_METHODS);
    n += kdp__dra_health_methods(d, m + n, MAX_METHODS - n);
    return listen_on(d, d->svc_path, m, n, &d->svc_server);
}

static void close_all(kdp__dra *d)
{
    if (d->reg_server || d->svc_server) {
        d->reg.base.ops->stop(&d->reg.base);
    }
    kdp__server_free(d->reg_server); /* removes the socket if still ours */
    kdp__server_free(d->svc_server);
    d->reg_server = NULL;
    d->svc_server = NULL;
    kdp__timer_stop(d->reopen);
    kdp__timer_stop(d->retry);
    kdp_dra_status *st = kdp__dra_status_lock(d);
    st->registered = false;
    kdp__dra_status_unlock(d);
    kdp__plugin_report_registration(d->p, KDP__REG_WAITING, "the DRA sockets are closed");
}

static void start(kdp__dra *d)
{
    int r = open_svc(d);
    if (r == 0) {
        r = open_reg(d);
    }
    if (r < 0) {
        close_all(d);
        kdp__timer_start(d->retry, retry_delay(d, d->failed_path, r));
        return;
    }
    kdp__backoff_reset(&d->retry_backoff);
    log_info("%s: serving %s; registration socket %s", d->driver, d->svc_path, d->reg_path);
    d->reg.base.ops->start(&d->reg.base);
}

void kdp__dra_kubelet_serving(kdp__dra *d, bool on)
{
    d->serving = on;
    close_all(d);
    if (on) {
        start(d);
    }
}

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra *d = ud;
    if (d->serving && !d->svc_server) {
        start(d);
    }
}

/* A new registration socket, so that the kubelet asks again. */
static void on_reopen(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra *d = ud;
    if (!d->serving || !d->svc_server) {
        return;
    }
    d->reg.base.ops->stop(&d->reg.base);
    kdp__server_free(d->reg_server);
    d->reg_server = NULL;
    int r = open_reg(d);
    if (r < 0) {
        kdp__timer_start(d->reopen, retry_delay(d, d->reg_path, r));
        return;
    }
    d->reg.base.ops->start(&d->reg.base);
}

/* ---- what reg_watcher says ---- */

static void reg_state(void *ud, kdp__reg_state s, const char *why)
{
    kdp__dra *d = ud;
    kdp_dra_status *st = kdp__dra_status_lock(d);
    st->registered = s == KDP__REG_REGISTERED;
    kdp__dra_status_unlock(d);
    kdp__plugin_report_registration(d->p, s, why);
}

static void reg_attempt(void *ud, bool sent)
{
    (void)ud;
    (void)sent;
}

static void reg_restart(void *ud, const char *why)
{
    kdp__dra *d = ud;
    log_info("%s: %s", d->driver, why);
    kdp__timer_start(d->reopen, 0);
}

static void reg_peer_appeared(void *ud)
{
    (void)ud;
}

static bool reg_socket_intact(void *ud)
{
    kdp__dra *d = ud;
    struct stat st;
    return d->reg_server && lstat(d->reg_path, &st) == 0 &&
           st.st_ino == kdp__server_socket_ino(d->reg_server);
}

int kdp__dra_kubelet_init(kdp__dra *d)
{
    kdp__reg_up up = {
        .state = reg_state,
        .attempt = reg_attempt,
        .restart = reg_restart,
        .peer_appeared = reg_peer_appeared,
        .socket_intact = reg_socket_intact,
        .failed = NULL,
        .ud = d,
    };
    kdp__reg_info info = {
        .type = "DRAPlugin",
        .name = d->driver,
        .endpoint = d->svc_path,
        .versions = d->versions,
        .n_versions = d->n_versions,
    };
    kdp__backoff_init(&d->retry_backoff, RETRY_MIN_US, RETRY_MAX_US, 0);
    int r = kdp__reg_watcher_init(&d->reg, d->loop, d->reg_path, d->driver, &info, &up);
    if (r == 0) {
        r = kdp__timer_new(d->loop, on_reopen, d, &d->reopen);
    }
    if (r == 0) {
        r = kdp__timer_new(d->loop, on_retry, d, &d->retry);
    }
    return r;
}

void kdp__dra_kubelet_done(kdp__dra *d)
{
    d->serving = false;
    if (d->reopen) {
        close_all(d);
    }
    kdp__reg_watcher_done(&d->reg);
    kdp__timer_free(d->reopen);
    kdp__timer_free(d->retry);
    d->reopen = NULL;
    d->retry = NULL;
}
