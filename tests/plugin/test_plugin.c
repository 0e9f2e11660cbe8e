/* SPDX-License-Identifier: MIT */
/*
 * kdp-test-plugin: a plugin with knobs, for the integration tests. Public API
 * only. Devices are given on the command line and changed at run time
 * through commands on stdin, which a separate thread turns into the
 * thread-safe kdp_plugin_set_devices / kdp_plugin_set_health calls.
 *
 *   --device-plugin-dir DIR
 *   --kubelet-root ROOT     the device-plugin dir is ROOT/device-plugins
 *   --registration MODE     kubelet, watcher or auto (kdp_config.registration)
 *   --watcher-resource NAME this resource registers through the plugin watcher
 *                           (the others as --registration says): both in one process
 *   --metrics-address ADDR  kdp_ctx_serve_metrics, with an author counter
 *                           kdptest_allocated_ids_total{resource} (IDs allocated)
 *   --resource NAME         repeatable: several resources on one context;
 *                           socket = NAME with every non-alphanumeric as '-' + ".sock"
 *   --socket NAME           socket of the first resource
 *   --devices SPEC          comma-separated id[:unhealthy][@numa] (every resource)
 *   --host-paths DIR        give device ID x the host path DIR/x
 *   --callback-timeout-ms N
 *   --slow-ms N             allocate of a device named "slow" sleeps N ms
 *   --fail-id ID            allocate of ID fails with -EINVAL and a message
 *   --die-id ID             allocate of ID kills the process (SIGKILL, as the
 *                           OOM killer would): a plugin that dies mid-call
 *   --stop-id ID            allocate of ID stops the context (kdp_ctx_stop, as
 *                           SIGTERM does), then returns after --slow-ms: a
 *                           plugin shut down mid-call
 *   --prestart FILE         enable PreStartContainer: append "prestart ids" to FILE
 *   --prestart-pods         the prestart op also asks the kubelet's PodResources
 *                           API (kdp_plugin_get_pods, blocking, on the worker)
 *                           and prints a "pods" JSON line (tag "prestart")
 *   --preferred             enable GetPreferredAllocation: available reversed
 *   --preferred-strategy packed|spread
 *                           kdp's own answer instead (kdp_config.preferred)
 *   --replicas N            kdp_config.replicas
 *   --one-per-container     kdp_config.replicas_one_per_container
 *   --alloc-log FILE        the allocate op appends "allocate ids -> device_ids"
 *   --lifecycle FILE        append "refresh" / "destroy" to FILE
 *   --list-file FILE        simple mode: the list op reads SPEC lines from FILE
 *   --default-alloc         no allocate op: kdp's default response
 *   --rescan-ms N           call the list op every N ms too
 *   --embed                 run in our own poll() loop (kdp_ctx_get_fd +
 *                           kdp_ctx_dispatch) with our own SIGTERM handler
 *   --positive-id ID        allocate of ID returns EINVAL (positive: a mistake)
 *   --misuse-id ID          allocate of ID first calls what a callback must not
 *                           (kdp_plugin_free, kdp_ctx_dispatch, kdp_ctx_run,
 *                           kdp_plugin_watch_path), printing each return code
 *   --probe-dir DIR         health checks (kdp_ops.probe): the probe of device x
 *                           reads DIR/x: missing or "ok" healthy, "fail"
 *                           unhealthy (with a reason), "down" the health
 *                           subsystem down, "hang" sleeps 60 s, "slow MS"
 *                           sleeps MS then healthy, "flap" alternates fail/ok;
 *                           each probe appends "probe x" to DIR/probes.log
 *   --probe-interval-ms N --probe-unhealthy-after N --probe-healthy-after N
 *   --probe-down keep|unhealthy|bad
 *                           kdp_config.probe_* ("bad": an invalid value)
 *   --sink-reenters         a log sink (lines on stderr as "sink: L msg") that
 *                           calls kdp_log_set and, once, a kdp call that logs
 *
 * stdin: "set SPEC", "health ID Healthy|Unhealthy", "rescan", "stop",
 *        "put SPEC": each device of SPEC through kdp_plugin_set_device (the
 *        first error is printed); "remove ID": kdp_plugin_remove_device;
 *        "burst N": N devices "burst-<i>" put one by one, as fast as it goes;
 *        "churn N M US": N device tables of M devices with 48-byte IDs set
 *        one after another (each differs from the one before), US
 *        microseconds apart: a load of ListAndWatch updates;
 *        "many N LEN": N devices with LEN-byte IDs (kdp_plugin_set_devices);
 *        "status": prints "status RES {json}" (kdp_plugin_get_status);
 *        "free": kdp_plugin_free from this (non-loop) thread while running;
 *        "get-pods": kdp_plugin_get_pods from this author thread, "query-pods":
 *        kdp_plugin_query_pods (its done, on the loop thread, also tries
 *        kdp_plugin_get_pods there: "deadlk" is its -EDEADLK): each prints a
 *        {"event": "pods", "tag", "resource", "rc", "devices": [...]} line.
 * The list file (--list-file) may hold "many N LEN" instead of a SPEC, and
 * may start with a line "sleep MS": the list op prints "list sleeping MS
 * ms", sleeps that long, then prints "list slept MS ms".
 */
