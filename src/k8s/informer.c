/* SPDX-License-Identifier: MIT */
/* informer: a collection listed, then watched (see informer.h). */
#include "k8s/informer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"

#define MIN_BACKOFF_US (1000ULL * 1000ULL)
#define MAX_BACKOFF_US (30ULL * 1000ULL * 1000ULL)
/* A watch that ends sooner than this is opened again after a backoff (a
 * server that closes every watch at once must not spin us). */
#define SHORT_WATCH_US (1000ULL * 1000ULL)

struct kdp__inf {
    kdp__api *a;
    kdp__inf_cbs cbs;
    char *path;
    kdp__api_req *req; /* a list page or the watch */
    kdp__timer *t;
    kdp__backoff bo;
    char rv[128];       /* the last resourceVersion seen ("": list) */
    char *cont;         /* the next page's continue token (NULL: first) */
    unsigned page;      /* objects per list page */
    unsigned base_page; /* ... as set (a page past its bound makes page smaller for one list) */
    uint64_t opened;    /* when the watch was opened */
};

static void step(kdp__inf *f);

static void retry(kdp__inf *f, int err, const char *why)
{
    if (f->cbs.error) {
        f->cbs.error(f->cbs.ud, err, why ? why : strerror(-err));
    }
    kdp__timer_start(f->t, kdp__backoff_next(&f->bo));
}

/* A list again from its first page (the watch too old, or a failure). */
static void relist(kdp__inf *f)
{
    free(f->cont);
    f->cont = NULL;
    f->rv[0] = '\0';
}

static void note_rv(kdp__inf *f, json_t *obj)
{
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (rv && strlen(rv) < sizeof(f->rv)) {
        snprintf(f->rv, sizeof(f->rv), "%s", rv);
    }
}

static void list_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kdp__inf *f = ud;
    f->req = NULL;
    json_t *meta = json_object_get(obj, "metadata");
    json_t *items = json_object_get(obj, "items");
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    if (err == 0 && (!rv || strlen(rv) >= sizeof(f->rv) || (items && !json_is_array(items)))) {
        err = -EPROTO;
        why = "the list has no metadata.resourceVersion or its items are not a list";
    }
    if (err < 0) {
        relist(f); /* a continue token may have expired (410) too */
        if (err == -EMSGSIZE && f->page > 1) {
            f->page = f->page / 4 ? f->page / 4 : 1; /* a page past the bound: smaller ones */
        }
        retry(f, err, why);
        return;
    }
    if (!f->cont) { /* the first page: its resourceVersion is the list's */
        snprintf(f->rv, sizeof(f->rv), "%s", rv);
        if (f->cbs.sync_begin) {
            f->cbs.sync_begin(f->cbs.ud);
        }
    }
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        f->cbs.event(f->cbs.ud, "ADDED", it);
    }
    const char *cont = json_string_value(json_object_get(meta, "continue"));
    free(f->cont);
    f->cont = cont && cont[0] ? strdup(cont) : NULL;
    if (cont && cont[0] && !f->cont) {
        relist(f);
        retry(f, -ENOMEM, "out of memory");
        return;
    }
    if (!f->cont) {
        f->page = f->base_page; /* smaller pages for that list only */
        if (f->cbs.sync_end) {
            f->cbs.sync_end(f->cbs.ud);
        }
    }
    step(f); /* the backoff is reset by a watch that lasts, not by a list */
}

static void watch_event(const char *type, json_t *obj, void *ud)
{
    kdp__inf *f = ud;
    note_rv(f, obj);
    kdp__backoff_reset(&f->bo); /* the watch works */
    if (strcmp(type, "BOOKMARK") != 0) {
        f->cbs.event(f->cbs.ud, type, obj);
    }
}

static void watch_end(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    (void)obj;
    kdp__inf *f = ud;
    f->req = NULL;
    bool lasted = kdp__now_us() - f->opened >= SHORT_WATCH_US;
    if (lasted) {
        kdp__backoff_reset(&f->bo);
    }
    if (err == -EIDRM || err == -EMSGSIZE || err == -EPROTO) {
        /* too old (410), or an event it cannot take past: list again */
        relist(f);
    }
    if (err < 0 && err != -EIDRM) {
        retry(f, err, why);
    } else if (!lasted) { /* a server that ends every watch at once: not a spin */
        kdp__timer_start(f->t, kdp__backoff_next(&f->bo));
    } else {
        step(f); /* ended by its timeout: again from the last resourceVersion */
    }
}

/* s as a query value (RFC 3986: all but the unreserved characters
 * percent-encoded) into out; false when it does not fit. */
static bool query_value(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || strchr("-._~", *p);
        if (n + (plain ? 1 : 3) >= cap) {
            return false;
        }
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
    return true;
}

/* The next call: a list page, or the watch from f->rv. */
static void step(kdp__inf *f)
{
    char path[2048];
    char value[1024];
    int r;
    bool list = !f->rv[0] || f->cont;
    if (!query_value(list ? (f->cont ? f->cont : "") : f->rv, value, sizeof(value))) {
        relist(f); /* a token too long for us: the next list starts over */
        retry(f, -ENAMETOOLONG, "the list's continue token is over 1 KiB");
        return;
    }
    int w = list ? snprintf(path, sizeof(path), "%s?limit=%u%s%s", f->path, f->page,
                            f->cont ? "&continue=" : "", value)
                 : snprintf(path, sizeof(path),
                            "%s?resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%d",
                            f->path, value, KDP__INF_WATCH_TIMEOUT_S);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        r = -ENAMETOOLONG;
    } else if (list) {
        r = kdp__api_call_bounded(f->a, "GET", path, NULL, KDP__API_BOUND_LIST, list_done, f,
                                  &f->req);
    } else {
        f->opened = kdp__now_us();
        r = kdp__api_watch_bounded(f->a, path, KDP__API_BOUND_OBJECT, watch_event, watch_end, f,
                                   &f->req);
    }
    if (r < 0) {
        f->req = NULL;
        relist(f);
        retry(f, r, NULL);
    }
}

static void on_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__inf *f = ud;
    if (!f->req) {
        step(f);
    }
}

int kdp__inf_new(kdp__api *a, const char *path, const kdp__inf_cbs *cbs, kdp__inf **ret)
{
    if (!a || !path || path[0] != '/' || strchr(path, '?') || !cbs || !cbs->event || !ret) {
        return -EINVAL;
    }
    kdp__inf *f = calloc(1, sizeof(*f));
    if (!f) {
        return -ENOMEM;
    }
    f->a = a;
    f->cbs = *cbs;
    f->path = strdup(path);
    f->page = f->base_page = KDP__INF_PAGE;
    kdp__backoff_init(&f->bo, MIN_BACKOFF_US, MAX_BACKOFF_US, 0);
    int r = f->path ? kdp__timer_new(kdp__api_loop(a), on_timer, f, &f->t) : -ENOMEM;
    if (r < 0) {
        kdp__inf_free(f);
        return r;
    }
    kdp__timer_start(f->t, 0);
    *ret = f;
    return 0;
}

void kdp__inf_set_page(kdp__inf *f, unsigned n)
{
    f->page = f->base_page = n < 1 ? 1 : n > KDP__INF_PAGE ? KDP__INF_PAGE : n;
}

void kdp__inf_free(kdp__inf *f)
{
    if (!f) {
        return;
    }
    kdp__api_cancel(f->req);
    kdp__timer_free(f->t);
    free(f->cont);
    free(f->path);
    free(f);
}
