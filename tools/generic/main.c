/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic: a device plugin with no code. Every resource of a YAML file
 * (docs/generic.md) is one kdp plugin on one context: its devices are the
 * device nodes its entries match (globs, groups, USB IDs), shared by
 * `count` containers each (kdp's replicas), pushed to the kubelet as they come and go
 * (inotify on their directories), handed out with the resource's mounts,
 * env and optional CDI spec. SIGHUP re-reads the file: a resource that
 * disappears is stopped, a new one started, a changed one restarted, an
 * unchanged one left alone; an invalid file is logged and ignored.
 *
 * A resource with a health: section gets kdp's probe op (health.c): its
 * devices' nodes, a file or a command checked every interval, with kdp's
 * hysteresis; with nodeExists, a device whose nodes vanish stays listed
 * and turns Unhealthy rather than leaving at once.
 *
 * With --watch-config, a change of the file's content (an edit, a
 * ConfigMap update) does the same without a signal: inotify on its
 * directory.
 *
 *   kdp-generic --config FILE [--device-plugin-dir DIR | --kubelet-root ROOT]
 *       [--registration kubelet|watcher|auto]
 *               [--watch-config] [--metrics-address ADDR]
 *               [--check | --list] [--quiet]
 */
#include <errno.h>
#include <kdp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/jsonstr.h"
#include "config.h"
#include "health.h"
#include "scan.h"
#include "util.h"

#define MAX_WATCHES 32

/* A running resource. */
typedef struct gres {
    struct gres *next;
    gen_resource cfg;
    kdp_plugin *p;
    kdp_path_watch *watches[MAX_WATCHES];
    size_t n_watches;
    pthread_mutex_t mu;
    gen_scan scan; /* the latest list, for Allocate (under mu) */
} gres;

typedef struct app {
    const char *file;
    const char *dp_dir;            /* --device-plugin-dir, $KDP_DEVICE_PLUGIN_DIR or the root's */
    const char *root;              /* --kubelet-root; NULL = $KDP_KUBELET_ROOT, else the default */
    kdp_registration registration; /* --registration; 0 = $KDP_REGISTRATION, else kubelet.sock */
    kdp_ctx *ctx;
    const char *metrics; /* --metrics-address, NULL = $KDP_METRICS_ADDRESS or off */
    gres *running;
    bool stopping;
    bool watch_config;
    uint64_t config_hash; /* of the content last loaded or rejected */
} app;

/* ---- the plugin's callbacks (worker thread) ---- */

static int write_cdi(const gres *g, const gen_scan *s)
{
    kdp_cdi_device *devs = calloc(s->n ? s->n : 1, sizeof(*devs));
    kdp_cdi_node *nodes = NULL;
    size_t total = 0;
    for (size_t i = 0; i < s->n; i++) {
        total += s->devs[i].n_paths;
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
    }
    int r = kdp_cdi_write_spec(g->cfg.cdi_dir, g->cfg.cdi_kind, devs, s->n, NULL);
    free(devs);
    free(nodes);
    return r;
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
    for (size_t i = 0; r == 0 && i < s.n; i++) {
        const gen_dev *d = &s.devs[i]; /* shared as `count` IDs by kdp's replicas */
        kdp_device dev = {.id = d->id, .numa_nodes = d->numa, .n_numa_nodes = d->n_numa};
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
    if (r < 0) {
        kdp_plugin_set_error(p, "out of memory");
        return r;
    }
    r = gen_health_check(p, &g->cfg, &copy);
    gen_dev_clear(&copy);
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
static int start_resource(app *a, gen_resource *r)
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
        .device_plugin_dir = a->dp_dir,
        .kubelet_root = a->root,
        .registration = a->registration,
        .preferred = g->cfg.preferred,
        .replicas = g->cfg.count,
        .replicas_one_per_container = g->cfg.one_per_container,
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
    int rc = kdp_plugin_new(a->ctx, &cfg, &ops, g, &g->p);
    if (rc < 0) {
        log_e("%s: cannot start: %s", g->cfg.name, strerror(-rc));
        g->p = NULL;
        gres_free(g);
        return rc;
    }
    watch_dirs(g);
    g->next = a->running;
    a->running = g;
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

/* Makes the running set match c: unchanged resources stay, the others are
 * stopped first (their sockets may be reused), then the new ones start. */
static void apply(app *a, gen_config *c)
{
    for (gres **pp = &a->running; *pp;) {
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
            (void)start_resource(a, &c->res[i]);
        }
    }
}

/* FNV-1a of the file's content (0 if it cannot be read). */
static uint64_t file_hash(const char *file)
{
    FILE *f = fopen(file, "r");
    if (!f) {
        return 0;
    }
    uint64_t h = 14695981039346656037ULL;
    char buf[8192];
    size_t n;
    size_t total = 0;
    while (total <= GEN_MAX_FILE_BYTES && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
        for (size_t i = 0; i < n; i++) {
            h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
        }
        total += n;
    }
    fclose(f);
    return h;
}

/* Re-reads the file; why names what asked for it ("SIGHUP", or the file's
 * change under --watch-config), for the log. */
static void reload(app *a, const char *why)
{
    a->config_hash = file_hash(a->file);
    gen_config c;
    char *err = NULL;
    if (gen_config_load(a->file, a->dp_dir, &c, &err) < 0) {
        log_e("reload rejected (%s), keeping the running configuration: %s", why,
              err ? err : "out of memory");
        free(err);
        return;
    }
    log_i("%s: re-read %s (%zu resources)", why, a->file, c.n_res);
    apply(a, &c);
    gen_config_free(&c);
}

/* ---- the loop ---- */

static void on_signal(app *a, int sfd)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP && !a->stopping) {
            reload(a, "SIGHUP");
        } else if (si.ssi_signo != SIGHUP && !a->stopping) {
            log_i("signal %u: stopping", si.ssi_signo);
            a->stopping = true;
            kdp_ctx_stop(a->ctx);
        }
    }
}

