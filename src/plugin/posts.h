/* SPDX-License-Identifier: MIT */
/*
 * posts: calls any thread hands to a context's own thread (kdp_ctx_post), a
 * bounded queue under a mutex and a wakeup of the loop. The context runs
 * them between two turns of its loop, outside every callback, in the order
 * they came.
 */
#ifndef KDP_POSTS_H
#define KDP_POSTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "kdp.h"
#include "runtime/loop.h"

typedef struct kdp__post {
    kdp_post_fn fn;
    void *arg;
} kdp__post;

typedef struct kdp__posts {
    pthread_mutex_t mu;
    kdp__post *q; /* a ring of KDP_MAX_POSTS, made at the first post */
    size_t head, n;
    bool closed;    /* freeing: no more */
    bool full_said; /* the -EAGAIN logged since the last call taken in */
    kdp__wakeup *wake;
    kdp_ctx *ctx; /* what each call gets */
} kdp__posts;

/* Loop thread (or before it runs). Returns 0 or -ENOMEM. */
int kdp__posts_init(kdp__posts *s, kdp__loop *l, kdp_ctx *ctx);
/* Any thread. Returns 0, -EAGAIN (KDP_MAX_POSTS waiting), -ESHUTDOWN
 * (closed), -ENOMEM. */
int kdp__posts_add(kdp__posts *s, kdp_post_fn fn, void *arg);
/* The context's thread, outside the loop's dispatch: runs the calls
 * waiting now (those they post run next time). Returns how many ran. */
size_t kdp__posts_run(kdp__posts *s);
/* Closes the queue, runs what still waits (so that no arg is lost), frees.
 * The wakeup goes with the loop (kdp__loop_free) or here. */
void kdp__posts_done(kdp__posts *s);

#endif
