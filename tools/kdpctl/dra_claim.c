/* SPDX-License-Identifier: MIT */
/*
 * dra_claim: `kdpctl dra claim`: an allocated ResourceClaim, as the
 * scheduler leaves it, through kdp's own API client (src/k8s/api): a create
 * (spec.devices.requests: one request of --count devices of the class named
 * after the driver), then the /status subresource with
 * status.allocation.devices.results (request, driver, pool = the node,
 * device; with --share-id each a share, with --consumed what it consumed)
 * and, with --config, one opaque config for the request, and a node
 * selector for the node. A device whose slice declares binding conditions
 * (KEP-5007) has them copied into its result, with the allocation's
 * allocationTimestamp, as the scheduler does (not with --no-check: no
 * slices are read); the node selector is pinned to the node either way
 * (bindsToNode). Prints the claim's UID and its binding state
 * (dra_binding.c). `--delete NS/NAME` deletes
 * a claim. Works against `kdpctl dra apiserver` and any API server.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/k8snames.h"
#include "dra_api.h"
#include "k8s/api.h"
#include "k8s/kconfig.h"
#include "kdp_dra.h"
#include "rpc.h"

typedef struct kd_claim {
    const kd_opts *o;
    kdp__loop *loop;
    kdp__api *api;
    char ns[256], name[256];
    json_t *config;   /* --config, parsed */
    json_t *consumed; /* --consumed, as {name: quantity} */
    kc_strv devices;
    json_t *slices; /* the driver's slices, when checked */
    bool binding;   /* some result has binding conditions */
    int exit;
} kd_claim;

static int fail(kd_claim *c, const char *msg, const char *hint)
{
    kc_print_error(c->o->json, "dra claim", NULL, 0, msg, hint);
    c->exit = KC_EXIT_FAIL;
    if (c->loop) {
        kdp__loop_quit(c->loop);
    }
    return KC_EXIT_FAIL;
}

static const char *hint_for(int err)
{
    return err == -EEXIST   ? "delete it first: kdpctl dra claim --delete NS/NAME"
           : err == -EACCES ? "the kubeconfig's credentials were refused: is it the API server's "
                              "kubeconfig (kdpctl dra apiserver --dir DIR writes DIR/kubeconfig)?"
           : err == -ENOENT ? "the API server does not serve resource.k8s.io/v1 resourceclaims "
                              "there, or the claim does not exist"
           : err == -EINVAL ? "the API server refused the claim: see its message"
           : err == -ECONNREFUSED ? "is the API server running (kdpctl dra apiserver)?"
                                  : NULL;
}

static void on_status(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kd_claim *c = ud;
    if (err) {
        fail(c, why, hint_for(err));
        return;
    }
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    char bind[600];
    kd_bind_state bs = kd_binding_state(obj, time(NULL), bind, sizeof(bind));
    if (c->o->json) {
        kc_json j;
        kd_json(&j, "claim");
        kc_json_str(&j, "namespace", c->ns);
        kc_json_str(&j, "name", c->name);
        kc_json_str(&j, "uid", uid);
        kc_json_str(&j, "driver", c->o->driver);
        kc_json_str(&j, "node", c->o->node);
        kc_json_str(&j, "binding_state", kd_binding_state_name(bs));
        kc_json_str(&j, "binding", bind);
        kc_json_arr(&j, "devices");
        for (size_t i = 0; i < c->devices.n; i++) {
            kc_json_str(&j, NULL, c->devices.v[i]);
        }
        kc_json_end(&j);
        kc_json_emit(&j);
    } else {
        printf("%s\n", uid ? uid : "");
        fprintf(stderr,
                "kdpctl dra claim: %s/%s allocated (%s on %s: %s; binding %s); prepare it with: "
                "prepare %s %s/%s/%s\n",
                c->ns, c->name, c->o->driver, c->o->node, c->o->devices, bind, c->o->driver, c->ns,
                c->name, uid ? uid : "");
    }
    c->exit = KC_EXIT_OK;
    kdp__loop_quit(c->loop);
}