#include <errno.h>
#include <kdp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_RES 4
#define MAX_DEV 256

static kdp_plugin *plugins[MAX_RES];
static int n_plugins;
static pthread_mutex_t plugins_mu = PTHREAD_MUTEX_INITIALIZER;
static bool plugins_freed; /* under plugins_mu */
static const char *host_paths;
static unsigned slow_ms;
static const char *fail_id;
static const char *die_id;
static const char *stop_id;
static kdp_ctx *the_ctx;
static const char *prestart_file;
static const char *lifecycle_file;
static const char *list_file;
static const char *watcher_resource;
static const char *positive_id;
static const char *misuse_id;
static const char *alloc_log;
static const char *probe_dir;
static kdp_metric *allocs_metric; /* --metrics-address: kdptest_allocations_total{resource} */
static kdp_ctx *the_ctx;

typedef struct spec {
    kdp_device devs[MAX_DEV];
    int64_t numa[MAX_DEV];
    char ids[MAX_DEV][64];
    char paths[MAX_DEV][256];
    size_t n;
} spec;

/* Parses "a,b:unhealthy,c@1" into s. */
static int parse_spec(const char *text, spec *s)
{
    memset(s, 0, sizeof(*s));
    char *copy = strdup(text);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",\n", &save); tok && s->n < MAX_DEV;
         tok = strtok_r(NULL, ",\n", &save)) {
        size_t i = s->n++;
        kdp_device *d = &s->devs[i];
        char *at = strchr(tok, '@');
        if (at) {
            *at = '\0';
            s->numa[i] = strtoll(at + 1, NULL, 10);
            d->numa_nodes = &s->numa[i];
            d->n_numa_nodes = 1;
        }
        char *colon = strchr(tok, ':');
        if (colon) {
            *colon = '\0';
            d->health = strcmp(colon + 1, "unhealthy") == 0 ? KDP_UNHEALTHY : KDP_HEALTHY;
        }
        snprintf(s->ids[i], sizeof(s->ids[i]), "%s", tok);
        d->id = s->ids[i];
        if (host_paths) {
            snprintf(s->paths[i], sizeof(s->paths[i]), "%s/%s", host_paths, tok);
            d->host_path = s->paths[i];
        }
    }
    free(copy);
    return 0;
}

static void note(const char *file, const char *what, const char *const *ids, size_t n)
{
    FILE *f = file ? fopen(file, "a") : NULL;
    if (!f) {
        return;
    }
    fprintf(f, "%s", what);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s%s", i ? "," : " ", ids[i]);
    }
    fprintf(f, "\n");
    fclose(f);
}

