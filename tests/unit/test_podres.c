/* SPDX-License-Identifier: MIT */
/* PodResources snapshots: built from packed List, Get and
 * GetAllocatableResources answers (protobuf-c), lookups both ways, replica
 * IDs resolved, DRA claims, empty and bad answers, the size bound. The
 * calls are test_podres_call.c's. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/podres.h"
#include "podresources.pb-c.h"

/* A List answer: pods "ns/pod" with containers, each with device groups. */
typedef struct group_spec {
    const char *resource;
    const char *ids[4];
    int64_t numa[2];
    size_t n_numa;
} group_spec;

typedef struct ctr_spec {
    const char *name;
    group_spec groups[2];
    size_t n_groups;
} ctr_spec;

typedef struct pod_spec {
    const char *ns, *name;
    ctr_spec ctrs[2];
    size_t n_ctrs;
} pod_spec;

static size_t count_ids(const char *const *ids)
{
    size_t n = 0;
    while (n < 4 && ids[n]) {
        n++;
    }
    return n;
}

/* Fills cd (and its topology, nodes from node storage) from g. */
static void fill_group(V1__ContainerDevices *cd, V1__TopologyInfo *topo, V1__NUMANode *nodes,
                       V1__NUMANode **node_ptrs, const group_spec *g)
{
    *cd = (V1__ContainerDevices)V1__CONTAINER_DEVICES__INIT;
    cd->resource_name = (char *)g->resource;
    cd->device_ids = (char **)g->ids;
    cd->n_device_ids = count_ids(g->ids);
    if (g->n_numa) {
        *topo = (V1__TopologyInfo)V1__TOPOLOGY_INFO__INIT;
        for (size_t i = 0; i < g->n_numa; i++) {
            nodes[i] = (V1__NUMANode)V1__NUMANODE__INIT;
            nodes[i].id = g->numa[i];
            node_ptrs[i] = &nodes[i];
        }
        topo->nodes = node_ptrs;
        topo->n_nodes = g->n_numa;
        cd->topology = topo;
    }
}

#define MAXP 4
typedef struct list_msg {
    V1__ListPodResourcesResponse resp;
    V1__PodResources pods[MAXP], *pod_ptrs[MAXP];
    V1__ContainerResources ctrs[MAXP][2], *ctr_ptrs[MAXP][2];
    V1__ContainerDevices groups[MAXP][2][2], *group_ptrs[MAXP][2][2];
    V1__TopologyInfo topo[MAXP][2][2];
    V1__NUMANode nodes[MAXP][2][2][2], *node_ptrs[MAXP][2][2][2];
} list_msg;

static uint8_t *pack_list(const pod_spec *pods, size_t n, size_t *ret_len)
{
    list_msg *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    m->resp = (V1__ListPodResourcesResponse)V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    for (size_t p = 0; p < n; p++) {
        V1__PodResources *pr = &m->pods[p];
        *pr = (V1__PodResources)V1__POD_RESOURCES__INIT;
        pr->namespace_ = (char *)pods[p].ns;
        pr->name = (char *)pods[p].name;
        for (size_t c = 0; c < pods[p].n_ctrs; c++) {
            const ctr_spec *cs = &pods[p].ctrs[c];
            V1__ContainerResources *cr = &m->ctrs[p][c];
            *cr = (V1__ContainerResources)V1__CONTAINER_RESOURCES__INIT;
            cr->name = (char *)cs->name;
            for (size_t g = 0; g < cs->n_groups; g++) {
                fill_group(&m->groups[p][c][g], &m->topo[p][c][g], m->nodes[p][c][g],
                           m->node_ptrs[p][c][g], &cs->groups[g]);
                m->group_ptrs[p][c][g] = &m->groups[p][c][g];
            }
            cr->devices = m->group_ptrs[p][c];
            cr->n_devices = cs->n_groups;
            m->ctr_ptrs[p][c] = cr;
        }
        pr->containers = m->ctr_ptrs[p];
        pr->n_containers = pods[p].n_ctrs;
        m->pod_ptrs[p] = pr;
    }
    m->resp.pod_resources = m->pod_ptrs;
    m->resp.n_pod_resources = n;
    size_t len = protobuf_c_message_get_packed_size(&m->resp.base);
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(&m->resp.base, buf), len);
    free(m);
    *ret_len = len;
    return buf;
}

