/* SPDX-License-Identifier: MIT */
/* podres_call: PodResources calls on a loop, errors explained. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "grpc/client.h"
#include "grpc/wire.h"
#include "plugin/podres.h"
#include "podresources.pb-c.h"

struct kdp__podres_call {
    kdp__client_call *call;
    kdp__podres_kind kind;
    char *socket;
    char *resource;
    unsigned replicas;
    kdp_pods_fn done;
    void *ud;
};

static void call_free(kdp__podres_call *c)
{
    free(c->socket);
    free(c->resource);
    free(c);
}

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The -errno of a failed call, after a log line saying what to do. */
static int call_error(const kdp__podres_call *c, int status, const char *message)
{
    const char *m = kdp__podres_method(c->kind);
    if (status == KDP__ST_UNAVAILABLE && starts_with(message, "connect ")) {
        struct stat st;
        if (lstat(c->socket, &st) < 0 && errno == ENOENT) {
            log_error("PodResources %s: no socket at %s: is the kubelet's pod-resources "
                      "directory mounted (hostPath /var/lib/kubelet/pod-resources), and is the "
                      "kubelet root right (kdp_config.kubelet_root, $KDP_KUBELET_ROOT)?",
                      m, c->socket);
            return -ENOENT;
        }
        log_error("PodResources %s: %s: is the kubelet running?", m, message);
        return -ECONNREFUSED;
    }
    if (c->kind == KDP__PODRES_GET && status == KDP__ST_UNKNOWN) {
        /* The kubelet's plain errors (code Unknown): its words. */
        if (strstr(message, "Get method disabled")) {
            status = KDP__ST_UNIMPLEMENTED;
        } else if (strstr(message, " not found")) {
            log_error("PodResources Get at %s: %s", c->socket, message);
            return -ESRCH;
        }
    }
    switch (status) {
    case KDP__ST_DEADLINE_EXCEEDED:
        log_error("PodResources %s at %s: no answer in time (%s)", m, c->socket, message);
        return -ETIMEDOUT;
    case KDP__ST_UNIMPLEMENTED:
        if (c->kind == KDP__PODRES_GET) {
            log_error("PodResources Get at %s: the kubelet does not serve it (%s): the "
                      "kubelet's KubeletPodResourcesGet feature gate is off (on by default since "
                      "Kubernetes 1.34, alpha since 1.27): turn it on, or use List (kdp_pods_get)",
                      c->socket, message);
        } else {
            log_error("PodResources %s at %s: the kubelet does not serve it (%s): List and "
                      "GetAllocatableResources need Kubernetes 1.28+ (or their feature gates)",
                      m, c->socket, message);
        }
        return -EOPNOTSUPP;
    case KDP__ST_RESOURCE_EXHAUSTED:
        if (starts_with(message, "response larger than max")) {
            log_error("PodResources %s at %s: the answer is over %u bytes", m, c->socket,
                      KDP_PODS_MAX_MESSAGE);
            return -EMSGSIZE;
        }
        break;
    default:
        break;
    }
    log_error("PodResources %s at %s: %s: %s", m, c->socket, kdp__status_name(status), message);
    return -EPROTO;
}

static void on_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    kdp__podres_call *c = ud;
    kdp_pods *pods = NULL;
    int err;
    if (status != KDP__ST_OK) {
        err = call_error(c, status, message);
    } else {
        char why[256] = "";
        err =
            kdp__pods_build(c->kind, resp, len, c->resource, c->replicas, &pods, why, sizeof(why));
        if (err < 0) {
            log_error("PodResources %s at %s: a bad answer: %s", kdp__podres_method(c->kind),
                      c->socket, err == -ENOMEM ? "out of memory" : why);
        }
    }
    c->done(err, pods, c->ud);
    call_free(c);
}

static int pack_and_start(kdp__loop *l, kdp__podres_call *c, const kdp__podres_req *req)
{
    unsigned ms = req->timeout_ms ? req->timeout_ms : KDP_PODS_TIMEOUT_MS;
    kdp__unary_opts opts = {.timeout_us = (uint64_t)ms * 1000, .max_recv = KDP_PODS_MAX_MESSAGE};
    switch (req->kind) {
    case KDP__PODRES_GET: {
        V1__GetPodResourcesRequest g = V1__GET_POD_RESOURCES_REQUEST__INIT;
        g.pod_name = (char *)req->pod;
        g.pod_namespace = (char *)req->ns;
        return kdp__client_unary_pb(l, c->socket, "/v1.PodResourcesLister/Get", &g.base, &opts,
                                    on_done, c, &c->call);
    }
    case KDP__PODRES_ALLOCATABLE: {
        V1__AllocatableResourcesRequest a = V1__ALLOCATABLE_RESOURCES_REQUEST__INIT;
        return kdp__client_unary_pb(l, c->socket, "/v1.PodResourcesLister/GetAllocatableResources",
                                    &a.base, &opts, on_done, c, &c->call);
    }
    default: {
        V1__ListPodResourcesRequest r = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        return kdp__client_unary_pb(l, c->socket, "/v1.PodResourcesLister/List", &r.base, &opts,
                                    on_done, c, &c->call);
    }
    }
}