static json_t *result(kd_claim *c, const char *req, const char *device)
{
    json_t *r = json_pack("{s:s, s:s, s:s, s:s}", "request", req, "driver", c->o->driver, "pool",
                          c->o->node, "device", device);
    if (r && c->o->share_id) {
        char id[37]; /* "new": random, as the scheduler makes share IDs */
        if (strcmp(c->o->share_id, "new") == 0) {
            kd_uuid(id);
        }
        json_object_set_new(r, "shareID",
                            json_string(strcmp(c->o->share_id, "new") == 0 ? id : c->o->share_id));
    }
    if (r && c->consumed) {
        json_object_set(r, "consumedCapacity", c->consumed);
    }
    const json_t *dev =
        c->slices ? kd_claim_find_device(c->slices, c->o->driver, c->o->node, device) : NULL;
    if (r && dev && kd_binding_copy(r, dev)) {
        c->binding = true;
    }
    return r;
}

static json_t *allocation(kd_claim *c)
{
    const char *req = c->o->request ? c->o->request : "req-0";
    json_t *results = json_array();
    for (size_t i = 0; results && i < c->devices.n; i++) {
        json_array_append_new(results, result(c, req, c->devices.v[i]));
    }
    json_t *devices = json_pack("{s:o}", "results", results);
    if (devices && c->config) {
        json_object_set_new(devices, "config",
                            json_pack("[{s:s, s:[s], s:{s:s, s:O}}]", "source", "FromClaim",
                                      "requests", req, "opaque", "driver", c->o->driver,
                                      "parameters", c->config));
    }
    json_t *st = json_pack("{s:{s:o, s:{s:[{s:[{s:s, s:s, s:[s]}]}]}}}", "allocation", "devices",
                           devices, "nodeSelector", "nodeSelectorTerms", "matchFields", "key",
                           "metadata.name", "operator", "In", "values", c->o->node);
    if (st && c->binding) { /* when PreBind's 600 s begin */
        char ts[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
        json_object_set_new(json_object_get(st, "allocation"), "allocationTimestamp",
                            json_string(ts));
    }
    return st;
}

static void on_created(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kd_claim *c = ud;
    if (err) {
        fail(c, why, hint_for(err));
        return;
    }
    json_t *o = json_deep_copy(obj);
    json_t *st = allocation(c);
    if (!o || !st) {
        json_decref(o);
        json_decref(st);
        fail(c, "out of memory", NULL);
        return;
    }
    json_object_set_new(o, "status", st);
    char path[800];
    snprintf(path, sizeof(path), "/apis/" KD_GROUP "/v1/namespaces/%s/resourceclaims/%s/status",
             c->ns, c->name);
    int r = kdp__api_call(c->api, "PUT", path, o, on_status, c, NULL);
    json_decref(o);
    if (r < 0) {
        fail(c, "cannot update the claim's status", strerror(-r));
    }
}

static void on_deleted(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    (void)obj;
    kd_claim *c = ud;
    if (err) {
        fail(c, why, hint_for(err));
        return;
    }
    if (c->o->json) {
        kc_json j;
        kd_json(&j, "claim_deleted");
        kc_json_str(&j, "namespace", c->ns);
        kc_json_str(&j, "name", c->name);
        kc_json_emit(&j);
    } else {
        printf("deleted %s/%s\n", c->ns, c->name);
    }
    c->exit = KC_EXIT_OK;
    kdp__loop_quit(c->loop);
}

static int create(kd_claim *c)
{
    char path[800];
    const char *req = c->o->request ? c->o->request : "req-0";
    json_t *o =
        json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:{s:[{s:s, s:{s:s, s:s, s:I}}]}}}", "apiVersion",
                  KD_GROUP "/v1", "kind", "ResourceClaim", "metadata", "name", c->name, "namespace",
                  c->ns, "spec", "devices", "requests", "name", req, "exactly", "deviceClassName",
                  c->o->driver, "allocationMode", "ExactCount", "count", (json_int_t)c->devices.n);
    if (!o) {
        return -ENOMEM;
    }
    if (c->consumed) {
        /* the request asks for what each share consumed */
        json_t *ex = json_object_get(
            json_array_get(
                json_object_get(json_object_get(json_object_get(o, "spec"), "devices"), "requests"),
                0),
            "exactly");
        json_object_set_new(ex, "capacity", json_pack("{s:O}", "requests", c->consumed));
    }
    snprintf(path, sizeof(path), "/apis/" KD_GROUP "/v1/namespaces/%s/resourceclaims", c->ns);
    int r = kdp__api_call(c->api, "POST", path, o, on_created, c, NULL);
    json_decref(o);
    return r;
}

