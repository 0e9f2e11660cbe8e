/* SPDX-License-Identifier: MIT */
/* rpc: one waited-for call on a private loop, and failures explained. */
#include "rpc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "grpc/client.h"
#include "grpc/wire.h"
#include "print.h"

typedef struct unary_wait {
    kdp__loop *loop;
    kc_reply *reply;
    int err;
} unary_wait;

static void on_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    unary_wait *w = ud;
    w->reply->done_us = kdp__now_us();
    w->reply->status = status;
    w->reply->message = strdup(message);
    if (resp) {
        w->reply->resp = malloc(len ? len : 1);
        if (w->reply->resp) {
            memcpy(w->reply->resp, resp, len);
        }
        w->reply->len = len;
    }
    if (!w->reply->message || (resp && !w->reply->resp)) {
        w->err = -ENOMEM;
    }
    kdp__loop_quit(w->loop);
}

void kc_loop_drain(kdp__loop *l)
{
    for (int i = 0; i < 100 && kdp__loop_next_timeout_ms(l) == 0; i++) {
        (void)kdp__loop_dispatch(l, 0);
    }
}

int kc_unary(const char *path, const char *method, const ProtobufCMessage *req, uint64_t timeout_us,
             kc_reply *ret)
{
    kc_reply reply = {.status = -1};
    unary_wait w = {.reply = &reply};
    int r = kdp__loop_new(&w.loop);
    if (r < 0) {
        return r;
    }
    kdp__unary_opts opts = {.timeout_us = timeout_us};
    r = kdp__client_unary_pb(w.loop, path, method, req, &opts, on_done, &w, NULL);
    if (r == 0) {
        r = kdp__loop_run(w.loop);
    }
    kc_loop_drain(w.loop);
    kdp__loop_free(w.loop);
    if (r == 0 && (w.err < 0 || reply.status < 0)) {
        r = w.err < 0 ? w.err : -EIO;
    }
    if (r < 0) {
        kc_reply_free(&reply);
        return r;
    }
    *ret = reply;
    return 0;
}

void kc_reply_free(kc_reply *r)
{
    free(r->message);
    free(r->resp);
    *r = (kc_reply){0};
}

void kc_call_begin(kc_call *c, const char *path, uint64_t timeout_us)
{
    struct stat st;
    *c = (kc_call){.path = path, .timeout_us = timeout_us, .start_us = kdp__now_us()};
    if (lstat(path, &st) == 0) {
        c->existed = true;
        c->dev = st.st_dev;
        c->ino = st.st_ino;
    }
}

/* Who ended a failed call. kdp's client (src/grpc/client.c) tells its own
 * failures from the plugin's answers only in the wording of its message:
 * these are its words, in one place (a test in tests/kdpctl pins each). */
typedef enum origin {
    FROM_PLUGIN, /* the plugin answered with this status */
    NO_CONNECT,  /* connect() failed: "connect PATH: ERROR" */
    CONN_LOST,   /* connected, and the connection ended before any status */
    OWN_LIMIT,   /* an answer over kdpctl's receive limit */
} origin;

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static origin origin_of(int status, const char *message)
{
    if (status == KDP__ST_UNAVAILABLE && starts_with(message, "connect ")) {
        return NO_CONNECT;
    }
    if (status == KDP__ST_UNAVAILABLE &&
        starts_with(message, "connection closed before the response")) {
        return CONN_LOST;
    }
    if (status == KDP__ST_RESOURCE_EXHAUSTED && starts_with(message, "response larger than max")) {
        return OWN_LIMIT;
    }
    return FROM_PLUGIN;
}

/* Connects to path without blocking (a full listen queue is -EAGAIN, not a
 * wait) and hangs up: 0 if something listens, else -errno. */
static int probe_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* What is at the call's socket path now. */
typedef enum sock_now {
    NOW_GONE,    /* no file */
    NOW_REFUSED, /* a socket nobody listens on */
    NOW_SAME,    /* listening, the same file as when the call began */
    NOW_NEW,     /* listening, another file: re-created since */
    NOW_UNKNOWN, /* anything else (not a socket, no permission, ...) */
} sock_now;

