/* SPDX-License-Identifier: MIT */
/*
 * dra: `kdpctl dra ...`, DRA without a cluster. `dra kubelet` plays the
 * kubelet's DRA side (dra_kubelet.c: plugins_registry and the process;
 * dra_reg.c: GetInfo, version choice, NotifyRegistrationStatus;
 * dra_health_stream.c: the health stream; dra_calls.c: the commands on
 * stdin, prepare and unprepare), on kdp's own gRPC client and loop.
 */
#ifndef KDPCTL_DRA_H
#define KDPCTL_DRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/client.h"
#include "kdpctl.h"
#include "print.h"
#include "regdir.h"
#include "runtime/loop.h"

#define KD_PLUGIN_TYPE     "DRAPlugin"
#define KD_HEALTH_SUFFIX   ".DRAResourceHealth"
#define KD_INFO_TIMEOUT    ((uint64_t)1000 * 1000)       /* GetInfo, us */
#define KD_NOTIFY_TIMEOUT  ((uint64_t)5 * 1000 * 1000)   /* NotifyRegistrationStatus */
#define KD_CALL_TIMEOUT    ((uint64_t)45 * 1000 * 1000)  /* the kubelet's per-call bound */
#define KD_HEALTH_RETRY    ((uint64_t)5 * 1000 * 1000)   /* the health stream reopened */
#define KD_BACKOFF_INITIAL ((uint64_t)500 * 1000)        /* a refused registration */
#define KD_BACKOFF_MAX     ((uint64_t)122 * 1000 * 1000) /* 2m2s */
#define KD_MAX_SOCKETS     256                           /* registration sockets tracked */
#define KD_MAX_LINE        65536                         /* one stdin command */
#define KD_MAX_CLAIMS      256                           /* claims in one command */
#define KD_MAX_HEALTH      4096                          /* devices kept from one health list */

/* `kdpctl dra` options: every subcommand's (each takes a subset). */
typedef struct kd_opts {
    const char *sub;  /* kubelet, apiserver, claim, run */
    const char *root; /* --kubelet-root */
    kc_strv versions; /* --versions: the kubelet's supported DRAPlugin versions */
    bool no_health;   /* --no-health */
    /* --health-versions: the health versions this kubelet has, its
     * preference first (default v1,v1alpha1: 1.37's negotiation); legacy
     * (1.34-1.36): v1alpha1 opened, advertised or not, and reopened. */
    kc_strv health_versions;
    bool health_legacy;
    bool json;
    uint64_t timeout_us; /* --timeout: run for D, then exit 0 (0 = until a signal) */
    const char *dir;     /* apiserver --dir */
    const char *listen;  /* apiserver --listen HOST:PORT */
    kc_strv nodes;       /* apiserver --node (repeatable) */
    const char *kubeconfig;
    const char *driver;
    const char *node;
    const char *devices;  /* claim --device DEV[,DEV...] */
    const char *request;  /* claim --request (default "req-0") */
    const char *config;   /* claim --config JSON */
    const char *share_id; /* claim --share-id UUID|new */
    const char *consumed; /* claim --consumed NAME=QTY[,NAME=QTY...] */
    bool no_check;        /* claim --no-check */
    bool del;             /* claim --delete */
    kc_strv pos;
} kd_opts;

/* A DRA plugin registered through a socket of plugins_registry. */
typedef struct kd_plugin kd_plugin;
typedef struct kd kd;

struct kd_plugin {
    kd *k;
    kd_plugin *next;
    char *reg_socket;           /* in plugins_registry */
    char *driver;               /* GetInfo's name */
    char *endpoint;             /* the service socket (absolute) */
    char *version;              /* the chosen one: "v1" or "v1beta1" */
    bool registered;            /* accepted and notified */
    bool health_advertised;     /* some version of the health service */
    kc_strv health_adv;         /* the versions advertised ("v1", "v1alpha1") */
    const char *health_version; /* the stream's (in k->o or static): NULL none */
    kdp__client_call *info;
    kdp__client_call *notify;
    kdp__client_call *health;
    kdp__timer *retry; /* a refused registration: GetInfo again; the health stream: reopen */
    uint64_t backoff_us;
    bool said_unimplemented;
    uint64_t health_msgs;
    /* The last health list: "pool/device" and its state, message. */
    kc_strv health_ids;
    kc_strv health_states;
    kc_strv health_msgs_text;
};