static const pod_spec two_pods[] = {
    {"default",
     "trainer",
     {{"main", {{"example.com/gpu", {"gpu0-1", "gpu1-0"}, {0, 1}, 2}}, 1},
      {"sidecar",
       {{"example.com/nic", {"nic3"}, {0}, 0}, {"example.com/gpu", {"gpu2-0"}, {1}, 1}},
       2}},
     2},
    {"batch", "job-7", {{"worker", {{"example.com/gpu", {"gpu0-0"}, {0}, 1}}, 1}}, 1},
};

static kdp_pods *build_list(const pod_spec *pods, size_t n, const char *resource, unsigned replicas)
{
    size_t len;
    uint8_t *buf = pack_list(pods, n, &len);
    kdp_pods *out = NULL;
    char why[128] = "";
    int r = kdp__pods_build(KDP__PODRES_LIST, buf, len, resource, replicas, &out, why, sizeof(why));
    free(buf);
    assert_int_equal(r, 0);
    assert_string_equal(why, "");
    return out;
}

static void test_list_all(void **state)
{
    (void)state;
    kdp_pods *s = build_list(two_pods, 2, NULL, 0);
    assert_int_equal(kdp_pods_count(s), 5);
    const kdp_pod_device *d = kdp_pods_at(s, 0);
    assert_string_equal(d->pod_namespace, "default");
    assert_string_equal(d->pod_name, "trainer");
    assert_string_equal(d->container_name, "main");
    assert_string_equal(d->resource_name, "example.com/gpu");
    assert_string_equal(d->device_id, "gpu0-1");
    assert_string_equal(d->physical_id, "gpu0-1"); /* no replicas: as the kubelet holds it */
    assert_int_equal(d->n_numa_nodes, 2);
    assert_int_equal(d->numa_nodes[0], 0);
    assert_int_equal(d->numa_nodes[1], 1);
    d = kdp_pods_at(s, 2);
    assert_string_equal(d->container_name, "sidecar");
    assert_string_equal(d->resource_name, "example.com/nic");
    assert_string_equal(d->device_id, "nic3");
    assert_null(d->numa_nodes);
    assert_int_equal(d->n_numa_nodes, 0);
    assert_string_equal(kdp_pods_at(s, 4)->pod_name, "job-7");
    assert_null(kdp_pods_at(s, 5));
    kdp_pods_free(s);
}

static void test_lookups(void **state)
{
    (void)state;
    kdp_pods *s = build_list(two_pods, 2, NULL, 0);
    const kdp_pod_device *d = kdp_pods_find_device(s, "example.com/gpu", "gpu2-0");
    assert_non_null(d);
    assert_string_equal(d->pod_name, "trainer");
    assert_string_equal(d->container_name, "sidecar");
    assert_null(kdp_pods_find_device(s, "example.com/nic", "gpu2-0")); /* other resource */
    assert_non_null(kdp_pods_find_device(s, NULL, "nic3"));            /* any resource */
    assert_null(kdp_pods_find_device(s, NULL, "gpu9"));
    assert_null(kdp_pods_find_device(s, NULL, NULL));
    assert_null(kdp_pods_find_device(NULL, NULL, "nic3"));

    const kdp_pod_device *out[8];
    assert_int_equal(kdp_pods_find_pod(s, "default", "trainer", NULL, out, 8), 4);
    assert_string_equal(out[3]->device_id, "gpu2-0");
    assert_int_equal(kdp_pods_find_pod(s, "default", "trainer", "sidecar", out, 8), 2);
    assert_string_equal(out[0]->device_id, "nic3");
    assert_int_equal(kdp_pods_find_pod(s, "default", "trainer", NULL, out, 1), 4); /* > max */
    assert_string_equal(out[0]->device_id, "gpu0-1");
    assert_int_equal(kdp_pods_find_pod(s, "default", "trainer", NULL, NULL, 0), 4);
    assert_int_equal(kdp_pods_find_pod(s, "batch", "trainer", NULL, out, 8), 0);
    assert_int_equal(kdp_pods_find_pod(s, NULL, "trainer", NULL, out, 8), 0);
    kdp_pods_free(s);
    kdp_pods_free(NULL);
    assert_int_equal(kdp_pods_count(NULL), 0);
}