static sock_now look_now(const kc_call *c)
{
    struct stat st;
    if (lstat(c->path, &st) < 0) {
        return errno == ENOENT ? NOW_GONE : NOW_UNKNOWN;
    }
    if (!S_ISSOCK(st.st_mode)) {
        return NOW_UNKNOWN;
    }
    int r = probe_connect(c->path);
    if (r == -ECONNREFUSED) {
        return NOW_REFUSED;
    }
    if (r < 0) {
        return NOW_UNKNOWN;
    }
    return c->existed && st.st_dev == c->dev && st.st_ino == c->ino ? NOW_SAME : NOW_NEW;
}

static const char *dir_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        return ".";
    }
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    snprintf(buf, cap, "%.*s", (int)n, path);
    return buf;
}

static bool is_socket_entry(DIR *d, const struct dirent *e)
{
    struct stat st;
    if (e->d_type != DT_UNKNOWN) {
        return e->d_type == DT_SOCK;
    }
    return fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode);
}

/* Appends "; sockets there: a.sock, b.sock" (at most a few) to buf. */
static void add_sockets_in(const char *dir, char *buf, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d) {
        return;
    }
    size_t len = strlen(buf);
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && len < cap) {
        if (!is_socket_entry(d, e)) {
            continue;
        }
        if (n == 5) {
            (void)snprintf(buf + len, cap - len, ", ...");
            break;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                n ? ", " : "; sockets there: ", e->d_name);
        n++;
    }
    closedir(d);
}

