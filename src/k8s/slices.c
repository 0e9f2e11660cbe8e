/* SPDX-License-Identifier: MIT */
/* slices: slicerec driven on the loop (see slices.h). */
#include "k8s/slices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "k8s/slicectr.h"

#define GROUP "resource.k8s.io"

struct kdp__slices {
    kdp__api *a;
    kdp__loop *loop;
    kdp__sr sr;
    kdp__slices_status_cb status_cb;
    void *ud;
    kdp__api_req *req;       /* the call in flight */
    kdp__api_req *watch;     /* the watch */
    kdp__timer *t;           /* slicerec's next time, or coalescing */
    kdp__slices_status last; /* as last told */
    bool pumping;
};

static void pump(kdp__slices *s);

static bool same_status(const kdp__slices_status *a, const kdp__slices_status *b)
{
    return a->published == b->published && a->generation == b->generation &&
           a->slices == b->slices && a->devices == b->devices && a->err == b->err &&
           a->writes == b->writes && a->lists == b->lists && a->conflicts == b->conflicts &&
           strcmp(a->version, b->version) == 0 && strcmp(a->error, b->error) == 0;
}

static void tell(kdp__slices *s)
{
    if (same_status(&s->last, &s->sr.st)) {
        return;
    }
    s->last = s->sr.st;
    if (s->status_cb) {
        s->status_cb(&s->last, s->ud);
    }
}

/* ---- the answers, into slicerec ---- */

static void discovered(int err, const char *version, const char *why, void *ud)
{
    kdp__slices *s = ud;
    s->req = NULL;
    kdp__sr_discovered(&s->sr, err, version, why, kdp__now_us());
    if (err == 0) {
        log_info("k8s: publishing ResourceSlices through " GROUP "/%s at %s (%s)", version,
                 kdp__api_server(s->a), kdp__api_source(s->a));
    }
    pump(s);
}

static void node_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kdp__slices *s = ud;
    s->req = NULL;
    kdp__sr_node(&s->sr, err, obj, why, kdp__now_us());
    pump(s);
}

static void list_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kdp__slices *s = ud;
    s->req = NULL;
    kdp__sr_listed(&s->sr, err, obj, why, kdp__now_us());
    pump(s);
}

static void write_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kdp__slices *s = ud;
    s->req = NULL;
    kdp__sr_written(&s->sr, err, err == 0 ? obj : NULL, why, kdp__now_us());
    pump(s);
}

static void watch_event(const char *type, json_t *obj, void *ud)
{
    kdp__slices *s = ud;
    kdp__sr_watch_event(&s->sr, type, obj, kdp__now_us());
    pump(s);
}

static void watch_end(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    (void)obj;
    kdp__slices *s = ud;
    s->watch = NULL;
    kdp__sr_watch_ended(&s->sr, err, why, kdp__now_us());
    pump(s);
}

/* ---- slicerec's actions, as calls ---- */

static int write_slice(kdp__slices *s, const kdp__sr_action *a)
{
    char path[512];
    const char *version = s->sr.st.version;
    if (a->kind == KDP__SR_CREATE) {
        snprintf(path, sizeof(path), "/apis/" GROUP "/%s/resourceslices", version);
    } else {
        snprintf(path, sizeof(path), "/apis/" GROUP "/%s/resourceslices/%s", version, a->name);
    }
    if (a->kind == KDP__SR_DELETE) {
        return kdp__api_call_bounded(s->a, "DELETE", path, NULL, KDP__API_BOUND_OBJECT, write_done,
                                     s, &s->req);
    }
    kdp__sr_chunkv c;
    kdp__sr_chunk(&s->sr, a->chunk, &c);
    bool create = a->kind == KDP__SR_CREATE;
    json_t *obj = kdp__slicebuild_object(version, s->sr.driver, s->sr.node, s->sr.node_uid,
                                         a->generation, a->count, c.sets, c.items, c.n,
                                         create ? NULL : a->name, create ? NULL : a->rv);
    if (!obj) {
        return -ENOMEM;
    }
    int r = kdp__api_call_bounded(s->a, create ? "POST" : "PUT", path, obj, KDP__API_BOUND_OBJECT,
                                  write_done, s, &s->req);
    json_decref(obj);
    return r;
}