static void test_resource_and_replicas(void **state)
{
    (void)state;
    kdp_pods *s = build_list(two_pods, 2, "example.com/gpu", 2);
    assert_int_equal(kdp_pods_count(s), 4); /* nic3 left out */
    assert_string_equal(kdp_pods_at(s, 0)->device_id, "gpu0-1");
    assert_string_equal(kdp_pods_at(s, 0)->physical_id, "gpu0");
    assert_string_equal(kdp_pods_at(s, 3)->device_id, "gpu0-0");
    assert_string_equal(kdp_pods_at(s, 3)->physical_id, "gpu0");
    /* By the physical ID: the first holder; by the replica ID: its own. */
    assert_string_equal(kdp_pods_find_device(s, NULL, "gpu0")->pod_name, "trainer");
    assert_string_equal(kdp_pods_find_device(s, NULL, "gpu0-0")->pod_name, "job-7");
    kdp_pods_free(s);
    /* An ID that is not a replica ID of this sharing stays as it is. */
    static const pod_spec odd[] = {
        {"a", "b", {{"c", {{"r.io/x", {"dev-7", "plain"}, {0}, 0}}, 1}}, 1}};
    s = build_list(odd, 1, NULL, 4);
    assert_string_equal(kdp_pods_at(s, 0)->physical_id, "dev-7"); /* 7 >= 4 replicas */
    assert_string_equal(kdp_pods_at(s, 1)->physical_id, "plain");
    kdp_pods_free(s);
}

static void test_empty(void **state)
{
    (void)state;
    kdp_pods *s = NULL;
    char why[64];
    /* Zero bytes: an empty List. */
    assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, NULL, 0, NULL, 0, &s, why, sizeof(why)), 0);
    assert_int_equal(kdp_pods_count(s), 0);
    assert_null(kdp_pods_at(s, 0));
    assert_null(kdp_pods_find_device(s, NULL, "x"));
    kdp_pods_free(s);
    /* A pod without containers, a container without devices. */
    static const pod_spec bare[] = {{"ns", "p", {{"c", {{0}}, 0}}, 1}, {"ns", "q", {{0}}, 0}};
    s = build_list(bare, 2, NULL, 0);
    assert_int_equal(kdp_pods_count(s), 0);
    kdp_pods_free(s);
    /* A filter nothing matches. */
    s = build_list(two_pods, 2, "example.com/none", 0);
    assert_int_equal(kdp_pods_count(s), 0);
    kdp_pods_free(s);
}

static void expect_bad(const pod_spec *pods, size_t n, const char *needle)
{
    size_t len;
    uint8_t *buf = pack_list(pods, n, &len);
    kdp_pods *out = (kdp_pods *)(uintptr_t)1; /* untouched on failure */
    char why[128] = "";
    assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, buf, len, NULL, 0, &out, why, sizeof(why)),
                     -EPROTO);
    assert_ptr_equal(out, (kdp_pods *)(uintptr_t)1);
    if (!strstr(why, needle)) {
        fail_msg("why \"%s\" lacks \"%s\"", why, needle);
    }
    free(buf);
}

static void test_missing_fields(void **state)
{
    (void)state;
    static const pod_spec no_name[] = {{"ns", "", {{0}}, 0}};
    expect_bad(no_name, 1, "pod_resources[0]: empty name");
    const pod_spec no_ns[] = {two_pods[0], {"", "p", {{0}}, 0}};
    expect_bad(no_ns, 2, "pod_resources[1]: empty namespace");
    static const pod_spec no_ctr[] = {{"ns", "p", {{"", {{0}}, 0}}, 1}};
    expect_bad(no_ctr, 1, "pod_resources[0].containers[0]: empty name");
    static const pod_spec no_res[] = {{"ns", "p", {{"c", {{"", {"a"}, {0}, 0}}, 1}}, 1}};
    expect_bad(no_res, 1, "pod_resources[0].containers[0].devices[0]: empty resource_name");
    static const pod_spec no_id[] = {{"ns", "p", {{"c", {{"r.io/x", {"a", ""}, {0}, 0}}, 1}}, 1}};
    expect_bad(no_id, 1, "containers[0].devices[0].device_ids[1]: empty");
}

