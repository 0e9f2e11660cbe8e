/* SPDX-License-Identifier: MIT */
/*
 * kdp-test-k8s: drives src/k8s (kconfig, api, claims, slices) on a kdp
 * loop, for tests/k8s/test_k8s.py. Reads commands from stdin, one a line,
 * while the loop runs:
 *
 *   config [FILE]             load a kubeconfig (none: $KUBECONFIG, else
 *                             in-cluster) and make the API client
 *   token-refresh MS          re-read the token file this often
 *   discover                  resource.k8s.io: v1, v1beta2, v1beta1
 *   call METHOD PATH [JSON]   one API call
 *   slices DRIVER NODE MS     start the slice publisher (resync every MS)
 *   set N [TAG]               publish devices dev-000..: attributes model
 *                             ("m-TAG"), index; capacity memory 1Gi
 *   claim VERSION DRIVER POOL NS NAME UID   read a claim (UID "-": none)
 *   informer PATH PAGE        keep the collection PATH in view (k8s/informer,
 *                             PAGE objects a list page): events inf_begin,
 *                             inf {type, name}, inf_end, inf_error
 *   idle MS                   figures after MS ms: the loop's next timer
 *                             before, and the callbacks run meanwhile
 *   status | stats | free | quit
 *
 * Prints one JSON line per event ({"event": ...}); logs go to stderr
 * ($KDP_TEST_LOG=debug for more).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "k8s/api.h"
#include "k8s/claims.h"
#include "k8s/informer.h"
#include "k8s/kconfig.h"
#include "k8s/lines.h"
#include "k8s/slices.h"
#include "runtime/loop.h"

static kdp__loop *loop;
static kdp__kconfig *kc;
static kdp__api *api;
static kdp__slices *slices;
static kdp__inf *inf;
static kdp__lines input;
static kdp__io *in_io;
static kdp__timer *idle_timer;
static bool quit;
static unsigned long callbacks; /* run by the loop */
static unsigned long idle_from;

static void emit(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    if (s) {
        printf("%s\n", s);
        fflush(stdout);
        free(s);
    }
    json_decref(o);
}

static void on_status(const kdp__slices_status *st, void *ud)
{
    (void)ud;
    emit(json_pack("{s:s,s:b,s:I,s:I,s:I,s:s,s:s,s:I,s:I}", "event", "status", "published",
                   st->published, "generation", (json_int_t)st->generation, "slices",
                   (json_int_t)st->slices, "devices", (json_int_t)st->devices, "version",
                   st->version, "error", st->error, "writes", (json_int_t)st->writes, "lists",
                   (json_int_t)st->lists));
}

static void on_discover(int err, const char *version, const char *why, void *ud)
{
    (void)ud;
    emit(json_pack("{s:s,s:i,s:s?,s:s?}", "event", "discover", "err", err, "version", version,
                   "why", why));
}

static void on_call(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)ud;
    emit(json_pack("{s:s,s:i,s:i,s:s?,s:O?}", "event", "call", "err", err, "code", (int)code, "why",
                   why, "obj", obj));
}

static void on_claim(int err, const kdp__claim *c, const char *why, void *ud)
{
    (void)ud;
    json_t *o = json_pack("{s:s,s:i,s:s?}", "event", "claim", "err", err, "why", why);
    if (c) {
        json_t *devs = json_array();
        for (size_t i = 0; i < c->n_devs; i++) {
            const kdp__claim_dev *d = &c->devs[i];
            json_t *cfg = json_array();
            for (size_t j = 0; j < d->n_configs; j++) {
                json_array_append_new(cfg, json_string(d->configs[j]));
            }
            json_array_append_new(devs,
                                  json_pack("{s:s,s:s,s:s,s:s?,s:b,s:o}", "request", d->request,
                                            "pool", d->pool, "device", d->device, "share_id",
                                            d->share_id, "admin", d->admin_access, "configs", cfg));
        }
        json_object_set_new(o, "claim",
                            json_pack("{s:s,s:s,s:s,s:o}", "ns", c->ns, "name", c->name, "uid",
                                      c->uid, "devices", devs));
    }
    emit(o);
}

