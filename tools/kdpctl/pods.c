/* SPDX-License-Identifier: MIT */
/* pods: which pod holds which device, from the kubelet's PodResources API
 * (libkdp's kdp_pods_get, kdp_pods_get_pod, kdp_allocatable_get). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdpctl.h"
#include "print.h"

/* The library's log lines, kept for the error message (the last one). */
static char last_log[1024];

static void keep_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    snprintf(last_log, sizeof(last_log), "%s", msg);
}

static const char *socket_of(const kc_opts *o, char *buf, size_t cap)
{
    if (o->socket) {
        return o->socket;
    }
    kdp_kubelet_paths *paths = malloc(sizeof(*paths));
    if (!paths || kdp_kubelet_paths_get(o->root, NULL, paths) < 0) {
        free(paths);
        return NULL;
    }
    snprintf(buf, cap, "%s", paths->pod_resources_socket);
    free(paths);
    return buf;
}

/* --pod NS/NAME is d's pod. */
static bool is_pod(const char *nsname, const kdp_pod_device *d)
{
    size_t n = strlen(d->pod_namespace);
    return strncmp(nsname, d->pod_namespace, n) == 0 && nsname[n] == '/' &&
           strcmp(nsname + n + 1, d->pod_name) == 0;
}

static bool wanted(const kc_opts *o, const kdp_pod_device *d)
{
    if (o->pod && !is_pod(o->pod, d)) {
        return false;
    }
    return !o->device || strcmp(o->device, d->device_id) == 0 ||
           strcmp(o->device, d->physical_id) == 0;
}

static void numa_text(const kdp_pod_device *d, kc_buf *b)
{
    for (size_t i = 0; i < d->n_numa_nodes; i++) {
        kc_buf_printf(b, "%s%lld", i ? "," : "", (long long)d->numa_nodes[i]);
    }
    if (!d->n_numa_nodes) {
        kc_buf_puts(b, "-");
    }
}

static bool same_group(const kdp_pod_device *a, const kdp_pod_device *b)
{
    return strcmp(a->pod_namespace, b->pod_namespace) == 0 &&
           strcmp(a->pod_name, b->pod_name) == 0 &&
           strcmp(a->container_name, b->container_name) == 0 &&
           strcmp(a->resource_name, b->resource_name) == 0 &&
           strcmp(a->claim_namespace, b->claim_namespace) == 0 &&
           strcmp(a->claim_name, b->claim_name) == 0 && strcmp(a->pool_name, b->pool_name) == 0;
}

/* A DRA claim's: "NS/NAME", into b. */
static void claim_text(const kdp_pod_device *d, kc_buf *b)
{
    if (*d->claim_name) {
        kc_buf_printf(b, "%s/%s", d->claim_namespace, d->claim_name);
    } else {
        kc_buf_puts(b, "-");
    }
}

/* A DRA claim's: the claim, the pool, the share ID of each device shown
 * (when one has one). */
static void json_claim(const kc_opts *o, kc_json *j, const kdp_pods *pods, size_t i, size_t end)
{
    const kdp_pod_device *first = kdp_pods_at(pods, i);
    kc_buf c = {0};
    claim_text(first, &c);
    kc_json_str(j, "claim", c.s ? c.s : "");
    kc_buf_free(&c);
    kc_json_str(j, "pool", first->pool_name);
    bool shares = false;
    for (size_t k = i; k < end; k++) {
        const kdp_pod_device *d = kdp_pods_at(pods, k);
        shares |= wanted(o, d) && *d->share_id != '\0';
    }
    if (!shares) {
        return;
    }
    kc_json_arr(j, "share_ids");
    for (size_t k = i; k < end; k++) {
        if (wanted(o, kdp_pods_at(pods, k))) {
            kc_json_str(j, NULL, kdp_pods_at(pods, k)->share_id);
        }
    }
    kc_json_end(j);
}

static void json_numa(kc_json *j, const kdp_pod_device *d)
{
    kc_json_arr(j, "numa");
    for (size_t i = 0; i < d->n_numa_nodes; i++) {
        kc_json_int(j, NULL, d->numa_nodes[i]);
    }
    kc_json_end(j);
}