const char *kc_socket_hint(const char *path, char *buf, size_t cap)
{
    char dir[4096];
    struct stat st;
    if (lstat(path, &st) < 0) {
        int e = errno;
        const char *d = dir_of(path, dir, sizeof(dir));
        struct stat dst;
        if (e == ENOENT && stat(d, &dst) < 0 && errno == ENOENT) {
            snprintf(buf, cap,
                     "the directory %s does not exist: a wrong --device-plugin-dir or "
                     "$KDP_DEVICE_PLUGIN_DIR?",
                     d);
        } else if (e == ENOENT) {
            snprintf(buf, cap, "no such socket: is the plugin running? dir is %s", d);
            add_sockets_in(d, buf, cap);
        } else if (e == ENOTDIR) {
            snprintf(buf, cap, "a part of %s is not a directory: give the plugin's socket file",
                     path);
        } else if (e == EACCES) {
            snprintf(buf, cap, "permission denied: run as root or check the permissions of %s", d);
        } else {
            snprintf(buf, cap, "cannot look at %s: %s", path, strerror(e));
        }
        return buf;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(buf, cap, "%s is not a unix socket: give the plugin's socket file", path);
        return buf;
    }
    int r = probe_connect(path);
    if (r == -EACCES || r == -EPERM) {
        snprintf(buf, cap,
                 "permission denied: run as root or check the socket's owner "
                 "(uid %u, mode %04o)",
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    } else if (r == -ECONNREFUSED) {
        snprintf(buf, cap,
                 "nothing listens on %s: the plugin has exited and left its socket behind", path);
    } else if (r == -EAGAIN) {
        snprintf(buf, cap,
                 "the listen queue of %s is full: the plugin does not accept connections "
                 "(is its event loop stuck?)",
                 path);
    } else if (r == -ENAMETOOLONG) {
        snprintf(buf, cap, "the socket path is longer than a unix socket allows (%d bytes)",
                 KDP_SOCKET_PATH_MAX);
    } else {
        return NULL;
    }
    return buf;
}

/* The call never connected. */
static const char *no_connect_hint(const kc_call *c, char *buf, size_t cap)
{
    if (c->existed && look_now(c) == NOW_GONE) {
        snprintf(buf, cap,
                 "%s went away as kdpctl connected: the plugin was stopping or restarting; "
                 "check its logs",
                 c->path);
        return buf;
    }
    if (kc_socket_hint(c->path, buf, cap)) {
        return buf;
    }
    snprintf(buf, cap,
             "nothing took the connection when kdpctl tried, but %s accepts one now: the plugin "
             "was (re)starting; try again",
             c->path);
    return buf;
}

/* The call connected and the connection ended before any answer. */
static const char *lost_hint(const kc_call *c, char *buf, size_t cap)
{
    sock_now now = look_now(c);
    if (now == NOW_SAME) {
        /* A process that is exiting closes its connections before its
         * listening socket: look again once it had the time to finish. */
        (void)usleep(100 * 1000);
        now = look_now(c);
    }
    switch (now) {
    case NOW_GONE:
        snprintf(buf, cap,
                 "the connection was lost mid-call and %s is gone: the plugin exited or was "
                 "stopped during the call; check its logs",
                 c->path);
        break;
    case NOW_REFUSED:
        snprintf(buf, cap,
                 "the connection was lost mid-call and nothing listens on %s any more: the plugin "
                 "process exited or crashed during the call; check its logs",
                 c->path);
        break;
    case NOW_NEW:
        snprintf(buf, cap,
                 "the connection was lost mid-call and %s is a new socket now: the plugin "
                 "restarted during the call (its logs say why); try again",
                 c->path);
        break;
    case NOW_SAME:
        snprintf(buf, cap,
                 "the plugin closed the connection without answering and still listens on %s: "
                 "its logs say why (too many connections?)",
                 c->path);
        break;
    case NOW_UNKNOWN:
        snprintf(buf, cap,
                 "the connection was lost mid-call: the plugin process probably exited or "
                 "crashed; check its logs");
        break;
    }
    return buf;
}

/* The plugin itself answered UNAVAILABLE. */
static const char *unavailable_hint(const kc_call *c, char *buf, size_t cap)
{
    switch (look_now(c)) {
    case NOW_GONE:
        snprintf(buf, cap,
                 "the plugin answered UNAVAILABLE itself and its socket is gone now: it was "
                 "stopping (SIGTERM?) during the call; check its logs");
        return buf;
    case NOW_REFUSED:
        snprintf(buf, cap,
                 "the plugin answered UNAVAILABLE itself and has exited since (nothing listens "
                 "on %s); check its logs",
                 c->path);
        return buf;
    case NOW_NEW:
        snprintf(buf, cap,
                 "the plugin answered UNAVAILABLE itself and %s is a new socket now: it "
                 "restarted during the call; try again",
                 c->path);
        return buf;
    default:
        return "the plugin answered UNAVAILABLE itself and still listens: its message says why";
    }
}

/* A duration measured (not configured): "203ms", "12.5s". */
static const char *fmt_elapsed(uint64_t us, char *buf, size_t cap)
{
    if (us < UINT64_C(10000000)) {
        snprintf(buf, cap, "%llums", (unsigned long long)((us + 500) / 1000));
    } else {
        snprintf(buf, cap, "%.1fs", (double)us / 1e6);
    }
    return buf;
}

/* The callback named in kdp's message for a callback past the plugin's
 * deadline (src/plugin/service.c): "RESOURCE: the WHAT callback did not return
 * within N ms". The plugin's words: only to name it, never to decide. */
static bool parse_callback_deadline(const char *msg, char *res, size_t rcap, char *what,
                                    size_t wcap, unsigned long *ms)
{
    static const char mid[] = ": the ";
    static const char tail[] = " callback did not return within ";
    const char *a = strstr(msg, mid);
    const char *b = a ? strstr(a + strlen(mid), tail) : NULL;
    if (!b || a == msg || b == a + strlen(mid)) {
        return false;
    }
    const char *num = b + strlen(tail);
    char *end;
    errno = 0;
    unsigned long v = strtoul(num, &end, 10);
    if (end == num || errno != 0 || strcmp(end, " ms") != 0) {
        return false;
    }
    const char *w = a + strlen(mid);
    snprintf(res, rcap, "%.*s", (int)(a - msg), msg);
    snprintf(what, wcap, "%.*s", (int)(b - w), w);
    *ms = v;
    return true;
}

/* DEADLINE_EXCEEDED: kdpctl's own bound (also the plugin's deadline for the
 * call, sent as grpc-timeout) if the call ran that long, else a deadline
 * inside the plugin. Decided on the time, not on the plugin's words. */
static const char *deadline_hint(const kc_opts *o, const kc_call *c, const char *message, char *buf,
                                 size_t cap)
{
    char d[32];
    char e[32];
    if (c->timeout_us && c->elapsed_us >= c->timeout_us) {
        kc_format_duration(c->timeout_us, d, sizeof(d));
        if (strcmp(o->cmd, "options") == 0 || strcmp(o->cmd, "info") == 0) {
            snprintf(buf, cap,
                     "no answer within %s (kdpctl's --timeout): the socket took the connection "
                     "but nothing answered: the plugin's event loop is stuck, or this is not a "
                     "gRPC server",
                     d);
        } else {
            snprintf(buf, cap,
                     "no answer within %s (kdpctl's --timeout, also sent to the plugin as the "
                     "call's deadline): a slow or hung %s callback, or a stuck plugin? its logs "
                     "may say; --timeout sets the bound",
                     d, strcmp(o->cmd, "preferred") == 0 ? "preferred allocation" : o->cmd);
        }
        return buf;
    }
    fmt_elapsed(c->elapsed_us, e, sizeof(e));
    if (!c->timeout_us) {
        snprintf(buf, cap,
                 "the plugin ended the call after %s by a deadline of its own (kdpctl set none "
                 "on this call): its message and logs say which",
                 e);
        return buf;
    }
    kc_format_duration(c->timeout_us, d, sizeof(d));
    char res[256];
    char what[64];
    unsigned long ms;
    if (parse_callback_deadline(message, res, sizeof(res), what, sizeof(what), &ms)) {
        snprintf(buf, cap,
                 "the plugin's own callback deadline (%lu ms) fired, not kdpctl's --timeout (%s): "
                 "%s's %s callback is slow or hung; fix it, or raise the plugin's callback "
                 "timeout",
                 ms, d, res, what);
        return buf;
    }
    snprintf(buf, cap,
             "the plugin gave up after %s by a deadline of its own, not kdpctl's --timeout (%s): "
             "something in the plugin is slow or hung; its message and logs say what",
             e, d);
    return buf;
}

static const char *unimplemented_hint(const kc_opts *o, const kc_call *c, char *buf, size_t cap)
{
    const char *base = strrchr(c->path, '/');
    base = base ? base + 1 : c->path;
    if (strcmp(base, KDP_KUBELET_SOCKET) == 0) {
        return "kubelet.sock is the kubelet's own socket (Registration), not a plugin's: give "
               "the plugin's socket";
    }
    if (strcmp(o->cmd, "info") == 0) {
        snprintf(buf, cap,
                 "%s does not serve pluginregistration.Registration: a device plugin that "
                 "registers through kubelet.sock, not through the plugin watcher (`kdpctl "
                 "options` talks to it)",
                 c->path);
        return buf;
    }
    if (strcmp(o->cmd, "preferred") == 0) {
        return "the plugin does not offer preferred allocations "
               "(get_preferred_allocation_available is false)";
    }
    if (strcmp(o->cmd, "prestart") == 0) {
        snprintf(buf, cap,
                 "the plugin does not implement PreStartContainer; the kubelet calls it only "
                 "when the plugin's options say pre_start_required (`kdpctl options %s`)",
                 o->pos.n ? o->pos.v[0] : c->path);
        return buf;
    }
    snprintf(buf, cap,
             "%s does not serve this v1beta1 DevicePlugin method, which every device plugin "
             "serves: not a device plugin's socket, or another API version?",
             c->path);
    return buf;
}

static const char *status_hint(const kc_opts *o, const kc_call *c, int status, const char *message,
                               char *buf, size_t cap)
{
    bool ids = strcmp(o->cmd, "allocate") == 0 || strcmp(o->cmd, "prestart") == 0 ||
               strcmp(o->cmd, "preferred") == 0;
    bool list_and_watch = strcmp(o->cmd, "list") == 0 || strcmp(o->cmd, "watch") == 0;
    origin from = origin_of(status, message);
    switch (status) {
    case KDP__ST_UNAVAILABLE:
        switch (from) {
        case NO_CONNECT:
            return no_connect_hint(c, buf, cap);
        case CONN_LOST:
            return lost_hint(c, buf, cap);
        default:
            return unavailable_hint(c, buf, cap);
        }
    case KDP__ST_PERMISSION_DENIED:
        return "the plugin refused the call itself (the socket let kdpctl in): its message says "
               "why";
    case KDP__ST_UNIMPLEMENTED:
        return unimplemented_hint(o, c, buf, cap);
    case KDP__ST_DEADLINE_EXCEEDED:
        return deadline_hint(o, c, message, buf, cap);
    case KDP__ST_RESOURCE_EXHAUSTED:
        if (from == OWN_LIMIT && list_and_watch) {
            return "the device list is over the kubelet's 4 MiB message limit: the kubelet "
                   "rejects it too (\"received message larger than max\"); fewer devices or "
                   "shorter IDs";
        }
        if (from == OWN_LIMIT) {
            return "the plugin's answer is larger than kdpctl accepts; the kubelet accepts "
                   "4 MiB at most and would reject it too";
        }
        return "the plugin refused the call itself for lack of a resource of its own: its "
               "message says which";
    case KDP__ST_CANCELLED:
        return "the plugin cancelled the call itself (it reset the stream): its logs say why";
    case KDP__ST_INVALID_ARGUMENT:
        if (ids) {
            snprintf(buf, cap, "`kdpctl list %s` shows the plugin's device IDs and their health",
                     o->pos.n ? o->pos.v[0] : c->path);
            return buf;
        }
        return NULL;
    default:
        return NULL;
    }
}

int kc_fail_call(const kc_opts *o, const kc_call *c, int status, const char *message,
                 const char *shown)
{
    char buf[1024];
    const char *hint = status_hint(o, c, status, message, buf, sizeof(buf));
    kc_print_error(o->json, o->cmd, kdp__status_name(status), status, shown ? shown : message,
                   hint);
    return KC_EXIT_FAIL;
}

int kc_fail_errno(const kc_opts *o, const char *what, int neg_errno)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "%s: %s", what, strerror(-neg_errno));
    kc_print_error(o->json, o->cmd, NULL, 0, msg, NULL);
    return KC_EXIT_FAIL;
}

int kc_call_plugin(const kc_opts *o, const char *path, const char *method,
                   const ProtobufCMessage *req, kc_reply *ret)
{
    kc_call c;
    kc_call_begin(&c, path, o->timeout_us ? o->timeout_us : KC_DEFAULT_TIMEOUT);
    kc_reply rep;
    int r = kc_unary(path, method, req, c.timeout_us, &rep);
    if (r < 0) {
        return kc_fail_errno(o, "cannot make the call", r);
    }
    if (rep.status != KDP__ST_OK) {
        c.elapsed_us = rep.done_us - c.start_us;
        int e = kc_fail_call(o, &c, rep.status, rep.message, NULL);
        kc_reply_free(&rep);
        return e;
    }
    *ret = rep;
    return KC_EXIT_OK;
}

int kc_fail_decode(const kc_opts *o, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "the plugin's answer does not decode as a %s", what);
    kc_print_error(o->json, o->cmd, kdp__status_name(KDP__ST_INTERNAL), KDP__ST_INTERNAL, msg,
                   NULL);
    return KC_EXIT_FAIL;
}