int kdp__podres_start(kdp__loop *l, const kdp__podres_req *req, kdp_pods_fn done, void *ud,
                      kdp__podres_call **ret)
{
    if (!l || !req || !req->socket || !done ||
        (req->kind == KDP__PODRES_GET && (!req->ns || !req->pod))) {
        return -EINVAL;
    }
    kdp__podres_call *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    c->kind = req->kind;
    c->replicas = req->replicas;
    c->done = done;
    c->ud = ud;
    c->socket = strdup(req->socket);
    c->resource = req->resource ? strdup(req->resource) : NULL;
    int r = !c->socket || (req->resource && !c->resource) ? -ENOMEM : pack_and_start(l, c, req);
    if (r < 0) {
        call_free(c);
        return r;
    }
    if (ret) {
        *ret = c;
    }
    return 0;
}

void kdp__podres_cancel(kdp__podres_call *c)
{
    if (!c) {
        return;
    }
    kdp__client_call_cancel(c->call);
    call_free(c);
}

typedef struct waiter {
    kdp__loop *loop;
    int err;
    kdp_pods *pods;
    bool done;
} waiter;

static void on_waited(int err, kdp_pods *pods, void *ud)
{
    waiter *w = ud;
    w->err = err;
    w->pods = pods;
    w->done = true;
    kdp__loop_quit(w->loop);
}

int kdp__podres_run(const kdp__podres_req *req, kdp_pods **ret)
{
    if (!ret) {
        return -EINVAL;
    }
    waiter w = {.err = -EIO};
    int r = kdp__loop_new(&w.loop);
    if (r < 0) {
        return r;
    }
    r = kdp__podres_start(w.loop, req, on_waited, &w, NULL);
    if (r == 0) {
        r = kdp__loop_run(w.loop);
    }
    kdp__loop_free(w.loop);
    if (r == 0 && !w.done) {
        r = -EIO;
    }
    if (r < 0 || w.err < 0) {
        kdp_pods_free(w.pods);
        return r < 0 ? r : w.err;
    }
    *ret = w.pods;
    return 0;
}

/* The socket of the default kubelet root. */
static int default_socket(const char *socket, char *buf, size_t cap, const char **ret)
{
    if (socket) {
        *ret = socket;
        return 0;
    }
    kdp_kubelet_paths *paths = malloc(sizeof(*paths));
    if (!paths) {
        return -ENOMEM;
    }
    int r = kdp_kubelet_paths_get(NULL, NULL, paths);
    if (r == 0) {
        snprintf(buf, cap, "%s", paths->pod_resources_socket);
        *ret = buf;
    }
    free(paths);
    return r;
}

static int run_at(const char *socket, const kdp__podres_req *req, kdp_pods **ret)
{
    char buf[4096];
    if (!ret) {
        return -EINVAL;
    }
    kdp__podres_req at = *req;
    int r = default_socket(socket, buf, sizeof(buf), &at.socket);
    return r < 0 ? r : kdp__podres_run(&at, ret);
}

KDP_EXPORT int kdp_pods_get(const char *socket, const char *resource, unsigned timeout_ms,
                            kdp_pods **ret)
{
    kdp__podres_req req = {
        .kind = KDP__PODRES_LIST, .resource = resource, .timeout_ms = timeout_ms};
    return run_at(socket, &req, ret);
}

KDP_EXPORT int kdp_pods_get_pod(const char *socket, const char *ns, const char *pod,
                                const char *resource, unsigned timeout_ms, kdp_pods **ret)
{
    if (!ns || !*ns || !pod || !*pod) {
        log_error("kdp_pods_get_pod: the pod's %s is %s", !ns || !*ns ? "namespace" : "name",
                  (!ns || !*ns ? ns : pod) ? "empty" : "NULL");
        return -EINVAL;
    }
    kdp__podres_req req = {.kind = KDP__PODRES_GET,
                           .resource = resource,
                           .ns = ns,
                           .pod = pod,
                           .timeout_ms = timeout_ms};
    return run_at(socket, &req, ret);
}

KDP_EXPORT int kdp_allocatable_get(const char *socket, const char *resource, unsigned timeout_ms,
                                   kdp_pods **ret)
{
    kdp__podres_req req = {
        .kind = KDP__PODRES_ALLOCATABLE, .resource = resource, .timeout_ms = timeout_ms};
    return run_at(socket, &req, ret);
}
