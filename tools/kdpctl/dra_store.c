/* SPDX-License-Identifier: MIT */
/*
 * dra_store: the objects of `kdpctl dra apiserver`, one global
 * resourceVersion counter (as etcd's revision), a window of the last
 * KD_WINDOW events, field selectors and watches: from "" or "0" the current
 * objects first as ADDED, from an older resourceVersion the events since
 * (one ERROR event holding a 410 Expired Status when the window no longer
 * has them), then every event as it happens; BOOKMARKs every 10 s when
 * asked; a stream ends at timeoutSeconds (at most 30 min).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "dra_api.h"

static const struct {
    const char *resource, *kind, *api_version, *qualified;
} kinds[KD_NKINDS] = {
    {"nodes", "Node", "v1", "nodes"},
    {"resourceslices", "ResourceSlice", KD_GROUP "/" KD_VERSION, "resourceslices." KD_GROUP},
    {"resourceclaims", "ResourceClaim", KD_GROUP "/" KD_VERSION, "resourceclaims." KD_GROUP},
    {"deviceclasses", "DeviceClass", KD_GROUP "/" KD_VERSION, "deviceclasses." KD_GROUP},
};

const char *kd_kind_resource(kd_kind k)
{
    return kinds[k].resource;
}

const char *kd_kind_name(kd_kind k)
{
    return kinds[k].kind;
}

const char *kd_kind_api_version(kd_kind k)
{
    return kinds[k].api_version;
}

const char *kd_kind_qualified(kd_kind k)
{
    return kinds[k].qualified;
}

void kd_uuid(char buf[37])
{
    unsigned char b[16];
    static uint64_t counter; /* getrandom cannot fail for 16 bytes; still unique if it does */
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
        uint64_t v = ++counter ^ kdp__now_us();
        memset(b, 0, sizeof(b));
        memcpy(b, &v, sizeof(v));
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