static int op_allocate(kdp_plugin *p, const kdp_alloc_request *req, kdp_alloc_response *resp,
                       void *ud)
{
    (void)ud;
    if (allocs_metric) {
        const char *labels[] = {kdp_plugin_resource(p)};
        (void)kdp_metric_add(allocs_metric, labels, (double)req->n_ids);
    }
    if (alloc_log) {
        char *ids = kdp_ids_join(req->ids, req->n_ids, ",");
        char *devs = kdp_ids_join(req->device_ids, req->n_ids, ",");
        char *line = NULL;
        if (ids && devs && asprintf(&line, "allocate %s ->", ids) >= 0) {
            note(alloc_log, line, (const char *const *)&devs, 1);
        }
        free(line);
        free(ids);
        free(devs);
    }
    for (size_t i = 0; i < req->n_ids; i++) {
        if (strcmp(req->ids[i], "slow") == 0) {
            usleep(slow_ms * 1000U);
        }
        if (die_id && strcmp(req->ids[i], die_id) == 0) {
            (void)raise(SIGKILL);
        }
        if (stop_id && strcmp(req->ids[i], stop_id) == 0) {
            (void)kdp_ctx_stop(the_ctx);
            usleep(slow_ms * 1000U);
        }
        if (fail_id && strcmp(req->ids[i], fail_id) == 0) {
            kdp_plugin_set_error(p, "device %s refuses to be allocated", fail_id);
            return -EINVAL;
        }
        if (positive_id && strcmp(req->ids[i], positive_id) == 0) {
            return EINVAL; /* the mistake: a positive errno */
        }
        if (misuse_id && strcmp(req->ids[i], misuse_id) == 0) {
            kdp_plugin_free(p); /* refused: the plugin stays */
            int rd = kdp_ctx_dispatch(the_ctx);
            int rr = kdp_ctx_run(the_ctx);
            int rw = kdp_plugin_watch_path(p, "/tmp", 0, NULL);
            kdp_config other = {.resource_name = "kdp.test/other", .socket_name = "other.sock"};
            kdp_plugin *np = NULL;
            int rn = kdp_plugin_new(the_ctx, &other, NULL, NULL, &np);
            printf("misuse: dispatch %d run %d watch %d new %d\n", rd, rr, rw, rn);
            fflush(stdout);
        }
    }
    int r = kdp_response_add_defaults(resp);
    if (r == 0) {
        r = kdp_response_add_env(resp, "TEST_RESOURCE", kdp_plugin_resource(p));
    }
    if (r == 0) {
        r = kdp_response_add_annotation(resp, "kdp.test/allocated", "yes");
    }
    if (r == 0) {
        r = kdp_response_add_cdi_device(resp, "kdp.test/device=all");
    }
    if (r == 0) {
        r = kdp_response_add_mount(resp, "/kdp-test", "/tmp", true);
    }
    return r;
}

static bool prestart_pods;

/* A JSON string without escapes: the tests' names need none; anything
 * else becomes '?'. */
static void json_str(char *buf, size_t cap, size_t *len, const char *s)
{
    *len += (size_t)snprintf(buf + *len, *len < cap ? cap - *len : 0, "\"");
    for (; *s && *len + 2 < cap; s++) {
        buf[(*len)++] = (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) ? '?' : *s;
    }
    *len += (size_t)snprintf(buf + *len, *len < cap ? cap - *len : 0, "\"");
}

/* One line: {"event": "pods", "tag", "resource", "rc", "deadlk", "devices"}. */
static void print_pods(const char *tag, kdp_plugin *p, int rc, int deadlk, const kdp_pods *pods)
{
    static char buf[65536];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    size_t len = (size_t)snprintf(buf, sizeof(buf),
                                  "{\"event\": \"pods\", \"tag\": \"%s\", \"resource\": \"%s\", "
                                  "\"rc\": %d, \"deadlk\": %d, \"devices\": [",
                                  tag, kdp_plugin_resource(p), rc, deadlk);
    for (size_t i = 0; i < kdp_pods_count(pods) && len + 1024 < sizeof(buf); i++) {
        const kdp_pod_device *d = kdp_pods_at(pods, i);
        const char *keys[] = {"ns", "pod", "container", "id", "physical"};
        const char *vals[] = {d->pod_namespace, d->pod_name, d->container_name, d->device_id,
                              d->physical_id};
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s{", i ? ", " : "");
        for (size_t k = 0; k < 5; k++) {
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s\"%s\": ", k ? ", " : "",
                                    keys[k]);
            json_str(buf, sizeof(buf), &len, vals[k]);
        }
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "}");
    }
    printf("%s]}\n", buf);
    fflush(stdout);
    pthread_mutex_unlock(&mu);
}

