/* SPDX-License-Identifier: MIT */
/*
 * dra_kubelet: `kdpctl dra kubelet`, the kubelet's DRA side on kdp's own
 * client and loop: the plugins, one per socket of <root>/plugins_registry,
 * walked and watched (regdir.c); a socket found is registered (dra_reg.c:
 * GetInfo, the version, NotifyRegistrationStatus; then the health stream,
 * dra_health_stream.c), found again is registered anew, removed
 * deregisters its plugin. And the process: its loop, or `dra run`'s,
 * SIGINT/SIGTERM, SIGHUP (a kubelet restart), --timeout, the commands on
 * stdin (dra_calls.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra.h"
#include "dra_reg.h"
#include "regdir.h"
#include "rpc.h"

/* ---- plugins ---- */

/* Frees p, already unlinked. */
static void plugin_destroy(kd_plugin *p)
{
    kd_calls_cancel(p->k, p);
    kd_reg_reset(p);
    kdp__timer_free(p->retry);
    free(p->reg_socket);
    free(p);
}

static void plugin_free(kd_plugin *p)
{
    kd *k = p->k;
    for (kd_plugin **pp = &k->plugins; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            k->n_plugins--;
            break;
        }
    }
    plugin_destroy(p);
}

kd_plugin *kd_find_driver(kd *k, const char *driver)
{
    for (kd_plugin *p = k->plugins; p; p = p->next) { /* newest first */
        if (p->registered && strcmp(p->driver, driver) == 0) {
            return p;
        }
    }
    return NULL;
}

static kd_plugin *find_socket(kd *k, const char *path)
{
    for (kd_plugin *p = k->plugins; p; p = p->next) {
        if (strcmp(p->reg_socket, path) == 0) {
            return p;
        }
    }
    return NULL;
}

/* ---- the directory ---- */

static void deregister(kd_plugin *p, const char *why)
{
    char text[800];
    snprintf(text, sizeof(text), "%s %s: %s deregistered", p->reg_socket, why,
             p->driver ? p->driver : "(not registered)");
    kd_say_plugin(p, "deregistered", text, NULL);
}

static void on_found(const char *name, const char *path, const char *source, void *ud)
{
    kd *k = ud;
    kd_plugin *p = find_socket(k, path);
    if (p) {
        if (p->registered) {
            deregister(p, "created again");
        }
        kd_calls_cancel(k, p);
    } else {
        if (k->n_plugins >= KD_MAX_SOCKETS) {
            char text[600];
            snprintf(text, sizeof(text), "%s ignored: %d sockets tracked already", name,
                     KD_MAX_SOCKETS);
            kd_say(text);
            return;
        }
        p = calloc(1, sizeof(*p));
        if (!p || !(p->reg_socket = strdup(path)) ||
            kdp__timer_new(k->loop, kd_reg_on_retry, p, &p->retry) < 0) {
            if (p) {
                free(p->reg_socket);
            }
            free(p);
            return;
        }
        p->k = k;
        p->next = k->plugins;
        k->plugins = p;
        k->n_plugins++;
    }
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "found");
        kc_json_str(&j, "socket", p->reg_socket);
        kc_json_str(&j, "source", source);
        kc_json_emit(&j);
    } else {
        char text[600];
        snprintf(text, sizeof(text), "found %s (%s)", name, source);
        kd_say(text);
    }
    kd_reg_start(p);
}

static void on_gone(const char *name, const char *path, void *ud)
{
    (void)name;
    kd_plugin *p = find_socket(ud, path);
    if (p) {
        deregister(p, "removed");
        plugin_free(p);
    }
}

static void on_dir_gone(void *ud)
{
    kd *k = ud;
    kd_say("plugins_registry was removed: no longer watching it");
    kc_regdir_free(k->regdir);
    k->regdir = NULL;
}

static int watch_start(kd *k)
{
    static const kc_regdir_ops ops = {on_found, on_gone, on_dir_gone};
    return kc_regdir_start(k->loop, k->registry, (size_t)KD_MAX_SOCKETS * 4, &ops, k, &k->regdir);
}

/* ---- the process ---- */

static void stop(kd *k, const char *reason)
{
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "exit");
        kc_json_str(&j, "reason", reason);
        kc_json_emit(&j);
    } else {
        char text[64];
        snprintf(text, sizeof(text), "%s: stopping", reason);
        kd_say(text);
    }
    if (k->exit < 0) {
        k->exit = KC_EXIT_OK;
    }
    kdp__loop_quit(k->loop);
}