void kd_now(char buf[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- objects ---- */

kd_obj *kd_store_find(kd_api *a, kd_kind k, const char *ns, const char *name)
{
    for (kd_obj *o = a->objs[k]; o; o = o->next) {
        if (strcmp(o->name, name) == 0 && (!ns || !o->ns || strcmp(o->ns, ns) == 0)) {
            return o;
        }
    }
    return NULL;
}

static void set_rv(json_t *o, uint64_t rv)
{
    json_t *md = json_object_get(o, "metadata");
    char s[32];
    snprintf(s, sizeof(s), "%llu", (unsigned long long)rv);
    json_object_set_new(md, "resourceVersion", json_string(s));
}

static void notify(kd_api *a, kd_kind k, const char *type, json_t *o);

static void record(kd_api *a, kd_kind k, const char *type, json_t *o)
{
    if (a->ev_n == KD_WINDOW) {
        kd_event *old = &a->ev[a->ev_head];
        a->ev_floor = old->rv;
        json_decref(old->o);
        a->ev_head = (a->ev_head + 1) % KD_WINDOW;
        a->ev_n--;
    }
    kd_event *e = &a->ev[(a->ev_head + a->ev_n) % KD_WINDOW];
    e->rv = a->rv;
    e->kind = k;
    e->type = type;
    e->o = json_incref(o);
    a->ev_n++;
    notify(a, k, type, o);
    if (k == KD_SLICE) {
        kd_print_slice(a, type, o);
    } else if (k == KD_CLAIM) {
        kd_print_claim_binding(a, type, o);
    }
}

kd_obj *kd_store_put(kd_api *a, kd_kind k, const char *ns, const char *name, json_t *o, kd_obj *obj)
{
    a->rv++;
    set_rv(o, a->rv);
    const char *type = obj ? "MODIFIED" : "ADDED";
    if (!obj) {
        obj = calloc(1, sizeof(*obj));
        if (!obj) {
            json_decref(o);
            return NULL;
        }
        obj->kind = k;
        obj->ns = ns ? strdup(ns) : NULL;
        obj->name = strdup(name);
        kd_obj **tail = &a->objs[k];
        while (*tail) {
            tail = &(*tail)->next;
        }
        *tail = obj;
        a->n_objs++;
    } else {
        json_decref(obj->o);
    }
    obj->o = o;
    obj->rv = a->rv;
    record(a, k, type, o);
    return obj;
}

json_t *kd_store_delete(kd_api *a, kd_obj *obj)
{
    for (kd_obj **pp = &a->objs[obj->kind]; *pp; pp = &(*pp)->next) {
        if (*pp == obj) {
            *pp = obj->next;
            break;
        }
    }
    a->n_objs--;
    a->rv++;
    json_t *o = json_deep_copy(obj->o);
    json_decref(obj->o);
    if (o) {
        set_rv(o, a->rv);
        record(a, obj->kind, "DELETED", o);
    }
    free(obj->ns);
    free(obj->name);
    free(obj);
    return o;
}

void kd_store_free(kd_api *a)
{
    for (int k = 0; k < KD_NKINDS; k++) {
        while (a->objs[k]) {
            kd_obj *o = a->objs[k];
            a->objs[k] = o->next;
            json_decref(o->o);
            free(o->ns);
            free(o->name);
            free(o);
        }
    }
    for (size_t i = 0; i < a->ev_n; i++) {
        json_decref(a->ev[(a->ev_head + i) % KD_WINDOW].o);
    }
    a->ev_n = 0;
}

/* ---- field selectors ---- */

static const char *const fields[KD_NKINDS][5] = {
    {"metadata.name", NULL},
    {"metadata.name", "spec.nodeName", "spec.driver", NULL},
    {"metadata.name", "metadata.namespace", NULL},
    {"metadata.name", NULL},
};

int kd_sel_parse(kd_kind k, const char *s, kd_sel *ret, char *why, size_t cap)
{
    memset(ret, 0, sizeof(*ret));
    if (!s || !*s) {
        return 0;
    }
    char *copy = strdup(s);
    if (!copy) {
        return -ENOMEM;
    }
    int r = 0;
    for (char *save = NULL, *term = strtok_r(copy, ",", &save); term && r == 0;
         term = strtok_r(NULL, ",", &save)) {
        char *op = strstr(term, "!=");
        size_t oplen = 2;
        if (!op) {
            op = strstr(term, "==");
        }
        if (!op) {
            op = strchr(term, '=');
            oplen = 1;
        }
        if (!op || ret->n == KD_SEL_TERMS) {
            snprintf(why, cap, "invalid selector: '%s'; can't understand '%s'", s, term);
            r = -EINVAL;
            break;
        }
        bool neg = op[0] == '!';
        *op = '\0';
        const char *value = op + oplen;
        bool known = false;
        for (size_t f = 0; fields[k][f]; f++) {
            known = known || strcmp(fields[k][f], term) == 0;
        }
        if (!known || strlen(term) >= sizeof(ret->t[0].field) ||
            strlen(value) >= sizeof(ret->t[0].value)) {
            snprintf(why, cap, "field label not supported for %s, Kind=%s: %s",
                     kd_kind_api_version(k), kd_kind_name(k), term);
            r = -EINVAL;
            break;
        }
        snprintf(ret->t[ret->n].field, sizeof(ret->t[0].field), "%s", term);
        snprintf(ret->t[ret->n].value, sizeof(ret->t[0].value), "%s", value);
        ret->t[ret->n].neg = neg;
        ret->n++;
    }
    free(copy);
    return r;
}

bool kd_sel_match(const kd_sel *s, const json_t *o)
{
    for (size_t i = 0; i < s->n; i++) {
        char path[32];
        snprintf(path, sizeof(path), "%s", s->t[i].field);
        char *dot = strchr(path, '.');
        *dot = '\0';
        const char *v = json_string_value(json_object_get(json_object_get(o, path), dot + 1));
        bool eq = strcmp(v ? v : "", s->t[i].value) == 0;
        if (eq == s->t[i].neg) {
            return false;
        }
    }
    return true;
}

/* ---- watches ---- */

static void watch_destroy(kd_watch *w)
{
    kdp__timer_free(w->timeout);
    free(w->ns);
    free(w);
}

static void watch_free(kd_watch *w)
{
    kd_api *a = w->a;
    for (kd_watch **pp = &a->watches; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            a->n_watches--;
            break;
        }
    }
    watch_destroy(w);
}

static void on_watch_close(kd_hreq *r, void *ud)
{
    (void)r;
    watch_free(ud);
}

static bool in_scope(const kd_watch *w, kd_kind k, const json_t *o)
{
    if (w->kind != k) {
        return false;
    }
    if (w->ns) {
        const char *ns =
            json_string_value(json_object_get(json_object_get(o, "metadata"), "namespace"));
        if (!ns || strcmp(ns, w->ns) != 0) {
            return false;
        }
    }
    return kd_sel_match(&w->sel, o);
}

/* Sends one event; false if the stream is gone or full. */
static bool send_event(kd_watch *w, const char *type, const json_t *o)
{
    json_t *e;
    if (w->table && strcmp(type, "BOOKMARK") != 0 && strcmp(type, "ERROR") != 0) {
        json_t *one = json_pack("[O]", o);
        const char *rvs =
            json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
        json_t *t =
            one ? kd_table_of(w->kind, one, rvs ? strtoull(rvs, NULL, 10) : w->a->rv, !w->columns)
                : NULL;
        json_decref(one);
        w->columns = w->columns || t;
        e = t ? json_pack("{s:s, s:o}", "type", type, "object", t) : NULL;
    } else {
        e = json_pack("{s:s, s:O}", "type", type, "object", o);
    }
    char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    if (!s) {
        return false;
    }
    size_t n = strlen(s);
    s[n] = '\n'; /* one event a line; its NUL dropped */
    int r = kd_http_write(w->r, s, n + 1);
    free(s);
    return r == 0;
}

static void notify(kd_api *a, kd_kind k, const char *type, json_t *o)
{
    for (kd_watch *w = a->watches; w; w = w->next) {
        if (in_scope(w, k, o)) {
            (void)send_event(w, type, o); /* a full stream ends: its close frees it */
        }
    }
}

static void on_watch_timeout(kdp__timer *t, void *ud)
{
    (void)t;
    kd_watch *w = ud;
    kd_http_end(w->r);
}

static void bookmark(kd_watch *w)
{
    json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "kind", kd_kind_name(w->kind), "apiVersion",
                          kd_kind_api_version(w->kind), "metadata", "resourceVersion", "");
    if (o) {
        set_rv(o, w->a->rv);
        (void)send_event(w, "BOOKMARK", o);
        json_decref(o);
    }
}