static int op_prestart(kdp_plugin *p, const char *const *ids, size_t n, void *ud)
{
    (void)ud;
    note(prestart_file, "prestart", ids, n);
    if (prestart_pods) {
        kdp_pods *pods = NULL;
        int r = kdp_plugin_get_pods(p, 0, &pods);
        print_pods("prestart", p, r, 0, pods);
        kdp_pods_free(pods);
    }
    return 0;
}

static void on_query(int err, kdp_pods *pods, void *ud)
{
    kdp_plugin *p = ud;
    kdp_pods *again = NULL;
    int deadlk = kdp_plugin_get_pods(p, 0, &again); /* on the loop thread: refused */
    kdp_pods_free(again);
    print_pods("query", p, err, deadlk, pods);
    kdp_pods_free(pods);
}

static int op_preferred(kdp_plugin *p, const kdp_preferred_request *req, kdp_id_list *out, void *ud)
{
    (void)p;
    (void)ud;
    for (size_t i = 0; i < req->n_available && i < req->size; i++) {
        kdp_id_list_add(out, req->available[req->n_available - 1 - i]);
    }
    return 0;
}

static int op_refresh(kdp_plugin *p, void *ud)
{
    (void)p;
    (void)ud;
    note(lifecycle_file, "refresh", NULL, 0);
    return 0;
}

static void op_destroy(kdp_plugin *p, void *ud)
{
    (void)p;
    (void)ud;
    note(lifecycle_file, "destroy", NULL, 0);
}

/* N devices with LEN-byte IDs ("many-<number>" padded with 'x'). */
static kdp_device *many_devices(unsigned n, unsigned len, char **ret_ids)
{
    if (len < 16 || len > 255) {
        len = 16;
    }
    kdp_device *devs = calloc(n ? n : 1, sizeof(*devs));
    char *ids = calloc((size_t)(n ? n : 1), (size_t)len + 1);
    if (!devs || !ids) {
        free(devs);
        free(ids);
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        char *id = ids + (size_t)i * (len + 1);
        int k = snprintf(id, len + 1, "many-%u-", i);
        memset(id + k, 'x', len - (unsigned)k);
        devs[i].id = id;
    }
    *ret_ids = ids;
    return devs;
}