static void inf_begin(void *ud)
{
    (void)ud;
    emit(json_pack("{s:s}", "event", "inf_begin"));
}

static void inf_event(void *ud, const char *type, json_t *obj)
{
    (void)ud;
    json_t *meta = json_object_get(obj, "metadata");
    emit(json_pack("{s:s,s:s,s:s?,s:s?}", "event", "inf", "type", type, "name",
                   json_string_value(json_object_get(meta, "name")), "rv",
                   json_string_value(json_object_get(meta, "resourceVersion"))));
}

static void inf_end(void *ud)
{
    (void)ud;
    emit(json_pack("{s:s}", "event", "inf_end"));
}

static void inf_error(void *ud, int err, const char *why)
{
    (void)ud;
    emit(json_pack("{s:s,s:i,s:s}", "event", "inf_error", "err", err, "why", why));
}

static int start_informer(const char *path, const char *page)
{
    kdp__inf_cbs cbs = {
        .sync_begin = inf_begin, .event = inf_event, .sync_end = inf_end, .error = inf_error};
    kdp__inf_free(inf);
    inf = NULL;
    int r = kdp__inf_new(api, path, &cbs, &inf);
    if (r == 0) {
        kdp__inf_set_page(inf, (unsigned)strtoul(page, NULL, 10));
    }
    return r;
}

static void on_idle(kdp__timer *t, void *ud)
{
    (void)t;
    (void)ud;
    kdp__api_stats st = {0};
    if (api) {
        kdp__api_get_stats(api, &st);
    }
    /* this timer's own callback is one of them */
    emit(json_pack("{s:s,s:I,s:I,s:I}", "event", "idle", "wakeups",
                   (json_int_t)(callbacks - idle_from), "in_flight", (json_int_t)st.in_flight,
                   "next_timeout_ms", (json_int_t)kdp__loop_next_timeout_ms(loop)));
}

static void set_devices(long n, const char *tag)
{
    kdp__slice_dev *devs = calloc((size_t)n + 1, sizeof(*devs));
    kdp_dra_attr *attrs = calloc((size_t)n + 1, 2 * sizeof(*attrs));
    char(*names)[32] = calloc((size_t)n + 1, sizeof(*names));
    char model[64];
    snprintf(model, sizeof(model), "m-%s", tag);
    static const kdp__slice_cap caps[] = {{"memory", "1Gi", NULL}};
    for (long i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "dev-%03ld", i);
        attrs[2 * i] =
            (kdp_dra_attr){.name = "model", .type = KDP_DRA_ATTR_STRING, .string_value = model};
        attrs[2 * i + 1] =
            (kdp_dra_attr){.name = "index", .type = KDP_DRA_ATTR_INT, .int_value = i};
        devs[i] = (kdp__slice_dev){
            .name = names[i], .attrs = &attrs[2 * i], .n_attrs = 2, .caps = caps, .n_caps = 1};
    }
    int r = kdp__slices_set(slices, devs, (size_t)n, NULL, 0);
    emit(json_pack("{s:s,s:i}", "event", "set", "r", r));
    free(devs);
    free(attrs);
    free(names);
}