static void on_bookmark(kdp__timer *t, void *ud)
{
    kd_api *a = ud;
    for (kd_watch *w = a->watches; w; w = w->next) {
        if (w->bookmarks) {
            bookmark(w);
        }
    }
    if (a->watches) {
        kdp__timer_start(t, KD_BOOKMARK_US);
    }
}

static unsigned parse_rv(const char *s, uint64_t *ret)
{
    char *end;
    errno = 0;
    unsigned long long v = s && *s ? strtoull(s, &end, 10) : 0;
    if (s && *s && (errno || *end)) {
        return 400;
    }
    *ret = v;
    return 0;
}

/* resourceVersion and timeoutSeconds: 0 or 400 with why. */
static unsigned watch_params(kd_hreq *r, uint64_t *from, long *timeout, char *why, size_t cap)
{
    const char *rvs = kd_http_arg(r, "resourceVersion");
    if (parse_rv(rvs, from)) {
        snprintf(why, cap, "invalid resourceVersion \"%s\": a number", rvs);
        return 400;
    }
    const char *ts = kd_http_arg(r, "timeoutSeconds");
    *timeout = KD_WATCH_MAX_S;
    if (ts) {
        char *end;
        long v = strtol(ts, &end, 10);
        if (*end || v < 0) {
            snprintf(why, cap, "invalid timeoutSeconds \"%s\"", ts);
            return 400;
        }
        if (v > 0 && v < *timeout) {
            *timeout = v;
        }
    }
    return 0;
}

