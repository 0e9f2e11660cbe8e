/* SPDX-License-Identifier: MIT */
/* podres_query: kdp_plugin_query_pods()'s queue: any thread in, the
 * context's loop out. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/list.h"
#include "base/log.h"
#include "plugin/podres.h"

typedef struct query {
    kdp__link link;
    kdp__podres_queue *q;
    kdp__podres_req req; /* its strings owned */
    kdp_pods_fn done;
    void *ud;
    kdp__podres_call *call; /* running */
} query;

struct kdp__podres_queue {
    kdp__loop *loop;
    kdp__wakeup *wake;
    pthread_mutex_t mu;
    kdp__link pending; /* mu */
    unsigned n;        /* pending and running (mu) */
    kdp__link running; /* loop thread */
};

static void query_free(query *x)
{
    free((char *)x->req.socket);
    free((char *)x->req.resource);
    free(x);
}

static void finish(kdp__podres_queue *q, query *x, int err, kdp_pods *pods)
{
    kdp__link_remove(&x->link);
    pthread_mutex_lock(&q->mu);
    q->n--;
    pthread_mutex_unlock(&q->mu);
    x->done(err, pods, x->ud);
    query_free(x);
}

static void on_query_done(int err, kdp_pods *pods, void *ud)
{
    query *x = ud;
    finish(x->q, x, err, pods);
}

static void on_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    kdp__podres_queue *q = ud;
    kdp__link batch;
    kdp__link_init(&batch);
    pthread_mutex_lock(&q->mu);
    kdp__link *l;
    while ((l = kdp__list_first(&q->pending))) {
        kdp__link_remove(l);
        kdp__list_append(&batch, l);
    }
    pthread_mutex_unlock(&q->mu);
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &batch)
    {
        query *x = KDP__CONTAINER_OF(l, query, link);
        kdp__link_remove(l);
        kdp__list_append(&q->running, l);
        int r = kdp__podres_start(q->loop, &x->req, on_query_done, x, &x->call);
        if (r < 0) {
            finish(q, x, r, NULL);
        }
    }
}

int kdp__podres_queue_new(kdp__loop *l, kdp__podres_queue **ret)
{
    kdp__podres_queue *q = calloc(1, sizeof(*q));
    if (!q) {
        return -ENOMEM;
    }
    q->loop = l;
    kdp__link_init(&q->pending);
    kdp__link_init(&q->running);
    int r = pthread_mutex_init(&q->mu, NULL);
    if (r != 0) {
        free(q);
        return -r;
    }
    r = kdp__wakeup_new(l, on_wake, q, &q->wake);
    if (r < 0) {
        pthread_mutex_destroy(&q->mu);
        free(q);
        return r;
    }
    *ret = q;
    return 0;
}

void kdp__podres_queue_free(kdp__podres_queue *q)
{
    if (!q) {
        return;
    }
    kdp__wakeup_free(q->wake);
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &q->running)
    {
        query *x = KDP__CONTAINER_OF(l, query, link);
        kdp__podres_cancel(x->call);
        x->done(-ECANCELED, NULL, x->ud);
        query_free(x);
    }
    kdp__link batch;
    kdp__link_init(&batch);
    pthread_mutex_lock(&q->mu);
    kdp__list_for_each_safe(l, tmp, &q->pending)
    {
        kdp__link_remove(l);
        kdp__list_append(&batch, l);
    }
    pthread_mutex_unlock(&q->mu);
    kdp__list_for_each_safe(l, tmp, &batch)
    {
        query *x = KDP__CONTAINER_OF(l, query, link);
        x->done(-ECANCELED, NULL, x->ud);
        query_free(x);
    }
    pthread_mutex_destroy(&q->mu);
    free(q);
}

int kdp__podres_queue_add(kdp__podres_queue *q, const kdp__podres_req *req, kdp_pods_fn done,
                          void *ud)
{
    query *x = calloc(1, sizeof(*x));
    if (!x) {
        return -ENOMEM;
    }
    x->q = q;
    x->req = *req;
    x->req.ns = x->req.pod = NULL; /* List only */
    x->req.socket = strdup(req->socket);
    x->req.resource = req->resource ? strdup(req->resource) : NULL;
    x->done = done;
    x->ud = ud;
    if (!x->req.socket || (req->resource && !x->req.resource)) {
        query_free(x);
        return -ENOMEM;
    }
    pthread_mutex_lock(&q->mu);
    int r = q->n < KDP_PODS_MAX_QUERIES ? 0 : -EAGAIN;
    if (r == 0) {
        q->n++;
        kdp__list_append(&q->pending, &x->link);
    }
    pthread_mutex_unlock(&q->mu);
    if (r < 0) {
        log_warn("kdp_plugin_query_pods: %u queries are pending already: wait for their "
                 "answers",
                 KDP_PODS_MAX_QUERIES);
        query_free(x);
        return r;
    }
    kdp__wakeup_signal(q->wake);
    return 0;
}