/* Commands from stdin, one a line (dra_lines.c). fn gets each line (NULL:
 * one over KD_MAX_LINE, dropped). */
typedef void (*kd_line_fn)(char *line, void *ud);
typedef struct kd_lines {
    kdp__io *in;
    kc_buf line; /* the partial line */
    bool dropped;
    kd_line_fn fn;
    void *ud;
} kd_lines;
/* Reads stdin on loop (not a pipe or terminal: no commands, 0). 0 or -errno. */
int kd_lines_start(kd_lines *l, kdp__loop *loop, kd_line_fn fn, void *ud);
void kd_lines_stop(kd_lines *l);
/* Splits line into words (at most cap): how many, or cap + 1 when over. */
size_t kd_words(char *line, char **argv, size_t cap);

/* The kubelet side's commands (dra_calls.c) and the API server's
 * (dra_faults.c). */
#define KD_KUBELET_USAGE                                                                           \
    "prepare DRIVER NS/NAME/UID..., unprepare DRIVER NS/NAME/UID..., state, health DRIVER"
#define KD_FAULT_USAGE                                                                             \
    "down SECONDS, fail CODE [COUNT], conflict [COUNT], edit-slice NAME, delete-slice NAME, "      \
    "rotate-token, faults"

/* Commands the kubelet side does not know, for `dra run`'s API server:
 * true when taken. */
typedef bool (*kd_more_fn)(char **argv, size_t argc, void *ud);

/* A prepare or unprepare in flight (dra_calls.c). */
typedef struct kd_call kd_call;

struct kd {
    const kd_opts *o;
    kdp__loop *loop;
    char *registry; /* <root>/plugins_registry */
    kc_regdir *regdir;
    kd_plugin *plugins;
    size_t n_plugins;
    kdp__signal *sig[3];
    kdp__timer *deadline;
    kd_lines input;  /* stdin */
    kd_more_fn more; /* `dra run`: the API server's commands */
    void *more_ud;
    kd_call *calls;
    kc_strv prepared;         /* "DRIVER NS/NAME/UID" of the claims prepared */
    kc_strv prepared_devices; /* their devices, one string each */
    int exit;                 /* -1 while running */
    bool owns_loop;           /* not `dra run`'s */
};

/* dra_main.c */
/* `kdpctl dra ...`: argv after "dra". Returns an exit status. */
int kc_dra_main(int argc, char **argv);

/* dra_kubelet.c */
int kd_cmd_kubelet(const kd_opts *o);
/* Starts the kubelet side in *k: on shared (`dra run`: its loop, signals
 * and --timeout), or on a loop of its own when NULL. Returns 0, or an exit
 * status with the failure printed; kd_kubelet_close() either way. */
int kd_kubelet_open(kd *k, const kd_opts *o, kdp__loop *shared);
void kd_kubelet_close(kd *k);
/* A kubelet restart (SIGHUP): every plugin's connection and call dropped,
 * the directory walked again, each socket registered anew; the claims
 * prepared are kept. */
void kd_kubelet_restart(kd *k);
/* The registered plugin of driver (the newest registration), or NULL. */
kd_plugin *kd_find_driver(kd *k, const char *driver);
/* dra_out.c */
/* A human line "HH:MM:SS.mmm dra-kubelet: text" (text terminal-safe). */
void kd_say(const char *text);
/* The same for who; extra (may be NULL) is appended as is, after it. */
void kd_say_as(const char *who, const char *text, const char *extra);
/* Starts a JSON event line: {"event": event, "t_ns": ...}. */
void kd_json(kc_json *j, const char *event);
/* A line about p: its JSON event (socket, driver, endpoint, version, and
 * error when not NULL) or text. */
void kd_say_plugin(kd_plugin *p, const char *event, const char *text, const char *error);
/* Prints the plugin's last health list (the `health DRIVER` command). */
void kd_print_health(kd_plugin *p, const char *why);
/* Prints the drivers registered and the claims prepared (`state`). */
void kd_print_state(kd *k);

/* dra_calls.c: the commands on stdin. */
/* Starts reading stdin. Returns 0 or -errno. */
int kd_input_start(kd *k);
void kd_input_stop(kd *k);
/* Cancels every call in flight (at exit, or when p goes: p non-NULL). */
void kd_calls_cancel(kd *k, const kd_plugin *p);

#endif
