/* SPDX-License-Identifier: MIT */
/*
 * kubelet: `kdpctl kubelet`, the kubelet's side of device-plugin
 * registration on kdp's own server and client: serves DIR/kubelet.sock,
 * cleans the directory as the kubelet does, simulates kubelet restarts on
 * SIGHUP and reports which plugins come back and how fast.
 */
#include "kubelet.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "rpc.h"

/* ---- output ---- */

void kl_json(kc_json *j, const char *event)
{
    kc_json_event(j, event);
}

void kl_say(const char *who, const char *text, const char *extra)
{
    kc_say_line(who, text, extra);
}

static void json_names(kc_json *j, const char *key, const kc_strv *names)
{
    kc_json_arr(j, key);
    for (size_t i = 0; i < names->n; i++) {
        kc_json_str(j, NULL, names->v[i]);
    }
    kc_json_end(j);
}

/* "ready" at start, "restart" (phase done) after a restart. */
static void say_serving(kl *k, const kc_strv *removed, const kc_strv *expected)
{
    if (k->o->json) {
        kc_json j;
        kl_json(&j, k->restarts ? "restart" : "ready");
        if (k->restarts) {
            kc_json_str(&j, "phase", "done");
        }
        kc_json_str(&j, "socket", k->sock);
        kc_json_str(&j, "dir", k->o->dir);
        if (k->registry) {
            kc_json_str(&j, "plugins_registry", k->registry);
        }
        kc_json_int(&j, "pid", (long long)getpid());
        kc_json_str(&j, "endpoint_tracking",
                    k->o->tracking == KC_TRACK_RESOURCE ? "resource" : "socket");
        json_names(&j, "removed", removed);
        if (k->restarts) {
            json_names(&j, "expected", expected);
        }
        kc_json_emit(&j);
        return;
    }
    kc_buf b = {0};
    kc_buf_printf(&b, "%s %s", k->restarts ? "restarted: re-created" : "listening on", k->sock);
    for (size_t i = 0; i < removed->n; i++) {
        kc_buf_printf(&b, "%s%s", i ? ", " : " (removed stale sockets: ", removed->v[i]);
    }
    kc_buf_puts(&b, removed->n ? ")" : "");
    if (k->registry) {
        kc_buf_printf(&b, "; watching %s", k->registry);
    }
    if (k->o->tracking == KC_TRACK_RESOURCE) {
        kc_buf_puts(&b, "; endpoint tracking by resource name (kubelets before PR #135437)");
    }
    for (size_t i = 0; i < expected->n; i++) {
        kc_buf_printf(&b, "%s%s", i ? ", " : "; waiting for ", expected->v[i]);
    }
    kl_say("kubelet", b.failed ? "serving" : b.s, NULL);
    kc_buf_free(&b);
}

/* ---- the socket directory ---- */

int kl_mkdir_p(const char *dir)
{
    return kdp__mkdir_p(dir, 0750);
}

/* Deletes the socket files in the directory, as the kubelet does when it
 * starts: never the checkpoint, never anything that is not a socket. */
static int remove_sockets(const char *dir, kc_strv *removed)
{
    DIR *d = opendir(dir);
    if (!d) {
        return -errno;
    }
    struct dirent *e;
    int r = 0;
    while (r == 0 && (e = readdir(d))) {
        struct stat st;
        if (strcmp(e->d_name, KL_CHECKPOINT) == 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(st.st_mode)) {
            continue;
        }
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
            r = kc_strv_add(removed, e->d_name);
        } else if (errno != ENOENT) {
            r = -errno;
        }
    }
    closedir(d);
    return r;
}

/* Cleans the directory and serves kubelet.sock. */
static int serve(kl *k, kc_strv *removed)
{
    int r = remove_sockets(k->o->dir, removed);
    if (r < 0) {
        return r;
    }
    static const kdp__method methods[] = {
        {"/v1beta1.Registration/Register", KDP__UNARY, kl_on_register, NULL, NULL},
    };
    kdp__method m = methods[0];
    m.ud = k;
    r = kdp__server_new(k->loop, &m, 1, NULL, &k->srv);
    if (r == 0) {
        r = kdp__server_listen(k->srv, k->sock);
    }
    k->listen_us = kdp__now_us();
    return r;
}

/* ---- restarts ---- */

static void expect_clear(kl *k)
{
    for (size_t i = 0; i < k->n_expect; i++) {
        free(k->expect[i].resource);
    }
    free(k->expect);
    k->expect = NULL;
    k->n_expect = 0;
    k->expect_open = false;
}