static int start(kdp__slices *s, const kdp__sr_action *a)
{
    char path[1024];
    const kdp__sr *sr = &s->sr;
    static const char *const wanted[] = {"v1", "v1beta2", "v1beta1", NULL};
    switch (a->kind) {
    case KDP__SR_DISCOVER:
        return kdp__api_discover(s->a, GROUP, wanted, discovered, s, &s->req);
    case KDP__SR_GET_NODE:
        snprintf(path, sizeof(path), "/api/v1/nodes/%s", sr->node);
        return kdp__api_call_bounded(s->a, "GET", path, NULL, KDP__API_BOUND_OBJECT, node_done, s,
                                     &s->req);
    case KDP__SR_LIST:
        snprintf(path, sizeof(path),
                 "/apis/" GROUP "/%s/resourceslices?fieldSelector=spec.nodeName%%3D%s%%2C"
                 "spec.driver%%3D%s",
                 sr->st.version, sr->node, sr->driver);
        return kdp__api_call_bounded(s->a, "GET", path, NULL, KDP__API_BOUND_LIST, list_done, s,
                                     &s->req);
    case KDP__SR_WATCH:
        snprintf(path, sizeof(path),
                 "/apis/" GROUP "/%s/resourceslices?fieldSelector=spec.nodeName%%3D%s%%2C"
                 "spec.driver%%3D%s&resourceVersion=%s&allowWatchBookmarks=true&"
                 "timeoutSeconds=%u",
                 sr->st.version, sr->node, sr->driver, a->rv, KDP__SLICES_WATCH_TIMEOUT_S);
        return kdp__api_watch_bounded(s->a, path, KDP__API_BOUND_OBJECT, watch_event, watch_end, s,
                                      &s->watch);
    case KDP__SR_CREATE:
    case KDP__SR_UPDATE:
    case KDP__SR_DELETE:
        return write_slice(s, a);
    case KDP__SR_NONE:
        break;
    }
    return 0;
}

/* Makes the calls slicerec wants now, then arms the timer for its next
 * time. Answers come later, on the loop (never from inside a call). */
static void pump(kdp__slices *s)
{
    if (s->pumping) {
        return;
    }
    s->pumping = true;
    kdp__sr_action a;
    for (;;) {
        uint64_t now = kdp__now_us();
        a = kdp__sr_next(&s->sr, now);
        if (a.kind == KDP__SR_NONE) {
            break;
        }
        int r = start(s, &a);
        if (r < 0) {
            if (a.kind == KDP__SR_WATCH) {
                s->watch = NULL;
            } else {
                s->req = NULL;
            }
            kdp__sr_not_started(&s->sr, a.kind, r, now);
        }
    }
    if (a.at_us) {
        kdp__timer_start_at(s->t, a.at_us);
    } else {
        kdp__timer_stop(s->t);
    }
    s->pumping = false;
    tell(s);
}

static void on_timer(kdp__timer *t, void *ud)
{
    (void)t;
    pump(ud);
}

/* ---- the API ---- */

int kdp__slices_set(kdp__slices *s, const kdp__slice_dev *devs, size_t n,
                    const kdp_dra_counter_set *sets, size_t nsets)
{
    if (!s || (n && !devs) || (nsets && !sets)) {
        return -EINVAL;
    }
    json_t **cs = NULL;
    int ns = kdp__slicectr_sets(sets, nsets, &cs);
    if (ns < 0) {
        return ns;
    }
    json_t **out = NULL;
    int r = kdp__slicebuild_devices(devs, n, cs, (size_t)ns, &out);
    if (r < 0) {
        for (int i = 0; i < ns; i++) {
            json_decref(cs[i]);
        }
        free(cs);
        return r;
    }
    int changed = kdp__sr_set_devices(&s->sr, out, (size_t)r, cs, (size_t)ns);
    if (changed < 0) {
        return changed;
    }
    if (changed) {
        tell(s);
        if (!s->req) {
            kdp__timer_start(s->t, KDP__SLICES_COALESCE_MS * 1000ULL);
        }
    }
    return r;
}

void kdp__slices_get_status(const kdp__slices *s, kdp__slices_status *ret)
{
    *ret = s->sr.st;
}

int kdp__slices_new(kdp__api *a, const char *driver, const char *node, const char *node_uid,
                    unsigned resync_ms, kdp__slices_status_cb status, void *ud, kdp__slices **ret)
{
    if (!a || !ret) {
        return -EINVAL;
    }
    kdp__slices *s = calloc(1, sizeof(*s));
    if (!s) {
        return -ENOMEM;
    }
    s->a = a;
    s->loop = kdp__api_loop(a);
    s->status_cb = status;
    s->ud = ud;
    int r = kdp__sr_init(&s->sr, driver, node, node_uid, resync_ms, 0);
    if (r == 0) {
        r = kdp__timer_new(s->loop, on_timer, s, &s->t);
    }
    if (r < 0) {
        kdp__slices_free(s);
        return r;
    }
    s->last = s->sr.st;
    kdp__timer_start(s->t, 0);
    *ret = s;
    return 0;
}

void kdp__slices_free(kdp__slices *s)
{
    if (!s) {
        return;
    }
    kdp__api_cancel(s->req);
    kdp__api_cancel(s->watch);
    kdp__timer_free(s->t);
    kdp__sr_done(&s->sr);
    free(s);
}