static void command(char *line)
{
    char *argv[8] = {0};
    int argc = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " ", &save); t && argc < 8; t = strtok_r(NULL, " ", &save)) {
        argv[argc++] = t;
    }
    /* "call" keeps the rest of the line as its body */
    if (argc == 0) {
        return;
    }
    const char *cmd = argv[0];
    int r = 0;
    char why[1024] = "";
    if (strcmp(cmd, "config") == 0) {
        r = kdp__kconfig_load(argc > 1 ? argv[1] : NULL, &kc, why, sizeof(why));
        if (r == 0) {
            r = kdp__api_new(loop, kc, &api);
        }
        emit(json_pack("{s:s,s:i,s:s,s:s?}", "event", "config", "err", r, "why", why, "source",
                       kc ? kc->source : NULL));
    } else if (strcmp(cmd, "token-refresh") == 0 && api && argc >= 2) {
        kdp__api_set_token_refresh(api, (unsigned)atol(argv[1]));
    } else if (strcmp(cmd, "discover") == 0 && api) {
        static const char *const wanted[] = {"v1", "v1beta2", "v1beta1", NULL};
        r = kdp__api_discover(api, "resource.k8s.io", wanted, on_discover, NULL, NULL);
    } else if (strcmp(cmd, "call") == 0 && api && argc >= 3) {
        json_t *body = NULL;
        if (argc >= 4) {
            json_error_t e;
            body = json_loads(argv[3], 0, &e);
        }
        r = kdp__api_call(api, argv[1], argv[2], body, on_call, NULL, NULL);
        json_decref(body);
    } else if (strcmp(cmd, "slices") == 0 && api && argc >= 4) {
        r = kdp__slices_new(api, argv[1], argv[2], NULL, (unsigned)atol(argv[3]), on_status, NULL,
                            &slices);
    } else if (strcmp(cmd, "set") == 0 && slices && argc >= 2) {
        set_devices(atol(argv[1]), argc > 2 ? argv[2] : "a");
    } else if (strcmp(cmd, "claim") == 0 && api && argc >= 7) {
        r = kdp__claim_get(api, argv[1], argv[2], argv[3], argv[4], argv[5],
                           strcmp(argv[6], "-") == 0 ? NULL : argv[6], on_claim, NULL, NULL);
    } else if (strcmp(cmd, "informer") == 0 && api && argc >= 3) {
        r = start_informer(argv[1], argv[2]);
    } else if (strcmp(cmd, "idle") == 0 && argc >= 2) {
        emit(json_pack("{s:s,s:I}", "event", "idle_start", "next_timeout_ms",
                       (json_int_t)kdp__loop_next_timeout_ms(loop)));
        idle_from = callbacks;
        kdp__timer_start(idle_timer, (uint64_t)atol(argv[1]) * 1000);
    } else if (strcmp(cmd, "status") == 0 && slices) {
        kdp__slices_status st;
        kdp__slices_get_status(slices, &st);
        on_status(&st, NULL);
    } else if (strcmp(cmd, "free") == 0) {
        kdp__inf_free(inf);
        inf = NULL;
        kdp__slices_free(slices);
        slices = NULL;
        kdp__api_free(api);
        api = NULL;
        emit(json_pack("{s:s}", "event", "freed"));
    } else if (strcmp(cmd, "quit") == 0) {
        quit = true;
    } else {
        r = -EINVAL;
    }
    if (r < 0 && strcmp(cmd, "config") != 0) {
        emit(json_pack("{s:s,s:s,s:i}", "event", "refused", "cmd", cmd, "err", r));
    }
}

static int on_line(const char *line, size_t len, void *ud)
{
    (void)ud;
    char buf[4096];
    snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
    command(buf);
    return 0;
}

static void on_input(kdp__io *io, uint32_t events, void *ud)
{
    (void)events;
    (void)ud;
    char buf[4096];
    ssize_t n = read(kdp__io_fd(io), buf, sizeof(buf));
    if (n > 0) {
        kdp__lines_feed(&input, buf, (size_t)n, on_line, NULL);
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        quit = true; /* EOF */
    }
}

int main(void)
{
    const char *lvl = getenv("KDP_TEST_LOG");
    kdp_log_set(lvl && strcmp(lvl, "debug") == 0 ? KDP_LOG_DEBUG : KDP_LOG_INFO, NULL, NULL);
    if (kdp__loop_new(&loop) < 0 || kdp__timer_new(loop, on_idle, NULL, &idle_timer) < 0) {
        return 1;
    }
    kdp__lines_init(&input, 4096);
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    if (kdp__io_add(loop, 0, EPOLLIN, on_input, NULL, &in_io) < 0) {
        return 1;
    }
    while (!quit) {
        int n = kdp__loop_dispatch(loop, -1);
        if (n < 0) {
            break;
        }
        callbacks += (unsigned long)n;
    }
    kdp__io_del(in_io);
    kdp__inf_free(inf);
    kdp__slices_free(slices);
    kdp__api_free(api);
    kdp__kconfig_free(kc);
    kdp__timer_free(idle_timer);
    kdp__lines_free(&input);
    kdp__loop_free(loop);
    return 0;
}