static int op_list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)ud;
    char text[8192] = "";
    FILE *f = fopen(list_file, "r");
    if (!f) {
        kdp_plugin_set_error(p, "cannot open %s", list_file);
        return -ENOENT;
    }
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    unsigned sleep_ms = 0;
    if (sscanf(text, "sleep %u", &sleep_ms) == 1) { /* a list that keeps the worker busy */
        printf("list sleeping %u ms\n", sleep_ms);
        fflush(stdout);
        usleep(sleep_ms * 1000U);
        printf("list slept %u ms\n", sleep_ms);
        fflush(stdout);
        char *nl = strchr(text, '\n');
        memmove(text, nl ? nl + 1 : text + n, strlen(nl ? nl + 1 : text + n) + 1);
    }
    unsigned many = 0;
    unsigned len = 0;
    if (sscanf(text, "many %u %u", &many, &len) == 2) {
        char *ids = NULL;
        kdp_device *devs = many_devices(many, len, &ids);
        int r = devs ? 0 : -ENOMEM;
        for (unsigned i = 0; r == 0 && i < many; i++) {
            r = kdp_device_list_add(out, &devs[i]);
        }
        free(devs);
        free(ids);
        printf("listed %u\n", many);
        fflush(stdout);
        return r;
    }
    static spec s;
    parse_spec(text, &s);
    for (size_t i = 0; i < s.n; i++) {
        int r = kdp_device_list_add(out, &s.devs[i]);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* "churn N M US": N tables of M devices, one device's health flipped
 * each time, US microseconds apart. */
static int churn(kdp_plugin *p, unsigned n, unsigned m, unsigned us)
{
    if (m == 0 || m > MAX_DEV) {
        return -EINVAL;
    }
    static spec s;
    memset(&s, 0, sizeof(s));
    for (unsigned k = 0; k < m; k++) {
        snprintf(s.ids[k], sizeof(s.ids[k]), "churn-device-%035u", k);
        s.devs[k].id = s.ids[k];
    }
    for (unsigned i = 0; i < n; i++) {
        s.devs[i % m].health = s.devs[i % m].health == KDP_HEALTHY ? KDP_UNHEALTHY : KDP_HEALTHY;
        int r = kdp_plugin_set_devices(p, s.devs, m);
        if (r < 0) {
            return r;
        }
        if (us) {
            usleep(us);
        }
    }
    return 0;
}

/* --probe-dir: what DIR/<id> says (see the top). */
static int op_probe(kdp_plugin *p, const kdp_device *d, void *ud)
{
    (void)ud;
    static pthread_mutex_t flap_mu = PTHREAD_MUTEX_INITIALIZER;
    static unsigned flaps;
    char path[512];
    snprintf(path, sizeof(path), "%s/probes.log", probe_dir);
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "probe %s\n", d->id);
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/%s", probe_dir, d->id);
    char what[64] = "";
    f = fopen(path, "r");
    if (!f) {
        return KDP_PROBE_HEALTHY;
    }
    if (!fgets(what, sizeof(what), f)) {
        what[0] = '\0';
    }
    fclose(f);
    what[strcspn(what, "\n")] = '\0';
    if (strcmp(what, "fail") == 0) {
        kdp_plugin_set_error(p, "device %s: the test says it fails", d->id);
        return KDP_PROBE_UNHEALTHY;
    }
    if (strcmp(what, "down") == 0) {
        kdp_plugin_set_error(p, "the test's health subsystem is down");
        return KDP_PROBE_DOWN;
    }
    if (strcmp(what, "hang") == 0) {
        sleep(60);
        return KDP_PROBE_HEALTHY;
    }
    if (strncmp(what, "slow ", 5) == 0) {
        usleep((useconds_t)atoi(what + 5) * 1000U);
        return KDP_PROBE_HEALTHY;
    }
    if (strcmp(what, "flap") == 0) {
        pthread_mutex_lock(&flap_mu);
        unsigned n = flaps++;
        pthread_mutex_unlock(&flap_mu);
        if (n % 2 == 0) {
            kdp_plugin_set_error(p, "device %s: flapping", d->id);
            return -EIO;
        }
    }
    return KDP_PROBE_HEALTHY;
}

static void print_status(kdp_plugin *p)
{
    kdp_plugin_status st;
    if (kdp_plugin_get_status(p, &st) < 0) {
        return;
    }
    printf("status %s {\"state\": %d, \"devices\": %zu, \"message_bytes\": %zu, "
           "\"rejected_devices\": %zu, \"rejected_bytes\": %zu, \"list_error\": %d, "
           "\"dir_error\": %d, \"stuck_callbacks\": %u, \"restarts\": %u, "
           "\"probe_unhealthy\": %u, \"probe_down\": %s}\n",
           kdp_plugin_resource(p), (int)st.state, st.devices, st.message_bytes, st.rejected_devices,
           st.rejected_bytes, st.list_error, st.dir_error, st.stuck_callbacks, st.restarts,
           st.probe_unhealthy, st.probe_down ? "true" : "false");
}