/* A container with a device-plugin group and two DRA claims (the kubelet's
 * DynamicResources): an entry per claim device, the claim's fields set, a
 * device-plugin entry's "". */
static uint8_t *pack_claims(const char *claim_name, const char *driver, size_t *ret_len)
{
    V1__CDIDevice cdi = V1__CDIDEVICE__INIT;
    cdi.name = (char *)"k8s.gpu.example.com/claim=u-gpu-0";
    V1__CDIDevice *cdis[] = {&cdi};
    V1__ClaimResource c0 = V1__CLAIM_RESOURCE__INIT, c1 = V1__CLAIM_RESOURCE__INIT,
                      c2 = V1__CLAIM_RESOURCE__INIT;
    c0.driver_name = (char *)driver;
    c0.pool_name = (char *)"node-a";
    c0.device_name = (char *)"gpu-0";
    c0.cdi_devices = cdis;
    c0.n_cdi_devices = 1;
    c1.driver_name = (char *)"gpu.example.com";
    c1.pool_name = (char *)"node-a";
    c1.device_name = (char *)"gpu-1";
    c1.share_id = (char *)"0b7d6f1e-3c52-4a8e-9d35-1f2e3d4c5b6a";
    c2.driver_name = (char *)"nic.example.com";
    c2.pool_name = (char *)"node-a";
    c2.device_name = (char *)"eth1";
    V1__ClaimResource *gpu_res[] = {&c0, &c1};
    V1__ClaimResource *nic_res[] = {&c2};
    V1__DynamicResource gpu = V1__DYNAMIC_RESOURCE__INIT, nic = V1__DYNAMIC_RESOURCE__INIT;
    gpu.claim_namespace = (char *)"ml";
    gpu.claim_name = (char *)claim_name;
    gpu.claim_resources = gpu_res;
    gpu.n_claim_resources = 2;
    nic.claim_namespace = (char *)"ml";
    nic.claim_name = (char *)"net";
    nic.claim_resources = nic_res;
    nic.n_claim_resources = 1;
    V1__DynamicResource *drs[] = {&gpu, &nic};
    char *ids[] = {(char *)"widget0"};
    V1__ContainerDevices cd = V1__CONTAINER_DEVICES__INIT;
    cd.resource_name = (char *)"example.com/widget";
    cd.device_ids = ids;
    cd.n_device_ids = 1;
    V1__ContainerDevices *cds[] = {&cd};
    V1__ContainerResources cr = V1__CONTAINER_RESOURCES__INIT;
    cr.name = (char *)"main";
    cr.devices = cds;
    cr.n_devices = 1;
    cr.dynamic_resources = drs;
    cr.n_dynamic_resources = 2;
    V1__ContainerResources *crs[] = {&cr};
    V1__PodResources pr = V1__POD_RESOURCES__INIT;
    pr.namespace_ = (char *)"ml";
    pr.name = (char *)"train";
    pr.containers = crs;
    pr.n_containers = 1;
    V1__PodResources *prs[] = {&pr};
    V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    resp.pod_resources = prs;
    resp.n_pod_resources = 1;
    size_t len = protobuf_c_message_get_packed_size(&resp.base);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(&resp.base, buf), len);
    *ret_len = len;
    return buf;
}

