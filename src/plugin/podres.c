/* SPDX-License-Identifier: MIT */
/* podres: PodResources answers into kdp_pods snapshots, and lookups. */
#include "plugin/podres.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/replicas.h"
#include "podresources.pb-c.h"

/* One allocation: this header, the entries, the NUMA nodes, the strings. */
struct kdp_pods {
    size_t n;
    kdp_pod_device *devs;
};

/* The walk over an answer runs twice: to size the block (fill false), then
 * to fill it. Checks happen in the first pass. */
typedef struct builder {
    bool fill;
    size_t n, n_numa, n_chars;
    kdp_pod_device *devs;
    int64_t *numa;
    char *chars;
    const char *resource;
    unsigned replicas;
    char *why;
    size_t why_cap;
} builder;

const char *kdp__podres_method(kdp__podres_kind kind)
{
    switch (kind) {
    case KDP__PODRES_GET:
        return "Get";
    case KDP__PODRES_ALLOCATABLE:
        return "GetAllocatableResources";
    default:
        return "List";
    }
}

static int fail(builder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(builder *b, const char *fmt, ...)
{
    if (b->why && b->why_cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->why, b->why_cap, fmt, ap);
        va_end(ap);
    }
    return -EPROTO;
}

static const char *put_strn(builder *b, const char *s, size_t n)
{
    if (!b->fill) {
        b->n_chars += n + 1;
        return NULL;
    }
    char *d = b->chars + b->n_chars;
    memcpy(d, s, n);
    d[n] = '\0';
    b->n_chars += n + 1;
    return d;
}

static const char *put_str(builder *b, const char *s)
{
    return s && *s ? put_strn(b, s, strlen(s)) : "";
}

static bool empty(const char *s)
{
    return !s || !*s;
}

typedef struct owner {
    const char *ns, *pod, *ctr; /* "" for allocatable devices */
} owner;

/* Entry d of o's (in the fill pass; counted in both): its owner set here,
 * the claim's fields "" where d has none. */
static void put_entry(builder *b, const owner *o, kdp_pod_device d)
{
    if (b->fill) {
        d.pod_namespace = o->ns;
        d.pod_name = o->pod;
        d.container_name = o->ctr;
        d.claim_namespace = d.claim_namespace ? d.claim_namespace : "";
        d.claim_name = d.claim_name ? d.claim_name : "";
        d.pool_name = d.pool_name ? d.pool_name : "";
        d.share_id = d.share_id ? d.share_id : "";
        b->devs[b->n] = d;
    }
    b->n++;
}

static int add_group(builder *b, const owner *o, const V1__ContainerDevices *cd, const char *where,
                     size_t gi)
{
    if (!cd || empty(cd->resource_name)) {
        return fail(b, "%sdevices[%zu]: empty resource_name", where, gi);
    }
    if (b->resource && strcmp(b->resource, cd->resource_name) != 0) {
        return 0;
    }
    const char *res = put_str(b, cd->resource_name);
    size_t n_numa = cd->topology ? cd->topology->n_nodes : 0;
    int64_t *numa = b->fill && n_numa ? b->numa + b->n_numa : NULL;
    for (size_t i = 0; i < n_numa; i++) {
        if (b->fill) {
            numa[i] = cd->topology->nodes[i] ? cd->topology->nodes[i]->id : -1;
        }
    }
    b->n_numa += n_numa;
    for (size_t i = 0; i < cd->n_device_ids; i++) {
        const char *id = cd->device_ids[i];
        if (empty(id)) {
            return fail(b, "%sdevices[%zu].device_ids[%zu]: empty", where, gi, i);
        }
        if (b->n >= KDP_PODS_MAX_DEVICES) {
            return -E2BIG;
        }
        const char *did = put_str(b, id);
        const char *pid = did;
        size_t len;
        unsigned k;
        if (kdp__replicas_on(b->replicas) && kdp__replica_parse(id, b->replicas, &len, &k) == 0) {
            pid = put_strn(b, id, len);
        }
        put_entry(b, o,
                  (kdp_pod_device){.resource_name = res,
                                   .device_id = did,
                                   .physical_id = pid,
                                   .numa_nodes = numa,
                                   .n_numa_nodes = n_numa});
    }
    return 0;
}

