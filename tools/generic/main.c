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
 * Here, the process: the command line, --check and --list, the signals and
 * --watch-config, the loop; the plugins are plugins.c's.
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

#include "base/jsonstr.h"
#include "config.h"
#include "dra.h"
#include "plugins.h"
#include "scan.h"
#include "util.h"

typedef struct app {
    const char *file;
    kdp_ctx *ctx;
    const char *metrics; /* --metrics-address, NULL = $KDP_METRICS_ADDRESS or off */
    gen_plugins plugins; /* the running resources, with the flags they start with */
    bool stopping;
    bool watch_config;
    uint64_t config_hash; /* of the content last loaded or rejected */
} app;

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
    if (gen_config_load(a->file, a->plugins.dp_dir, &c, &err) < 0) {
        log_e("reload rejected (%s), keeping the running configuration: %s", why,
              err ? err : "out of memory");
        free(err);
        return;
    }
    log_i("%s: re-read %s (%zu resources)", why, a->file, c.n_res);
    gen_plugins_apply(&a->plugins, &c);
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
        if (!a->plugins.running && !a->stopping) {
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
    a->plugins.ctx = a->ctx;
    gen_plugins_apply(&a->plugins, c);
    r = a->plugins.running ? loop(a, sfd, ifd) : -EINVAL;
    if (r < 0) {
        log_e("stopped: %s", strerror(-r));
    }
    gen_plugins_free(&a->plugins);
    kdp_ctx_free(a->ctx);
    close(sfd);
    if (ifd >= 0) {
        close(ifd);
    }
    return r == 1 ? 0 : 1;
}

static void print_paths(char *const *v, size_t n)
{
    printf("[");
    for (size_t k = 0; k < n; k++) {
        printf(k ? ", " : "");
        kdp__json_string_file(stdout, v[k]);
    }
    printf("]");
}

static void print_opt(const char *key, const char *v)
{
    printf(", \"%s\": ", key);
    if (v) {
        kdp__json_string_file(stdout, v);
    } else {
        printf("null");
    }
}

static void print_dev(const gen_resource *r, const gen_dev *d)
{
    printf("{\"id\": ");
    kdp__json_string_file(stdout, d->id);
    printf(", \"paths\": ");
    print_paths(d->paths, d->n_paths);
    printf(", \"numa\": [");
    for (size_t k = 0; k < d->n_numa; k++) {
        printf("%s%lld", k ? ", " : "", (long long)d->numa[k]);
    }
    printf("]");
    if (d->pci.address) {
        printf(", \"pci\": {\"address\": ");
        kdp__json_string_file(stdout, d->pci.address);
        printf(", \"vendor\": \"%04x\", \"device\": \"%04x\", \"class\": \"%06x\"", d->pci.vendor,
               d->pci.device, (unsigned)d->pci.class_code);
        print_opt("driver", d->pci.driver);
        print_opt("pcieRoot", d->pci.pcie_root);
        printf("}");
    }
    if (r->dra.set) {
        fflush(stdout);
        gen_dra_print(stdout, r, d);
    }
    printf("}");
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
        kdp__json_string_file(stdout, c->res[i].name);
        if (c->res[i].dra.set) {
            print_opt("driver", c->res[i].dra.driver);
        }
        printf(", \"ids\": %zu, \"devices\": [", s.n_ids);
        for (size_t d = 0; d < s.n; d++) {
            printf(d ? ", " : "");
            print_dev(&c->res[i], &s.devs[d]);
        }
        printf("]");
        if (c->res[i].n_shared > 0) {
            printf(", \"sharedNodes\": ");
            print_paths(s.shared, s.n_shared);
            print_opt("sharedMissing", s.shared_missing);
        }
        printf("}\n");
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
            a->plugins.dp_dir = v;
        } else if ((v = flag_value(argc, argv, &i, "--kubelet-root"))) {
            a->plugins.root = v;
        } else if ((v = flag_value(argc, argv, &i, "--metrics-address"))) {
            a->metrics = v;
        } else if ((v = flag_value(argc, argv, &i, "--registration"))) {
            if (kdp_registration_parse(v, &a->plugins.registration) < 0) {
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
    if (a.plugins.root && a.plugins.root[0] != '/') {
        fprintf(stderr, "kdp-generic: --kubelet-root wants an absolute path, not \"%s\"\n",
                a.plugins.root);
        return 2;
    }
    if (kdp_kubelet_paths_get(a.plugins.root, a.plugins.dp_dir, &paths) < 0) {
        return usage(argv[0]); /* the line above it says which setting */
    }
    a.plugins.dp_dir = paths.device_plugin_dir;
    gen_config c;
    char *err = NULL;
    a.config_hash = file_hash(a.file);
    if (gen_config_load(a.file, a.plugins.dp_dir, &c, &err) < 0) {
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
