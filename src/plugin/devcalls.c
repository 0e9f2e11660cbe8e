/* SPDX-License-Identifier: MIT */
/* devcalls: Allocate, GetPreferredAllocation, PreStartContainer (see
 * devcalls.h). */
#include "plugin/devcalls.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/wire.h"
#include "plugin/prefer.h"
#include "plugin/replicas.h"
#include "plugin/response.h"

static void fail(kdp__call *call, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- a call that runs a user callback ---- */

typedef struct rpc {
    kdp__call *call; /* NULL once the caller is gone */
    kdp__pjob *job;
    void *req;                   /* the unpacked request */
    void (*free_req)(void *req); /* protobuf-c free_unpacked */
    kdp__devtab devs;            /* the requested devices, for add_defaults */
    uint8_t *out;                /* the packed response, built on the worker */
    size_t out_len;
} rpc;

static void rpc_cleanup(kdp__pjob *j)
{
    rpc *c = j->data;
    if (!c) {
        return;
    }
    if (c->req) {
        c->free_req(c->req);
    }
    kdp__devtab_clear(&c->devs);
    free(c->out);
    free(c);
}

static void rpc_on_cancel(kdp__call *call, int status, void *ud)
{
    (void)call;
    (void)status;
    rpc *c = ud;
    c->call = NULL;
    kdp__pjob_cancel(c->job); /* the kubelet is gone: drop the result */
}

static void rpc_complete(kdp__pjob *j, bool timed_out)
{
    rpc *c = j->data;
    kdp__devcalls *p = j->owner;
    kdp__call *call = c->call;
    if (!call) {
        return;
    }
    c->call = NULL;
    char msg[KDP__JOB_MSG_MAX + 64];
    if (timed_out) {
        snprintf(msg, sizeof(msg), "%s: the %s callback did not return within %u ms", p->resource,
                 j->what, p->jobs->timeout_ms);
        (void)kdp__call_finish(call, KDP__ST_DEADLINE_EXCEEDED, msg);
        return;
    }
    if (j->result < 0) {
        snprintf(msg, sizeof(msg), "%s: %s: %s", p->resource, j->what,
                 j->has_msg ? j->msg : strerror(-j->result));
        (void)kdp__call_finish(call, kdp__status_from_errno(j->result), msg);
        return;
    }
    (void)kdp__call_reply(call, c->out, c->out_len); /* message + status in one write */
}

/* Runs fn on the worker for this call; takes req (freed with free_req). */
static void rpc_start(kdp__devcalls *p, kdp__call *call, const char *what, void *req,
                      void (*free_req)(void *), kdp__devtab *devs, void (*fn)(kdp__pjob *))
{
    rpc *c = calloc(1, sizeof(*c));
    kdp__pjob *j = c ? kdp__pjob_new(p->jobs, what, p) : NULL;
    if (!j) {
        free(c);
        free_req(req);
        kdp__devtab_clear(devs);
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    c->call = call;
    c->job = j;
    c->req = req;
    c->free_req = free_req;
    kdp__devtab_init(&c->devs);
    kdp__devtab_move(&c->devs, devs);
    j->data = c;
    j->fn = fn;
    j->complete = rpc_complete;
    j->cleanup = rpc_cleanup;
    kdp__call_set_cancel(call, rpc_on_cancel, c);
    int r = kdp__pjob_submit(j, kdp__call_deadline(call));
    if (r == -EBUSY) {
        char msg[512];
        (void)kdp__pjob_busy_message(p->jobs, what, msg, sizeof(msg));
        kdp__call_set_cancel(call, NULL, NULL);
        (void)kdp__call_finish(call, KDP__ST_UNAVAILABLE, msg);
    } else if (r < 0) {
        kdp__call_set_cancel(call, NULL, NULL);
        (void)kdp__call_finish(call, KDP__ST_RESOURCE_EXHAUSTED, "cannot start the callback");
    }
}

/* Packs the response on the worker thread, for rpc_complete to send. */
static int rpc_pack(rpc *c, const ProtobufCMessage *m)
{
    c->out_len = protobuf_c_message_get_packed_size(m);
    c->out = malloc(c->out_len ? c->out_len : 1);
    if (!c->out) {
        return -ENOMEM;
    }
    (void)protobuf_c_message_pack(m, c->out);
    return 0;
}

static void fail(kdp__call *call, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): va_start is the line above
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    (void)kdp__call_finish(call, status, msg);
}

/* Copies the devices named in ids (replica IDs resolved: each device once)
 * into devs; refuses unknown (and, if need_healthy, unhealthy) ones naming
 * the first such ID. */
static bool check_ids(kdp__devcalls *p, kdp__call *call, char **ids, size_t n, bool need_healthy,
                      kdp__devtab *devs)
{
    for (size_t i = 0; i < n; i++) {
        const kdp__dev *d = kdp__replica_find(kdp__table_told(p->table), p->replicas, ids[i]);
        if (!d) {
            fail(call, KDP__ST_INVALID_ARGUMENT, "%s: unknown device ID \"%s\"", p->resource,
                 ids[i]);
            return false;
        }
        if (need_healthy && d->health != KDP_HEALTHY) {
            fail(call, KDP__ST_INVALID_ARGUMENT, "%s: device \"%s\" is Unhealthy", p->resource,
                 ids[i]);
            return false;
        }
        if (kdp__devtab_find(devs, d->id)) {
            continue;
        }
        kdp_device dev = kdp__dev_view(d);
        dev.data = NULL; /* a call's copy: the author's data is looked up, never copied */
        if (kdp__devtab_add(devs, &dev, NULL) < 0) {
            fail(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
            return false;
        }
    }
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Refuses an ID listed twice for one container (the kubelet never does so:
 * a peer that does is confused, and the author's callback must not have to
 * cope). Sorted copy: O(n log n) for the largest requests. */
static bool check_unique(kdp__devcalls *p, kdp__call *call, char **ids, size_t n)
{
    if (n < 2) {
        return true;
    }
    char **sorted = malloc(n * sizeof(*sorted));
    if (!sorted) {
        fail(call, KDP__ST_RESOURCE_EXHAUSTED, "out of memory");
        return false;
    }
    memcpy(sorted, ids, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), cmp_str);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(sorted[i - 1], sorted[i]) == 0) {
            fail(call, KDP__ST_INVALID_ARGUMENT,
                 "%s: device ID \"%s\" is listed twice for one container", p->resource, sorted[i]);
            free(sorted);
            return false;
        }
    }
    free(sorted);
    return true;
}