/* One container's devices of one resource (or of one DRA claim), from entry
 * i on: a table row (with a CLAIM column when claims) or a JSON line
 * (nothing if the filters leave none). Returns the index past the group;
 * counts a printed one in *rows. */
static size_t print_group(const kc_opts *o, const kdp_pods *pods, size_t i, kc_table *t,
                          bool claims, size_t *rows)
{
    size_t n = kdp_pods_count(pods);
    const kdp_pod_device *first = kdp_pods_at(pods, i);
    kc_buf ids = {0};
    kc_json j;
    kc_json_begin(&j);
    kc_json_str(&j, "namespace", first->pod_namespace);
    kc_json_str(&j, "pod", first->pod_name);
    kc_json_str(&j, "container", first->container_name);
    kc_json_str(&j, "resource", first->resource_name);
    kc_json_arr(&j, "devices");
    size_t shown = 0;
    size_t end = i;
    for (; end < n && same_group(first, kdp_pods_at(pods, end)); end++) {
        const kdp_pod_device *d = kdp_pods_at(pods, end);
        if (wanted(o, d)) {
            kc_json_str(&j, NULL, d->device_id);
            kc_buf_printf(&ids, "%s%s", shown++ ? "," : "", d->device_id);
        }
    }
    kc_json_end(&j);
    json_numa(&j, first);
    if (*first->claim_name) {
        json_claim(o, &j, pods, i, end);
    }
    if (shown && o->json) {
        kc_json_emit(&j);
    } else {
        kc_buf_free(&j.b);
    }
    if (shown && !o->json) {
        kc_buf c = {0};
        claim_text(first, &c);
        const char *row[] = {first->pod_namespace,        first->pod_name,
                             first->container_name,       first->resource_name,
                             claims && c.s ? c.s : ids.s, ids.s};
        kc_table_row(t, row);
        kc_buf_free(&c);
    }
    kc_buf_free(&ids);
    *rows += shown ? 1 : 0;
    return end;
}

/* Prints the table (unless JSON lines were printed, or no row but its
 * head), frees it, and returns rows. */
static size_t end_table(const kc_opts *o, kc_table *t, size_t rows)
{
    if (!o->json && rows) {
        kc_buf out = {0};
        kc_table_render(t, &out, "");
        (void)kc_buf_write(&out, stdout);
        kc_buf_free(&out);
    }
    kc_table_free(t);
    return rows;
}

/* The devices of each container and resource as one row / line, in order. */
static size_t print_pods(const kc_opts *o, const kdp_pods *pods)
{
    bool claims = false;
    for (size_t i = 0; i < kdp_pods_count(pods) && !claims; i++) {
        claims = *kdp_pods_at(pods, i)->claim_name != '\0';
    }
    kc_table t;
    kc_table_init(&t, claims ? 6 : 5);
    const char *head[] = {"NAMESPACE", "POD", "CONTAINER", "RESOURCE", "CLAIM", "DEVICES"};
    const char *head5[] = {"NAMESPACE", "POD", "CONTAINER", "RESOURCE", "DEVICES"};
    kc_table_row(&t, claims ? head : head5);
    size_t rows = 0;
    for (size_t i = 0; i < kdp_pods_count(pods);) {
        i = print_group(o, pods, i, &t, claims, &rows);
    }
    return end_table(o, &t, rows);
}

static size_t print_allocatable(const kc_opts *o, const kdp_pods *pods)
{
    kc_table t;
    kc_table_init(&t, 3);
    const char *head[] = {"RESOURCE", "DEVICE", "NUMA"};
    kc_table_row(&t, head);
    size_t rows = 0;
    for (size_t i = 0; i < kdp_pods_count(pods); i++) {
        const kdp_pod_device *d = kdp_pods_at(pods, i);
        if (!wanted(o, d)) {
            continue;
        }
        rows++;
        if (o->json) {
            kc_json j;
            kc_json_begin(&j);
            kc_json_str(&j, "resource", d->resource_name);
            kc_json_str(&j, "device", d->device_id);
            json_numa(&j, d);
            kc_json_emit(&j);
            continue;
        }
        kc_buf numa = {0};
        numa_text(d, &numa);
        const char *row[] = {d->resource_name, d->device_id, numa.s};
        kc_table_row(&t, row);
        kc_buf_free(&numa);
    }
    return end_table(o, &t, rows);
}