/* Who should come back: each resource with a plugin (once). */
static int expect_collect(kl *k, kc_strv *names)
{
    for (kl_plugin *p = k->plugins; p; p = p->next) {
        bool seen = p->state == KL_DIALING || p->state == KL_REPLACED;
        for (size_t i = 0; !seen && i < names->n; i++) {
            seen = strcmp(names->v[i], p->resource) == 0;
        }
        if (!seen && kc_strv_add(names, p->resource) < 0) {
            return -ENOMEM;
        }
    }
    k->expect = names->n ? calloc(names->n, sizeof(*k->expect)) : NULL;
    if (names->n && !k->expect) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < names->n; i++) {
        k->expect[i].resource = strdup(names->v[i]);
        if (!k->expect[i].resource) {
            return -ENOMEM;
        }
        k->n_expect = i + 1;
    }
    k->expect_open = names->n > 0;
    return 0;
}

static void summary(kl *k)
{
    kc_buf b = {0};
    size_t back = 0;
    uint64_t last = 0;
    char ms[32];
    for (size_t i = 0; i < k->n_expect; i++) {
        back += k->expect[i].back;
        last = k->expect[i].back && k->expect[i].after_us > last ? k->expect[i].after_us : last;
    }
    if (k->o->json) {
        kc_json j;
        kl_json(&j, "restart_summary");
        kc_json_arr(&j, "back");
        for (size_t i = 0; i < k->n_expect; i++) {
            if (k->expect[i].back) {
                kc_json_obj(&j, NULL);
                kc_json_str(&j, "resource", k->expect[i].resource);
                kc_json_ms(&j, "ms", k->expect[i].after_us);
                kc_json_end(&j);
            }
        }
        kc_json_end(&j);
        kc_json_arr(&j, "missing");
        for (size_t i = 0; i < k->n_expect; i++) {
            if (!k->expect[i].back) {
                kc_json_str(&j, NULL, k->expect[i].resource);
            }
        }
        kc_json_emit(&j);
        return;
    }
    if (back == k->n_expect) {
        kc_buf_printf(&b, "restart: all %zu plugin%s came back, the last in %s ms", back,
                      back == 1 ? "" : "s", kc_ms(last, ms, sizeof(ms)));
    } else {
        kc_buf_printf(&b, "restart: %zu of %zu plugins came back within 10s; still missing:", back,
                      k->n_expect);
        for (size_t i = 0; i < k->n_expect; i++) {
            if (!k->expect[i].back) {
                kc_buf_printf(&b, " %s", k->expect[i].resource);
            }
        }
    }
    kl_say("kubelet", b.failed ? "restart summary" : b.s, NULL);
    kc_buf_free(&b);
}

void kl_registered(kl *k, kl_plugin *p)
{
    for (size_t i = 0; k->expect_open && i < k->n_expect; i++) {
        kl_expect *e = &k->expect[i];
        if (e->back || strcmp(e->resource, p->resource) != 0) {
            continue;
        }
        e->back = true;
        e->after_us = p->arrived_us - k->listen_us;
        char ms[32];
        char text[128];
        kc_ms(e->after_us, ms, sizeof(ms));
        if (k->o->json) {
            kc_json j;
            kl_json(&j, "came_back");
            kc_json_str(&j, "resource", p->resource);
            kc_json_ms(&j, "ms", e->after_us);
            kc_json_emit(&j);
        } else {
            snprintf(text, sizeof(text), "came back in %s ms (%s)", ms,
                     p->via_watcher ? "kubelet restarted -> GetInfo answered, via watcher"
                                    : "kubelet.sock re-created -> Register");
            kl_say(p->resource, text, NULL);
        }
    }
    bool all = k->expect_open;
    for (size_t i = 0; all && i < k->n_expect; i++) {
        all = k->expect[i].back;
    }
    if (all) {
        summary(k);
        k->expect_open = false;
        kdp__timer_stop(k->report);
    }
}

static void on_report(kdp__timer *t, void *ud)
{
    (void)t;
    kl *k = ud;
    if (k->expect_open) {
        summary(k);
        k->expect_open = false;
    }
}

static void free_plugins(kl *k)
{
    while (k->plugins) {
        kl_plugin_free(k->plugins);
    }
}

static void fatal(kl *k, const char *what, const char *path, int r)
{
    char msg[8400];
    snprintf(msg, sizeof(msg), "%s %s: %s", what, path, strerror(-r));
    kc_print_error(k->o->json, "kubelet", NULL, 0, msg,
                   r == -EACCES || r == -EPERM
                       ? "permission denied: run as root or use --device-plugin-dir"
                       : NULL);
    k->exit = KC_EXIT_FAIL;
    kdp__loop_quit(k->loop);
}