static void test_dra_claims(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = pack_claims("gpus", "gpu.example.com", &len);
    kdp_pods *all = NULL;
    char why[160] = "";
    assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, buf, len, NULL, 0, &all, why, sizeof(why)),
                     0);
    assert_int_equal(kdp_pods_count(all), 4);
    const kdp_pod_device *w = kdp_pods_at(all, 0);
    assert_string_equal(w->resource_name, "example.com/widget");
    assert_string_equal(w->claim_name, "");
    assert_string_equal(w->pool_name, "");
    const kdp_pod_device *g0 = kdp_pods_at(all, 1);
    assert_string_equal(g0->container_name, "main");
    assert_string_equal(g0->resource_name, "gpu.example.com");
    assert_string_equal(g0->claim_namespace, "ml");
    assert_string_equal(g0->claim_name, "gpus");
    assert_string_equal(g0->pool_name, "node-a");
    assert_string_equal(g0->device_id, "gpu-0");
    assert_string_equal(g0->physical_id, "gpu-0");
    assert_string_equal(g0->share_id, "");
    assert_int_equal(g0->n_numa_nodes, 0);
    assert_string_equal(kdp_pods_at(all, 2)->share_id, "0b7d6f1e-3c52-4a8e-9d35-1f2e3d4c5b6a");
    assert_string_equal(kdp_pods_at(all, 3)->claim_name, "net");
    assert_ptr_equal(kdp_pods_find_device(all, "gpu.example.com", "gpu-1"), kdp_pods_at(all, 2));
    kdp_pods_free(all);
    /* a DRA driver's query (its name as the resource): its claims' devices only */
    kdp_pods *mine = NULL;
    assert_int_equal(
        kdp__pods_build(KDP__PODRES_LIST, buf, len, "gpu.example.com", 0, &mine, why, sizeof(why)),
        0);
    assert_int_equal(kdp_pods_count(mine), 2);
    assert_string_equal(kdp_pods_at(mine, 1)->device_id, "gpu-1");
    kdp_pods_free(mine);
    free(buf);
    /* the API's bad answers, named */
    kdp_pods *out = NULL;
    buf = pack_claims("", "gpu.example.com", &len);
    assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, buf, len, NULL, 0, &out, why, sizeof(why)),
                     -EPROTO);
    assert_non_null(strstr(why, "containers[0].dynamic_resources[0]: empty claim_name"));
    free(buf);
    buf = pack_claims("gpus", "", &len);
    assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, buf, len, NULL, 0, &out, why, sizeof(why)),
                     -EPROTO);
    assert_non_null(strstr(why, "dynamic_resources[0].claim_resources[0]: empty driver_name"));
    assert_null(out);
    free(buf);
}

static void test_garbage(void **state)
{
    (void)state;
    static const uint8_t junk[][6] = {
        {0x0a, 0x05, 0x01},             /* a field longer than the input */
        {0xff, 0xff, 0xff, 0xff, 0xff}, /* a bad tag */
        {0x0a, 0x02, 0x0a, 0x7f},       /* a pod whose name overruns it */
        {0x0b},                         /* group start: wire type 3 */
    };
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
        kdp_pods *out = NULL;
        char why[128] = "";
        assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, junk[i], sizeof(junk[i]), NULL, 0, &out,
                                         why, sizeof(why)),
                         -EPROTO);
        assert_null(out);
        assert_non_null(strstr(why, "not a valid v1.ListPodResourcesResponse"));
    }
    kdp_pods *out = NULL;
    assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, NULL, 3, NULL, 0, &out, NULL, 0), -EINVAL);
    assert_int_equal(kdp__pods_build(KDP__PODRES_LIST, junk[0], 1, NULL, 0, NULL, NULL, 0),
                     -EINVAL);
}

