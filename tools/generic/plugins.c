/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's running resources: one kdp plugin per resource, on the
 * caller's context. Its callbacks, on kdp's worker thread: the list (the
 * resource's scan, the CDI spec written), Allocate (the devices' nodes or
 * CDI names, the mounts and env) and the health probe (health.c) on a copy
 * of the device's latest scan. On the loop thread: a plugin started with
 * inotify on the directories its devices come from, stopped (its CDI spec
 * removed unless its successor writes it), and the running set matched to
 * a configuration.
 */
#include "plugins.h"

#include <errno.h>
#include <kdp.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dra.h"
#include "health.h"
#include "scan.h"
#include "util.h"

#define MAX_WATCHES 32

/* A running resource. */
struct gres {
    struct gres *next;
    gen_resource cfg;
    kdp_plugin *p;
    kdp_path_watch *watches[MAX_WATCHES];
    size_t n_watches;
    pthread_mutex_t mu;
    gen_scan scan; /* the latest list, for Allocate (under mu) */
    bool listed;   /* a list ran (under mu) */
};

/* ---- for the DRA side ---- */

const gen_resource *gen_res_config(const gres *g)
{
    return &g->cfg;
}

int gen_res_copy_dev(gres *g, const char *id, gen_dev *out)
{
    pthread_mutex_lock(&g->mu);
    const gen_dev *d = gen_scan_lookup(&g->scan, id);
    int r = d ? gen_dev_copy(out, d) : -ENOENT;
    pthread_mutex_unlock(&g->mu);
    return r;
}

int gen_res_copy_shared(gres *g, char ***out)
{
    pthread_mutex_lock(&g->mu);
    char **v = calloc(g->scan.n_shared + 1, sizeof(*v));
    size_t n = 0;
    for (; v && n < g->scan.n_shared && (v[n] = strdup(g->scan.shared[n])); n++) {
    }
    bool ok = v && n == g->scan.n_shared;
    pthread_mutex_unlock(&g->mu);
    if (!ok) {
        kdp_strv_free(v);
        return -ENOMEM;
    }
    *out = v;
    return 0;
}

/* ---- the plugin's callbacks (worker thread) ---- */

static bool has_path(const gen_dev *d, const char *path)
{
    for (size_t i = 0; i < d->n_paths; i++) {
        if (strcmp(d->paths[i], path) == 0) {
            return true;
        }
    }
    return false;
}

/* Each device with its nodes, then the shared nodes it lacks (CDI has no
 * per-resource edits that only some devices' users get: a container given
 * two devices gets a shared node twice, which runtimes merge). */
static int write_cdi(const gres *g, const gen_scan *s)
{
    kdp_cdi_device *devs = calloc(s->n ? s->n : 1, sizeof(*devs));
    kdp_cdi_node *nodes = NULL;
    size_t total = 0;
    for (size_t i = 0; i < s->n; i++) {
        total += s->devs[i].n_paths + s->n_shared;
    }
    nodes = calloc(total ? total : 1, sizeof(*nodes));
    if (!devs || !nodes) {
        free(devs);
        free(nodes);
        return -ENOMEM;
    }
    size_t o = 0;
    for (size_t i = 0; i < s->n; i++) {
        devs[i].name = s->devs[i].id;
        devs[i].nodes = &nodes[o];
        devs[i].n_nodes = s->devs[i].n_paths;
        for (size_t j = 0; j < s->devs[i].n_paths; j++) {
            nodes[o++] =
                (kdp_cdi_node){.path = s->devs[i].paths[j], .permissions = g->cfg.permissions};
        }
        for (size_t j = 0; j < s->n_shared; j++) {
            if (!has_path(&s->devs[i], s->shared[j])) {
                nodes[o++] =
                    (kdp_cdi_node){.path = s->shared[j], .permissions = g->cfg.permissions};
                devs[i].n_nodes++;
            }
        }
    }
    int r = kdp_cdi_write_spec(g->cfg.cdi_dir, g->cfg.cdi_kind, devs, s->n, NULL);
    free(devs);
    free(nodes);
    return r;
}