static void restart(kl *k)
{
    kc_strv names = {0};
    kc_strv removed = {0};
    k->restarts++;
    if (k->o->json) {
        kc_json j;
        kl_json(&j, "restart");
        kc_json_str(&j, "phase", "begin");
        kc_json_emit(&j);
    } else {
        kl_say("kubelet",
               k->registry ? "SIGHUP: simulating a kubelet restart (connections closed, sockets "
                             "deleted, kubelet.sock re-created; plugins_registry kept and "
                             "walked again)"
                           : "SIGHUP: simulating a kubelet restart (connections closed, sockets "
                             "deleted, kubelet.sock re-created)",
               NULL);
    }
    /* Like a dying kubelet: every connection goes at once. */
    kdp__server_free(k->srv);
    k->srv = NULL;
    expect_clear(k);
    int r = expect_collect(k, &names);
    free_plugins(k);
    kl_watcher_stop(k); /* the new kubelet knows nothing of the old one's */
    kl_cap_forget(k);
    if (r == 0) {
        r = serve(k, &removed);
    }
    if (r < 0) {
        fatal(k, "cannot restart on", k->sock, r);
    } else {
        say_serving(k, &removed, &names);
        kdp__timer_start(k->report, KL_REPORT_DELAY);
        r = k->registry ? kl_watcher_start(k) : 0;
        if (r < 0) {
            fatal(k, "cannot watch", k->registry, r);
        }
    }
    kc_strv_free(&names);
    kc_strv_free(&removed);
}

/* ---- the process ---- */

static void stop(kl *k, const char *reason)
{
    if (k->o->json) {
        kc_json j;
        kl_json(&j, "exit");
        kc_json_str(&j, "reason", reason);
        kc_json_emit(&j);
    } else {
        char text[64];
        snprintf(text, sizeof(text), "%s: stopping", reason);
        kl_say("kubelet", text, NULL);
    }
    if (k->exit < 0) {
        k->exit = KC_EXIT_OK;
    }
    kdp__loop_quit(k->loop);
}

static void on_signal(kdp__signal *s, int signo, void *ud)
{
    (void)s;
    kl *k = ud;
    if (signo == SIGHUP) {
        restart(k);
    } else {
        stop(k, signo == SIGINT ? "SIGINT" : "SIGTERM");
    }
}

static void on_deadline(kdp__timer *t, void *ud)
{
    (void)t;
    stop(ud, "timeout");
}

static int setup(kl *k)
{
    static const int signals[3] = {SIGINT, SIGTERM, SIGHUP};
    int r = kdp__loop_new(&k->loop);
    for (int i = 0; r == 0 && i < 3; i++) {
        r = kdp__signal_add(k->loop, signals[i], on_signal, k, &k->sig[i]);
    }
    if (r == 0) {
        r = kdp__timer_new(k->loop, on_deadline, k, &k->deadline);
    }
    if (r == 0) {
        r = kdp__timer_new(k->loop, on_report, k, &k->report);
    }
    if (r == 0 && k->o->timeout_us) {
        kdp__timer_start(k->deadline, k->o->timeout_us);
    }
    return r;
}

static void teardown(kl *k)
{
    kdp__server_free(k->srv); /* removes kubelet.sock: it is ours */
    free_plugins(k);
    kl_watcher_stop(k);
    expect_clear(k);
    kl_cap_free(k);
    kdp__timer_free(k->deadline);
    kdp__timer_free(k->report);
    for (int i = 0; i < 3; i++) {
        kdp__signal_free(k->sig[i]);
    }
    if (k->loop) {
        kc_loop_drain(k->loop);
    }
    kdp__loop_free(k->loop);
    free(k->sock);
    free(k->registry);
}

int kc_cmd_kubelet(const kc_opts *o)
{
    kl k = {.o = o, .exit = -1};
    kc_strv removed = {0};
    setvbuf(stdout, NULL, _IOLBF, 0);
    k.sock = kc_socket_path(o, KL_SOCKET);
    const char *registry = kc_registry_dir(o, true);
    if (registry) {
        k.registry = strdup(registry);
    }
    int r = k.sock && (!registry || k.registry) ? kl_mkdir_p(o->dir) : -ENOMEM;
    const char *failed_dir = o->dir;
    if (r == 0 && registry) {
        r = kl_mkdir_p(registry); /* the kubelet's MkdirAll, before it serves */
        failed_dir = registry;
    }
    if (r < 0) {
        char msg[8400];
        snprintf(msg, sizeof(msg), "cannot create %s: %s", failed_dir, strerror(-r));
        kc_print_error(o->json, "kubelet", NULL, 0, msg,
                       r == -EACCES ? "permission denied: run as root or use --device-plugin-dir"
                                    : NULL);
        free(k.sock);
        free(k.registry);
        return KC_EXIT_FAIL;
    }
    r = setup(&k);
    if (r == 0) {
        r = serve(&k, &removed);
    }
    if (r < 0) {
        fatal(&k, "cannot serve", k.sock, r);
    } else {
        kc_strv none = {0};
        say_serving(&k, &removed, &none);
        r = k.registry ? kl_watcher_start(&k) : 0;
        if (r < 0) {
            fatal(&k, "cannot watch", k.registry, r);
        } else {
            r = kdp__loop_run(k.loop);
        }
    }
    kc_strv_free(&removed);
    if (k.exit < 0) {
        k.exit = r < 0 ? kc_fail_errno(o, "event loop", r) : KC_EXIT_OK;
    }
    teardown(&k);
    return k.exit;
}