/* --watch-config: something changed in the file's directory. */
static void on_config_dir(app *a, int ifd)
{
    _Alignas(struct inotify_event) char buf[4096];
    while (read(ifd, buf, sizeof(buf)) > 0) {
    }
    if (!a->stopping && file_hash(a->file) != a->config_hash) {
        reload(a, "config file changed");
    }
}

static int watch_config_dir(const app *a)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(a->file, '/');
    if (!slash || slash == a->file) {
        snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
    } else {
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - a->file), a->file);
    }
    int ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM;
    if (ifd < 0 || inotify_add_watch(ifd, dir, mask) < 0) {
        log_e("--watch-config: cannot watch %s: %s", dir, strerror(errno));
        if (ifd >= 0) {
            close(ifd);
        }
        return -1;
    }
    return ifd;
}

/* Dispatches kdp until every plugin stopped; signals through a signalfd,
 * config changes through inotify (ifd, -1 if not watched). */
static int loop(app *a, int sfd, int ifd)
{
    for (;;) {
        if (!a->running && !a->stopping) {
            return -ENOENT; /* every resource failed to start after a reload */
        }
        int r = kdp_ctx_dispatch(a->ctx); /* also starts plugins added meanwhile */
        if (r != 0) {
            return r;
        }
        struct pollfd fds[3] = {{.fd = kdp_ctx_get_fd(a->ctx), .events = POLLIN},
                                {.fd = sfd, .events = POLLIN},
                                {.fd = ifd, .events = POLLIN}};
        if (poll(fds, 3, -1) < 0 && errno != EINTR) {
            return -errno;
        }
        if (fds[1].revents & POLLIN) {
            on_signal(a, sfd);
        }
        if (fds[2].revents & POLLIN) {
            on_config_dir(a, ifd);
        }
    }
}

static int run(app *a, gen_config *c)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    /* Blocked before kdp starts any thread, so that threads inherit it. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    int r = sfd < 0 ? -errno : kdp_ctx_new(&a->ctx);
    if (r < 0) {
        log_e("cannot start: %s", strerror(-r));
        return 1;
    }
    if (a->metrics) {
        r = kdp_ctx_serve_metrics(a->ctx, a->metrics);
        if (r < 0) {
            log_e("--metrics-address %s: %s: %s", a->metrics, strerror(-r),
                  r == -EINVAL       ? "HOST:PORT (127.0.0.1:9400, [::1]:9400, :9400 for every "
                                       "interface, port 0 for any free port) or unix:/abs/path"
                  : r == -EADDRINUSE ? "choose another port or path"
                                     : "see the line above");
            kdp_ctx_free(a->ctx);
            close(sfd);
            return 1;
        }
    }
    int ifd = a->watch_config ? watch_config_dir(a) : -1;
    apply(a, c);
    r = a->running ? loop(a, sfd, ifd) : -EINVAL;
    if (r < 0) {
        log_e("stopped: %s", strerror(-r));
    }
    while (a->running) {
        gres *g = a->running;
        a->running = g->next;
        gres_free(g);
    }
    kdp_ctx_free(a->ctx);
    close(sfd);
    if (ifd >= 0) {
        close(ifd);
    }
    return r == 1 ? 0 : 1;
}

/* --list: what each resource would expose now, one JSON line each. */
static int list_once(const gen_config *c)
{
    int rc = 0;
    for (size_t i = 0; i < c->n_res; i++) {
        gen_scan s;
        if (gen_scan_run(&c->res[i], &s) < 0) {
            rc = 1;
            continue;
        }
        printf("{\"resource\": ");
        kt_json_string_file(stdout, c->res[i].name);
        printf(", \"ids\": %zu, \"devices\": [", s.n_ids);
        for (size_t d = 0; d < s.n; d++) {
            printf("%s{\"id\": ", d ? ", " : "");
            kt_json_string_file(stdout, s.devs[d].id);
            printf(", \"paths\": [");
            for (size_t k = 0; k < s.devs[d].n_paths; k++) {
                printf(k ? ", " : "");
                kt_json_string_file(stdout, s.devs[d].paths[k]);
            }
            printf("], \"numa\": [");
            for (size_t k = 0; k < s.devs[d].n_numa; k++) {
                printf("%s%lld", k ? ", " : "", (long long)s.devs[d].numa[k]);
            }
            printf("]}");
        }
        printf("]}\n");
        gen_scan_clear(&s);
    }
    return rc;
}