/* The node's slices of the driver: each device checked before the claim is
 * made. */
static void on_listed(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kd_claim *c = ud;
    char line[600];
    if (err) {
        fail(c, why, hint_for(err));
        return;
    }
    if (kd_claim_problem(obj, c->o->driver, c->o->node, &c->devices, c->o->share_id != NULL,
                         c->consumed, line, sizeof(line))) {
        fail(c, line,
             "kubectl get resourceslices (or kdpctl dra apiserver's output) shows what the "
             "driver publishes; --no-check allocates it anyway (to try the driver's refusal)");
        return;
    }
    c->slices = json_incref(obj);
    int r = create(c);
    if (r < 0) {
        fail(c, "cannot create the claim", strerror(-r));
    }
}

static int start(kd_claim *c)
{
    char path[800];
    if (c->o->del) {
        snprintf(path, sizeof(path), "/apis/" KD_GROUP "/v1/namespaces/%s/resourceclaims/%s", c->ns,
                 c->name);
        return kdp__api_call(c->api, "DELETE", path, NULL, on_deleted, c, NULL);
    }
    if (c->o->no_check) {
        return create(c);
    }
    snprintf(path, sizeof(path),
             "/apis/" KD_GROUP "/v1/resourceslices?fieldSelector=spec.driver%%3D%s", c->o->driver);
    return kdp__api_call(c->api, "GET", path, NULL, on_listed, c, NULL);
}

/* NS/NAME, both DNS names. */
static int parse_name(kd_claim *c, const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/') ||
        (size_t)(slash - s) >= sizeof(c->ns) || strlen(slash + 1) >= sizeof(c->name)) {
        return -EINVAL;
    }
    snprintf(c->ns, sizeof(c->ns), "%.*s", (int)(slash - s), s);
    snprintf(c->name, sizeof(c->name), "%s", slash + 1);
    return strspn(c->ns, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(c->ns) &&
                   strspn(c->name, "abcdefghijklmnopqrstuvwxyz0123456789-.") == strlen(c->name)
               ? 0
               : -EINVAL;
}

/* --config: a JSON object. Returns 0 or an exit status. */
static int parse_config(kd_claim *c)
{
    json_error_t err;
    c->config = json_loads(c->o->config, 0, &err);
    if (!json_is_object(c->config)) {
        fprintf(stderr,
                "kdpctl dra claim: --config wants a JSON object (the driver's opaque "
                "parameters), e.g. '{\"mode\": \"shared\"}': %s\n",
                c->config ? "not an object" : err.text);
        return KC_EXIT_USAGE;
    }
    return 0;
}

/* --consumed NAME=QTY,...: into c->consumed. Returns 0 or an exit status. */
static int parse_consumed(kd_claim *c)
{
    kc_strv parts = {0};
    int e = kc_split_ids(c->o->consumed, &parts) < 0 || !parts.n ? KC_EXIT_USAGE : 0;
    c->consumed = json_object();
    for (size_t i = 0; !e && i < parts.n; i++) {
        char *eq = strchr(parts.v[i], '=');
        const char *why = "NAME=QUANTITY";
        if (eq) {
            *eq = '\0';
            why = kdp__k8snames_qualified_name(parts.v[i], &why) < 0 ? why
                  : kdp__k8snames_quantity(eq + 1, &why) < 0         ? why
                                                                     : NULL;
        }
        if (why) {
            fprintf(
                stderr,
                "kdpctl dra claim: --consumed \"%s\": %s (e.g. --consumed memory=8Gi,cores=2)\n",
                parts.v[i], why);
            e = KC_EXIT_USAGE;
            break;
        }
        json_object_set_new(c->consumed, parts.v[i], json_string(eq + 1));
    }
    kc_strv_free(&parts);
    return e;
}