static int fail(const kc_opts *o, const char *path, int r)
{
    char msg[4200];
    const char *hint = NULL;
    switch (r) {
    case -ENOENT:
        snprintf(msg, sizeof(msg), "no socket at %s", path);
        hint = "run on the node, mount /var/lib/kubelet/pod-resources, or pass --kubelet-root "
               "(or --socket)";
        break;
    case -ECONNREFUSED:
        snprintf(msg, sizeof(msg), "nobody answers at %s", path);
        hint = "is the kubelet running? (it re-creates the socket when it starts)";
        break;
    case -ETIMEDOUT:
        snprintf(msg, sizeof(msg), "no answer from %s in time", path);
        hint = "the kubelet is stalled or overloaded; --timeout D waits longer";
        break;
    case -ESRCH:
        snprintf(msg, sizeof(msg), "no pod %s known to the kubelet", o->pod);
        break;
    default:
        snprintf(msg, sizeof(msg), "%s", *last_log ? last_log : strerror(-r));
        break;
    }
    kc_print_error(o->json, o->cmd, NULL, 0, msg, hint);
    return KC_EXIT_FAIL;
}

/* --pod: Get, or List where the kubelet has no Get. */
static int get_pod(const kc_opts *o, const char *path, unsigned ms, kdp_pods **ret)
{
    const char *slash = strchr(o->pod, '/');
    char *ns = strndup(o->pod, (size_t)(slash - o->pod));
    if (!ns) {
        return -ENOMEM;
    }
    int r = kdp_pods_get_pod(path, ns, slash + 1, o->resource, ms, ret);
    if (r == -EOPNOTSUPP) {
        /* List has the same answer, bigger. */
        kc_buf warn = {0};
        kc_buf_printf(&warn, "%s; using List", last_log);
        kc_print_warnings(o->cmd, &warn);
        kc_buf_free(&warn);
        kdp_pods *all = NULL;
        r = kdp_pods_get(path, o->resource, ms, &all);
        if (r == 0 && kdp_pods_find_pod(all, ns, slash + 1, NULL, NULL, 0) == 0) {
            r = -ESRCH;
        }
        if (r == 0) {
            *ret = all;
        } else {
            kdp_pods_free(all);
        }
    }
    free(ns);
    return r;
}

int kc_cmd_pods(const kc_opts *o)
{
    char buf[4096];
    const char *path = socket_of(o, buf, sizeof(buf));
    if (!path) {
        kc_print_error(o->json, o->cmd, NULL, 0, "cannot find the socket",
                       "$KDP_KUBELET_ROOT must be an absolute path");
        return KC_EXIT_USAGE;
    }
    uint64_t ms64 = (o->timeout_us + 999) / 1000;
    unsigned ms = ms64 > UINT_MAX ? UINT_MAX : (unsigned)ms64; /* 0: the default */
    kdp_log_set(KDP_LOG_WARNING, keep_log, NULL);
    kdp_pods *pods = NULL;
    int r;
    if (o->allocatable) {
        r = kdp_allocatable_get(path, o->resource, ms, &pods);
    } else if (o->pod) {
        r = get_pod(o, path, ms, &pods);
    } else {
        r = kdp_pods_get(path, o->resource, ms, &pods);
    }
    kdp_log_set(KDP_LOG_WARNING, NULL, NULL);
    if (r < 0) {
        return fail(o, path, r);
    }
    size_t rows = o->allocatable ? print_allocatable(o, pods) : print_pods(o, pods);
    if (!rows && !o->json) {
        printf("no devices%s%s%s%s\n", o->allocatable ? " to allocate" : " held by pods",
               o->resource ? " of " : "", o->resource ? o->resource : "",
               o->device ? " with that ID" : "");
    }
    kdp_pods_free(pods);
    return KC_EXIT_OK;
}