static const char *flag_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *arg = *i < argc ? argv[*i] : NULL;
    if (!arg || strncmp(arg, name, n) != 0) {
        return NULL;
    }
    if (arg[n] == '=') {
        return arg + n + 1;
    }
    return arg[n] == '\0' && *i + 1 < argc ? argv[++*i] : NULL;
}

static int usage(const char *argv0)
{
    fprintf(
        stderr,
        "usage: %s --config FILE [--device-plugin-dir DIR | --kubelet-root ROOT]\n"
        "                   [--registration kubelet|watcher|auto]\n"
        "                   [--watch-config] [--metrics-address ADDR] [--check | --list]\n"
        "                   [--quiet]\n"
        "  --device-plugin-dir DIR  default: $KDP_DEVICE_PLUGIN_DIR, else " KDP_DEVICE_PLUGIN_DIR
        " (a root does not move it)\n"
        "  --kubelet-root ROOT      default: $KDP_KUBELET_ROOT, else " KDP_KUBELET_ROOT "\n"
        "  --registration MODE      kubelet.sock (kubelet), the plugin watcher in\n"
        "                           ROOT/plugins_registry (watcher), or auto; default:\n"
        "                           $KDP_REGISTRATION, else kubelet\n"
        "  --watch-config  re-read FILE when its content changes (as on SIGHUP)\n"
        "  --metrics-address ADDR  serve /metrics and /healthz on HOST:PORT (\":9400\": every\n"
        "                  interface) or unix:/abs/path; default: $KDP_METRICS_ADDRESS, else off\n"
        "  --check         validate FILE and exit\n"
        "  --list          print the devices each resource would expose now, and exit\n"
        "  --quiet         warnings and errors only\n",
        argv0);
    return 2;
}

static bool is_flag(const char *arg, const char *name)
{
    return arg && strcmp(arg, name) == 0;
}

/* The command line into a, check and list; false if it is not valid. */
static bool parse_args(int argc, char **argv, app *a, bool *check, bool *list)
{
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = flag_value(argc, argv, &i, "--config"))) {
            a->file = v;
        } else if ((v = flag_value(argc, argv, &i, "--device-plugin-dir"))) {
            a->dp_dir = v;
        } else if ((v = flag_value(argc, argv, &i, "--kubelet-root"))) {
            a->root = v;
        } else if ((v = flag_value(argc, argv, &i, "--metrics-address"))) {
            a->metrics = v;
        } else if ((v = flag_value(argc, argv, &i, "--registration"))) {
            if (kdp_registration_parse(v, &a->registration) < 0) {
                fprintf(stderr,
                        "kdp-generic: --registration: kubelet, watcher or auto, not \"%s\"\n", v);
                return false;
            }
        } else if (is_flag(argv[i], "--check")) {
            *check = true;
        } else if (is_flag(argv[i], "--list")) {
            *list = true;
        } else if (is_flag(argv[i], "--watch-config")) {
            a->watch_config = true;
        } else if (is_flag(argv[i], "--quiet")) {
            gen_verbose = false;
        } else {
            return false;
        }
    }
    return a->file && !(*check && *list);
}

int main(int argc, char **argv)
{
    app a = {0};
    bool check = false;
    bool list = false;
    if (!parse_args(argc, argv, &a, &check, &list)) {
        return usage(argv[0]);
    }
    /* The directory as the library finds it, for the checks of the config
     * (socket path lengths) and for every plugin. */
    static kdp_kubelet_paths paths;
    if (a.root && a.root[0] != '/') {
        fprintf(stderr, "kdp-generic: --kubelet-root wants an absolute path, not \"%s\"\n", a.root);
        return 2;
    }
    if (kdp_kubelet_paths_get(a.root, a.dp_dir, &paths) < 0) {
        return usage(argv[0]); /* the line above it says which setting */
    }
    a.dp_dir = paths.device_plugin_dir;
    gen_config c;
    char *err = NULL;
    a.config_hash = file_hash(a.file);
    if (gen_config_load(a.file, a.dp_dir, &c, &err) < 0) {
        log_e("%s", err ? err : "out of memory");
        free(err);
        return 1;
    }
    int rc;
    if (check) {
        printf("%s: OK (%zu resource%s)\n", a.file, c.n_res, c.n_res == 1 ? "" : "s");
        rc = 0;
    } else if (list) {
        rc = list_once(&c);
    } else {
        kdp_log_set(gen_verbose ? KDP_LOG_INFO : KDP_LOG_WARNING, NULL, NULL);
        rc = run(&a, &c);
    }
    gen_config_free(&c);
    return rc;
}
