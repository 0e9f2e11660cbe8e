/* SPDX-License-Identifier: MIT */
/*
 * dra_calls: the commands `kdpctl dra kubelet` reads on stdin, one a line:
 *   prepare DRIVER NS/NAME/UID [NS/NAME/UID...]    one NodePrepareResources
 *   unprepare DRIVER NS/NAME/UID [NS/NAME/UID...]  one NodeUnprepareResources
 *   state                                          drivers and prepared claims
 *   health DRIVER                                  the driver's last health list
 * A call goes to the driver's newest registration with the version chosen
 * at registration (the v1 and v1beta1 messages are the same on the wire but
 * for v1's share_id), bounded by the kubelet's 45 s. Each claim's answer is
 * printed: its devices and CDI IDs, or its error; a claim the answer lacks
 * is said so (the kubelet retries those).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dra.h"
#include "dra_v1.pb-c.h"
#include "grpc/wire.h"
#include "kubelet.h"
#include "rpc.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim pb_claim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest pb_prep_req;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse pb_prep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest pb_unprep_req;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse pb_unprep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device pb_device;

struct kd_call {
    kd *k;
    kd_call *next;
    const kd_plugin *p;
    bool prepare;
    char *driver;
    kc_strv ns, name, uid; /* the claims, in the command's order */
    kdp__client_call *call;
    uint64_t start_us;
};

static void call_free(kd_call *c)
{
    for (kd_call **pp = &c->k->calls; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    kc_strv_free(&c->ns);
    kc_strv_free(&c->name);
    kc_strv_free(&c->uid);
    free(c->driver);
    free(c);
}

void kd_calls_cancel(kd *k, const kd_plugin *p)
{
    kd_call *c = k->calls;
    while (c) {
        kd_call *next = c->next;
        if (!p || c->p == p) {
            kdp__client_call_cancel(c->call);
            call_free(c);
        }
        c = next;
    }
}

/* ---- output ---- */

static void say_error(kd *k, const char *text, const char *hint)
{
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "command_error");
        kc_json_str(&j, "message", text);
        kc_json_str(&j, "hint", hint);
        kc_json_emit(&j);
        return;
    }
    char line[1600];
    snprintf(line, sizeof(line), "%s%s%s", text, hint ? " (" : "", hint ? hint : "");
    if (hint) {
        strncat(line, ")", sizeof(line) - strlen(line) - 1);
    }
    kd_say(line);
}

static void claim_label(kc_buf *b, const kd_call *c, size_t i)
{
    kc_buf_printf(b, "%s/%s (uid %s)", c->ns.v[i], c->name.v[i], c->uid.v[i]);
}

/* Records a claim as prepared (or forgets it). */
static void note_prepared(kd *k, const kd_call *c, size_t i, const char *devices, bool add)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s %s/%s/%s", c->driver, c->ns.v[i], c->name.v[i], c->uid.v[i]);
    for (size_t j = 0; j < k->prepared.n; j++) {
        if (strcmp(k->prepared.v[j], key) == 0) {
            free(k->prepared.v[j]);
            free(k->prepared_devices.v[j]);
            k->prepared.v[j] = k->prepared.v[k->prepared.n - 1];
            k->prepared_devices.v[j] = k->prepared_devices.v[k->prepared.n - 1];
            k->prepared.n--;
            k->prepared_devices.n--;
            break;
        }
    }
    if (add && k->prepared.n < 4096) {
        if (kc_strv_add(&k->prepared, key) == 0 && kc_strv_add(&k->prepared_devices, devices) < 0) {
            free(k->prepared.v[--k->prepared.n]);
        }
    }
}

static void device_text(kc_buf *b, const pb_device *d)
{
    kc_buf_printf(b, "%s/%s", d->pool_name, d->device_name);
    if (d->n_request_names) {
        kc_buf_puts(b, " [request ");
        for (size_t r = 0; r < d->n_request_names; r++) {
            kc_buf_printf(b, "%s%s", r ? "," : "", d->request_names[r]);
        }
        kc_buf_puts(b, "]");
    }
    if (d->share_id && *d->share_id) {
        kc_buf_printf(b, " share %s", d->share_id);
    }
    kc_buf_puts(b, " -> ");
    for (size_t r = 0; r < d->n_cdi_device_ids; r++) {
        kc_buf_printf(b, "%s%s", r ? ", " : "", d->cdi_device_ids[r]);
    }
    if (!d->n_cdi_device_ids) {
        kc_buf_puts(b, "(no CDI IDs)");
    }
}