static void *read_commands(void *arg)
{
    (void)arg;
    char line[4096];
    static spec s;
    while (fgets(line, sizeof(line), stdin)) {
        line[strcspn(line, "\n")] = '\0';
        char id[128];
        char health[32];
        unsigned cn = 0;
        unsigned cm = 0;
        unsigned cus = 0;
        /* The plugins are freed once the context has stopped: never use
         * them after (TSan saw this thread read a freed plugin). */
        pthread_mutex_lock(&plugins_mu);
        for (int i = 0; i < n_plugins && !plugins_freed; i++) {
            int r = 0;
            if (strncmp(line, "set ", 4) == 0) {
                parse_spec(line + 4, &s);
                r = kdp_plugin_set_devices(plugins[i], s.devs, s.n);
            } else if (strncmp(line, "put ", 4) == 0) {
                parse_spec(line + 4, &s);
                for (size_t k = 0; k < s.n && r == 0; k++) {
                    r = kdp_plugin_set_device(plugins[i], &s.devs[k]);
                }
            } else if (sscanf(line, "remove %127s", id) == 1) {
                r = kdp_plugin_remove_device(plugins[i], id);
            } else if (sscanf(line, "burst %u", &cn) == 1) {
                for (unsigned k = 0; k < cn && r == 0; k++) {
                    char bid[32];
                    snprintf(bid, sizeof(bid), "burst-%u", k);
                    kdp_device d = {.id = bid, .health = KDP_HEALTHY};
                    r = kdp_plugin_set_device(plugins[i], &d);
                }
            } else if (sscanf(line, "health %127s %31s", id, health) == 2) {
                r = kdp_plugin_set_health(plugins[i], id,
                                          strcmp(health, "Healthy") ? KDP_UNHEALTHY : KDP_HEALTHY);
            } else if (strcmp(line, "rescan") == 0) {
                r = kdp_plugin_rescan(plugins[i]);
            } else if (sscanf(line, "churn %u %u %u", &cn, &cm, &cus) == 3) {
                r = churn(plugins[i], cn, cm, cus);
            } else if (strcmp(line, "stop") == 0) {
                r = kdp_plugin_stop(plugins[i]);
            } else if (sscanf(line, "many %u %u", &cn, &cm) == 2) {
                char *ids = NULL;
                kdp_device *devs = many_devices(cn, cm, &ids);
                r = devs ? kdp_plugin_set_devices(plugins[i], devs, cn) : -ENOMEM;
                free(devs);
                free(ids);
            } else if (strcmp(line, "status") == 0) {
                print_status(plugins[i]);
            } else if (strcmp(line, "get-pods") == 0) {
                kdp_pods *pods = NULL;
                r = kdp_plugin_get_pods(plugins[i], 0, &pods);
                print_pods("get", plugins[i], r, 0, pods);
                kdp_pods_free(pods);
            } else if (strcmp(line, "query-pods") == 0) {
                r = kdp_plugin_query_pods(plugins[i], on_query, plugins[i]);
            } else if (strcmp(line, "free") == 0) {
                kdp_plugin_free(plugins[i]); /* refused while the context runs */
            }
            printf("command \"%s\" on %s: %d\n", line, kdp_plugin_resource(plugins[i]), r);
            fflush(stdout);
        }
        pthread_mutex_unlock(&plugins_mu);
    }
    return NULL;
}

/* A sink that calls back into kdp: kdp_log_set on every line and, once, a
 * call that logs an error itself. Neither may deadlock. */
static void reentrant_sink(kdp_log_level level, const char *msg, void *ud)
{
    (void)ud;
    static const char letters[] = "DIWE";
    static bool once;
    fprintf(stderr, "sink: %c %s\n", letters[level & 3], msg);
    kdp_log_set(KDP_LOG_INFO, reentrant_sink, NULL);
    if (!once && n_plugins > 0) {
        once = true;
        kdp_device bad = {.id = "bad id"}; /* refused, with an error line */
        (void)kdp_plugin_set_devices(plugins[0], &bad, 1);
    }
}

static kdp_ctx *embed_ctx;

static void on_sigterm(int signo)
{
    (void)signo;
    kdp_ctx_stop(embed_ctx); /* async-signal-safe */
}

