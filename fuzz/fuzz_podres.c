/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the PodResources snapshot builder
 * (src/plugin/podres.c), which decodes whatever the kubelet's socket
 * answers: arbitrary bytes as a ListPodResourcesResponse,
 * GetPodResourcesResponse or AllocatableResourcesResponse. Oracle, abort()s
 * on any breach:
 *   - a failure is -EPROTO (with a reason), -E2BIG or -ENOMEM, and leaves
 *     *ret alone;
 *   - a snapshot has at most KDP_PODS_MAX_DEVICES entries, every string
 *     non-NULL, resource and device IDs non-empty, pod fields non-empty
 *     (List, Get) or "" (GetAllocatableResources), physical_id a prefix of
 *     device_id (the whole of it without replicas), NUMA nodes present iff
 *     counted;
 *   - the lookups find every entry (by device ID and resource, by pod and
 *     container), and find nothing after the end;
 *   - built again with the first entry's resource as the filter, the
 *     snapshot is exactly the entries of that resource, in order.
 *
 * Input bytes: [kind % 3][replicas % 5] then the message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/podres.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "fuzz_podres: check failed: %s (line %d)\n", #x, __LINE__);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_entry(const kdp_pods *s, size_t i, kdp__podres_kind kind, unsigned replicas)
{
    const kdp_pod_device *d = kdp_pods_at(s, i);
    CHECK(d);
    CHECK(d->pod_namespace && d->pod_name && d->container_name);
    CHECK(d->resource_name && *d->resource_name);
    CHECK(d->device_id && *d->device_id && d->physical_id && *d->physical_id);
    bool pods = kind != KDP__PODRES_ALLOCATABLE;
    CHECK(pods == (*d->pod_namespace != 0));
    CHECK(pods == (*d->pod_name != 0));
    CHECK(pods == (*d->container_name != 0));
    size_t pl = strlen(d->physical_id);
    CHECK(strncmp(d->physical_id, d->device_id, pl) == 0);
    CHECK(replicas > 1 ? (d->device_id[pl] == '-' || d->device_id[pl] == 0)
                       : d->device_id[pl] == 0);
    CHECK((d->numa_nodes != NULL) == (d->n_numa_nodes > 0));
    /* a DRA claim's device: in pods only, its claim named, by its name in the pool */
    CHECK(d->claim_namespace && d->claim_name && d->pool_name && d->share_id);
    bool dra = *d->claim_name != 0;
    CHECK(dra == (*d->claim_namespace != 0));
    CHECK(!dra || (pods && strcmp(d->physical_id, d->device_id) == 0 && !d->n_numa_nodes));
    CHECK(dra || (!*d->pool_name && !*d->share_id));
    int64_t sum = 0;
    for (size_t k = 0; k < d->n_numa_nodes; k++) {
        sum ^= d->numa_nodes[k]; /* readable */
    }
    (void)sum;
    const kdp_pod_device *f = kdp_pods_find_device(s, d->resource_name, d->device_id);
    CHECK(f && f <= d && strcmp(f->resource_name, d->resource_name) == 0);
    CHECK(strcmp(f->device_id, d->device_id) == 0 || strcmp(f->physical_id, d->device_id) == 0);
    if (pods) {
        size_t n = kdp_pods_find_pod(s, d->pod_namespace, d->pod_name, d->container_name, NULL, 0);
        CHECK(n >= 1 && n <= kdp_pods_count(s));
        const kdp_pod_device *one[1];
        CHECK(kdp_pods_find_pod(s, d->pod_namespace, d->pod_name, NULL, one, 1) >= n);
        CHECK(strcmp(one[0]->pod_name, d->pod_name) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    kdp__podres_kind kind = (kdp__podres_kind)(data[0] % 3);
    unsigned replicas = data[1] % 5;
    const uint8_t *msg = data + 2;
    size_t len = size - 2;
    kdp_pods *s = NULL;
    char why[256] = "";
    int r = kdp__pods_build(kind, msg, len, NULL, replicas, &s, why, sizeof(why));
    if (r < 0) {
        CHECK(r == -EPROTO || r == -E2BIG || r == -ENOMEM);
        CHECK(s == NULL);
        CHECK(r != -EPROTO || why[0]);
        return 0;
    }
    size_t n = kdp_pods_count(s);
    CHECK(n <= KDP_PODS_MAX_DEVICES);
    for (size_t i = 0; i < n; i++) {
        check_entry(s, i, kind, replicas);
    }
    CHECK(kdp_pods_at(s, n) == NULL);
    if (n > 0) {
        const char *res = kdp_pods_at(s, 0)->resource_name;
        kdp_pods *f = NULL;
        CHECK(kdp__pods_build(kind, msg, len, res, replicas, &f, why, sizeof(why)) == 0);
        size_t j = 0;
        for (size_t i = 0; i < n; i++) {
            const kdp_pod_device *d = kdp_pods_at(s, i);
            if (strcmp(d->resource_name, res) != 0) {
                continue;
            }
            const kdp_pod_device *e = kdp_pods_at(f, j++);
            CHECK(e && strcmp(e->device_id, d->device_id) == 0 &&
                  strcmp(e->pod_name, d->pod_name) == 0 &&
                  strcmp(e->container_name, d->container_name) == 0 &&
                  e->n_numa_nodes == d->n_numa_nodes);
        }
        CHECK(j == kdp_pods_count(f));
        kdp_pods_free(f);
    }
    kdp_pods_free(s);
    return 0;
}
