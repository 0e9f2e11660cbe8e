/* SPDX-License-Identifier: MIT */
/*
 * dra_rest: the REST verbs of `kdpctl dra apiserver` on one resource: get,
 * list (fieldSelector), watch, create (generateName; a claim's status
 * dropped), update (PUT; 409 Conflict on a stale metadata.resourceVersion;
 * a no-op writes nothing; a claim's /status changes only its status, the
 * main resource never its status), patch (JSON merge patch) and delete
 * (preconditions), with Kubernetes Status objects for every error and
 * ResourceSlices validated as the API server does (dra_check.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dra_api.h"
#include "dra_check.h"

/* ---- answers ---- */

static void reply_json_with(kd_hreq *r, unsigned code, const json_t *o, const char *header)
{
    char *s = json_dumps(o, JSON_COMPACT);
    if (!s) {
        kd_http_reply(r, 500, "text/plain", "out of memory\n", 14, NULL);
        return;
    }
    kd_http_reply(r, code, "application/json", s, strlen(s), header);
    free(s);
}

void kd_reply_json(kd_hreq *r, unsigned code, const json_t *o)
{
    reply_json_with(r, code, o, NULL);
}

void kd_status_with(kd_hreq *r, unsigned code, const char *reason, const char *message,
                    const char *header)
{
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion",
                           "v1", "metadata", "status", "Failure", "message", message, "reason",
                           reason, "code", (int)code);
    if (!st) {
        kd_http_reply(r, code, "text/plain", message, strlen(message), header);
        return;
    }
    reply_json_with(r, code, st, header);
    json_decref(st);
}

void kd_status(kd_hreq *r, unsigned code, const char *reason, const char *message)
{
    kd_status_with(r, code, reason, message, NULL);
}

static void not_found(kd_hreq *r, kd_kind k, const char *name)
{
    char msg[400];
    snprintf(msg, sizeof(msg), "%s \"%.200s\" not found", kd_kind_qualified(k), name);
    kd_status(r, 404, "NotFound", msg);
}

static void invalid(kd_hreq *r, kd_kind k, const char *name, const char *field, const char *detail)
{
    char msg[800];
    snprintf(msg, sizeof(msg), "%s.%s \"%.200s\" is invalid: %s: %s", kd_kind_name(k),
             k == KD_NODE ? "" : KD_GROUP, name ? name : "", field, detail);
    kd_status(r, 422, "Invalid", msg);
}

/* ---- helpers ---- */

static json_t *md(const json_t *o)
{
    return json_object_get(o, "metadata");
}

static const char *md_str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(md(o), key));
}

static json_t *read_body(kd_hreq *r, char *why, size_t cap, unsigned *code)
{
    size_t len;
    bool big;
    const char *body = kd_http_body(r, &len, &big);
    if (big) {
        snprintf(why, cap, "the request body is larger than %zu bytes", KD_HTTP_MAX_BODY);
        *code = 413;
        return NULL;
    }
    json_error_t err;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
    if (!json_is_object(o)) {
        snprintf(why, cap, "the body is not a JSON object: %s",
                 o ? "another JSON value" : err.text);
        json_decref(o);
        *code = 400;
        return NULL;
    }
    if (!json_is_object(md(o))) {
        json_object_set_new(o, "metadata", json_object());
    }
    return o;
}

/* The object as stored: kind, apiVersion, namespace set. */
static void stamp(json_t *o, kd_kind k, const char *ns)
{
    json_object_set_new(o, "kind", json_string(kd_kind_name(k)));
    json_object_set_new(o, "apiVersion", json_string(kd_kind_api_version(k)));
    if (ns) {
        json_object_set_new(md(o), "namespace", json_string(ns));
    }
}

/* ---- verbs ---- */

static void do_list(kd_api *a, kd_hreq *r, kd_kind k, const char *ns)
{
    char why[400];
    kd_sel sel;
    if (kd_sel_parse(k, kd_http_arg(r, "fieldSelector"), &sel, why, sizeof(why)) < 0) {
        kd_status(r, 400, "BadRequest", why);
        return;
    }
    const char *ls = kd_http_arg(r, "labelSelector");
    if (ls && *ls) {
        kd_status(r, 400, "BadRequest",
                  "labelSelector is not supported by kdpctl dra apiserver: use fieldSelector");
        return;
    }
    const char *w = kd_http_arg(r, "watch");
    if (w && (strcmp(w, "true") == 0 || strcmp(w, "1") == 0 || strcmp(w, "True") == 0)) {
        unsigned code = kd_watch_start(a, r, k, ns, &sel, why, sizeof(why));
        if (code) {
            kd_status(r, code, code == 429 ? "TooManyRequests" : "BadRequest", why);
        }
        return;
    }
    char kind[64];
    char rv[32];
    snprintf(kind, sizeof(kind), "%sList", kd_kind_name(k));
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)a->rv);
    json_t *items = json_array();
    for (kd_obj *o = a->objs[k]; o && items; o = o->next) {
        if ((!ns || (o->ns && strcmp(o->ns, ns) == 0)) && kd_sel_match(&sel, o->o)) {
            json_array_append(items, o->o);
        }
    }
    if (items && kd_wants_table(r)) {
        kd_reply_table(r, k, items, a->rv);
        json_decref(items);
        return;
    }
    json_t *list =
        json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", kind, "apiVersion", kd_kind_api_version(k),
                  "metadata", "resourceVersion", rv, "items", items);
    if (!list) {
        kd_status(r, 500, "InternalError", "out of memory");
        return;
    }
    kd_reply_json(r, 200, list);
    json_decref(list);
}

