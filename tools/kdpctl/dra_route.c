/* SPDX-License-Identifier: MIT */
/*
 * dra_route: the requests of `kdpctl dra apiserver`: bearer-token
 * authentication, routing, discovery (/version, /api, /api/v1, /apis,
 * /apis/resource.k8s.io, /apis/resource.k8s.io/v1, and the aggregated
 * form kubectl asks /api and /apis for first) and the request log (every
 * slice is printed as it changes by dra_slice_out.c). No I/O of its own:
 * the HTTP side is dra_http.c (or the fuzz target's stand-in).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra_api.h"

/* ---- output ---- */

static void say(const char *text, const char *extra)
{
    kd_say_as("dra-apiserver", text, extra);
}

static void log_request(kd_api *a, kd_hreq *r)
{
    unsigned code = kd_http_code(r);
    const char *m = kd_http_method(r);
    if (code >= 400) {
        a->errors++;
    }
    if (a->o->json) {
        kc_json j;
        kd_json(&j, "request");
        kc_json_str(&j, "method", m);
        kc_json_str(&j, "path", kd_http_path(r));
        kc_json_uint(&j, "code", code);
        kc_json_emit(&j);
    } else if (code >= 400 || strcmp(m, "GET") != 0) {
        char text[600];
        snprintf(text, sizeof(text), "%s %.400s: %u", m, kd_http_path(r), code);
        say(text, NULL);
    }
}

/* ---- discovery ---- */

static void reply_pack(kd_hreq *r, json_t *o)
{
    if (!o) {
        kd_status(r, 500, "InternalError", "out of memory");
        return;
    }
    kd_reply_json(r, 200, o);
    json_decref(o);
}

static json_t *verbs(bool write)
{
    return write ? json_pack("[sssssss]", "create", "delete", "get", "list", "patch", "update",
                             "watch")
                 : json_pack("[sss]", "get", "list", "watch");
}

/* The aggregated discovery kubectl 1.30+ asks /api and /apis for first
 * (KEP-3352): one APIGroupDiscoveryList (apidiscovery.k8s.io/v2) with every
 * group's versions and resources. */
#define AGGREGATED_CT "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

static bool wants_aggregated(kd_hreq *r)
{
    const char *accept = kd_http_header(r, "Accept");
    return accept && strstr(accept, "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList");
}

static json_t *agg_kind(bool core, const char *kind)
{
    /* core: group "", version v1; resource.k8s.io: its version (v1 too) */
    return json_pack("{s:s, s:s, s:s}", "group", core ? "" : KD_GROUP, "version", KD_VERSION,
                     "kind", kind);
}

static json_t *agg_resource(const char *res, const char *singular, const char *kind,
                            bool namespaced, json_t *verb_list)
{
    bool core = strcmp(kind, "Node") == 0;
    return json_pack("{s:s, s:o, s:s, s:s, s:o}", "resource", res, "responseKind",
                     agg_kind(core, kind), "scope", namespaced ? "Namespaced" : "Cluster",
                     "singularResource", singular, "verbs", verb_list);
}

static json_t *agg_group(const char *name, const char *version, json_t *resources)
{
    return json_pack("{s:{s:s, s:n}, s:[{s:s, s:o, s:s}]}", "metadata", "name", name,
                     "creationTimestamp", "versions", "version", version, "resources", resources,
                     "freshness", "Current");
}

