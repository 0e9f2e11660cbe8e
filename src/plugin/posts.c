/* SPDX-License-Identifier: MIT */
/* posts: see posts.h. */
#include "plugin/posts.h"

#include <errno.h>
#include <stdlib.h>

#include "base/log.h"

static void on_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    (void)ud; /* the dispatch returns: the context runs the calls after it */
}

int kdp__posts_init(kdp__posts *s, kdp__loop *l, kdp_ctx *ctx)
{
    *s = (kdp__posts){.ctx = ctx};
    pthread_mutex_init(&s->mu, NULL);
    return kdp__wakeup_new(l, on_wake, s, &s->wake);
}

int kdp__posts_add(kdp__posts *s, kdp_post_fn fn, void *arg)
{
    pthread_mutex_lock(&s->mu);
    int r = 0;
    if (s->closed) {
        r = -ESHUTDOWN;
    } else if (s->n >= KDP_MAX_POSTS) {
        r = -EAGAIN;
        if (!s->full_said) { /* said once per time it fills */
            s->full_said = true;
            log_warn("kdp_ctx_post: %u calls wait already for the context's thread: refused "
                     "(-EAGAIN) until it catches up",
                     KDP_MAX_POSTS);
        }
    } else if (!s->q && !(s->q = calloc(KDP_MAX_POSTS, sizeof(*s->q)))) {
        r = -ENOMEM;
    } else {
        s->q[(s->head + s->n) % KDP_MAX_POSTS] = (kdp__post){fn, arg};
        s->n++;
        s->full_said = false;
        /* under the lock: once closed (the context freeing), the wakeup goes */
        kdp__wakeup_signal(s->wake);
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* The first waiting call, taken; false when none. */
static bool take(kdp__posts *s, kdp__post *out)
{
    pthread_mutex_lock(&s->mu);
    bool any = s->n > 0;
    if (any) {
        *out = s->q[s->head];
        s->head = (s->head + 1) % KDP_MAX_POSTS;
        s->n--;
    }
    pthread_mutex_unlock(&s->mu);
    return any;
}

size_t kdp__posts_run(kdp__posts *s)
{
    pthread_mutex_lock(&s->mu);
    size_t now = s->n;
    pthread_mutex_unlock(&s->mu);
    size_t ran = 0;
    kdp__post p;
    while (ran < now && take(s, &p)) { /* without the lock: a call may post */
        p.fn(s->ctx, p.arg);
        ran++;
    }
    return ran;
}

void kdp__posts_done(kdp__posts *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    pthread_mutex_unlock(&s->mu);
    kdp__post p;
    while (take(s, &p)) {
        p.fn(s->ctx, p.arg);
    }
    kdp__wakeup_free(s->wake);
    s->wake = NULL;
    free(s->q);
    s->q = NULL;
    pthread_mutex_destroy(&s->mu);
}