static void gen_name(const char *prefix, char *out, size_t cap)
{
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    unsigned char b[5];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        memset(b, 7, sizeof(b));
    }
    char suffix[6];
    for (size_t i = 0; i < 5; i++) {
        suffix[i] = alphabet[b[i] % (sizeof(alphabet) - 1)];
    }
    suffix[5] = '\0';
    snprintf(out, cap, "%.247s%s", prefix, suffix);
}

static bool check_type(kd_hreq *r, kd_kind k, const json_t *o)
{
    const char *kind = json_string_value(json_object_get(o, "kind"));
    const char *av = json_string_value(json_object_get(o, "apiVersion"));
    if ((kind && strcmp(kind, kd_kind_name(k)) != 0) ||
        (av && strcmp(av, kd_kind_api_version(k)) != 0)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "the body is a %.60s %.60s, not a %s %s", av ? av : "",
                 kind ? kind : "", kd_kind_api_version(k), kd_kind_name(k));
        kd_status(r, 400, "BadRequest", msg);
        return false;
    }
    return true;
}

static bool check_kind(kd_hreq *r, kd_kind k, const char *name, const json_t *o)
{
    if (k == KD_NODE) {
        return true;
    }
    char field[128];
    const char *detail;
    const char *f = k == KD_SLICE   ? kd_check_slice(o, field, sizeof(field), &detail)
                    : k == KD_CLASS ? kd_check_class(o, field, sizeof(field), &detail)
                                    : kd_check_claim_status(o, field, sizeof(field), &detail);
    if (f) {
        invalid(r, k, name, f, detail);
        return false;
    }
    return true;
}

static void do_create(kd_api *a, kd_hreq *r, kd_kind k, const char *ns)
{
    char why[400];
    unsigned code;
    json_t *o = read_body(r, why, sizeof(why), &code);
    if (!o) {
        kd_status(r, code, code == 413 ? "RequestEntityTooLarge" : "BadRequest", why);
        return;
    }
    const char *name = md_str(o, "name");
    const char *gname = md_str(o, "generateName");
    const char *bns = md_str(o, "namespace");
    char nbuf[256];
    if (!check_type(r, k, o)) {
        json_decref(o);
        return;
    }
    if (ns && bns && *bns && strcmp(bns, ns) != 0) {
        kd_status(r, 400, "BadRequest",
                  "the namespace of the provided object does not match the namespace sent on "
                  "the request");
        json_decref(o);
        return;
    }
    if ((!name || !*name) && gname && *gname) {
        gen_name(gname, nbuf, sizeof(nbuf));
        name = nbuf;
    }
    if (!name || !*name || !kd_dns_subdomain(name)) {
        invalid(r, k, name, "metadata.name",
                name && *name ? "Invalid value: a lowercase RFC 1123 subdomain"
                              : "Required value: name or generateName is required");
        json_decref(o);
        return;
    }
    char keep[256];
    snprintf(keep, sizeof(keep), "%s", name); /* o's strings change below */
    name = keep;
    if (kd_store_find(a, k, ns, name)) {
        char msg[400];
        snprintf(msg, sizeof(msg), "%s \"%s\" already exists", kd_kind_qualified(k), name);
        kd_status(r, 409, "AlreadyExists", msg);
        json_decref(o);
        return;
    }
    if (k != KD_CLAIM && !check_kind(r, k, name, o)) { /* a claim's status is dropped below */
        json_decref(o);
        return;
    }
    if (a->n_objs >= KD_MAX_OBJECTS) {
        kd_status(r, 429, "TooManyRequests", "too many objects stored: delete some");
        json_decref(o);
        return;
    }
    char uid[37];
    char now[32];
    kd_uuid(uid);
    kd_now(now);
    json_t *m = md(o);
    json_object_set_new(m, "name", json_string(name));
    json_object_set_new(m, "uid", json_string(uid));
    json_object_set_new(m, "creationTimestamp", json_string(now));
    json_object_del(m, "resourceVersion");
    if (k != KD_NODE) {
        json_object_set_new(m, "generation", json_integer(1));
    }
    if (k == KD_CLAIM) {
        json_object_del(o, "status");
    }
    stamp(o, k, ns);
    kd_obj *obj = kd_store_put(a, k, ns, name, o, NULL);
    if (!obj) {
        kd_status(r, 500, "InternalError", "out of memory");
        return;
    }
    kd_reply_json(r, 201, obj->o);
}