static void aggregated(kd_hreq *r, bool core)
{
    json_t *group;
    if (core) {
        json_t *nodes = agg_resource("nodes", "node", "Node", false, verbs(false));
        json_object_set_new(nodes, "shortNames", json_pack("[s]", "no"));
        group = agg_group("", "v1", json_pack("[o]", nodes));
    } else {
        json_t *claims =
            agg_resource("resourceclaims", "resourceclaim", "ResourceClaim", true, verbs(true));
        json_object_set_new(claims, "subresources",
                            json_pack("[{s:s, s:{s:s, s:s, s:s}, s:[sss]}]", "subresource",
                                      "status", "responseKind", "group", "", "version", "", "kind",
                                      "ResourceClaim", "verbs", "get", "patch", "update"));
        group = agg_group(KD_GROUP, KD_VERSION,
                          json_pack("[ooo]",
                                    agg_resource("resourceslices", "resourceslice", "ResourceSlice",
                                                 false, verbs(true)),
                                    claims,
                                    agg_resource("deviceclasses", "deviceclass", "DeviceClass",
                                                 false, verbs(true))));
    }
    json_t *list = json_pack("{s:s, s:s, s:{}, s:[o]}", "kind", "APIGroupDiscoveryList",
                             "apiVersion", "apidiscovery.k8s.io/v2", "metadata", "items", group);
    char *body = list ? json_dumps(list, JSON_COMPACT) : NULL;
    json_decref(list);
    if (!body) {
        kd_status(r, 500, "InternalError", "out of memory");
        return;
    }
    kd_http_reply(r, 200, AGGREGATED_CT, body, strlen(body), NULL);
    free(body);
}

static void discovery(kd_api *a, kd_hreq *r, char **seg, size_t n)
{
    if (n == 1 && wants_aggregated(r)) {
        aggregated(r, strcmp(seg[0], "api") == 0);
    } else if (n == 1 && strcmp(seg[0], "api") == 0) {
        char addr[100];
        snprintf(addr, sizeof(addr), "%s", a->server + strlen("https://"));
        reply_pack(r, json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "kind", "APIVersions", "versions",
                                "v1", "serverAddressByClientCIDRs", "clientCIDR", "0.0.0.0/0",
                                "serverAddress", addr));
    } else if (n == 2 && strcmp(seg[0], "api") == 0) {
        reply_pack(r, json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:b, s:s, s:o, s:[s]}]}", "kind",
                                "APIResourceList", "apiVersion", "v1", "groupVersion", "v1",
                                "resources", "name", "nodes", "singularName", "node", "namespaced",
                                0, "kind", "Node", "verbs", verbs(false), "shortNames", "no"));
    } else if (n == 1) {
        reply_pack(r, json_pack("{s:s, s:s, s:[{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}]}", "kind",
                                "APIGroupList", "apiVersion", "v1", "groups", "name", KD_GROUP,
                                "versions", "groupVersion", KD_GROUP "/" KD_VERSION, "version",
                                KD_VERSION, "preferredVersion", "groupVersion",
                                KD_GROUP "/" KD_VERSION, "version", KD_VERSION));
    } else if (n == 2) {
        reply_pack(r, json_pack("{s:s, s:s, s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "kind", "APIGroup",
                                "apiVersion", "v1", "name", KD_GROUP, "versions", "groupVersion",
                                KD_GROUP "/" KD_VERSION, "version", KD_VERSION, "preferredVersion",
                                "groupVersion", KD_GROUP "/" KD_VERSION, "version", KD_VERSION));
    } else {
        reply_pack(r, json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:b, s:s, s:o}, {s:s, s:s, s:b, "
                                "s:s, s:o}, {s:s, s:s, s:b, s:s, s:[sss]}, {s:s, s:s, s:b, s:s, "
                                "s:o}]}",
                                "kind", "APIResourceList", "apiVersion", "v1", "groupVersion",
                                KD_GROUP "/" KD_VERSION, "resources", "name", "resourceslices",
                                "singularName", "resourceslice", "namespaced", 0, "kind",
                                "ResourceSlice", "verbs", verbs(true), "name", "resourceclaims",
                                "singularName", "resourceclaim", "namespaced", 1, "kind",
                                "ResourceClaim", "verbs", verbs(true), "name",
                                "resourceclaims/status", "singularName", "", "namespaced", 1,
                                "kind", "ResourceClaim", "verbs", "get", "patch", "update", "name",
                                "deviceclasses", "singularName", "deviceclass", "namespaced", 0,
                                "kind", "DeviceClass", "verbs", verbs(true)));
    }
}

/* ---- routing ---- */

static bool authorized(kd_api *a, kd_hreq *r)
{
    const char *h = kd_http_header(r, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) {
        return false;
    }
    const char *t = h + 7;
    size_t n = strlen(a->creds.token);
    if (strlen(t) != n) {
        return false;
    }
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++) {
        diff |= (unsigned char)(t[i] ^ a->creds.token[i]);
    }
    return diff == 0;
}