/* Logs a shared node going missing (or missing at the first list) and
 * all of them back, once per change. */
static void note_shared(gres *g, const gen_scan *s)
{
    pthread_mutex_lock(&g->mu);
    bool first = !g->listed;
    bool before = g->scan.shared_missing != NULL;
    g->listed = true;
    pthread_mutex_unlock(&g->mu);
    if (s->shared_missing && (first || !before)) {
        log_w("%s: shared node %s is missing: every device is unhealthy until it appears",
              g->cfg.name, s->shared_missing);
    } else if (!s->shared_missing && before) {
        log_i("%s: the shared nodes are all there again", g->cfg.name);
    }
}

static int list_devices(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    gres *g = ud;
    gen_scan s;
    int r = gen_scan_run(&g->cfg, &s);
    if (r == 0 && g->cfg.health.set && g->cfg.health.node_exists) {
        /* a device whose nodes vanish stays, for its probe to turn it
         * Unhealthy (after unhealthyAfter rounds) */
        pthread_mutex_lock(&g->mu);
        r = gen_scan_keep_missing(&g->cfg, &s, &g->scan);
        pthread_mutex_unlock(&g->mu);
    }
    if (r == 0) {
        note_shared(g, &s);
    }
    for (size_t i = 0; r == 0 && i < s.n; i++) {
        const gen_dev *d = &s.devs[i]; /* shared as `count` IDs by kdp's replicas */
        kdp_device dev = {.id = d->id,
                          .health = s.shared_missing ? KDP_UNHEALTHY : KDP_HEALTHY,
                          .numa_nodes = d->numa,
                          .n_numa_nodes = d->n_numa};
        r = kdp_device_list_add(out, &dev);
    }
    if (r == 0 && g->cfg.cdi) {
        r = write_cdi(g, &s);
        if (r < 0) {
            kdp_plugin_set_error(p, "cannot write the CDI spec of %s in %s: %s", g->cfg.cdi_kind,
                                 g->cfg.cdi_dir, strerror(-r));
        }
    }
    if (r >= 0) {
        pthread_mutex_lock(&g->mu);
        gen_scan old = g->scan;
        g->scan = s;
        pthread_mutex_unlock(&g->mu);
        s = old;
    }
    gen_scan_clear(&s);
    return r < 0 ? r : 0;
}

/* health: the probe op, on a copy of the device's latest scan. */
static int probe_device(kdp_plugin *p, const kdp_device *d, void *ud)
{
    gres *g = ud;
    gen_dev copy;
    pthread_mutex_lock(&g->mu);
    const gen_dev *cur = gen_scan_lookup(&g->scan, d->id);
    int r = cur ? gen_dev_copy(&copy, cur) : -ENOENT;
    pthread_mutex_unlock(&g->mu);
    if (r == -ENOENT) {
        return KDP_PROBE_HEALTHY; /* gone since: the list drops it */
    }
    pthread_mutex_lock(&g->mu);
    bool shared_missing = g->scan.shared_missing != NULL;
    pthread_mutex_unlock(&g->mu);
    if (r == 0 && shared_missing) {
        gen_dev_clear(&copy);
        return KDP_PROBE_UNHEALTHY; /* the list's log line says which */
    }
    if (r < 0) {
        kdp_plugin_set_error(p, "out of memory");
        return r;
    }
    r = gen_health_check(p, &g->cfg, &copy);
    gen_dev_clear(&copy);
    return r;
}

/* The shared nodes, once, unless one of the devices brought them (under
 * g->mu). */
static int add_shared(const gres *g, const gen_dev *const *devs, size_t n, kdp_alloc_response *resp)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < g->scan.n_shared; i++) {
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++) {
            dup = has_path(devs[j], g->scan.shared[i]);
        }
        r = dup ? 0
                : kdp_response_add_device(resp, g->scan.shared[i], g->scan.shared[i],
                                          g->cfg.permissions);
    }
    return r;
}

/* The devices behind the requested IDs (resolved by kdp), each once, under
 * g->mu. */
