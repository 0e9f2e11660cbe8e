/* SPDX-License-Identifier: MIT */
/* Private to the plugin modules (ctx.c, plugin.c, lifecycle.c, service.c,
 * jobs.c): the structures behind kdp_ctx and kdp_plugin. */
#ifndef KDP_PLUGIN_INT_H
#define KDP_PLUGIN_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "base/backoff.h"
#include "grpc/client.h"
#include "grpc/server.h"
#include "kdp.h"
#include "plugin/devices.h"
#include "runtime/loop.h"
#include "runtime/watch.h"
#include "runtime/worker.h"

#define KDP_DEFAULT_CB_TIMEOUT_MS 10000U
#define KDP_REGISTER_TIMEOUT_US   (30ULL * 1000000ULL)
#define KDP_WARN_MESSAGE          (3U * 1024U * 1024U)
#define KDP_WAIT_FALLBACK_US      (30ULL * 1000000ULL)
#define KDP_DRAIN_LINGER_US       (1000000ULL) /* bound on GOAWAY delivery at stop */
#define KDP_MAX_LAW_STREAMS       64U          /* the kubelet opens one; tools a few */
#define KDP_FAST_RETRIES          5U
#define KDP_FAST_RETRY_US         1000U /* kubelet.sock exists but is not listening yet */
/* A registration that lasted this long was a success: the restart after it
 * is immediate. Restarts after shorter ones back off (restart_backoff). */
#define KDP_STABLE_REGISTRATION_US (10ULL * 1000000ULL)
#define KDP_RESTART_BACKOFF_MIN_US (50ULL * 1000ULL)
#define KDP_RESTART_BACKOFF_MAX_US (30ULL * 1000000ULL)
#define KDP_LIST_RETRY_MIN_US      (100ULL * 1000ULL)
#define KDP_LIST_RETRY_MAX_US      (30ULL * 1000000ULL)
/* A refused device table (over the message limit) is logged this often. */
#define KDP_REJECT_LOG_US (60ULL * 1000000ULL)

typedef enum plugin_state {
    P_IDLE = 0,    /* not started */
    P_STARTING,    /* refresh / first list running on the worker */
    P_WAITING,     /* serving; kubelet.sock absent */
    P_REGISTERING, /* serving; Register in flight or waiting to retry */
    P_REGISTERED,  /* serving; registered */
    P_STOPPING,    /* destroy running */
    P_STOPPED,
} plugin_state;

struct kdp_ctx {
    kdp__loop *loop;
    kdp_plugin *plugins;
    kdp__wakeup *stop_wake;
    /* The thread (gettid) that runs the context: kdp_ctx_run() for its
     * duration, kdp_ctx_dispatch() from its first call until it returns
     * non-zero. 0 = none. Loop-thread-only calls from any other thread are
     * refused while it is set (kdp__ctx_check_caller). */
    _Atomic int owner;
    bool dispatching;    /* inside kdp__loop_dispatch (owner thread only) */
    bool stop_requested; /* loop thread's view */
    bool started;
    int error; /* the first fatal plugin error, returned by run */
};

typedef struct law law; /* an open ListAndWatch stream */

struct kdp_plugin {
    kdp_ctx *ctx;
    kdp_plugin *next; /* in ctx->plugins */
    bool own_ctx;
    kdp_ops ops;
    void *ud;

    char *resource;
    char *socket_name;
    char *dir;
    char *socket_path;
    char *kubelet_path;
    char *lock_path;
    char *env_name;
    unsigned cb_timeout_ms;
    unsigned rescan_ms;

    /* shared with other threads */
    pthread_mutex_t mu;
    kdp__devtab shared; /* the latest table set from any thread */
    uint64_t shared_ver;
    atomic_bool rescan_wanted;
    atomic_bool stop_wanted;
    kdp__wakeup *wake;
    _Atomic uint64_t set_rejected_logged_us; /* kdp_plugin_set_devices' -EMSGSIZE line */

    /* Read by kdp_plugin_get_status() from any thread (under mu): what the
     * loop thread last published. */
    kdp_plugin_status pub;

