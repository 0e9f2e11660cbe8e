/* SPDX-License-Identifier: MIT */
/*
 * ctx: kdp_ctx, one event loop shared by the plugins attached to it, its
 * run / dispatch / stop, SIGTERM/SIGINT for kdp_ctx_run(), and which thread
 * may make the calls that are not thread-safe. It knows its plugins only
 * through kdp__member: what a context needs of them.
 */
#ifndef KDP_CTX_H
#define KDP_CTX_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/list.h"
#include "kdp.h"
#include "plugin/posts.h"
#include "plugin/pstats.h"
#include "runtime/loop.h"

typedef struct kdp__member kdp__member;

typedef struct kdp__member_ops {
    void (*start)(kdp__member *m); /* an idle member: start */
    void (*stop)(kdp__member *m);  /* begin stopping (async); STOPPED when done */
    bool (*idle)(const kdp__member *m);
    bool (*stopped)(const kdp__member *m);
    void (*free)(kdp__member *m);                  /* kdp_ctx_free: stop at once and free */
    void (*view)(kdp__member *m, kdp__pview *out); /* for /metrics and /healthz */
} kdp__member_ops;

/* Something that lives with a context and is not a plugin (the metrics
 * endpoint): started on the context's first run or dispatch, freed by
 * kdp_ctx_free. Set by the module that makes it (upward calls are hooks). */
typedef struct kdp__ctx_addon {
    int (*start)(kdp_ctx *ctx); /* < 0: the run fails with it */
    void (*free)(kdp_ctx *ctx);
} kdp__ctx_addon;

struct kdp__member {
    const kdp__member_ops *ops;
    const char *key; /* its socket path: one member per socket; borrowed */
    kdp__link link;  /* in ctx->members */
};

struct kdp_ctx {
    kdp__loop *loop;
    kdp__link members;
    kdp__wakeup *stop_wake;
    /* The thread (gettid) that runs the context: kdp_ctx_run() for its
     * duration, kdp_ctx_dispatch() from its first call until it returns
     * non-zero. 0 = none. Loop-thread-only calls from any other thread are
     * refused while it is set (kdp__ctx_check_caller). */
    _Atomic int owner;
    bool dispatching;    /* inside kdp__loop_dispatch (owner thread only) */
    bool stop_requested; /* loop thread's view */
    bool started;
    int error; /* the first fatal member error, returned by run */
    const kdp__ctx_addon *addon;
    void *_Atomic addon_data; /* the add-on's (read by any thread) */
    bool addon_started;       /* its start succeeded */
    kdp__posts posts;         /* kdp_ctx_post's calls */
    /* Running them (written and, once the caller is known to be the
     * context's thread, read there): no free, run or dispatch from there. */
    _Atomic bool in_posts;
    bool posts_made;
};

/* Attaches m (-EADDRINUSE if a member has its key already). */
int kdp__ctx_attach(kdp_ctx *ctx, kdp__member *m);
void kdp__ctx_detach(kdp_ctx *ctx, kdp__member *m);
/* A member stopped, cleanly (0) or on a fatal error (-errno: the whole
 * context stops, and run returns it). */
void kdp__ctx_member_stopped(kdp_ctx *ctx, int error);
/* For the public calls that must run on the context's thread, outside
 * callbacks and outside kdp's own loop: 0 if this caller may go on, else
 * -EPERM (from a callback, or from inside the loop, e.g. a log sink) or
 * -EBUSY (another thread runs the context), after a log line naming fn and
 * what to do instead. ctx may be NULL (only the callback check applies). */
int kdp__ctx_check_caller(kdp_ctx *ctx, const char *fn, const char *instead);

#endif