static int add_devices(kdp_plugin *p, gres *g, const kdp_alloc_request *req,
                       kdp_alloc_response *resp)
{
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    const gen_dev **seen = calloc(req->n_ids ? req->n_ids : 1, sizeof(*seen));
    if (!seen) {
        return -ENOMEM;
    }
    size_t n_seen = 0;
    int r = 0;
    for (size_t i = 0; r == 0 && i < req->n_ids; i++) {
        const gen_dev *d = gen_scan_lookup(&g->scan, req->device_ids[i]);
        if (!d) {
            kdp_plugin_set_error(p, "device %s is no longer present", req->ids[i]);
            r = -ENOENT;
            break;
        }
        size_t j = 0;
        while (j < n_seen && seen[j] != d) {
            j++;
        }
        if (j < n_seen) {
            continue;
        }
        seen[n_seen++] = d;
        for (size_t k = 0; r == 0 && k < d->n_paths && (!g->cfg.cdi || g->cfg.cdi_device_specs);
             k++) {
            r = kdp_response_add_device(resp, d->paths[k], d->paths[k], g->cfg.permissions);
        }
        if (r == 0 && g->cfg.cdi) {
            char name[600]; /* kind: 320 bytes at most, ID: 200 */
            int w = snprintf(name, sizeof(name), "%s=%s", g->cfg.cdi_kind, d->id);
            r = w > 0 && (size_t)w < sizeof(name) ? kdp_response_add_cdi_device(resp, name)
                                                  : -EINVAL;
        }
    }
    if (r == 0 && (!g->cfg.cdi || g->cfg.cdi_device_specs)) {
        r = add_shared(g, seen, n_seen, resp);
    }
    free(seen);
    return r;
}

static int allocate(kdp_plugin *p, const kdp_alloc_request *req, kdp_alloc_response *resp, void *ud)
{
    gres *g = ud;
    pthread_mutex_lock(&g->mu);
    int r = add_devices(p, g, req, resp);
    pthread_mutex_unlock(&g->mu);
    for (size_t i = 0; r == 0 && i < g->cfg.n_mounts; i++) {
        const gen_mount *m = &g->cfg.mounts[i];
        r = kdp_response_add_mount(resp, m->container_path, m->host_path, m->read_only);
    }
    for (size_t i = 0; r == 0 && i < g->cfg.n_env; i++) {
        r = kdp_response_add_env(resp, g->cfg.env[i].key, g->cfg.env[i].value);
    }
    return r == 0 ? kdp_response_add_defaults(resp) : r; /* + the env var listing the IDs */
}

/* ---- starting and stopping resources (loop thread) ---- */

static void watch_dirs(gres *g)
{
    char *dirs[MAX_WATCHES];
    unsigned depths[MAX_WATCHES];
    size_t n = gen_watch_dirs(&g->cfg, dirs, depths, MAX_WATCHES);
    size_t rl = strlen(g->cfg.root);
    while (rl > 0 && g->cfg.root[rl - 1] == '/') {
        rl--;
    }
    for (size_t i = 0; i < n; i++) {
        char real[PATH_MAX];
        snprintf(real, sizeof(real), "%.*s%s", (int)rl, g->cfg.root, dirs[i]);
        int r = kdp_plugin_watch_path(g->p, real, depths[i], &g->watches[g->n_watches]);
        if (r < 0) {
            log_w("%s: no hot-plug for %s: %s", g->cfg.name, real, strerror(-r));
        } else {
            g->n_watches++;
        }
        free(dirs[i]);
    }
}