    /* loop thread only (state is also read by kdp_plugin_get_status) */
    _Atomic plugin_state state;
    kdp__worker *worker;
    struct kdp__pjob *jobs;  /* outstanding jobs whose complete may still run (jobs.c) */
    atomic_bool destroy_ran; /* set by the destroy job as it starts (worker thread) */
    kdp__devtab tab;         /* what the kubelet has been told */
    uint64_t tab_ver;
    uint8_t *law_msg; /* tab encoded as ListAndWatchResponse */
    size_t law_len;
    kdp__server *server;
    kdp__server *draining; /* shutting down gracefully during a stop */
    law *laws;
    unsigned n_laws;
    law *kubelet_law; /* the stream the kubelet opened after our Register */
    bool expect_kubelet_law;
    kdp__client_call *reg_call;
    kdp__backoff backoff;
    kdp__timer *retry_timer;
    kdp__timer *rescan_timer;
    kdp__timer *restart_timer;
    const char *restart_why; /* static string */
    kdp__watch *watch;
    kdp__watch *parent_watch;     /* the dir's parent, while the dir is missing */
    kdp_path_watch *path_watches; /* hot-plug watches (hotplug.c), freed with p */
    int lock_fd;
    ino_t kubelet_ino;
    unsigned kubelet_creates; /* kubelet.sock creations seen by the watch */
    unsigned reg_creates;     /* kubelet_creates when the Register started */
    int retry_what;           /* what retry_timer will do */
    unsigned fast_retries;    /* quick Register retries left after kubelet.sock appeared */
    bool busy;                /* a lifecycle job (refresh/list/destroy) is running */
    bool restart_pending;     /* restart once the running lifecycle job is done */
    bool stop_pending;        /* stop once the running lifecycle job is done */
    bool started;             /* refresh ran since the last destroy */
    bool destroyed;           /* destroy ran for the current start */
    bool list_running;
    void *start_list; /* the list job of the current start, if running */
    unsigned starts;  /* how many times the server started */

    /* A table whose message is over the kubelet's limit is not sent: the
     * kubelet keeps the last one that fit (tab). */
    size_t rejected_n, rejected_bytes; /* the newest refused table; 0 = none */
    uint64_t rejected_logged_us;       /* its last error line */
    /* Restarts back off unless the registration before was stable. */
    kdp__backoff restart_backoff;
    uint64_t registered_us;        /* when the current registration succeeded; 0 = none */
    bool restart_counts;           /* the restart under way is one more in a loop */
    unsigned quick_restarts;       /* restarts in a row that counted */
    struct timespec kubelet_ctime; /* kubelet.sock's change time at the last Register */
    unsigned restarts;
    /* A failed list op is called again with backoff. */
    kdp__backoff list_backoff;
    int list_error;          /* the last list call's -errno; 0 = it succeeded */
    uint64_t list_retry_us;  /* the delay before that next call */
    uint64_t busy_logged_us; /* the last "callbacks are stuck" line */
    /* The device-plugin directory's problem, last logged: 0 = none. */
    int dir_error;
};

/* plugin.c: hands a new table to the loop thread (takes t's content). */
void kdp__plugin_publish(kdp_plugin *p, kdp__devtab *t);

/* plugin.c: kdp_plugin_free() without the caller checks (ctx.c frees its
 * plugins through it once it has checked its own caller). */
void kdp__plugin_free(kdp_plugin *p);
/* hotplug.c: kdp_path_watch_free() without the caller checks. */
void kdp__path_watch_free(kdp_path_watch *w);

/* ctx.c */
void kdp__ctx_plugin_stopped(kdp_ctx *ctx, kdp_plugin *p, int error);
/* For the public calls that must run on the context's thread, outside
 * callbacks and outside kdp's own loop: 0 if this caller may go on, else
 * -EPERM (from a callback, or from inside the loop, e.g. a log sink) or
 * -EBUSY (another thread runs the context), after a log line naming fn and
 * what to do instead. ctx may be NULL (only the callback check applies). */
int kdp__ctx_check_caller(kdp_ctx *ctx, const char *fn, const char *instead);

#endif