/* ---- Allocate ---- */

/* One container's response: the author's op on the worker (j set), or
 * kdp's default (j NULL: on the loop thread, no callback to wait for). */
static int allocate_one(kdp__devcalls *p, kdp__pjob *j, const kdp__devtab *devs,
                        V1beta1__ContainerAllocateRequest *cr,
                        V1beta1__ContainerAllocateResponse *out, kdp_alloc_response *b)
{
    const char *const *ids = (const char *const *)cr->devices_ids;
    size_t n = cr->n_devices_ids;
    /* the device of each ID: pointers into devs (checked on the loop) */
    const char **dev_ids = NULL;
    if (kdp__replicas_on(p->replicas) && n > 0) {
        // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
        dev_ids = calloc(n, sizeof(*dev_ids));
        if (!dev_ids) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            const kdp__dev *d = kdp__replica_find(devs, p->replicas, ids[i]);
            dev_ids[i] = d ? d->id : ids[i];
        }
    }
    kdp__response_init(b, devs, ids, dev_ids, n, p->env_name);
    kdp_alloc_request req = {.ids = ids, .n_ids = n, .device_ids = dev_ids ? dev_ids : ids};
    int r = j ? kdp__pjob_checked(j, p->ops->allocate(p->owner, &req, b, p->ud))
              : kdp_response_add_defaults(b);
    if (r == 0) {
        r = kdp__response_to_pb(b, out);
    }
    b->device_ids = b->ids; /* dev_ids goes now; b lives until the reply is packed */
    free(dev_ids);
    return r;
}

/* Every container's response, then fin(resp, fin_ud) with the whole
 * AllocateResponse (before it is freed). Returns 0 or the first -errno. */
