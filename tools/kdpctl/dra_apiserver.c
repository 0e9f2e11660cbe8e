/* SPDX-License-Identifier: MIT */
/*
 * dra_apiserver: `kdpctl dra apiserver`: the process (credentials and
 * files in --dir, HTTPS on --listen, the Node objects, signals, --timeout);
 * the requests are dra_route.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "dra_api.h"
#include "k8s/kfile.h"
#include "kubelet.h"
#include "rpc.h"

void kd_bookmark_cb(kdp__timer *t, void *ud);

/* ---- files ---- */

static int write_file(const char *dir, const char *name, const char *data, mode_t mode)
{
    char path[4200];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    return kdp__replace_file(path, data, strlen(data), mode);
}

int kd_api_write_files(kd_api *a)
{
    const char *dir = a->o->dir;
    int r = kl_mkdir_p(dir);
    if (r == 0) {
        r = write_file(dir, "ca.crt", a->creds.ca_pem, 0644);
    }
    if (r == 0) {
        r = write_file(dir, "token", a->creds.token, 0600);
    }
    if (r == 0) {
        r = write_file(dir, "server.crt", a->creds.cert_pem, 0644);
    }
    if (r == 0) {
        r = write_file(dir, "server.key", a->creds.key_pem, 0600);
    }
    char abs[4096];
    if (r == 0 && !realpath(dir, abs)) {
        r = -errno;
    }
    static const char form[] = "apiVersion: v1\n"
                               "kind: Config\n"
                               "clusters:\n"
                               "- name: kdpctl\n"
                               "  cluster:\n"
                               "    server: %s\n"
                               "    certificate-authority: %s/ca.crt\n"
                               "users:\n"
                               "- name: kdpctl\n"
                               "  user:\n"
                               "    %s: %s%s\n"
                               "contexts:\n"
                               "- name: kdpctl\n"
                               "  context:\n"
                               "    cluster: kdpctl\n"
                               "    user: kdpctl\n"
                               "    namespace: default\n"
                               "current-context: kdpctl\n";
    for (int file = 0; file < 2 && r == 0; file++) {
        kc_buf kc = {0};
        kc_buf_printf(&kc, form, a->server, abs, file ? "tokenFile" : "token", file ? abs : "",
                      file ? "/token" : a->creds.token);
        r = kc.failed ? -ENOMEM
                      : write_file(dir, file ? "kubeconfig-tokenfile" : "kubeconfig", kc.s, 0600);
        kc_buf_free(&kc);
    }
    return r;
}

/* "HOST:PORT" of the server line of DIR/kubeconfig (ours), into buf; else
 * "127.0.0.1:0". */
static const char *last_address(const char *dir, char *buf, size_t len)
{
    char path[4200];
    char *text = NULL;
    snprintf(path, sizeof(path), "%s/kubeconfig", dir);
    const char *s =
        kdp__kfile_read(path, &text, NULL) == 0 ? strstr(text, "server: https://") : NULL;
    if (s) {
        s += strlen("server: https://");
        snprintf(buf, len, "%.*s", (int)strcspn(s, "/\r\n"), s);
    }
    free(text);
    return buf[0] && strrchr(buf, ':') ? buf : "127.0.0.1:0";
}

/* ---- the process ---- */

static void say(const char *text, const char *extra)
{
    kd_say_as("dra-apiserver", text, extra);
}

static int add_node(kd_api *a, const char *name)
{
    if (kd_store_find(a, KD_NODE, NULL, name)) {
        return 0;
    }
    char uid[37];
    char now[32];
    kd_uuid(uid);
    kd_now(now);
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "kind", "Node", "apiVersion", "v1",
                          "metadata", "name", name, "uid", uid, "creationTimestamp", now);
    return o && kd_store_put(a, KD_NODE, NULL, name, o, NULL) ? 0 : -ENOMEM;
}

static void stop(kd_api *a, const char *reason)
{
    if (a->o->json) {
        kc_json j;
        kd_json(&j, "exit");
        kc_json_str(&j, "reason", reason);
        kc_json_uint(&j, "requests", a->requests);
        kc_json_uint(&j, "errors", a->errors);
        kc_json_emit(&j);
    } else {
        char text[160];
        snprintf(text, sizeof(text), "%s: stopping (%lu requests, %lu errors)", reason, a->requests,
                 a->errors);
        say(text, NULL);
    }
    if (a->exit < 0) {
        a->exit = KC_EXIT_OK;
    }
    kdp__loop_quit(a->loop);
}