/* Deep-merges patch into target (RFC 7386), without recursion: nested
 * objects wait on a bounded stack (deeper ones are set whole). */
#define MERGE_DEPTH 64
static void merge_patch(json_t *target, const json_t *patch)
{
    json_t *stack[MERGE_DEPTH][2];
    size_t n = 0;
    stack[n][0] = target;
    stack[n][1] = (json_t *)patch;
    n++;
    while (n > 0) {
        n--;
        json_t *t = stack[n][0];
        json_t *p = stack[n][1];
        const char *key;
        json_t *v;
        json_object_foreach(p, key, v)
        {
            json_t *tv = json_object_get(t, key);
            if (json_is_null(v)) {
                json_object_del(t, key);
            } else if (json_is_object(v) && json_is_object(tv) && n < MERGE_DEPTH) {
                stack[n][0] = tv;
                stack[n][1] = v;
                n++;
            } else {
                json_object_set(t, key, v);
            }
        }
    }
}

static bool same_without_rv(const json_t *a, const json_t *b)
{
    json_t *x = json_deep_copy(a);
    json_t *y = json_deep_copy(b);
    json_object_del(md(x), "resourceVersion");
    json_object_del(md(y), "resourceVersion");
    bool eq = x && y && json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return eq;
}

static void conflict(kd_hreq *r, kd_kind k, const char *name)
{
    char msg[500];
    snprintf(msg, sizeof(msg),
             "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please "
             "apply your changes to the latest version and try again",
             kd_kind_qualified(k), name);
    kd_status(r, 409, "Conflict", msg);
}

/* status of from into to, or none. */
static void copy_status(json_t *to, const json_t *from)
{
    json_t *st = json_object_get(from, "status");
    if (st) {
        json_object_set(to, "status", st);
    } else {
        json_object_del(to, "status");
    }
}

/* obj's next version: body merged (patch), body's status only (sub), or
 * body with obj's status (a claim's main resource). NULL: out of memory. */
static json_t *combine(const kd_obj *obj, const json_t *body, const char *sub, bool patch)
{
    json_t *n = json_deep_copy(patch || sub ? obj->o : body);
    if (!n) {
        return NULL;
    }
    if (patch) {
        merge_patch(n, body);
    } else if (sub) {
        copy_status(n, body);
    } else if (obj->kind == KD_CLAIM) {
        copy_status(n, obj->o);
    }
    return n;
}

/* The new version of obj from body (PUT) or obj + body (PATCH). */
static json_t *next_version(kd_hreq *r, kd_obj *obj, const char *sub, bool patch)
{
    char why[400];
    unsigned code;
    json_t *body = read_body(r, why, sizeof(why), &code);
    if (!body) {
        kd_status(r, code, code == 413 ? "RequestEntityTooLarge" : "BadRequest", why);
        return NULL;
    }
    if (!check_type(r, obj->kind, body)) {
        json_decref(body);
        return NULL;
    }
    const char *bname = md_str(body, "name");
    if (!patch && (!bname || strcmp(bname, obj->name) != 0)) {
        kd_status(r, 400, "BadRequest",
                  "the name of the object does not match the name on the URL");
        json_decref(body);
        return NULL;
    }
    const char *rv = md_str(body, "resourceVersion");
    if (rv && *rv && strtoull(rv, NULL, 10) != obj->rv) {
        conflict(r, obj->kind, obj->name);
        json_decref(body);
        return NULL;
    }
    json_t *n = combine(obj, body, sub, patch);
    json_decref(body);
    if (!n || !json_is_object(md(n))) {
        json_decref(n);
        kd_status(r, 400, "BadRequest", "the result has no metadata object");
        return NULL;
    }
    /* what the server owns stays */
    json_t *m = md(n);
    static const char *const keep[] = {"uid", "creationTimestamp", "generation", "name"};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        json_t *v = json_object_get(md(obj->o), keep[i]);
        if (v) {
            json_object_set(m, keep[i], v);
        }
    }
    stamp(n, obj->kind, obj->ns);
    return n;
}