static void json_device(kc_json *j, const pb_device *d)
{
    kc_json_obj(j, NULL);
    kc_json_str(j, "pool", d->pool_name);
    kc_json_str(j, "device", d->device_name);
    kc_json_arr(j, "requests");
    for (size_t r = 0; r < d->n_request_names; r++) {
        kc_json_str(j, NULL, d->request_names[r]);
    }
    kc_json_end(j);
    kc_json_arr(j, "cdi_device_ids");
    for (size_t r = 0; r < d->n_cdi_device_ids; r++) {
        kc_json_str(j, NULL, d->cdi_device_ids[r]);
    }
    kc_json_end(j);
    kc_json_end(j);
}

static void json_prepared(kd_call *c, size_t i, const char *error, pb_device **devs, size_t n)
{
    kc_json j;
    kd_json(&j, "prepared");
    kc_json_str(&j, "driver", c->driver);
    kc_json_str(&j, "namespace", c->ns.v[i]);
    kc_json_str(&j, "name", c->name.v[i]);
    kc_json_str(&j, "uid", c->uid.v[i]);
    kc_json_ms(&j, "call_ms", kdp__now_us() - c->start_us);
    if (error) {
        kc_json_str(&j, "error", error);
    } else {
        kc_json_arr(&j, "devices");
        for (size_t d = 0; d < n; d++) {
            json_device(&j, devs[d]);
        }
    }
    kc_json_emit(&j);
}

static void print_prepared(kd_call *c, size_t i, const char *error, pb_device **devs, size_t n)
{
    kd *k = c->k;
    if (k->o->json) {
        json_prepared(c, i, error, devs, n);
    }
    kc_buf b = {0};
    kc_buf all = {0};
    kc_buf lines = {0};
    kc_buf_printf(&b, "prepare %s ", c->driver);
    claim_label(&b, c, i);
    if (error) {
        kc_buf_printf(&b, ": %s", error);
    } else {
        kc_buf_printf(&b, ": %zu device%s", n, n == 1 ? "" : "s");
        for (size_t d = 0; d < n; d++) {
            kc_buf_puts(&lines, "    ");
            kc_buf lb = {0};
            device_text(&lb, devs[d]);
            kc_buf_safe(&lines, lb.len ? lb.s : "");
            kc_buf_free(&lb);
            kc_buf_puts(&lines, "\n");
            if (d) {
                kc_buf_puts(&all, "; ");
            }
            device_text(&all, devs[d]);
        }
        note_prepared(k, c, i, all.len ? all.s : "", true);
    }
    if (!k->o->json) {
        kd_say_as("dra-kubelet", b.failed ? "prepare: out of memory" : b.s,
                  lines.len && !lines.failed ? lines.s : NULL);
    }
    kc_buf_free(&b);
    kc_buf_free(&lines);
    kc_buf_free(&all);
}

static void print_unprepared(kd_call *c, size_t i, const char *error)
{
    kd *k = c->k;
    if (!error) {
        note_prepared(k, c, i, NULL, false);
    }
    if (k->o->json) {
        kc_json j;
        kd_json(&j, "unprepared");
        kc_json_str(&j, "driver", c->driver);
        kc_json_str(&j, "namespace", c->ns.v[i]);
        kc_json_str(&j, "name", c->name.v[i]);
        kc_json_str(&j, "uid", c->uid.v[i]);
        kc_json_ms(&j, "call_ms", kdp__now_us() - c->start_us);
        if (error) {
            kc_json_str(&j, "error", error);
        }
        kc_json_emit(&j);
        return;
    }
    kc_buf b = {0};
    kc_buf_printf(&b, "unprepare %s ", c->driver);
    claim_label(&b, c, i);
    kc_buf_printf(&b, ": %s", error ? error : "done");
    kd_say(b.failed ? "unprepare: out of memory" : b.s);
    kc_buf_free(&b);
}

static const char *missing = "no entry for this claim in the answer (the kubelet retries it)";

static void said_extra(kd_call *c, const char *uid)
{
    for (size_t i = 0; i < c->uid.n; i++) {
        if (strcmp(c->uid.v[i], uid) == 0) {
            return;
        }
    }
    char text[600];
    snprintf(text, sizeof(text), "%s answered for claim uid %s, which was not asked", c->driver,
             uid);
    say_error(c->k, text, NULL);
}