/* Every plugin, call and the directory's watch dropped. */
static void forget_all(kd *k)
{
    kd_calls_cancel(k, NULL);
    while (k->plugins) {
        kd_plugin *p = k->plugins;
        k->plugins = p->next;
        k->n_plugins--;
        plugin_destroy(p);
    }
    kc_regdir_free(k->regdir);
    k->regdir = NULL;
}

void kd_kubelet_restart(kd *k)
{
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "restart");
        kc_json_emit(&j);
    } else {
        kd_say("SIGHUP: simulating a kubelet restart (connections and calls in flight closed, "
               "plugins_registry walked again, every driver registered anew; the prepared "
               "claims kept, as the kubelet's checkpoint keeps them)");
    }
    forget_all(k); /* like a dying kubelet: every connection goes at once */
    int r = watch_start(k);
    if (r < 0) {
        char text[4400];
        snprintf(text, sizeof(text), "cannot watch %s again: %s", k->registry, strerror(-r));
        kd_say(text);
    }
}

static void on_signal(kdp__signal *s, int signo, void *ud)
{
    (void)s;
    if (signo == SIGHUP) {
        kd_kubelet_restart(ud);
        return;
    }
    stop(ud, signo == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_deadline(kdp__timer *t, void *ud)
{
    (void)t;
    stop(ud, "timeout");
}

void kd_kubelet_close(kd *k)
{
    kd_input_stop(k);
    forget_all(k);
    kdp__timer_free(k->deadline);
    for (int i = 0; i < 3; i++) {
        kdp__signal_free(k->sig[i]);
    }
    if (k->owns_loop) {
        kc_loop_drain(k->loop);
        kdp__loop_free(k->loop);
    }
    k->loop = NULL;
    kc_strv_free(&k->prepared);
    kc_strv_free(&k->prepared_devices);
    free(k->registry);
    k->registry = NULL;
}

/* The loop, signals and --timeout of a kubelet of its own. */
static int own_loop(kd *k)
{
    static const int signals[3] = {SIGINT, SIGTERM, SIGHUP};
    int r = kdp__loop_new(&k->loop);
    k->owns_loop = r == 0;
    for (int i = 0; r == 0 && i < 3; i++) {
        r = kdp__signal_add(k->loop, signals[i], on_signal, k, &k->sig[i]);
    }
    if (r == 0) {
        r = kdp__timer_new(k->loop, on_deadline, k, &k->deadline);
    }
    if (r == 0 && k->o->timeout_us) {
        kdp__timer_start(k->deadline, k->o->timeout_us);
    }
    return r;
}

static void say_ready(kd *k)
{
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "ready");
        kc_json_str(&j, "registry", k->registry);
        kc_json_emit(&j);
        return;
    }
    char text[8400];
    snprintf(text, sizeof(text), "watching %s; commands on stdin: " KD_KUBELET_USAGE, k->registry);
    kd_say(text);
}

int kd_kubelet_open(kd *k, const kd_opts *o, kdp__loop *shared)
{
    memset(k, 0, sizeof(*k));
    k->o = o;
    k->exit = -1;
    const char *root = o->root ? o->root : getenv(KDP_KUBELET_ROOT_ENV);
    if (!root || !*root) {
        root = KDP_KUBELET_ROOT;
    }
    if (asprintf(&k->registry, "%s%splugins_registry", root,
                 root[strlen(root) - 1] == '/' ? "" : "/") < 0) {
        k->registry = NULL;
        return kc_fail_errno(&(kc_opts){.cmd = "dra kubelet", .json = o->json}, "path", -ENOMEM);
    }
    k->loop = shared;
    int r = shared ? 0 : own_loop(k);
    const char *stage = "start";
    if (r == 0) {
        stage = "watch";
        r = watch_start(k);
    }
    if (r == 0) {
        stage = "read stdin";
        r = kd_input_start(k);
    }
    if (r < 0) {
        char msg[8600];
        snprintf(msg, sizeof(msg), "cannot %s %s: %s", stage, k->registry, strerror(-r));
        kc_print_error(o->json, "dra kubelet", NULL, 0, msg,
                       r == -EACCES ? "permission denied: run as root, or give --kubelet-root DIR "
                                      "(the driver's too)"
                                    : NULL);
        return KC_EXIT_FAIL;
    }
    say_ready(k);
    return 0;
}

int kd_cmd_kubelet(const kd_opts *o)
{
    kd k;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int e = kd_kubelet_open(&k, o, NULL);
    if (e == 0) {
        int r = kdp__loop_run(k.loop);
        if (r < 0 && k.exit < 0) {
            k.exit =
                kc_fail_errno(&(kc_opts){.cmd = "dra kubelet", .json = o->json}, "event loop", r);
        }
        e = k.exit < 0 ? KC_EXIT_OK : k.exit;
    }
    kd_kubelet_close(&k);
    return e;
}
