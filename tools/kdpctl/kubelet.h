/* SPDX-License-Identifier: MIT */
/*
 * The kubelet emulator's state, shared by kubelet.c (the process: socket
 * directory, server, signals, restarts) and registration.c (one plugin's
 * registration: Register, the dial back, ListAndWatch). Everything runs on
 * one kdp loop.
 */
#ifndef KDPCTL_KUBELET_H
#define KDPCTL_KUBELET_H

#include <stdbool.h>
#include <stdint.h>

#include "grpc/client.h"
#include "grpc/server.h"
#include "kdpctl.h"
#include "plugin/devices.h"
#include "pluginregistration.pb-c.h"
#include "print.h"
#include "regdir.h"
#include "runtime/loop.h"

#define KL_DIAL_TIMEOUT ((uint64_t)10 * 1000 * 1000) /* the kubelet's dial bound, us */
#define KL_REPORT_DELAY ((uint64_t)10 * 1000 * 1000) /* restart: who is still missing, us */
#define KL_CHECKPOINT   "kubelet_internal_checkpoint"
#define KL_SOCKET       KDP_KUBELET_SOCKET
#define KL_API_VERSION  KDP_KUBELET_API_VERSION

/* The plugin watcher's bounds (pluginwatcher, operation_generator.go). */
#define KL_INFO_TIMEOUT    ((uint64_t)1000 * 1000)       /* GetInfo, us */
#define KL_NOTIFY_TIMEOUT  ((uint64_t)5 * 1000 * 1000)   /* NotifyRegistrationStatus, us */
#define KL_BACKOFF_INITIAL ((uint64_t)500 * 1000)        /* a failed register, us */
#define KL_BACKOFF_MAX     ((uint64_t)122 * 1000 * 1000) /* 2m2s, goroutinemap's cap */
#define KL_REDIAL_DELAY    ((uint64_t)100 * 1000)        /* connect refused: dial again, us */
#define KL_PLUGIN_TYPE     "DevicePlugin"

typedef enum kl_state {
    KL_DIALING,  /* Register held; GetDevicePluginOptions in flight */
    KL_ACTIVE,   /* the resource's current plugin, ListAndWatch open */
    KL_REPLACED, /* a later registration took the resource; stream kept */
    KL_ENDED,    /* its ListAndWatch ended: must register again */
} kl_state;

typedef struct kl kl;
typedef struct kw_entry kw_entry;

typedef struct kl_plugin {
    kl *k;
    struct kl_plugin *next;
    kl_state state;
    char *resource;
    char *endpoint;
    char *version;
    char *socket; /* DIR/endpoint; watcher: the endpoint, a full path */
    bool via_watcher;
    char *reg_socket; /* watcher: the registration socket in plugins_registry */
    bool req_has_options;
    bool req_pre_start;
    bool req_preferred;
    bool pre_start;
    bool preferred;
    kdp__call *reg;                /* the held Register call, until answered */
    kdp__client_call *dial;        /* GetDevicePluginOptions */
    kdp__client_call *list_stream; /* ListAndWatch */
    kdp__devtab tab;
    long seq;
    uint64_t arrived_us; /* Register arrived, or GetInfo answered (kdp__now_us) */
    uint64_t dialed_us;  /* options answered */
} kl_plugin;

/* What the node status says of one resource: its devices as its current
 * registration last listed them; all counted unhealthy (allocatable 0)
 * after a stream end or a deregistration, until the next list. */
typedef struct kl_res {
    struct kl_res *next;
    char *name;
    size_t n;       /* devices */
    size_t healthy; /* of them */
    bool marked;    /* every device counted unhealthy */
    bool reported;  /* a capacity line was printed: */
    size_t last_capacity, last_allocatable;
} kl_res;

typedef struct kl_expect {
    char *resource;
    bool back;
    uint64_t after_us; /* kubelet.sock re-created -> Register */
} kl_expect;