static void on_prepare(kd_call *c, const uint8_t *resp, size_t len)
{
    pb_prep_resp *m = k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__unpack(
        NULL, len, resp);
    if (!m) {
        say_error(c->k, "NodePrepareResources: the answer does not decode", NULL);
        return;
    }
    for (size_t i = 0; i < c->uid.n; i++) {
        const char *err = missing;
        pb_device **devs = NULL;
        size_t n = 0;
        for (size_t e = 0; e < m->n_claims; e++) {
            if (strcmp(m->claims[e]->key, c->uid.v[i]) == 0 && m->claims[e]->value) {
                err = *m->claims[e]->value->error ? m->claims[e]->value->error : NULL;
                devs = m->claims[e]->value->devices;
                n = m->claims[e]->value->n_devices;
            } else if (strcmp(m->claims[e]->key, c->uid.v[i]) == 0) {
                err = NULL;
            }
        }
        print_prepared(c, i, err, devs, n);
    }
    for (size_t e = 0; e < m->n_claims; e++) {
        said_extra(c, m->claims[e]->key);
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__free_unpacked(m, NULL);
}

static void on_unprepare(kd_call *c, const uint8_t *resp, size_t len)
{
    pb_unprep_resp *m =
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__unpack(NULL, len,
                                                                                        resp);
    if (!m) {
        say_error(c->k, "NodeUnprepareResources: the answer does not decode", NULL);
        return;
    }
    for (size_t i = 0; i < c->uid.n; i++) {
        const char *err = missing;
        for (size_t e = 0; e < m->n_claims; e++) {
            if (strcmp(m->claims[e]->key, c->uid.v[i]) == 0) {
                err = m->claims[e]->value && *m->claims[e]->value->error
                          ? m->claims[e]->value->error
                          : NULL;
            }
        }
        print_unprepared(c, i, err);
    }
    for (size_t e = 0; e < m->n_claims; e++) {
        said_extra(c, m->claims[e]->key);
    }
    k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__free_unpacked(m, NULL);
}

static void on_done(int status, const char *message, const uint8_t *resp, size_t len, void *ud)
{
    kd_call *c = ud;
    c->call = NULL;
    char ms[32];
    const char *what = c->prepare ? "NodePrepareResources" : "NodeUnprepareResources";
    if (status != KDP__ST_OK) {
        char text[1200];
        snprintf(text, sizeof(text), "%s to %s failed after %s ms: %s: %s", what, c->driver,
                 kc_ms(kdp__now_us() - c->start_us, ms, sizeof(ms)), kdp__status_name(status),
                 message);
        say_error(c->k, text,
                  status == KDP__ST_UNIMPLEMENTED
                      ? "the driver does not serve this DRAPlugin version"
                      : NULL);
        call_free(c);
        return;
    }
    if (!c->k->o->json) {
        char text[200];
        snprintf(text, sizeof(text), "%s %s: answered in %s ms (%zu claim%s)", what, c->driver,
                 kc_ms(kdp__now_us() - c->start_us, ms, sizeof(ms)), c->uid.n,
                 c->uid.n == 1 ? "" : "s");
        kd_say(text);
    }
    if (c->prepare) {
        on_prepare(c, resp, len);
    } else {
        on_unprepare(c, resp, len);
    }
    call_free(c);
}

/* ---- commands ---- */

/* NS/NAME/UID into the call's lists. Returns 0 or -EINVAL. */
static int parse_claim(kd_call *c, const char *s)
{
    const char *a = strchr(s, '/');
    const char *b = a ? strchr(a + 1, '/') : NULL;
    if (!a || !b || a == s || b == a + 1 || !b[1] || strchr(b + 1, '/')) {
        return -EINVAL;
    }
    char *ns = strndup(s, (size_t)(a - s));
    char *name = strndup(a + 1, (size_t)(b - a - 1));
    int r = ns && name ? 0 : -ENOMEM;
    if (r == 0) {
        r = kc_strv_add(&c->ns, ns) < 0 || kc_strv_add(&c->name, name) < 0 ||
                    kc_strv_add(&c->uid, b + 1) < 0
                ? -ENOMEM
                : 0;
    }
    free(ns);
    free(name);
    return r;
}

static void start_call(kd *k, bool prepare, char **argv, size_t argc)
{
    const char *verb = prepare ? "prepare" : "unprepare";
    char text[800];
    if (argc < 2) {
        snprintf(text, sizeof(text), "%s wants DRIVER NS/NAME/UID [NS/NAME/UID...]", verb);
        say_error(k, text, "e.g. prepare gopher.example.com default/claim-1/UID");
        return;
    }
    kd_plugin *p = kd_find_driver(k, argv[0]);
    if (!p) {
        snprintf(text, sizeof(text), "%s: no driver %s registered", verb, argv[0]);
        say_error(k, text,
                  "`state` lists the drivers; is the driver running with this kubelet root?");
        return;
    }
    if (argc - 1 > KD_MAX_CLAIMS) {
        snprintf(text, sizeof(text), "%s: at most %d claims in one call", verb, KD_MAX_CLAIMS);
        say_error(k, text, NULL);
        return;
    }
    kd_call *c = calloc(1, sizeof(*c));
    if (!c || !(c->driver = strdup(p->driver))) {
        free(c);
        say_error(k, "out of memory", NULL);
        return;
    }
    c->k = k;
    c->p = p;
    c->prepare = prepare;
    c->next = k->calls;
    k->calls = c;
    for (size_t i = 1; i < argc; i++) {
        if (parse_claim(c, argv[i]) < 0) {
            snprintf(text, sizeof(text), "%s: \"%s\" is not NAMESPACE/NAME/UID", verb, argv[i]);
            say_error(k, text, "`kdpctl dra claim` prints a claim's UID");
            call_free(c);
            return;
        }
    }
    pb_claim *claims = calloc(c->uid.n, sizeof(*claims));
    pb_claim **ptrs = calloc(c->uid.n, sizeof(pb_claim *));
    int r = claims && ptrs ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < c->uid.n; i++) {
        pb_claim init = K8S__IO__KUBELET__PKG__APIS__DRA__V1__CLAIM__INIT;
        claims[i] = init;
        claims[i].namespace_ = c->ns.v[i];
        claims[i].name = c->name.v[i];
        claims[i].uid = c->uid.v[i];
        ptrs[i] = &claims[i];
    }
    char method[160];
    snprintf(method, sizeof(method), "/k8s.io.kubelet.pkg.apis.dra.%s.DRAPlugin/%s", p->version,
             prepare ? "NodePrepareResources" : "NodeUnprepareResources");
    kdp__unary_opts opts = {.timeout_us = KD_CALL_TIMEOUT, .max_recv = KC_KUBELET_MAX_RECV};
    c->start_us = kdp__now_us();
    if (r == 0 && prepare) {
        pb_prep_req req =
            K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
        req.n_claims = c->uid.n;
        req.claims = ptrs;
        r = kdp__client_unary_pb(k->loop, p->endpoint, method, &req.base, &opts, on_done, c,
                                 &c->call);
    } else if (r == 0) {
        pb_unprep_req req =
            K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_REQUEST__INIT;
        req.n_claims = c->uid.n;
        req.claims = ptrs;
        r = kdp__client_unary_pb(k->loop, p->endpoint, method, &req.base, &opts, on_done, c,
                                 &c->call);
    }
    free(claims);
    free(ptrs);
    if (r < 0) {
        snprintf(text, sizeof(text), "%s: cannot call %s: %s", verb, p->endpoint, strerror(-r));
        say_error(k, text, NULL);
        call_free(c);
    }
}

