/* SPDX-License-Identifier: MIT */
/*
 * dra_run: `kdpctl dra run`: `dra apiserver` and `dra kubelet` in one
 * process, on one loop (the one-liner of a session: start it, start the
 * driver with --kubeconfig DIR/kubeconfig and the same kubelet root, type
 * prepare and unprepare on its stdin).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "dra_api.h"
#include "rpc.h"

typedef struct kd_run {
    const kd_opts *o;
    kdp__loop *loop;
    kdp__signal *sig[3];
    kdp__timer *deadline;
    kd *kubelet; /* SIGHUP restarts it; the API server keeps its objects */
} kd_run;

static void stop(kd_run *r, const char *reason)
{
    if (r->o->json) {
        kc_json j;
        kd_json(&j, "exit");
        kc_json_str(&j, "reason", reason);
        kc_json_emit(&j);
    } else {
        char text[64];
        snprintf(text, sizeof(text), "%s: stopping", reason);
        kd_say_as("dra-run", text, NULL);
    }
    kdp__loop_quit(r->loop);
}

static void on_signal(kdp__signal *s, int signo, void *ud)
{
    (void)s;
    kd_run *r = ud;
    if (signo == SIGHUP) {
        kd_kubelet_restart(r->kubelet);
        return;
    }
    stop(r, signo == SIGINT ? "SIGINT" : "SIGTERM");
}

static void on_deadline(kdp__timer *t, void *ud)
{
    (void)t;
    stop(ud, "timeout");
}

/* The API server's commands (faults) on the kubelet's stdin. */
static bool more(char **argv, size_t argc, void *ud)
{
    return kd_fault_command(ud, argv, argc);
}

static int open_loop(kd_run *r)
{
    static const int signals[3] = {SIGINT, SIGTERM, SIGHUP};
    int e = kdp__loop_new(&r->loop);
    for (int i = 0; e == 0 && i < 3; i++) {
        e = kdp__signal_add(r->loop, signals[i], on_signal, r, &r->sig[i]);
    }
    if (e == 0) {
        e = kdp__timer_new(r->loop, on_deadline, r, &r->deadline);
    }
    if (e == 0 && r->o->timeout_us) {
        kdp__timer_start(r->deadline, r->o->timeout_us);
    }
    return e;
}

int kd_cmd_run(const kd_opts *o)
{
    kd_run run = {.o = o};
    kd_api *a = calloc(1, sizeof(*a));
    kd *k = calloc(1, sizeof(*k));
    run.kubelet = k;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int e = a && k ? open_loop(&run) : -ENOMEM;
    if (e < 0) {
        e = kc_fail_errno(&(kc_opts){.cmd = "dra run", .json = o->json}, "start", e);
    } else if ((e = kd_apiserver_open(a, o, run.loop)) == 0 &&
               (e = kd_kubelet_open(k, o, run.loop)) == 0) {
        k->more = more;
        k->more_ud = a;
        int r = kdp__loop_run(run.loop);
        e = r < 0 ? kc_fail_errno(&(kc_opts){.cmd = "dra run", .json = o->json}, "event loop", r)
                  : KC_EXIT_OK;
    }
    if (k) {
        kd_kubelet_close(k);
    }
    if (a) {
        kd_apiserver_close(a);
    }
    kdp__timer_free(run.deadline);
    for (int i = 0; i < 3; i++) {
        kdp__signal_free(run.sig[i]);
    }
    if (run.loop) {
        kc_loop_drain(run.loop);
    }
    kdp__loop_free(run.loop);
    free(a);
    free(k);
    return e;
}