/* The embedding mode: an application's own loop with kdp's fd in it. */
static int run_embedded(kdp_ctx *ctx)
{
    embed_ctx = ctx;
    struct sigaction sa = {.sa_handler = on_sigterm};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
    fprintf(stderr, "kdp-test-plugin: embedded loop on fd %d\n", pfd.fd);
    for (;;) {
        int r = kdp_ctx_dispatch(ctx);
        if (r != 0) {
            return r < 0 ? r : 0;
        }
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
            return -errno;
        }
    }
}

static char *socket_for(const char *resource)
{
    char *s = malloc(strlen(resource) + 6);
    size_t i = 0;
    for (; resource[i]; i++) {
        char c = resource[i];
        s[i] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
    }
    strcpy(s + i, ".sock");
    return s;
}

int main(int argc, char **argv)
{
    const char *resources[MAX_RES];
    int n_res = 0;
    const char *socket = NULL;
    const char *devices = "";
    bool prestart = false;
    bool preferred = false;
    bool default_alloc = false;
    bool embed = false;
    bool sink_reenters = false;
    kdp_config cfg = {0};
    const char *metrics = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--preferred") == 0) {
            preferred = true;
            continue;
        }
        if (strcmp(a, "--default-alloc") == 0) {
            default_alloc = true;
            continue;
        }
        if (strcmp(a, "--embed") == 0) {
            embed = true;
            continue;
        }
        if (strcmp(a, "--sink-reenters") == 0) {
            sink_reenters = true;
            continue;
        }
        if (strcmp(a, "--prestart-pods") == 0) {
            prestart_pods = true;
            continue;
        }
        if (strcmp(a, "--one-per-container") == 0) {
            cfg.replicas_one_per_container = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "kdp-test-plugin: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--device-plugin-dir") == 0) {
            cfg.device_plugin_dir = v;
        } else if (strcmp(a, "--kubelet-root") == 0) {
            cfg.kubelet_root = v;
        } else if (strcmp(a, "--watcher-resource") == 0) {
            watcher_resource = v;
        } else if (strcmp(a, "--registration") == 0) {
            if (kdp_registration_parse(v, &cfg.registration) < 0) {
                fprintf(stderr, "--registration: kubelet, watcher or auto\n");
                return 2;
            }
        } else if (strcmp(a, "--preferred-strategy") == 0) {
            cfg.preferred = strcmp(v, "packed") == 0   ? KDP_PREFERRED_PACKED
                            : strcmp(v, "spread") == 0 ? KDP_PREFERRED_SPREAD
                                                       : (kdp_preferred_strategy)99;
        } else if (strcmp(a, "--probe-dir") == 0) {
            probe_dir = v;
        } else if (strcmp(a, "--probe-interval-ms") == 0) {
            cfg.probe_interval_ms = (unsigned)atoi(v);
        } else if (strcmp(a, "--probe-unhealthy-after") == 0) {
            cfg.probe_unhealthy_after = (unsigned)atoi(v);
        } else if (strcmp(a, "--probe-healthy-after") == 0) {
            cfg.probe_healthy_after = (unsigned)atoi(v);
        } else if (strcmp(a, "--probe-down") == 0) {
            cfg.probe_down = strcmp(v, "keep") == 0        ? KDP_PROBE_DOWN_KEEP
                             : strcmp(v, "unhealthy") == 0 ? KDP_PROBE_DOWN_UNHEALTHY
                                                           : (kdp_probe_down_policy)99;
        } else if (strcmp(a, "--replicas") == 0) {
            cfg.replicas = (unsigned)atoi(v);
        } else if (strcmp(a, "--alloc-log") == 0) {
            alloc_log = v;
        } else if (strcmp(a, "--metrics-address") == 0) {
            metrics = v;
        } else if (strcmp(a, "--resource") == 0 && n_res < MAX_RES) {
            resources[n_res++] = v;
        } else if (strcmp(a, "--socket") == 0) {
            socket = v;
        } else if (strcmp(a, "--devices") == 0) {
            devices = v;
        } else if (strcmp(a, "--host-paths") == 0) {
            host_paths = v;
        } else if (strcmp(a, "--callback-timeout-ms") == 0) {
            cfg.callback_timeout_ms = (unsigned)atoi(v);
        } else if (strcmp(a, "--slow-ms") == 0) {
            slow_ms = (unsigned)atoi(v);
        } else if (strcmp(a, "--fail-id") == 0) {
            fail_id = v;
        } else if (strcmp(a, "--die-id") == 0) {
            die_id = v;
        } else if (strcmp(a, "--stop-id") == 0) {
            stop_id = v;
        } else if (strcmp(a, "--prestart") == 0) {
            prestart = true;
            prestart_file = v;
        } else if (strcmp(a, "--lifecycle") == 0) {
            lifecycle_file = v;
        } else if (strcmp(a, "--list-file") == 0) {
            list_file = v;
        } else if (strcmp(a, "--rescan-ms") == 0) {
            cfg.rescan_interval_ms = (unsigned)atoi(v);
        } else if (strcmp(a, "--positive-id") == 0) {
            positive_id = v;
        } else if (strcmp(a, "--misuse-id") == 0) {
            misuse_id = v;
        } else {
            fprintf(stderr, "kdp-test-plugin: unknown flag %s\n", a);
            return 2;
        }
    }
    if (n_res == 0) {
        resources[n_res++] = "kdp.test/dev";
    }
    kdp_log_set(KDP_LOG_INFO, sink_reenters ? reentrant_sink : NULL, NULL);
    kdp_ops ops = {
        .allocate = default_alloc ? NULL : op_allocate,
        .prestart = prestart || prestart_pods ? op_prestart : NULL,
        .preferred = preferred ? op_preferred : NULL,
        .refresh = lifecycle_file ? op_refresh : NULL,
        .destroy = lifecycle_file ? op_destroy : NULL,
        .list = list_file ? op_list : NULL,
        .probe = probe_dir ? op_probe : NULL,
    };
    kdp_ctx *ctx;
    if (kdp_ctx_new(&ctx) < 0) {
        return 1;
    }
    the_ctx = ctx;
    if (metrics) {
        const char *label = "resource";
        int r = kdp_ctx_serve_metrics(ctx, metrics);
        if (r == 0) {
            r = kdp_metric_new(ctx, KDP_METRIC_COUNTER, "kdptest_allocated_ids_total",
                               "Device IDs the test plugin's allocate op was asked for.", &label, 1,
                               &allocs_metric);
        }
        if (r < 0) {
            fprintf(stderr, "kdp-test-plugin: --metrics-address %s: %s\n", metrics, strerror(-r));
            kdp_ctx_free(ctx);
            return 1;
        }
    }
    static spec initial;
    parse_spec(devices, &initial);
    for (int i = 0; i < n_res; i++) {
        char *sock = i == 0 && socket ? strdup(socket) : socket_for(resources[i]);
        cfg.resource_name = resources[i];
        cfg.socket_name = sock;
        kdp_config one = cfg;
        if (watcher_resource && strcmp(watcher_resource, resources[i]) == 0) {
            one.registration = KDP_REGISTRATION_WATCHER;
        }
        int r = kdp_plugin_new(ctx, &one, &ops, NULL, &plugins[n_plugins]);
        free(sock);
        if (r < 0) {
            fprintf(stderr, "kdp-test-plugin: resource %d: %s\n", i + 1, strerror(-r));
            kdp_ctx_free(ctx);
            return 1;
        }
        if (!list_file) {
            kdp_plugin_set_devices(plugins[n_plugins], initial.devs, initial.n);
        }
        n_plugins++;
    }
    pthread_t tid;
    pthread_create(&tid, NULL, read_commands, NULL);
    pthread_detach(tid);
    int r = embed ? run_embedded(ctx) : kdp_ctx_run(ctx);
    if (r < 0) {
        fprintf(stderr, "kdp-test-plugin: %s\n", strerror(-r));
    }
    pthread_mutex_lock(&plugins_mu);
    plugins_freed = true;
    pthread_mutex_unlock(&plugins_mu);
    kdp_ctx_free(ctx);
    return r == 0 ? 0 : 1;
}
