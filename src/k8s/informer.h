/* SPDX-License-Identifier: MIT */
/*
 * informer: one collection of the API server kept in view, as client-go's
 * reflector keeps it: a list (in pages of KDP__INF_PAGE objects, limit and
 * continue), each object handed over as "ADDED" between sync_begin and
 * sync_end (objects not seen in between are gone); then a watch from the
 * list's resourceVersion, each change handed over ("ADDED", "MODIFIED",
 * "DELETED"); a watch the server ends is opened again from the last
 * resourceVersion seen (bookmarks asked for); 410 Gone (too old) lists
 * again, and so does a watch event past the bound on one object. A
 * failure is told (error) and retried with backoff (1 s doubling to 30 s,
 * reset by a watch that lasts a second or brings an event); a watch the
 * server ends sooner is opened again after the backoff too, so no server
 * can make it spin; a list page past the bound on a list makes the pages
 * smaller.
 *
 * Loop thread (the api's); callbacks run on it, never from inside
 * kdp__inf_new.
 */
#ifndef KDP_K8S_INFORMER_H
#define KDP_K8S_INFORMER_H

#include <jansson.h>

#include "k8s/api.h"

/* Objects per page of a list: the page's JSON tree is what a list costs in
 * memory (bench/dra.py: 2,000 claims of other drivers listed in pages of
 * 500 left 2.9 MB of anonymous memory behind, in pages of 100 0.6 MB). */
#define KDP__INF_PAGE 100
/* A watch's timeoutSeconds (the server ends it then; it is opened again). */
#define KDP__INF_WATCH_TIMEOUT_S 300

typedef struct kdp__inf kdp__inf;

typedef struct kdp__inf_cbs {
    void (*sync_begin)(void *ud);
    /* obj borrowed for the call */
    void (*event)(void *ud, const char *type, json_t *obj);
    void (*sync_end)(void *ud);
    /* a list or watch failed (why: a line for the log); retried */
    void (*error)(void *ud, int err, const char *why);
    void *ud;
} kdp__inf_cbs;

/* Keeps path (a collection, e.g. "/apis/resource.k8s.io/v1/resourceclaims";
 * no query) in view. Returns 0 and *ret (the list starts from the loop),
 * -EINVAL, -ENOMEM. */
int kdp__inf_new(kdp__api *a, const char *path, const kdp__inf_cbs *cbs, kdp__inf **ret);
/* Objects per page from the next list on (1 .. KDP__INF_PAGE; tests and
 * servers with small pages). */
void kdp__inf_set_page(kdp__inf *f, unsigned n);
/* Cancels what is under way (no callback runs after). NULL is fine. */
void kdp__inf_free(kdp__inf *f);

#endif