static int allocate_all(kdp__devcalls *p, kdp__pjob *j, const kdp__devtab *devs,
                        const V1beta1__AllocateRequest *req,
                        int (*fin)(const ProtobufCMessage *resp, void *fin_ud), void *fin_ud)
{
    size_t n = req->n_container_requests;
    V1beta1__ContainerAllocateResponse *outs = calloc(n, sizeof(*outs));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    V1beta1__ContainerAllocateResponse **ptrs = calloc(n, sizeof(*ptrs));
    kdp_alloc_response *bs = calloc(n, sizeof(*bs));
    size_t done = 0;
    int r = outs && ptrs && bs ? 0 : -ENOMEM;
    for (; r == 0 && done < n; done++) {
        v1beta1__container_allocate_response__init(&outs[done]);
        ptrs[done] = &outs[done];
        r = allocate_one(p, j, devs, req->container_requests[done], &outs[done], &bs[done]);
    }
    if (r == 0) {
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        resp.n_container_responses = n;
        resp.container_responses = ptrs;
        r = fin(&resp.base, fin_ud);
    }
    for (size_t i = 0; i < done; i++) {
        kdp__response_pb_done(&outs[i]);
        kdp__response_done(&bs[i]);
    }
    free(outs);
    free(ptrs);
    free(bs);
    return r;
}

static int pack_for_rpc(const ProtobufCMessage *resp, void *ud)
{
    return rpc_pack(ud, resp);
}

static void fn_allocate(kdp__pjob *j)
{
    rpc *c = j->data;
    j->result = allocate_all(j->owner, j, &c->devs, c->req, pack_for_rpc, c);
}

static int reply_now(const ProtobufCMessage *resp, void *ud)
{
    return kdp__call_reply_pb(ud, resp) < 0 ? -EIO : 0;
}

/* No allocate op: kdp's default answer, built and sent on the loop thread
 * (nothing of the author's runs, so no worker hop and no deadline). */
static void allocate_inline(kdp__devcalls *p, kdp__call *call, const kdp__devtab *devs,
                            const V1beta1__AllocateRequest *req)
{
    int r = allocate_all(p, NULL, devs, req, reply_now, call);
    if (r == -EIO) {
        return; /* the reply could not be queued: the call is gone */
    }
    if (r < 0) {
        fail(call, kdp__status_from_errno(r), "%s: allocate: %s", p->resource, strerror(-r));
    }
}

static void free_alloc_req(void *m)
{
    v1beta1__allocate_request__free_unpacked(m, NULL);
}