static void run_line(kd *k, char *line)
{
    char *argv[KD_MAX_CLAIMS + 3];
    size_t cap = sizeof(argv) / sizeof(argv[0]);
    size_t argc = kd_words(line, argv, cap);
    if (argc > cap) {
        say_error(k, "too many words in one command", NULL);
        return;
    }
    if (argc == 0 || argv[0][0] == '#') {
        return;
    }
    if (strcmp(argv[0], "prepare") == 0 || strcmp(argv[0], "unprepare") == 0) {
        start_call(k, argv[0][0] == 'p', argv + 1, argc - 1);
    } else if (strcmp(argv[0], "state") == 0 && argc == 1) {
        kd_print_state(k);
    } else if (strcmp(argv[0], "health") == 0 && argc == 2) {
        kd_plugin *p = kd_find_driver(k, argv[1]);
        if (p) {
            kd_print_health(p, p->health || p->health_msgs ? "last list" : "no stream");
        } else {
            say_error(k, "health: no such driver registered", "`state` lists the drivers");
        }
    } else if (!k->more || !k->more(argv, argc, k->more_ud)) {
        char text[300];
        snprintf(text, sizeof(text), "unknown command \"%.200s\" (or wrong arguments)", argv[0]);
        say_error(k, text,
                  k->more ? "commands: " KD_KUBELET_USAGE "; " KD_FAULT_USAGE
                          : "commands: " KD_KUBELET_USAGE);
    }
}

static void on_line(char *line, void *ud)
{
    if (line) {
        run_line(ud, line);
    } else {
        say_error(ud, "a command longer than 64 KiB: ignored", NULL);
    }
}

int kd_input_start(kd *k)
{
    return kd_lines_start(&k->input, k->loop, on_line, k);
}

void kd_input_stop(kd *k)
{
    kd_lines_stop(&k->input);
}