struct kl {
    const kc_opts *o;
    kdp__loop *loop;
    kdp__server *srv;
    char *sock;
    kdp__signal *sig[3];
    kdp__timer *deadline; /* --timeout */
    kdp__timer *report;   /* restart: report the missing */
    kl_plugin *plugins;
    uint64_t listen_us; /* kubelet.sock (re)created */
    unsigned restarts;
    kl_expect *expect;
    size_t n_expect;
    bool expect_open; /* the restart's summary is not printed yet */
    int exit;         /* -1 while running */
    char *registry;   /* plugins_registry/ watched; NULL = no watcher side */
    kc_regdir *regdir;
    kw_entry *entries; /* the sockets found there */
    kl_res *res;       /* every resource seen (capacity.c) */
};

/* registration.c */
/* The Register handler (kdp__handler_fn), ud = kl. */
void kl_on_register(kdp__call *call, const uint8_t *req, size_t len, void *ud);
/* Unlinks and frees p: cancels its calls; a held Register gets UNAVAILABLE. */
void kl_plugin_free(kl_plugin *p);
/* The connect that follows an accepted GetInfo: dials endpoint (a full
 * path), GetDevicePluginOptions (10 s), then as for a Register. The outcome
 * goes to kl_watcher_connected(). Returns 0 or -errno. */
int kl_connect_watcher(kl *k, const char *resource, const char *endpoint, const char *reg_socket,
                       uint64_t arrived_us);
/* The resource's current registration (KL_ACTIVE), or NULL. */
kl_plugin *kl_current(kl *k, const char *resource);
/* The kubelet closes p's connection (endpoint tracking by resource name:
 * p was found by its resource's name after the end of another
 * registration, cause "stream_end" or "deregistered", of cause_endpoint):
 * p ends (KL_ENDED) and must register again. Prints it. */
void kl_disconnect(kl_plugin *p, const char *cause, const char *cause_endpoint);
/* Appends s as Go's %q shows it, for the kubelet's messages. */
void kl_go_quote(kc_buf *b, const char *s);
/* grpc-go's name of a status code ("Unimplemented"). */
const char *kl_go_code(int status);

/* watcher.c: the plugin-watcher side on k->registry. */
/* Creates the directory if needed, watches it and walks it. Returns 0 or
 * -errno. */
int kl_watcher_start(kl *k);
/* Forgets every socket found (a kubelet restart), stops watching. */
void kl_watcher_stop(kl *k);
/* The connect of p (a watcher registration) has ended: error NULL if it
 * succeeded, else the kubelet's message. p stays the caller's. */
void kl_watcher_connected(kl *k, kl_plugin *p, const char *error);
/* The kubelet's checks of a GetInfo answer from socket: 0 if it accepts,
 * else -EINVAL with its refusal text appended to reason and *ret_stage set
 * ("type" or "validate"). */
int kl_info_check(const Pluginregistration__PluginInfo *info, const char *socket, kc_buf *reason,
                  const char **ret_stage);

/* capacity.c: the node status of each resource; a line (a "capacity"
 * event) whenever its capacity or allocatable changes. cause: "devices",
 * "stream_end", "deregistered" or "restart"; endpoint: whose (may be NULL). */
/* p, the resource's current registration, has listed its devices. */
void kl_cap_devices(kl_plugin *p);
/* Every device of the resource is counted unhealthy (allocatable 0). */
void kl_cap_mark(kl *k, const char *resource, const char *cause, const char *endpoint);
/* How many devices the resource has (what a stream end marks unhealthy). */
size_t kl_cap_count(kl *k, const char *resource);
/* A kubelet restart: every resource forgotten (0 and 0). */
void kl_cap_forget(kl *k);
void kl_cap_free(kl *k);

/* kubelet.c */
/* Starts a JSON event line: {"event": name, "t_ns": ...}. */
void kl_json(kc_json *j, const char *event);
/* A human line: "HH:MM:SS.mmm WHO: text" (text terminal-safe); extra
 * (may be NULL) is appended as is, after a newline. */
void kl_say(const char *who, const char *text, const char *extra);
/* mkdir -p dir (0750). Returns 0 or -errno. */
int kl_mkdir_p(const char *dir);
/* A registration has completed: restart bookkeeping ("came back in"). */
void kl_registered(kl *k, kl_plugin *p);

#endif