void kdp__devcalls_allocate(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    kdp__devcalls *p = ud;
    V1beta1__AllocateRequest *req = v1beta1__allocate_request__unpack(NULL, len, msg);
    if (!req) {
        fail(call, KDP__ST_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        return;
    }
    if (req->n_container_requests == 0) {
        free_alloc_req(req);
        fail(call, KDP__ST_INVALID_ARGUMENT, "%s: AllocateRequest has no container requests",
             p->resource);
        return;
    }
    kdp__devtab devs;
    kdp__devtab_init(&devs);
    for (size_t i = 0; i < req->n_container_requests; i++) {
        V1beta1__ContainerAllocateRequest *cr = req->container_requests[i];
        if (p->one_per_container && kdp__replicas_on(p->replicas) && cr->n_devices_ids > 1) {
            fail(call, KDP__ST_INVALID_ARGUMENT,
                 "%s: a container asked for %zu replicas; this resource allows one per container",
                 p->resource, cr->n_devices_ids);
            kdp__devtab_clear(&devs);
            free_alloc_req(req);
            return;
        }
        if (!check_unique(p, call, cr->devices_ids, cr->n_devices_ids) ||
            !check_ids(p, call, cr->devices_ids, cr->n_devices_ids, true, &devs)) {
            kdp__devtab_clear(&devs);
            free_alloc_req(req);
            return;
        }
    }
    if (!p->ops->allocate) {
        allocate_inline(p, call, &devs, req);
        kdp__devtab_clear(&devs);
        free_alloc_req(req);
        return;
    }
    rpc_start(p, call, "allocate", req, free_alloc_req, &devs, fn_allocate);
}

/* ---- GetPreferredAllocation ---- */

static int prefer_one(kdp__pjob *j, V1beta1__ContainerPreferredAllocationRequest *cr,
                      kdp_id_list *ids)
{
    kdp__devcalls *p = j->owner;
    kdp_preferred_request req = {
        .available = (const char *const *)cr->available_deviceids,
        .n_available = cr->n_available_deviceids,
        .must_include = (const char *const *)cr->must_include_deviceids,
        .n_must_include = cr->n_must_include_deviceids,
        .size = cr->allocation_size > 0 ? (size_t)cr->allocation_size : 0,
    };
    return kdp__pjob_checked(j, p->ops->preferred(p->owner, &req, ids, p->ud));
}

static void fn_preferred(kdp__pjob *j)
{
    rpc *c = j->data;
    V1beta1__PreferredAllocationRequest *req = c->req;
    size_t n = req->n_container_requests;
    V1beta1__ContainerPreferredAllocationResponse *outs = calloc(n, sizeof(*outs));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    V1beta1__ContainerPreferredAllocationResponse **ptrs = calloc(n, sizeof(*ptrs));
    kdp_id_list *lists = calloc(n, sizeof(*lists));
    size_t done = 0;
    j->result = outs && ptrs && lists ? 0 : -ENOMEM;
    for (; j->result == 0 && done < n; done++) {
        v1beta1__container_preferred_allocation_response__init(&outs[done]);
        kdp__id_list_init(&lists[done]);
        ptrs[done] = &outs[done];
        j->result = prefer_one(j, req->container_requests[done], &lists[done]);
        outs[done].n_deviceids = lists[done].n;
        outs[done].deviceids = lists[done].ids;
    }
    if (j->result == 0) {
        V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
        resp.n_container_responses = n;
        resp.container_responses = ptrs;
        j->result = rpc_pack(c, &resp.base);
    }
    for (size_t i = 0; i < done; i++) {
        kdp__id_list_done(&lists[i]);
    }
    free(outs);
    free(ptrs);
    free(lists);
}

static void free_pref_req(void *m)
{
    v1beta1__preferred_allocation_request__free_unpacked(m, NULL);
}

/* kdp's own answer (a strategy, no op): inline, on the loop thread. */
static void prefer_inline(kdp__devcalls *p, kdp__call *call,
                          const V1beta1__PreferredAllocationRequest *req)
{
    size_t n = req->n_container_requests;
    V1beta1__ContainerPreferredAllocationResponse *outs = calloc(n ? n : 1, sizeof(*outs));
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    V1beta1__ContainerPreferredAllocationResponse **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    kdp_id_list *lists = calloc(n ? n : 1, sizeof(*lists));
    int r = outs && ptrs && lists ? 0 : -ENOMEM;
    size_t done = 0;
    for (; r == 0 && done < n; done++) {
        const V1beta1__ContainerPreferredAllocationRequest *cr = req->container_requests[done];
        kdp_preferred_request one = {
            .available = (const char *const *)cr->available_deviceids,
            .n_available = cr->n_available_deviceids,
            .must_include = (const char *const *)cr->must_include_deviceids,
            .n_must_include = cr->n_must_include_deviceids,
            .size = cr->allocation_size > 0 ? (size_t)cr->allocation_size : 0,
        };
        v1beta1__container_preferred_allocation_response__init(&outs[done]);
        kdp__id_list_init(&lists[done]);
        ptrs[done] = &outs[done];
        r = kdp__prefer(p->preferred, kdp__table_told(p->table), p->replicas, &one, &lists[done]);
        outs[done].n_deviceids = lists[done].n;
        outs[done].deviceids = lists[done].ids;
    }
    if (r == 0) {
        V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
        resp.n_container_responses = n;
        resp.container_responses = ptrs;
        (void)kdp__call_reply_pb(call, &resp.base);
    } else if (r == -EINVAL) {
        fail(call, KDP__ST_INVALID_ARGUMENT, "%s: an ID in the request is not a valid device ID",
             p->resource);
    } else {
        fail(call, KDP__ST_RESOURCE_EXHAUSTED, "%s: out of memory", p->resource);
    }
    for (size_t i = 0; i < done; i++) {
        kdp__id_list_done(&lists[i]);
    }
    free(outs);
    free(ptrs);
    free(lists);
}

void kdp__devcalls_preferred(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    kdp__devcalls *p = ud;
    if (!p->ops->preferred && p->preferred != KDP_PREFERRED_NONE) {
        V1beta1__PreferredAllocationRequest *req =
            v1beta1__preferred_allocation_request__unpack(NULL, len, msg);
        if (!req) {
            fail(call, KDP__ST_INVALID_ARGUMENT, "cannot decode PreferredAllocationRequest");
            return;
        }
        prefer_inline(p, call, req);
        v1beta1__preferred_allocation_request__free_unpacked(req, NULL);
        return;
    }
    if (!p->ops->preferred) {
        fail(call, KDP__ST_UNIMPLEMENTED,
             "%s: this plugin has no preferred-allocation callback "
             "(get_preferred_allocation_available is false)",
             p->resource);
        return;
    }
    V1beta1__PreferredAllocationRequest *req =
        v1beta1__preferred_allocation_request__unpack(NULL, len, msg);
    if (!req) {
        fail(call, KDP__ST_INVALID_ARGUMENT, "cannot decode PreferredAllocationRequest");
        return;
    }
    kdp__devtab none;
    kdp__devtab_init(&none);
    rpc_start(p, call, "preferred allocation", req, free_pref_req, &none, fn_preferred);
}

/* ---- PreStartContainer ---- */

static void fn_prestart(kdp__pjob *j)
{
    rpc *c = j->data;
    V1beta1__PreStartContainerRequest *req = c->req;
    kdp__devcalls *p = j->owner;
    j->result =
        kdp__pjob_checked(j, p->ops->prestart(p->owner, (const char *const *)req->devices_ids,
                                              req->n_devices_ids, p->ud));
    if (j->result == 0) {
        V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
        j->result = rpc_pack(c, &resp.base);
    }
}

static void free_prestart_req(void *m)
{
    v1beta1__pre_start_container_request__free_unpacked(m, NULL);
}

void kdp__devcalls_prestart(kdp__call *call, const uint8_t *msg, size_t len, void *ud)
{
    kdp__devcalls *p = ud;
    V1beta1__PreStartContainerRequest *req =
        v1beta1__pre_start_container_request__unpack(NULL, len, msg);
    if (!req) {
        fail(call, KDP__ST_INVALID_ARGUMENT, "cannot decode PreStartContainerRequest");
        return;
    }
    kdp__devtab devs;
    kdp__devtab_init(&devs);
    bool ok = check_unique(p, call, req->devices_ids, req->n_devices_ids) &&
              check_ids(p, call, req->devices_ids, req->n_devices_ids, false, &devs);
    kdp__devtab_clear(&devs);
    if (!ok) {
        free_prestart_req(req);
        return;
    }
    if (!p->ops->prestart) {
        free_prestart_req(req);
        V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
        (void)kdp__call_reply_pb(call, &resp.base);
        return;
    }
    rpc_start(p, call, "pre-start", req, free_prestart_req, &devs, fn_prestart);
}

/* Every Allocate's outcome, whichever path ended it (a refused ID, the
 * callback's error, its deadline, the kubelet gone). */
void kdp__devcalls_allocate_ended(int status, void *ud)
{
    kdp__devcalls *c = ud;
    if (c->stats && status >= 0 && status < KDP__GRPC_CODES) {
        kdp__count(&c->stats->allocations[status], 1);
    }
}

void kdp__devcalls_init(kdp__devcalls *c, kdp_plugin *owner, const kdp_ops *ops, void *ud,
                        const char *resource, const char *env_name, kdp__table *table,
                        kdp__jobs *jobs)
{
    memset(c, 0, sizeof(*c));
    c->owner = owner;
    c->ops = ops;
    c->ud = ud;
    c->resource = resource;
    c->env_name = env_name;
    c->table = table;
    c->jobs = jobs;
}