static void do_update(kd_api *a, kd_hreq *r, kd_obj *obj, const char *sub, bool patch)
{
    json_t *n = next_version(r, obj, sub, patch);
    if (!n) {
        return;
    }
    if (obj->kind == KD_SLICE) {
        const char *f = kd_slice_immutable(obj->o, n);
        if (f) {
            invalid(r, obj->kind, obj->name, f, "Invalid value: field is immutable");
            json_decref(n);
            return;
        }
        if (!check_kind(r, obj->kind, obj->name, n)) {
            json_decref(n);
            return;
        }
    }
    if ((obj->kind == KD_CLAIM || obj->kind == KD_CLASS) &&
        !check_kind(r, obj->kind, obj->name, n)) {
        json_decref(n);
        return;
    }
    const json_t *os = json_object_get(obj->o, "spec");
    const json_t *ns = json_object_get(n, "spec");
    bool spec_changed = !(os == ns || (os && ns && json_equal(os, ns)));
    if (obj->kind == KD_CLAIM && spec_changed) {
        invalid(r, obj->kind, obj->name, "spec", "Invalid value: field is immutable");
        json_decref(n);
        return;
    }
    if (spec_changed && obj->kind == KD_SLICE) {
        json_int_t g = json_integer_value(json_object_get(md(obj->o), "generation"));
        json_object_set_new(md(n), "generation", json_integer(g + 1));
    }
    if (same_without_rv(obj->o, n)) {
        json_decref(n); /* a no-op: nothing written */
        kd_reply_json(r, 200, obj->o);
        return;
    }
    obj = kd_store_put(a, obj->kind, obj->ns, obj->name, n, obj);
    kd_reply_json(r, 200, obj->o);
}

static void do_delete(kd_api *a, kd_hreq *r, kd_obj *obj)
{
    size_t len;
    bool big;
    const char *body = kd_http_body(r, &len, &big);
    json_t *opts = len ? json_loadb(body, len, 0, NULL) : NULL;
    json_t *pre = json_object_get(opts, "preconditions");
    const char *uid = json_string_value(json_object_get(pre, "uid"));
    const char *rv = json_string_value(json_object_get(pre, "resourceVersion"));
    if (len && !json_is_object(opts)) {
        kd_status(r, 400, "BadRequest", "the body is not a DeleteOptions JSON object");
    } else if (uid && strcmp(uid, md_str(obj->o, "uid")) != 0) {
        char msg[500];
        snprintf(msg, sizeof(msg),
                 "Precondition failed: UID in precondition: %.64s, UID in object meta: %s", uid,
                 md_str(obj->o, "uid"));
        kd_status(r, 409, "Conflict", msg);
    } else if (rv && strtoull(rv, NULL, 10) != obj->rv) {
        conflict(r, obj->kind, obj->name);
    } else {
        json_t *gone = kd_store_delete(a, obj);
        if (gone) {
            kd_reply_json(r, 200, gone);
            json_decref(gone);
        } else {
            kd_status(r, 500, "InternalError", "out of memory");
        }
    }
    json_decref(opts);
}

void kd_rest(kd_api *a, kd_hreq *r, kd_kind k, const char *ns, const char *name, const char *sub)
{
    const char *m = kd_http_method(r);
    bool get = strcmp(m, "GET") == 0;
    if (!name) {
        if (get) {
            do_list(a, r, k, ns);
        } else if (strcmp(m, "POST") == 0 && k != KD_NODE) {
            do_create(a, r, k, ns);
        } else {
            char msg[200];
            snprintf(msg, sizeof(msg), "%s is not allowed on the %s collection here", m,
                     kd_kind_resource(k));
            kd_status(r, 405, "MethodNotAllowed", msg);
        }
        return;
    }
    kd_obj *obj = kd_store_find(a, k, ns, name);
    if (!obj) {
        not_found(r, k, name);
        return;
    }
    bool put = strcmp(m, "PUT") == 0;
    bool patch = strcmp(m, "PATCH") == 0;
    const char *ct = kd_http_header(r, "Content-Type");
    if (get && kd_wants_table(r)) {
        json_t *one = json_pack("[O]", obj->o);
        kd_reply_table(r, k, one, obj->rv);
        json_decref(one);
    } else if (get) {
        kd_reply_json(r, 200, obj->o);
    } else if (patch && ct && strncmp(ct, "application/json-patch+json", 27) == 0) {
        kd_status(r, 415, "UnsupportedMediaType",
                  "json-patch is not supported here: use a merge patch "
                  "(application/merge-patch+json)");
    } else if (patch && ct && strncmp(ct, "application/apply-patch", 23) == 0) {
        kd_status(r, 415, "UnsupportedMediaType", "server-side apply is not supported here");
    } else if ((put || patch) && k != KD_NODE) {
        do_update(a, r, obj, sub, patch);
    } else if (strcmp(m, "DELETE") == 0 && k != KD_NODE && !sub) {
        do_delete(a, r, obj);
    } else {
        char msg[200];
        snprintf(msg, sizeof(msg), "%s is not allowed on %s here", m, kd_kind_resource(k));
        kd_status(r, 405, "MethodNotAllowed", msg);
    }
}