static void gres_free(gres *g)
{
    for (size_t i = 0; i < g->n_watches; i++) {
        kdp_path_watch_free(g->watches[i]);
    }
    kdp_plugin_free(g->p); /* stops it: socket removed, the kubelet's stream ends */
    gen_scan_clear(&g->scan);
    gen_resource_clear(&g->cfg);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* Starts a plugin for r (its content is taken). Started by the next dispatch. */
static int start_resource(gen_plugins *ps, gen_resource *r)
{
    gres *g = calloc(1, sizeof(*g));
    if (!g) {
        gen_resource_clear(r);
        return -ENOMEM;
    }
    g->cfg = *r;
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&g->mu, NULL);
    kdp_config cfg = {
        .resource_name = g->cfg.name,
        .socket_name = g->cfg.socket,
        .device_plugin_dir = ps->dp_dir,
        .kubelet_root = ps->root,
        .registration = ps->registration,
        .preferred = g->cfg.preferred,
        .replicas = g->cfg.count,
        .replicas_one_per_container = g->cfg.one_per_container,
        .rescan_interval_ms = g->cfg.rescan_ms,
        .probe_interval_ms = g->cfg.health.interval_ms,
        .probe_unhealthy_after = g->cfg.health.unhealthy_after,
        .probe_healthy_after = g->cfg.health.healthy_after,
        .probe_down = (kdp_probe_down_policy)g->cfg.health.on_down,
        /* the command is killed at its own timeout: the probe's deadline
         * leaves it room to be reaped and answer */
        .probe_timeout_ms =
            (g->cfg.health.timeout_ms ? g->cfg.health.timeout_ms : GEN_HEALTH_TIMEOUT_MS) +
            GEN_HEALTH_REAP_MARGIN_MS,
    };
    kdp_ops ops = {.list = list_devices,
                   .allocate = allocate,
                   .probe = g->cfg.health.set ? probe_device : NULL};
    int rc = kdp_plugin_new(ps->ctx, &cfg, &ops, g, &g->p);
    if (rc < 0) {
        log_e("%s: cannot start: %s", g->cfg.name, strerror(-rc));
        g->p = NULL;
        gres_free(g);
        return rc;
    }
    if (g->cfg.dra.set && (rc = gen_dra_enable(g->p, g)) < 0) {
        log_e("%s: cannot serve DRA driver %s: %s", g->cfg.name, g->cfg.dra.driver, strerror(-rc));
        gres_free(g);
        return rc;
    }
    watch_dirs(g);
    g->next = ps->running;
    ps->running = g;
    return 0;
}

static const gen_resource *find_by_name(const gen_config *c, const char *name)
{
    for (size_t i = 0; i < c->n_res; i++) {
        if (c->res[i].name && strcmp(c->res[i].name, name) == 0) {
            return &c->res[i];
        }
    }
    return NULL;
}

/* Stops g; its CDI spec goes too unless next (its successor) writes it. */
static void stop_resource(gres *g, const gen_resource *next)
{
    bool keep_spec = next && next->cdi && g->cfg.cdi &&
                     strcmp(next->cdi_kind, g->cfg.cdi_kind) == 0 &&
                     strcmp(next->cdi_dir, g->cfg.cdi_dir) == 0;
    if (g->cfg.cdi && !keep_spec) {
        int r = kdp_cdi_remove_spec(g->cfg.cdi_dir, g->cfg.cdi_kind);
        if (r < 0) {
            log_w("%s: cannot remove its CDI spec: %s", g->cfg.name, strerror(-r));
        }
    }
    gres_free(g);
}

void gen_plugins_apply(gen_plugins *ps, gen_config *c)
{
    for (gres **pp = &ps->running; *pp;) {
        gres *g = *pp;
        const gen_resource *n = find_by_name(c, g->cfg.name);
        if (n && strcmp(n->fingerprint, g->cfg.fingerprint) == 0) {
            log_i("reload: %s unchanged", g->cfg.name);
            gen_resource_clear((gen_resource *)n); /* nothing to start for it */
            pp = &g->next;
            continue;
        }
        log_i("reload: %s %s", g->cfg.name, n ? "changed: restarting" : "removed: stopping");
        *pp = g->next;
        stop_resource(g, n);
    }
    for (size_t i = 0; i < c->n_res; i++) {
        if (c->res[i].name) {
            log_i("%s: starting (socket %s)", c->res[i].name, c->res[i].socket);
            (void)start_resource(ps, &c->res[i]);
        }
    }
}

void gen_plugins_free(gen_plugins *ps)
{
    while (ps->running) {
        gres *g = ps->running;
        ps->running = g->next;
        gres_free(g);
    }
}
