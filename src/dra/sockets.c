/* SPDX-License-Identifier: MIT */
/* sockets: the DRA driver's registration and service sockets (see
 * sockets.h). */
#include "dra/sockets.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"

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
static int clear_path(kdp__dra_sockets *s, const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        log_error("%s: %s exists and is not a socket: refusing to replace it", s->cfg.driver, path);
        return -EEXIST;
    }
    if (someone_listens(path)) {
        log_error("%s: another process serves %s: refusing to take it over (give each instance "
                  "its own name: $POD_UID or kdp_dra_config.instance)",
                  s->cfg.driver, path);
        return -EADDRINUSE;
    }
    log_debug("%s: removing the stale socket %s", s->cfg.driver, path);
    return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* A socket that cannot be served is tried again after this (logged). */
static uint64_t retry_delay(kdp__dra_sockets *s, const char *path, int err)
{
    uint64_t delay = kdp__backoff_next(&s->retry_backoff);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    const char *why = NULL;
    if (slash && err == -KDP__EUNTRUSTED) {
        *slash = '\0';
        (void)kdp__dir_trusted(dir, &why);
    }
    if (why) {
        log_error("%s: cannot serve %s: its directory %s %s: whoever can write there can take "
                  "the driver's place; fix its owner and mode. Trying again in %llu ms",
                  s->cfg.driver, path, dir, why, (unsigned long long)(delay / 1000));
    } else {
        log_error("%s: cannot serve %s: %s; trying again in %llu ms", s->cfg.driver, path,
                  strerror(-err), (unsigned long long)(delay / 1000));
    }
    return delay;
}

static int listen_on(kdp__dra_sockets *s, const char *path, const kdp__method *m, size_t n,
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
        r = kdp__dir_trusted(dir, NULL) == -KDP__EUNTRUSTED ? -KDP__EUNTRUSTED : 0;
    }
    if (r == 0) {
        r = clear_path(s, path);
    }
    kdp__server_config cfg = {.max_recv_message = MAX_RECV_MESSAGE};
    kdp__server *srv = NULL;
    if (r == 0) {
        r = kdp__server_new(s->loop, m, n, &cfg, &srv);
    }
    if (r == 0) {
        r = kdp__server_listen(srv, path);
    }
    if (r < 0) {
        kdp__server_free(srv);
        s->failed_path = path;
        return r;
    }
    *ret = srv;
    return 0;
}

static int open_reg(kdp__dra_sockets *s)
{
    kdp__method m[KDP__DRA_SOCKETS_MAX_METHODS];
    size_t n = s->reg.svc.ops->methods(&s->reg.svc, m, KDP__DRA_SOCKETS_MAX_METHODS);
    return listen_on(s, s->cfg.reg_path, m, n, &s->reg_server);
}

static void set_registered(kdp__dra_sockets *s, kdp__reg_state st, const char *why)
{
    s->registered = st == KDP__REG_REGISTERED;
    s->cfg.state(s->cfg.ud, st, why);
}

static void close_all(kdp__dra_sockets *s)
{
    if (s->reg_server || s->svc_server) {
        s->reg.base.ops->stop(&s->reg.base);
    }
    kdp__server_free(s->reg_server); /* removes the socket if still ours */
    kdp__server_free(s->svc_server);
    s->reg_server = NULL;
    s->svc_server = NULL;
    kdp__timer_stop(s->reopen);
    kdp__timer_stop(s->retry);
    set_registered(s, KDP__REG_WAITING, "the DRA sockets are closed");
}

static void start(kdp__dra_sockets *s)
{
    int r = listen_on(s, s->cfg.svc_path, s->methods, s->cfg.n_methods, &s->svc_server);
    if (r == 0) {
        r = open_reg(s);
    }
    if (r < 0) {
        close_all(s);
        kdp__timer_start(s->retry, retry_delay(s, s->failed_path, r));
        return;
    }
    kdp__backoff_reset(&s->retry_backoff);
    log_info("%s: serving %s; registration socket %s", s->cfg.driver, s->cfg.svc_path,
             s->cfg.reg_path);
    s->reg.base.ops->start(&s->reg.base);
}

void kdp__dra_sockets_serving(kdp__dra_sockets *s, bool on)
{
    s->serving = on;
    close_all(s);
    if (on) {
        start(s);
    }
}

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra_sockets *s = ud;
    if (s->serving && !s->svc_server) {
        start(s);
    }
}

/* A new registration socket, so that the kubelet asks again. */
static void on_reopen(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra_sockets *s = ud;
    if (!s->serving || !s->svc_server) {
        return;
    }
    s->reg.base.ops->stop(&s->reg.base);
    kdp__server_free(s->reg_server);
    s->reg_server = NULL;
    int r = open_reg(s);
    if (r < 0) {
        kdp__timer_start(s->reopen, retry_delay(s, s->cfg.reg_path, r));
        return;
    }
    s->reg.base.ops->start(&s->reg.base);
}

/* ---- what reg_watcher says ---- */

static void reg_state(void *ud, kdp__reg_state st, const char *why)
{
    set_registered(ud, st, why);
}

static void reg_attempt(void *ud, bool sent)
{
    (void)ud;
    (void)sent;
}

static void reg_restart(void *ud, const char *why)
{
    kdp__dra_sockets *s = ud;
    log_info("%s: %s", s->cfg.driver, why);
    kdp__timer_start(s->reopen, 0);
}

static void reg_peer_appeared(void *ud)
{
    (void)ud;
}

static bool reg_socket_intact(void *ud)
{
    kdp__dra_sockets *s = ud;
    struct stat st;
    return s->reg_server && lstat(s->cfg.reg_path, &st) == 0 &&
           st.st_ino == kdp__server_socket_ino(s->reg_server);
}

int kdp__dra_sockets_init(kdp__dra_sockets *s, kdp__loop *l, const kdp__dra_sockets_cfg *cfg)
{
    memset(s, 0, sizeof(*s));
    if (cfg->n_methods > KDP__DRA_SOCKETS_MAX_METHODS) {
        return -E2BIG;
    }
    s->loop = l;
    s->cfg = *cfg;
    memcpy(s->methods, cfg->methods, cfg->n_methods * sizeof(*s->methods));
    kdp__reg_up up = {
        .state = reg_state,
        .attempt = reg_attempt,
        .restart = reg_restart,
        .peer_appeared = reg_peer_appeared,
        .socket_intact = reg_socket_intact,
        .failed = NULL,
        .ud = s,
    };
    kdp__reg_info info = {
        .type = "DRAPlugin",
        .name = cfg->driver,
        .endpoint = cfg->svc_path,
        .versions = cfg->versions,
        .n_versions = cfg->n_versions,
    };
    kdp__backoff_init(&s->retry_backoff, RETRY_MIN_US, RETRY_MAX_US, 0);
    int r = kdp__reg_watcher_init(&s->reg, l, cfg->reg_path, cfg->driver, &info, &up);
    if (r == 0) {
        r = kdp__timer_new(l, on_reopen, s, &s->reopen);
    }
    if (r == 0) {
        r = kdp__timer_new(l, on_retry, s, &s->retry);
    }
    return r;
}

void kdp__dra_sockets_done(kdp__dra_sockets *s)
{
    s->serving = false;
    if (s->reopen) {
        close_all(s);
    }
    kdp__reg_watcher_done(&s->reg);
    kdp__timer_free(s->reopen);
    kdp__timer_free(s->retry);
    s->reopen = NULL;
    s->retry = NULL;
}