/* A DRA claim the container references: an entry per device. */
static int add_claim(builder *b, const owner *o, const V1__DynamicResource *dr, const char *where,
                     size_t ci)
{
    if (!dr || empty(dr->claim_name) || empty(dr->claim_namespace)) {
        return fail(b, "%sdynamic_resources[%zu]: empty claim_%s", where, ci,
                    dr && !empty(dr->claim_name) ? "namespace" : "name");
    }
    const char *cns = NULL;
    const char *cname = NULL;
    bool named = false;
    for (size_t i = 0; i < dr->n_claim_resources; i++) {
        const V1__ClaimResource *cr = dr->claim_resources[i];
        if (!cr || empty(cr->driver_name) || empty(cr->device_name)) {
            return fail(b, "%sdynamic_resources[%zu].claim_resources[%zu]: empty %s", where, ci, i,
                        cr && !empty(cr->driver_name) ? "device_name" : "driver_name");
        }
        if (b->resource && strcmp(b->resource, cr->driver_name) != 0) {
            continue;
        }
        if (b->n >= KDP_PODS_MAX_DEVICES) {
            return -E2BIG;
        }
        if (!named) { /* the claim's names once, for its devices (both passes) */
            cns = put_str(b, dr->claim_namespace);
            cname = put_str(b, dr->claim_name);
            named = true;
        }
        const char *drv = put_str(b, cr->driver_name);
        const char *dev = put_str(b, cr->device_name);
        const char *pool = put_str(b, cr->pool_name);
        const char *share = put_str(b, cr->share_id);
        put_entry(b, o,
                  (kdp_pod_device){.resource_name = drv,
                                   .device_id = dev,
                                   .physical_id = dev,
                                   .claim_namespace = cns,
                                   .claim_name = cname,
                                   .pool_name = pool,
                                   .share_id = share});
    }
    return 0;
}

static int add_pod(builder *b, const V1__PodResources *pr, const char *where)
{
    if (!pr) {
        return fail(b, "%s: missing", where);
    }
    if (empty(pr->name) || empty(pr->namespace_)) {
        return fail(b, "%s: empty %s", where, empty(pr->name) ? "name" : "namespace");
    }
    owner o = {.ns = put_str(b, pr->namespace_), .pod = put_str(b, pr->name)};
    for (size_t c = 0; c < pr->n_containers; c++) {
        const V1__ContainerResources *cr = pr->containers[c];
        char w[96];
        snprintf(w, sizeof(w), "%s.containers[%zu]", where, c);
        if (!cr || empty(cr->name)) {
            return fail(b, "%s: empty name", w);
        }
        o.ctr = put_str(b, cr->name);
        size_t wl = strlen(w);
        snprintf(w + wl, sizeof(w) - wl, ".");
        for (size_t g = 0; g < cr->n_devices; g++) {
            int r = add_group(b, &o, cr->devices[g], w, g);
            if (r < 0) {
                return r;
            }
        }
        for (size_t k = 0; k < cr->n_dynamic_resources; k++) {
            int r = add_claim(b, &o, cr->dynamic_resources[k], w, k);
            if (r < 0) {
                return r;
            }
        }
    }
    return 0;
}

static int walk(builder *b, kdp__podres_kind kind, const ProtobufCMessage *m)
{
    switch (kind) {
    case KDP__PODRES_GET: {
        const V1__GetPodResourcesResponse *g = (const V1__GetPodResourcesResponse *)m;
        return add_pod(b, g->pod_resources, "pod_resources");
    }
    case KDP__PODRES_ALLOCATABLE: {
        const V1__AllocatableResourcesResponse *a = (const V1__AllocatableResourcesResponse *)m;
        owner o = {.ns = "", .pod = "", .ctr = ""};
        for (size_t g = 0; g < a->n_devices; g++) {
            int r = add_group(b, &o, a->devices[g], "", g);
            if (r < 0) {
                return r;
            }
        }
        return 0;
    }
    default: {
        const V1__ListPodResourcesResponse *l = (const V1__ListPodResourcesResponse *)m;
        for (size_t i = 0; i < l->n_pod_resources; i++) {
            char w[48];
            snprintf(w, sizeof(w), "pod_resources[%zu]", i);
            int r = add_pod(b, l->pod_resources[i], w);
            if (r < 0) {
                return r;
            }
        }
        return 0;
    }
    }
}