static void on_signal(kdp__signal *s, int signo, void *ud)
{
    (void)s;
    stop(ud, signo == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_deadline(kdp__timer *t, void *ud)
{
    (void)t;
    stop(ud, "timeout");
}

/* Every 5 s while watches are open: the clients gone from them. */
static void on_reap(kdp__timer *t, void *ud)
{
    kd_api *a = ud;
    if (a->http) { /* not down */
        (void)kd_http_reap(a->http);
    }
    if (a->watches) {
        kdp__timer_start(t, KD_REAP_US);
    }
}

static int start_loop(kd_api *a)
{
    static const int signals[2] = {SIGINT, SIGTERM};
    int r = kdp__loop_new(&a->loop);
    a->owns_loop = r == 0;
    for (int i = 0; r == 0 && i < 2; i++) {
        r = kdp__signal_add(a->loop, signals[i], on_signal, a, &a->sig[i]);
    }
    if (r == 0) {
        r = kdp__timer_new(a->loop, on_deadline, a, &a->deadline);
    }
    if (r == 0 && a->o->timeout_us) {
        kdp__timer_start(a->deadline, a->o->timeout_us);
    }
    return r;
}

/* The Node objects: --node, else $NODE_NAME, else the host name. */
static int add_nodes(kd_api *a)
{
    const kd_opts *o = a->o;
    int r = 0;
    for (size_t i = 0; r == 0 && i < o->nodes.n; i++) {
        r = add_node(a, o->nodes.v[i]);
    }
    if (r == 0 && o->nodes.n == 0) {
        const char *env = getenv("NODE_NAME");
        char hn[256] = "";
        if (!env || !*env) {
            (void)gethostname(hn, sizeof(hn) - 1);
        }
        r = add_node(a, env && *env ? env : *hn ? hn : "node-a");
    }
    return r;
}

static int start(kd_api *a, const char **stage)
{
    const kd_opts *o = a->o;
    *stage = "start";
    int r = a->loop ? 0 : start_loop(a);
    if (r == 0) {
        r = kdp__timer_new(a->loop, kd_bookmark_cb, a, &a->bookmark);
    }
    if (r == 0) {
        r = kdp__timer_new(a->loop, on_reap, a, &a->reaper);
    }
    if (r == 0) {
        *stage = "make the credentials";
        a->reused = kd_tls_load(o->dir, &a->creds) == 0;
        r = a->reused ? 0 : kd_tls_make(&a->creds);
    }
    /* the address of the start before (its kubeconfig), for a driver that
     * kept running: else a free port */
    char before[128] = "";
    const char *listen = o->listen ? o->listen : last_address(o->dir, before, sizeof(before));
    const char *colon = strrchr(listen, ':');
    char host[100];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - listen), listen);
    if (host[0] == '[') { /* [::1] */
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    if (r == 0) {
        *stage = "listen on";
        r = kd_http_new(a->loop, host, colon + 1, a->creds.cert_pem, a->creds.key_pem,
                        kd_api_request, a, &a->http);
        if (r < 0 && !o->listen && before[0]) { /* taken meanwhile: any free port */
            snprintf(host, sizeof(host), "127.0.0.1");
            r = kd_http_new(a->loop, host, "0", a->creds.cert_pem, a->creds.key_pem, kd_api_request,
                            a, &a->http);
        }
    }
    if (r == 0) { /* where an outage's end listens again */
        snprintf(a->faults.host, sizeof(a->faults.host), "%s", host);
        snprintf(a->faults.port, sizeof(a->faults.port), "%u", kd_http_port(a->http));
        bool v6 = strchr(host, ':') != NULL;
        snprintf(a->server, sizeof(a->server), "https://%s%s%s:%u", v6 ? "[" : "",
                 strcmp(host, "0.0.0.0") == 0 || !*host ? "127.0.0.1" : host, v6 ? "]" : "",
                 kd_http_port(a->http));
        *stage = "write the files in";
        r = kd_api_write_files(a);
    }
    if (r == 0) {
        *stage = "read stdin for";
        r = kd_faults_start(a, a->owns_loop);
    }
    return r == 0 ? add_nodes(a) : r;
}

static void say_ready(kd_api *a)
{
    const kd_opts *o = a->o;
    char kcpath[4200];
    snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", o->dir);
    if (o->json) {
        kc_json j;
        kd_json(&j, "ready");
        kc_json_str(&j, "url", a->server);
        kc_json_str(&j, "kubeconfig", kcpath);
        kc_json_str(&j, "dir", o->dir);
        kc_json_bool(&j, "reused", a->reused);
        kc_json_arr(&j, "nodes");
        for (kd_obj *n = a->objs[KD_NODE]; n; n = n->next) {
            kc_json_str(&j, NULL, n->name);
        }
        kc_json_end(&j);
        kc_json_emit(&j);
        return;
    }
    kc_buf b = {0};
    kc_buf_printf(
        &b, "serving %s (resource.k8s.io/v1: resourceslices, resourceclaims; nodes:", a->server);
    for (kd_obj *n = a->objs[KD_NODE]; n; n = n->next) {
        kc_buf_printf(&b, " %s", n->name);
    }
    kc_buf_printf(&b, "); kubeconfig %s (kubectl --kubeconfig %s get resourceslices)%s", kcpath,
                  kcpath, a->reused ? "; the CA, certificate and token of the start before" : "");
    say(b.failed ? "serving" : b.s, NULL);
    kc_buf_free(&b);
}

static void say_failure(kd_api *a, const char *stage, int r)
{
    const kd_opts *o = a->o;
    bool listening = strcmp(stage, "listen on") == 0;
    char msg[8600];
    const char *where = listening ? (o->listen ? o->listen : "127.0.0.1:0")
                        : strcmp(stage, "write the files in") == 0 ? o->dir
                                                                   : "";
    snprintf(msg, sizeof(msg), "cannot %s %s: %s", stage, where,
             r == -ENOTSUP ? "libmicrohttpd has no TLS support" : strerror(-r));
    const char *hint = NULL;
    if (r == -EADDRINUSE) {
        hint = "the port is taken: give --listen 127.0.0.1:0 for any";
    } else if (r == -EINVAL && listening) {
        hint = "--listen wants HOST:PORT with an IP address or localhost";
    } else if (r == -EACCES) {
        hint = "permission denied: choose another --dir or port";
    }
    kc_print_error(o->json, "dra apiserver", NULL, 0, msg, hint);
}

void kd_apiserver_close(kd_api *a)
{
    kd_faults_stop(a);
    kd_http_free(a->http); /* ends the watches: their close callbacks free them */
    a->http = NULL;
    kd_watches_free(a);
    kd_store_free(a);
    kd_creds_free(&a->creds);
    kdp__timer_free(a->deadline);
    kdp__timer_free(a->bookmark);
    kdp__timer_free(a->reaper);
    a->deadline = a->bookmark = a->reaper = NULL;
    for (int i = 0; i < 2; i++) {
        kdp__signal_free(a->sig[i]);
        a->sig[i] = NULL;
    }
    if (a->owns_loop) {
        kc_loop_drain(a->loop);
        kdp__loop_free(a->loop);
    }
    a->loop = NULL;
}

int kd_apiserver_open(kd_api *a, const kd_opts *o, kdp__loop *shared)
{
    memset(a, 0, sizeof(*a));
    a->o = o;
    a->exit = -1;
    a->loop = shared;
    const char *stage = "start";
    int r = start(a, &stage);
    if (r < 0) {
        say_failure(a, stage, r);
        return KC_EXIT_FAIL;
    }
    say_ready(a);
    return 0;
}

int kd_cmd_apiserver(const kd_opts *o)
{
    kd_api *a = malloc(sizeof(*a)); /* the event window: not on the stack */
    if (!a) {
        return kc_fail_errno(&(kc_opts){.cmd = "dra apiserver", .json = o->json}, "start", -ENOMEM);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int e = kd_apiserver_open(a, o, NULL);
    if (e == 0) {
        int r = kdp__loop_run(a->loop);
        if (r < 0 && a->exit < 0) {
            say_failure(a, "run", r);
            a->exit = KC_EXIT_FAIL;
        }
        e = a->exit < 0 ? KC_EXIT_OK : a->exit;
    }
    kd_apiserver_close(a);
    free(a);
    return e;
}