static void unknown(kd_hreq *r)
{
    kd_status(r, 404, "NotFound", "the server could not find the requested resource");
}

/* Whether seg[0..n) is a resource path of resource.k8s.io/v1 (seg[0..2]
 * checked): fills what kd_rest needs. */
static bool group_path(char **seg, size_t n, kd_kind *k, const char **ns, const char **name,
                       const char **sub)
{
    *ns = *name = *sub = NULL;
    if (n >= 4 && n <= 5 && strcmp(seg[3], "resourceslices") == 0) {
        *k = KD_SLICE;
        *name = n == 5 ? seg[4] : NULL;
        return true;
    }
    if (n >= 4 && n <= 5 && strcmp(seg[3], "deviceclasses") == 0) {
        *k = KD_CLASS;
        *name = n == 5 ? seg[4] : NULL;
        return true;
    }
    if (n == 4 && strcmp(seg[3], "resourceclaims") == 0) {
        *k = KD_CLAIM;
        return true;
    }
    if (n >= 6 && n <= 8 && strcmp(seg[3], "namespaces") == 0 &&
        strcmp(seg[5], "resourceclaims") == 0 && (n < 8 || strcmp(seg[7], "status") == 0)) {
        *k = KD_CLAIM;
        *ns = seg[4];
        *name = n >= 7 ? seg[6] : NULL;
        *sub = n == 8 ? "status" : NULL;
        return true;
    }
    return false;
}

static bool is(char **seg, size_t n, size_t i, const char *s)
{
    return i < n && strcmp(seg[i], s) == 0;
}

static void route(kd_api *a, kd_hreq *r, char **seg, size_t n)
{
    if (n == 1 && is(seg, n, 0, "version")) {
        reply_pack(r, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "major", "1", "minor", "34",
                                "gitVersion", "v1.34.0-kdpctl", "platform", "linux/amd64",
                                "compiler", "gc", "goVersion", "go1.24"));
        return;
    }
    if (n == 1 && (is(seg, n, 0, "healthz") || is(seg, n, 0, "livez") || is(seg, n, 0, "readyz"))) {
        kd_http_reply(r, 200, "text/plain", "ok", 2, NULL);
        return;
    }
    if (!authorized(a, r)) {
        kd_status(r, 401, "Unauthorized", "Unauthorized");
        return;
    }
    bool api = is(seg, n, 0, "api") && (n == 1 || is(seg, n, 1, "v1"));
    bool group = is(seg, n, 0, "apis") && (n == 1 || is(seg, n, 1, KD_GROUP)) &&
                 (n < 3 || is(seg, n, 2, KD_VERSION));
    kd_kind k = KD_NODE;
    const char *ns = NULL;
    const char *name = NULL;
    const char *sub = NULL;
    if ((api && n <= 2) || (group && n <= 3)) {
        discovery(a, r, seg, n);
    } else if (api && n <= 4 && is(seg, n, 2, "nodes")) {
        kd_rest(a, r, KD_NODE, NULL, n == 4 ? seg[3] : NULL, NULL);
    } else if (group && group_path(seg, n, &k, &ns, &name, &sub)) {
        kd_rest(a, r, k, ns, name, sub);
    } else {
        unknown(r);
    }
}

void kd_api_request(kd_hreq *r, void *ud)
{
    kd_api *a = ud;
    a->requests++;
    char path[1024];
    const char *p = kd_http_path(r);
    char *seg[9];
    size_t n = 0;
    if (strlen(p) >= sizeof(path)) {
        kd_status(r, 414, "RequestURITooLong", "the path is too long");
        log_request(a, r);
        return;
    }
    snprintf(path, sizeof(path), "%s", p);
    bool too_many = false;
    for (char *save = NULL, *s = strtok_r(path, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (n == sizeof(seg) / sizeof(seg[0])) {
            too_many = true;
            break;
        }
        seg[n++] = s;
    }
    if (a->intercept && a->intercept(a, r)) {
        /* answered as a fault armed */
    } else if (too_many || n == 0) {
        unknown(r);
    } else {
        route(a, r, seg, n);
    }
    log_request(a, r);
}