static void test_get_and_allocatable(void **state)
{
    (void)state;
    /* Get: one pod. */
    V1__PodResources pr = V1__POD_RESOURCES__INIT;
    pr.namespace_ = (char *)"default";
    pr.name = (char *)"trainer";
    V1__ContainerResources cr = V1__CONTAINER_RESOURCES__INIT, *crs[] = {&cr};
    cr.name = (char *)"main";
    V1__ContainerDevices cd, *cds[] = {&cd};
    V1__TopologyInfo topo;
    V1__NUMANode nodes[2], *node_ptrs[2];
    group_spec g = {"example.com/gpu", {"gpu0", "gpu1"}, {1}, 1};
    fill_group(&cd, &topo, nodes, node_ptrs, &g);
    cr.devices = cds;
    cr.n_devices = 1;
    pr.containers = crs;
    pr.n_containers = 1;
    V1__GetPodResourcesResponse get = V1__GET_POD_RESOURCES_RESPONSE__INIT;
    get.pod_resources = &pr;
    uint8_t buf[512];
    size_t len = protobuf_c_message_pack(&get.base, buf);
    kdp_pods *s = NULL;
    char why[128] = "";
    assert_int_equal(kdp__pods_build(KDP__PODRES_GET, buf, len, NULL, 0, &s, why, sizeof(why)), 0);
    assert_int_equal(kdp_pods_count(s), 2);
    assert_string_equal(kdp_pods_at(s, 1)->device_id, "gpu1");
    assert_int_equal(kdp_pods_at(s, 1)->numa_nodes[0], 1);
    kdp_pods_free(s);
    /* Get without its pod. */
    get.pod_resources = NULL;
    len = protobuf_c_message_pack(&get.base, buf);
    assert_int_equal(kdp__pods_build(KDP__PODRES_GET, buf, len, NULL, 0, &s, why, sizeof(why)),
                     -EPROTO);
    assert_string_equal(why, "pod_resources: missing");

    /* GetAllocatableResources: devices without pods. */
    V1__AllocatableResourcesResponse a = V1__ALLOCATABLE_RESOURCES_RESPONSE__INIT;
    a.devices = cds;
    a.n_devices = 1;
    len = protobuf_c_message_pack(&a.base, buf);
    assert_int_equal(
        kdp__pods_build(KDP__PODRES_ALLOCATABLE, buf, len, NULL, 0, &s, why, sizeof(why)), 0);
    assert_int_equal(kdp_pods_count(s), 2);
    assert_string_equal(kdp_pods_at(s, 0)->pod_name, "");
    assert_string_equal(kdp_pods_at(s, 0)->container_name, "");
    assert_string_equal(kdp_pods_find_device(s, "example.com/gpu", "gpu1")->device_id, "gpu1");
    kdp_pods_free(s);
    assert_string_equal(kdp__podres_method(KDP__PODRES_ALLOCATABLE), "GetAllocatableResources");
}

static void test_size_bound(void **state)
{
    (void)state;
    /* One group with KDP_PODS_MAX_DEVICES + 1 IDs: refused, not truncated. */
    size_t n = KDP_PODS_MAX_DEVICES + 1;
    char **ids = malloc(n * sizeof(*ids));
    char *names = malloc(n * 8);
    assert_non_null(ids);
    assert_non_null(names);
    for (size_t i = 0; i < n; i++) {
        ids[i] = names + i * 8;
        snprintf(ids[i], 8, "%zx", i);
    }
    V1__ContainerDevices cd = V1__CONTAINER_DEVICES__INIT, *cds[] = {&cd};
    cd.resource_name = (char *)"r.io/x";
    cd.device_ids = ids;
    cd.n_device_ids = n;
    V1__AllocatableResourcesResponse a = V1__ALLOCATABLE_RESOURCES_RESPONSE__INIT;
    a.devices = cds;
    a.n_devices = 1;
    size_t len = protobuf_c_message_get_packed_size(&a.base);
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    protobuf_c_message_pack(&a.base, buf);
    kdp_pods *s = NULL;
    char why[128] = "";
    assert_int_equal(
        kdp__pods_build(KDP__PODRES_ALLOCATABLE, buf, len, NULL, 0, &s, why, sizeof(why)), -E2BIG);
    assert_null(s);
    assert_non_null(strstr(why, "more than 262144 devices"));
    /* Exactly the bound is fine. */
    cd.n_device_ids = n - 1;
    len = protobuf_c_message_pack(&a.base, buf);
    assert_int_equal(
        kdp__pods_build(KDP__PODRES_ALLOCATABLE, buf, len, NULL, 0, &s, why, sizeof(why)), 0);
    assert_int_equal(kdp_pods_count(s), KDP_PODS_MAX_DEVICES);
    assert_string_equal(kdp_pods_at(s, n - 2)->device_id, ids[n - 2]);
    kdp_pods_free(s);
    free(buf);
    free(names);
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_all),
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_resource_and_replicas),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_missing_fields),
        cmocka_unit_test(test_dra_claims),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_get_and_allocatable),
        cmocka_unit_test(test_size_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