/* What a watch from resourceVersion `from` sees first. */
static void watch_replay(kd_watch *w, uint64_t from)
{
    kd_api *a = w->a;
    if (from == 0) {
        for (kd_obj *o = a->objs[w->kind]; o; o = o->next) {
            if (in_scope(w, w->kind, o->o)) {
                (void)send_event(w, "ADDED", o->o);
            }
        }
        return;
    }
    if (from < a->ev_floor) {
        json_t *st =
            json_pack("{s:s, s:s, s:{}, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                      "metadata", "status", "Failure", "reason", "Expired", "code", 410);
        char msg[120];
        snprintf(msg, sizeof(msg), "too old resource version: %llu (%llu)",
                 (unsigned long long)from, (unsigned long long)a->ev_floor + 1);
        json_object_set_new(st, "message", json_string(msg));
        (void)send_event(w, "ERROR", st);
        json_decref(st);
        kd_http_end(w->r);
        return;
    }
    for (size_t i = 0; i < a->ev_n; i++) {
        const kd_event *e = &a->ev[(a->ev_head + i) % KD_WINDOW];
        if (e->rv > from && in_scope(w, w->kind, e->o)) {
            (void)send_event(w, e->type, e->o);
        }
    }
}

unsigned kd_watch_start(kd_api *a, kd_hreq *r, kd_kind k, const char *ns, const kd_sel *sel,
                        char *why, size_t cap)
{
    uint64_t from = 0;
    long timeout = 0;
    unsigned code = watch_params(r, &from, &timeout, why, cap);
    if (code) {
        return code;
    }
    if (a->n_watches >= KD_MAX_WATCHES) {
        snprintf(why, cap, "too many watches (%d): close some", KD_MAX_WATCHES);
        return 429;
    }
    kd_watch *w = calloc(1, sizeof(*w));
    if (!w || (ns && !(w->ns = strdup(ns))) ||
        kdp__timer_new(a->loop, on_watch_timeout, w, &w->timeout) < 0 ||
        kd_http_stream(r, "application/json", on_watch_close, w) < 0) {
        if (w) {
            watch_destroy(w);
        }
        snprintf(why, cap, "out of memory");
        return 500;
    }
    w->a = a;
    w->r = r;
    w->kind = k;
    w->sel = *sel;
    const char *bm = kd_http_arg(r, "allowWatchBookmarks");
    w->bookmarks = bm && (strcmp(bm, "true") == 0 || strcmp(bm, "1") == 0);
    w->table = kd_wants_table(r);
    w->next = a->watches;
    a->watches = w;
    a->n_watches++;
    kdp__timer_start(w->timeout, (uint64_t)timeout * 1000 * 1000);
    if (w->bookmarks && !kdp__timer_armed(a->bookmark)) {
        kdp__timer_start(a->bookmark, KD_BOOKMARK_US);
    }
    if (a->reaper && !kdp__timer_armed(a->reaper)) {
        kdp__timer_start(a->reaper, KD_REAP_US);
    }
    watch_replay(w, from);
    return 0;
}

void kd_watches_free(kd_api *a)
{
    while (a->watches) { /* after kd_http_free, whose close callbacks free them: none */
        kd_watch *w = a->watches;
        a->watches = w->next;
        a->n_watches--;
        watch_destroy(w);
    }
}

/* The bookmark timer's callback, for dra_apiserver.c. */
void kd_bookmark_cb(kdp__timer *t, void *ud);

void kd_bookmark_cb(kdp__timer *t, void *ud)
{
    on_bookmark(t, ud);
}