static const ProtobufCMessageDescriptor *descriptor_of(kdp__podres_kind kind)
{
    switch (kind) {
    case KDP__PODRES_GET:
        return &v1__get_pod_resources_response__descriptor;
    case KDP__PODRES_ALLOCATABLE:
        return &v1__allocatable_resources_response__descriptor;
    default:
        return &v1__list_pod_resources_response__descriptor;
    }
}

int kdp__pods_build(kdp__podres_kind kind, const uint8_t *msg, size_t len, const char *resource,
                    unsigned replicas, kdp_pods **ret, char *why, size_t why_cap)
{
    if (!ret || (!msg && len)) {
        return -EINVAL;
    }
    const ProtobufCMessageDescriptor *desc = descriptor_of(kind);
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, msg);
    if (!m) {
        builder e = {.why = why, .why_cap = why_cap};
        return fail(&e, "not a valid %s message (%zu bytes)", desc->name, len);
    }
    builder b = {.resource = resource, .replicas = replicas, .why = why, .why_cap = why_cap};
    int r = walk(&b, kind, m);
    kdp_pods *p = NULL;
    if (r == 0) {
        /* Each part's size is bounded by the answer's (at most 16 MiB). */
        size_t size =
            sizeof(*p) + b.n * sizeof(kdp_pod_device) + b.n_numa * sizeof(int64_t) + b.n_chars;
        p = malloc(size);
        r = p ? 0 : -ENOMEM;
    }
    if (r == 0) {
        kdp_pod_device *devs = (kdp_pod_device *)(p + 1);
        int64_t *numa = (int64_t *)(devs + b.n);
        char *chars = (char *)(numa + b.n_numa);
        builder f = {.fill = true,
                     .devs = devs,
                     .numa = numa,
                     .chars = chars,
                     .resource = resource,
                     .replicas = replicas};
        r = walk(&f, kind, m);
        p->n = f.n;
        p->devs = devs;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (r < 0) {
        free(p);
        if (r == -E2BIG && why && why_cap) {
            snprintf(why, why_cap, "more than %u devices", KDP_PODS_MAX_DEVICES);
        }
        return r;
    }
    *ret = p;
    return 0;
}

KDP_EXPORT size_t kdp_pods_count(const kdp_pods *pods)
{
    return pods ? pods->n : 0;
}

KDP_EXPORT const kdp_pod_device *kdp_pods_at(const kdp_pods *pods, size_t i)
{
    return pods && i < pods->n ? &pods->devs[i] : NULL;
}

KDP_EXPORT const kdp_pod_device *kdp_pods_find_device(const kdp_pods *pods, const char *resource,
                                                      const char *id)
{
    if (!pods || !id) {
        return NULL;
    }
    for (size_t i = 0; i < pods->n; i++) {
        const kdp_pod_device *d = &pods->devs[i];
        if ((!resource || strcmp(resource, d->resource_name) == 0) &&
            (strcmp(id, d->device_id) == 0 || strcmp(id, d->physical_id) == 0)) {
            return d;
        }
    }
    return NULL;
}

KDP_EXPORT size_t kdp_pods_find_pod(const kdp_pods *pods, const char *ns, const char *pod,
                                    const char *container, const kdp_pod_device **out, size_t max)
{
    if (!pods || !ns || !pod) {
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < pods->n; i++) {
        const kdp_pod_device *d = &pods->devs[i];
        if (strcmp(ns, d->pod_namespace) != 0 || strcmp(pod, d->pod_name) != 0 ||
            (container && strcmp(container, d->container_name) != 0)) {
            continue;
        }
        if (out && n < max) {
            out[n] = d;
        }
        n++;
    }
    return n;
}

KDP_EXPORT void kdp_pods_free(kdp_pods *pods)
{
    free(pods);
}