/* --share-id and --consumed; returns 0 or an exit status. */
static int check_sharing(kd_claim *c)
{
    const kd_opts *o = c->o;
    if (o->share_id && strcmp(o->share_id, "new") != 0 &&
        kdp__k8snames_uuid(o->share_id, NULL) < 0) {
        fprintf(stderr,
                "kdpctl dra claim: --share-id \"%s\" is not a lower-case UUID (or new, "
                "for a new one per device)\n",
                o->share_id);
        return KC_EXIT_USAGE;
    }
    if (o->consumed && !o->share_id) {
        fprintf(stderr, "kdpctl dra claim: --consumed is what a share consumed: give --share-id "
                        "too (new makes one per device)\n");
        return KC_EXIT_USAGE;
    }
    return o->consumed ? parse_consumed(c) : 0;
}

/* --driver and --node: names the API takes. Returns 0 or an exit status. */
static int check_names(const kd_opts *o)
{
    const char *bad = NULL;
    if (kdp_dra_validate_driver_name(o->driver, &bad) < 0) {
        fprintf(stderr,
                "kdpctl dra claim: --driver \"%s\" is not a driver name: %s (e.g. "
                "gpu.example.com)\n",
                o->driver, bad);
        return KC_EXIT_USAGE;
    }
    if (kdp__k8snames_dns_subdomain(o->node, &bad) < 0) {
        fprintf(stderr, "kdpctl dra claim: --node \"%s\" is not a node name: %s\n", o->node, bad);
        return KC_EXIT_USAGE;
    }
    return 0;
}

/* The flags the subcommand needs; returns 0 or an exit status. */
static int check(kd_claim *c)
{
    const kd_opts *o = c->o;
    const char *what = NULL;
    if (parse_name(c, o->pos.v[0]) < 0) {
        fprintf(stderr,
                "kdpctl dra claim: \"%s\" is not NAMESPACE/NAME (lowercase DNS names)\n"
                "(kdpctl dra help claim for help)\n",
                o->pos.v[0]);
        return KC_EXIT_USAGE;
    }
    if (!o->del) {
        what = !o->driver    ? "--driver D"
               : !o->node    ? "--node N"
               : !o->devices ? "--device DEV"
                             : NULL;
    } else if (o->driver || o->devices || o->config || o->request || o->share_id || o->consumed ||
               o->no_check) {
        what = "nothing but NS/NAME and --kubeconfig with --delete: no --driver, --device,";
    }
    if (what) {
        fprintf(stderr, "kdpctl dra claim: %s is required%s\n(kdpctl dra help claim for help)\n",
                what, o->del ? " --config, --request, --share-id, --consumed or --no-check" : "");
        return KC_EXIT_USAGE;
    }
    int e = o->del ? 0 : check_names(o);
    if (e) {
        return e;
    }
    if (!o->del && (kc_split_ids(o->devices, &c->devices) < 0 || !c->devices.n)) {
        fprintf(stderr, "kdpctl dra claim: --device wants DEV[,DEV...]\n");
        return KC_EXIT_USAGE;
    }
    e = check_sharing(c);
    return e ? e : o->config ? parse_config(c) : 0;
}

int kd_cmd_claim(const kd_opts *o)
{
    kd_claim c = {.o = o, .exit = KC_EXIT_FAIL};
    int e = check(&c);
    if (e) {
        kc_strv_free(&c.devices);
        json_decref(c.config);
        json_decref(c.consumed);
        return e;
    }
    char why[600] = "";
    kdp__kconfig *kc = NULL;
    int r = kdp__kconfig_load(o->kubeconfig, &kc, why, sizeof(why));
    if (r < 0) {
        fail(&c, why,
             "give --kubeconfig DIR/kubeconfig (kdpctl dra apiserver --dir DIR writes it) or set "
             "$KUBECONFIG");
    } else if ((r = kdp__loop_new(&c.loop)) < 0 || (r = kdp__api_new(c.loop, kc, &c.api)) < 0 ||
               (r = start(&c)) < 0) {
        fail(&c, strerror(-r), NULL);
    } else {
        r = kdp__loop_run(c.loop);
        if (r < 0) {
            fail(&c, "event loop", strerror(-r));
        }
    }
    kdp__api_free(c.api);
    if (c.loop) {
        kc_loop_drain(c.loop);
    }
    kdp__loop_free(c.loop);
    kdp__kconfig_free(kc);
    kc_strv_free(&c.devices);
    json_decref(c.config);
    json_decref(c.consumed);
    json_decref(c.slices);
    return c.exit;
}
