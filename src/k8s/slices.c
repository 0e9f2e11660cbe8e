/* SPDX-License-Identifier: MIT */
/* slices: the node's ResourceSlices (see slices.h). */
#include "k8s/slices.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/k8snames.h"
#include "base/log.h"

#define GROUP "resource.k8s.io"

/* --- building --- */

size_t kdp__slices_count(size_t n)
{
    return n == 0 ? 1 : (n + KDP__SLICES_MAX_DEVICES - 1) / KDP__SLICES_MAX_DEVICES;
}

void kdp__slices_generate_name(const char *node, const char *driver, char *out, size_t len)
{
    /* 63 (a name) - 5 (the random suffix the API server appends) */
    size_t max = len - 1 < 58 ? len - 1 : 58;
    size_t n = 0;
    for (const char *p = node; *p && n < max - 1; p++) {
        out[n++] = (char)(*p == '.' ? '-' : *p);
    }
    if (n < max - 1) {
        out[n++] = '-';
    }
    for (const char *p = driver; *p && n < max - 1; p++) {
        out[n++] = (char)(*p == '.' ? '-' : *p);
    }
    out[n++] = '-';
    out[n] = '\0';
}

static json_t *attr_value(const kdp_dra_attr *a, const char **why)
{
    switch (a->type) {
    case KDP_DRA_ATTR_INT:
        return json_pack("{s:I}", "int", (json_int_t)a->int_value);
    case KDP_DRA_ATTR_BOOL:
        return json_pack("{s:b}", "bool", a->bool_value);
    case KDP_DRA_ATTR_STRING:
        if (!a->string_value || strlen(a->string_value) > KDP__K8S_ATTR_STRING_MAX) {
            *why = "a string attribute needs a value of at most 64 characters";
            return NULL;
        }
        return json_pack("{s:s}", "string", a->string_value);
    case KDP_DRA_ATTR_VERSION:
        if (kdp__k8snames_semver(a->string_value, why) < 0) {
            return NULL;
        }
        return json_pack("{s:s}", "version", a->string_value);
    default:
        *why = "has an unknown type";
        return NULL;
    }
}

/* The device's attributes into attrs, bad ones left out (logged); *fields
 * counts them. Returns 0 or -ENOMEM. */
static int add_attrs(const kdp__slice_dev *d, json_t *attrs, size_t *fields)
{
    for (size_t i = 0; i < d->n_attrs; i++) {
        const kdp_dra_attr *a = &d->attrs[i];
        const char *w = NULL;
        json_t *v = NULL;
        if (kdp__k8snames_qualified_name(a->name, &w) == 0 && json_object_get(attrs, a->name)) {
            w = "is there twice";
        }
        if (!w && *fields >= KDP__SLICES_MAX_FIELDS) {
            w = "is past the 32 attributes and capacities a device may have";
        }
        if (!w) {
            v = attr_value(a, &w);
        }
        if (w) {
            log_warn("k8s: device %s: attribute \"%s\" %s: left out", d->name,
                     a->name ? a->name : "", w);
            continue;
        }
        if (!v || json_object_set_new(attrs, a->name, v) < 0) {
            return -ENOMEM;
        }
        (*fields)++;
    }
    return 0;
}

/* The same for its capacities. */
static int add_caps(const kdp__slice_dev *d, json_t *caps, size_t *fields)
{
    for (size_t i = 0; i < d->n_caps; i++) {
        const char *name = d->cap_names[i];
        const char *value = d->cap_values[i];
        const char *w = NULL;
        if (kdp__k8snames_qualified_name(name, &w) == 0 && json_object_get(caps, name)) {
            w = "is there twice";
        }
        if (!w && kdp__k8snames_quantity(value, &w) < 0) {
            log_warn("k8s: device %s: capacity \"%s\" value \"%s\" %s: left out", d->name, name,
                     value ? value : "", w);
            continue;
        }
        if (!w && *fields >= KDP__SLICES_MAX_FIELDS) {
            w = "is past the 32 attributes and capacities a device may have";
        }
        if (w) {
            log_warn("k8s: device %s: capacity \"%s\" %s: left out", d->name, name ? name : "", w);
            continue;
        }
        if (json_object_set_new(caps, name, json_pack("{s:s}", "value", value)) < 0) {
            return -ENOMEM;
        }
        (*fields)++;
    }
    return 0;
}

json_t *kdp__slices_device(const kdp__slice_dev *d, char *why, size_t why_len)
{
    const char *w = NULL;
    if (why && why_len) {
        why[0] = '\0';
    }
    if (kdp__k8snames_dns_label(d->name, &w) < 0) {
        snprintf(why, why_len, "device name \"%s\" %s", d->name ? d->name : "", w);
        return NULL;
    }
    json_t *attrs = json_object();
    json_t *caps = json_object();
    json_t *dev = json_object();
    size_t fields = 0;
    bool bad = !attrs || !caps || !dev || add_attrs(d, attrs, &fields) < 0 ||
               add_caps(d, caps, &fields) < 0 ||
               json_object_set_new(dev, "name", json_string(d->name)) < 0 ||
               (json_object_size(attrs) && json_object_set(dev, "attributes", attrs) < 0) ||
               (json_object_size(caps) && json_object_set(dev, "capacity", caps) < 0);
    json_decref(attrs);
    json_decref(caps);
    if (bad) {
        json_decref(dev);
        return NULL;
    }
    return dev;
}

json_t *kdp__slices_device_shape(const char *version, json_t *dev)
{
    if (strcmp(version, "v1beta1") != 0) {
        return json_incref(dev);
    }
    json_t *basic = json_object();
    json_t *out = json_pack("{s:O}", "name", json_object_get(dev, "name"));
    json_t *a = json_object_get(dev, "attributes");
    json_t *c = json_object_get(dev, "capacity");
    if (!basic || !out || (a && json_object_set(basic, "attributes", a) < 0) ||
        (c && json_object_set(basic, "capacity", c) < 0) ||
        json_object_set(out, "basic", basic) < 0) {
        json_decref(out);
        out = NULL;
    }
    json_decref(basic);
    return out;
}

json_t *kdp__slices_object(const char *version, const char *driver, const char *node,
                           const char *node_uid, uint64_t generation, size_t count,
                           json_t *const *devs, size_t n, const char *name,
                           const char *resource_version)
{
    char api_version[64];
    snprintf(api_version, sizeof(api_version), GROUP "/%s", version);
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        if (json_array_append_new(list, kdp__slices_device_shape(version, devs[i])) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    if (!list) {
        return NULL;
    }
    json_t *meta = json_pack("{s:[{s:s,s:s,s:s,s:s,s:b}]}", "ownerReferences", "apiVersion", "v1",
                             "kind", "Node", "name", node, "uid", node_uid, "controller", 1);
    char gen_name[64];
    kdp__slices_generate_name(node, driver, gen_name, sizeof(gen_name));
    if (meta && name) {
        json_object_set_new(meta, "name", json_string(name));
        if (resource_version) {
            json_object_set_new(meta, "resourceVersion", json_string(resource_version));
        }
    } else if (meta) {
        json_object_set_new(meta, "generateName", json_string(gen_name));
    }
    json_t *obj =
        json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:{s:s,s:I,s:I},s:o}}", "apiVersion", api_version,
                  "kind", "ResourceSlice", "metadata", meta, "spec", "driver", driver, "nodeName",
                  node, "pool", "name", node, "generation", (json_int_t)generation,
                  "resourceSliceCount", (json_int_t)count, "devices", list);
    return obj; /* json_pack's "o" steals meta and list, even on failure */
}

/* --- the publisher --- */

struct have {
    char *name;
    char *rv;
    uint64_t gen;
    json_t *obj; /* as the API server has it */
};

struct kdp__slices {
    kdp__api *a;
    kdp__loop *loop;
    char driver[KDP__K8S_DRIVER_NAME_MAX + 1];
    char node[KDP__K8S_DNS_SUBDOMAIN_MAX + 1];
    char node_uid[128];
    char version[16];
    unsigned resync_ms;
    kdp__slices_status_cb status_cb;
    void *ud;

    json_t **devs; /* desired, v1 shape, sorted by name */
    size_t ndevs;

    struct have *have; /* the pool's slices as last seen (list order, then ours) */
    size_t nhave;
    uint64_t round_gen; /* > 0 while a publish round writes */
    char watch_rv[64];
    /* watch events not recognized while a write was in flight: checked
     * again once it ended (our own writes' events often come first) */
    struct suspect {
        char name[KDP__K8S_DNS_SUBDOMAIN_MAX + 1];
        char rv[64];
        bool deleted;
    } suspects[16];
    size_t nsuspects;
    bool started; /* kdp__slices_set was called: publish */

    kdp__api_req *req;   /* the pipeline's call in flight */
    kdp__api_req *watch; /* the watch */
    uint64_t watch_started_us;
    kdp__timer *t_step;   /* retry (backoff), coalescing, pokes */
    kdp__timer *t_resync; /* the periodic list */
    kdp__timer *t_watch;  /* re-watch after a backoff */
    kdp__backoff bo;
    kdp__backoff conflict_bo; /* 409s: the server answers, retry sooner */
    kdp__backoff watch_bo;
    bool relist; /* list before the next sync */
    bool dirty;  /* compare and write */
    bool failing;
    char err_key[64]; /* what failed last (logged once per change) */
    kdp__slices_status st;
};

static void step(kdp__slices *s);

static void notify(kdp__slices *s)
{
    if (s->status_cb) {
        s->status_cb(&s->st, s->ud);
    }
}

static void have_clear(kdp__slices *s)
{
    for (size_t i = 0; i < s->nhave; i++) {
        free(s->have[i].name);
        free(s->have[i].rv);
        json_decref(s->have[i].obj);
    }
    free(s->have);
    s->have = NULL;
    s->nhave = 0;
}

static struct have *have_find(kdp__slices *s, const char *name)
{
    for (size_t i = 0; name && i < s->nhave; i++) {
        if (strcmp(s->have[i].name, name) == 0) {
            return &s->have[i];
        }
    }
    return NULL;
}

static void have_remove(kdp__slices *s, struct have *h)
{
    free(h->name);
    free(h->rv);
    json_decref(h->obj);
    size_t i = (size_t)(h - s->have);
    memmove(h, h + 1, (s->nhave - i - 1) * sizeof(*h));
    s->nhave--;
}

/* Records obj (a slice of ours, as the server returned it); replaces the
 * entry of the same name. Returns 0 or -ENOMEM. */
static int have_put(kdp__slices *s, json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    json_t *gen =
        json_object_get(json_object_get(json_object_get(obj, "spec"), "pool"), "generation");
    if (!name || !rv) {
        return -EINVAL;
    }
    struct have *h = have_find(s, name);
    if (!h) {
        struct have *n = realloc(s->have, (s->nhave + 1) * sizeof(*n));
        if (!n) {
            return -ENOMEM;
        }
        s->have = n;
        h = &s->have[s->nhave];
        memset(h, 0, sizeof(*h));
        h->name = strdup(name);
        if (!h->name) {
            return -ENOMEM;
        }
        s->nhave++;
    }
    char *r = strdup(rv);
    if (!r) {
        return -ENOMEM;
    }
    free(h->rv);
    h->rv = r;
    h->gen = json_is_integer(gen) ? (uint64_t)json_integer_value(gen) : 0;
    json_decref(h->obj);
    h->obj = json_incref(obj);
    return 0;
}

static bool ours(const kdp__slices *s, json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    const char *d = json_string_value(json_object_get(spec, "driver"));
    const char *n = json_string_value(json_object_get(spec, "nodeName"));
    return d && n && strcmp(d, s->driver) == 0 && strcmp(n, s->node) == 0;
}

static bool in_pool(const kdp__slices *s, const struct have *h)
{
    json_t *pool = json_object_get(json_object_get(h->obj, "spec"), "pool");
    const char *p = json_string_value(json_object_get(pool, "name"));
    return p && strcmp(p, s->node) == 0;
}

/* The device JSON of a slice as the server has it, as v1 shape pieces. */
static bool dev_equal(const char *version, json_t *want, json_t *got)
{
    if (!json_equal(json_object_get(want, "name"), json_object_get(got, "name"))) {
        return false;
    }
    json_t *g = strcmp(version, "v1beta1") == 0 ? json_object_get(got, "basic") : got;
    json_t *empty = json_object();
    json_t *wa = json_object_get(want, "attributes");
    json_t *ga = json_object_get(g, "attributes");
    json_t *wc = json_object_get(want, "capacity");
    json_t *gc = json_object_get(g, "capacity");
    bool eq = json_equal(wa ? wa : empty, ga ? ga : empty) &&
              json_equal(wc ? wc : empty, gc ? gc : empty);
    json_decref(empty);
    return eq;
}

/* Does slice h hold chunk i (devices, pool, owner, node) at generation
 * gen and count? */
static bool slice_matches(const kdp__slices *s, const struct have *h, size_t i, uint64_t gen,
                          size_t count)
{
    json_t *spec = json_object_get(h->obj, "spec");
    json_t *pool = json_object_get(spec, "pool");
    json_t *rc = json_object_get(pool, "resourceSliceCount");
    if (h->gen != gen || !json_is_integer(rc) || (size_t)json_integer_value(rc) != count) {
        return false;
    }
    json_t *owners = json_object_get(json_object_get(h->obj, "metadata"), "ownerReferences");
    bool owned = false;
    size_t k;
    json_t *o;
    json_array_foreach(owners, k, o)
    {
        const char *uid = json_string_value(json_object_get(o, "uid"));
        const char *kind = json_string_value(json_object_get(o, "kind"));
        owned |= uid && kind && strcmp(uid, s->node_uid) == 0 && strcmp(kind, "Node") == 0 &&
                 json_is_true(json_object_get(o, "controller"));
    }
    if (!owned) {
        return false;
    }
    json_t *devs = json_object_get(spec, "devices");
    size_t from = i * KDP__SLICES_MAX_DEVICES;
    size_t n =
        s->ndevs - from < KDP__SLICES_MAX_DEVICES ? s->ndevs - from : KDP__SLICES_MAX_DEVICES;
    if (json_array_size(devs) != n) {
        return false;
    }
    for (size_t j = 0; j < n; j++) {
        if (!dev_equal(s->version, s->devs[from + j], json_array_get(devs, j))) {
            return false;
        }
    }
    return true;
}

/* Is the pool as wanted: exactly count slices, one per chunk, all of the
 * highest generation, nothing else of ours on the node? Sets *maxgen. */
static bool up_to_date(const kdp__slices *s, uint64_t *maxgen)
{
    size_t count = kdp__slices_count(s->ndevs);
    uint64_t g = 0;
    for (size_t i = 0; i < s->nhave; i++) {
        g = s->have[i].gen > g ? s->have[i].gen : g;
    }
    *maxgen = g;
    if (s->nhave != count) {
        return false;
    }
    for (size_t c = 0; c < count; c++) {
        bool found = false;
        for (size_t i = 0; i < s->nhave && !found; i++) {
            found = in_pool(s, &s->have[i]) && slice_matches(s, &s->have[i], c, g, count);
        }
        if (!found) {
            return false;
        }
    }
    return true;
}

/* --- failures --- */

static void fail_with(kdp__slices *s, const char *key, int err, const char *why, kdp__backoff *bo)
{
    char k[64];
    snprintf(k, sizeof(k), "%s:%d", key, err);
    if (!s->failing || strcmp(k, s->err_key) != 0) {
        log_warn("k8s: slices of %s on %s: %s (retrying with backoff up to %u s)", s->driver,
                 s->node, why, KDP__SLICES_MAX_BACKOFF_MS / 1000);
        snprintf(s->err_key, sizeof(s->err_key), "%s", k);
    }
    s->failing = true;
    snprintf(s->st.error, sizeof(s->st.error), "%s", why);
    s->st.published = false;
    notify(s);
    kdp__timer_start(s->t_step, kdp__backoff_next(bo));
}

static void fail(kdp__slices *s, const char *key, int err, const char *why)
{
    fail_with(s, key, err, why, &s->bo);
}

/* A step worked: back to the shortest backoff only once nothing fails
 * (a list that works before a write that fails must not reset it). */
static void ok(kdp__slices *s)
{
    if (!s->failing) {
        kdp__backoff_reset(&s->bo);
    }
}

/* --- the watch --- */

static void watch_start(kdp__slices *s);

/* Is this event one of our own writes (as far as we know now)? */
static bool known(kdp__slices *s, const char *name, const char *rv, bool deleted)
{
    struct have *h = have_find(s, name);
    if (deleted) {
        return !h; /* we deleted it (or it was never ours) */
    }
    return h && rv && strcmp(h->rv, rv) == 0;
}

static void poke(kdp__slices *s, const char *name, bool deleted)
{
    log_info("k8s: slice %s %s by someone else: publishing again", name,
             deleted ? "deleted" : "changed");
    s->relist = s->dirty = true;
    if (!s->req && !kdp__timer_armed(s->t_step)) {
        kdp__timer_start(s->t_step, KDP__SLICES_POKE_MS * 1000ULL);
    }
}

/* After a write ended: the events that came while it ran. */
static void check_suspects(kdp__slices *s)
{
    for (size_t i = 0; i < s->nsuspects; i++) {
        struct suspect *x = &s->suspects[i];
        if (!known(s, x->name, x->rv, x->deleted)) {
            poke(s, x->name, x->deleted);
            break;
        }
    }
    s->nsuspects = 0;
}

static void watch_event(const char *type, json_t *obj, void *ud)
{
    kdp__slices *s = ud;
    json_t *meta = json_object_get(obj, "metadata");
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    if (rv && strlen(rv) < sizeof(s->watch_rv)) {
        snprintf(s->watch_rv, sizeof(s->watch_rv), "%s", rv);
    }
    if (strcmp(type, "BOOKMARK") == 0) {
        return;
    }
    const char *name = json_string_value(json_object_get(meta, "name"));
    bool deleted = strcmp(type, "DELETED") == 0;
    if (!name || (!ours(s, obj) && !have_find(s, name)) || known(s, name, rv, deleted)) {
        return;
    }
    if (s->req && s->nsuspects < sizeof(s->suspects) / sizeof(s->suspects[0]) &&
        strlen(name) < sizeof(s->suspects[0].name) && rv &&
        strlen(rv) < sizeof(s->suspects[0].rv)) {
        struct suspect *x = &s->suspects[s->nsuspects++];
        snprintf(x->name, sizeof(x->name), "%s", name);
        snprintf(x->rv, sizeof(x->rv), "%s", rv);
        x->deleted = deleted;
        return;
    }
    poke(s, name, deleted);
}

static void watch_end(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    (void)obj;
    kdp__slices *s = ud;
    s->watch = NULL;
    uint64_t lasted = kdp__now_us() - s->watch_started_us;
    if (err == 0) {
        log_debug("k8s: the slices' watch ended after %llu ms: watching again",
                  (unsigned long long)(lasted / 1000));
    } else {
        log_info("k8s: the slices' watch ended: %s", why ? why : strerror(-err));
    }
    if (err != 0) {
        /* a gap: list again (the list restarts the watch) */
        s->relist = s->dirty = true;
        s->watch_rv[0] = '\0';
        if (!s->req && !kdp__timer_armed(s->t_step)) {
            kdp__timer_start(s->t_step, err == -EIDRM ? 0 : kdp__backoff_next(&s->watch_bo));
        }
        return;
    }
    /* a quick end again and again: back off */
    kdp__timer_start(s->t_watch, lasted < 1000000 ? kdp__backoff_next(&s->watch_bo) : 0);
}

static void watch_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__slices *s = ud;
    if (!s->watch && s->watch_rv[0]) {
        watch_start(s);
    }
}

static void watch_start(kdp__slices *s)
{
    char path[1024];
    snprintf(path, sizeof(path),
             "/apis/" GROUP "/%s/resourceslices?fieldSelector=spec.nodeName%%3D%s%%2Cspec.driver"
             "%%3D%s&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%u",
             s->version, s->node, s->driver, s->watch_rv, KDP__SLICES_WATCH_TIMEOUT_S);
    s->watch_started_us = kdp__now_us();
    int r = kdp__api_watch(s->a, path, watch_event, watch_end, s, &s->watch);
    if (r < 0) {
        s->watch = NULL;
        kdp__timer_start(s->t_watch, kdp__backoff_next(&s->watch_bo));
    }
}

/* --- the pipeline: discovery, the Node, list, writes --- */

static void discovered(int err, const char *version, const char *why, void *ud)
{
    kdp__slices *s = ud;
    s->req = NULL;
    if (err < 0) {
        fail(s, "discover", err, why);
        return;
    }
    snprintf(s->version, sizeof(s->version), "%s", version);
    snprintf(s->st.version, sizeof(s->st.version), "%s", version);
    log_info("k8s: publishing ResourceSlices through " GROUP "/%s at %s (%s)", version,
             kdp__api_server(s->a), kdp__api_source(s->a));
    ok(s);
    step(s);
}

static void node_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kdp__slices *s = ud;
    s->req = NULL;
    char line[1024];
    if (err == -ENOENT) {
        snprintf(line, sizeof(line),
                 "node %s not found at the API server: the node name must be the Node's "
                 "(spec.nodeName through the downward API, $NODE_NAME)",
                 s->node);
        fail(s, "node", err, line);
        return;
    }
    const char *uid =
        err == 0 ? json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"))
                 : NULL;
    if (err == 0 && (!uid || strlen(uid) >= sizeof(s->node_uid))) {
        err = -EPROTO;
        why = "the Node object has no metadata.uid";
    }
    if (err < 0) {
        fail(s, "node", err, why);
        return;
    }
    snprintf(s->node_uid, sizeof(s->node_uid), "%s", uid);
    ok(s);
    step(s);
}

static void list_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    kdp__slices *s = ud;
    s->req = NULL;
    json_t *items = err == 0 ? json_object_get(obj, "items") : NULL;
    const char *rv = err == 0 ? json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                                  "resourceVersion"))
                              : NULL;
    if (err == 0 && (!rv || (items && !json_is_null(items) && !json_is_array(items)))) {
        err = -EPROTO;
        why = "the ResourceSlice list has no metadata.resourceVersion or items";
    }
    if (err < 0) {
        fail(s, "list", err, why);
        return;
    }
    s->st.lists++;
    have_clear(s);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        if (ours(s, it) && have_put(s, it) == -ENOMEM) {
            fail(s, "list", -ENOMEM, "out of memory");
            return;
        }
    }
    s->relist = false;
    if (!s->watch || !s->watch_rv[0]) {
        snprintf(s->watch_rv, sizeof(s->watch_rv), "%s", rv);
        kdp__api_cancel(s->watch);
        s->watch = NULL;
        watch_start(s);
    }
    kdp__timer_start(s->t_resync, (uint64_t)s->resync_ms * 1000);
    ok(s);
    step(s);
}

static void write_done(int err, long code, json_t *obj, const char *why, void *ud);

struct wctx {
    kdp__slices *s;
    char name[KDP__K8S_DNS_SUBDOMAIN_MAX + 1];
    bool del;
};

static int put_slice(kdp__slices *s, const char *method, const char *name, json_t *body)
{
    char path[512];
    if (name) {
        snprintf(path, sizeof(path), "/apis/" GROUP "/%s/resourceslices/%s", s->version, name);
    } else {
        snprintf(path, sizeof(path), "/apis/" GROUP "/%s/resourceslices", s->version);
    }
    struct wctx *w = calloc(1, sizeof(*w));
    if (!w) {
        return -ENOMEM;
    }
    w->s = s;
    w->del = strcmp(method, "DELETE") == 0;
    snprintf(w->name, sizeof(w->name), "%s", name ? name : "");
    int r = kdp__api_call(s->a, method, path, body, write_done, w, &s->req);
    if (r < 0) {
        free(w);
        s->req = NULL;
        return r;
    }
    kdp__api_req_own(s->req, w);
    s->st.writes++;
    return 0;
}

static void write_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    struct wctx *w = ud;
    kdp__slices *s = w->s;
    s->req = NULL;
    if (w->del && (err == 0 || err == -ENOENT)) {
        struct have *h = have_find(s, w->name);
        if (h) {
            have_remove(s, h);
        }
        ok(s);
        step(s);
        return;
    }
    if (err == -ESTALE || err == -EEXIST || err == -ENOENT) {
        /* someone else wrote meanwhile: read again, then write again */
        s->relist = true;
        char line[1024];
        snprintf(line, sizeof(line), "%s (conflict: listing again)", why);
        fail_with(s, "conflict", -ESTALE, line, &s->conflict_bo);
        return;
    }
    if (err < 0) {
        s->relist = true;
        fail(s, "write", err, why);
        return;
    }
    if (have_put(s, obj) < 0) {
        s->relist = true;
        fail(s, "write", -EPROTO, "the API server's answer to a write has no name");
        return;
    }
    ok(s);
    step(s);
}

/* The first slice to delete: of another pool, or past count. */
static struct have *first_obsolete(kdp__slices *s, size_t count)
{
    size_t pool_seen = 0;
    for (size_t i = 0; i < s->nhave; i++) {
        struct have *h = &s->have[i];
        if (!in_pool(s, h) || ++pool_seen > count) {
            return h;
        }
    }
    return NULL;
}

/* Writes chunk c of count into slice h (NULL: a new one). Returns 1 or
 * -errno. */
static int write_chunk(kdp__slices *s, size_t c, size_t count, const struct have *h)
{
    size_t from = c * KDP__SLICES_MAX_DEVICES;
    size_t n =
        s->ndevs - from < KDP__SLICES_MAX_DEVICES ? s->ndevs - from : KDP__SLICES_MAX_DEVICES;
    json_t *obj =
        kdp__slices_object(s->version, s->driver, s->node, s->node_uid, s->round_gen, count,
                           n ? s->devs + from : NULL, n, h ? h->name : NULL, h ? h->rv : NULL);
    if (!obj) {
        return -ENOMEM;
    }
    int r = put_slice(s, h ? "PUT" : "POST", h ? h->name : NULL, obj);
    json_decref(obj);
    return r < 0 ? r : 1;
}

/* One write of the publish round, or none when the pool is as wanted.
 * Returns 1 if a write started, 0 if done, or -errno. */
static int sync_once(kdp__slices *s)
{
    size_t count = kdp__slices_count(s->ndevs);
    uint64_t maxgen = 0;
    bool done = up_to_date(s, &maxgen);
    if (s->round_gen == 0 && done) {
        s->st.generation = maxgen;
        return 0;
    }
    if (s->round_gen < maxgen || (s->round_gen == 0 && !done)) {
        /* a new round, or someone else went past ours: above them all */
        s->round_gen = maxgen + 1;
    }
    struct have *obsolete = first_obsolete(s, count);
    if (obsolete) {
        return put_slice(s, "DELETE", obsolete->name, NULL) < 0 ? -ENOMEM : 1;
    }
    /* then chunk c into the c-th slice, or a new one */
    for (size_t c = 0; c < count; c++) {
        struct have *h = c < s->nhave ? &s->have[c] : NULL;
        if (!h || !slice_matches(s, h, c, s->round_gen, count)) {
            return write_chunk(s, c, count, h);
        }
    }
    s->st.generation = s->round_gen;
    s->round_gen = 0;
    return 0;
}

static void step(kdp__slices *s)
{
    if (s->req) {
        return; /* one call at a time: its end steps again */
    }
    check_suspects(s);
    kdp__timer_stop(s->t_step);
    int r = 0;
    if (!s->version[0]) {
        static const char *const wanted[] = {"v1", "v1beta2", "v1beta1", NULL};
        r = kdp__api_discover(s->a, GROUP, wanted, discovered, s, &s->req);
    } else if (!s->node_uid[0]) {
        char path[400];
        snprintf(path, sizeof(path), "/api/v1/nodes/%s", s->node);
        r = kdp__api_call(s->a, "GET", path, NULL, node_done, s, &s->req);
    } else if (s->relist) {
        char path[1024];
        snprintf(path, sizeof(path),
                 "/apis/" GROUP "/%s/resourceslices?fieldSelector=spec.nodeName%%3D%s%%2C"
                 "spec.driver%%3D%s",
                 s->version, s->node, s->driver);
        r = kdp__api_call(s->a, "GET", path, NULL, list_done, s, &s->req);
    } else if (s->dirty && s->started) {
        r = sync_once(s);
        if (r == 0) {
            s->dirty = false;
            bool was = s->st.published;
            s->st.published = true;
            s->st.slices = kdp__slices_count(s->ndevs);
            s->st.devices = s->ndevs;
            s->st.error[0] = '\0';
            if (s->failing || !was) {
                log_info("k8s: %zu device(s) of %s published in %zu ResourceSlice(s) of pool %s, "
                         "generation %llu%s",
                         s->ndevs, s->driver, s->st.slices, s->node,
                         (unsigned long long)s->st.generation,
                         s->failing ? " (the API server answers again)" : "");
            }
            s->failing = false;
            s->err_key[0] = '\0';
            kdp__backoff_reset(&s->bo);
            kdp__backoff_reset(&s->conflict_bo);
            notify(s);
        }
        r = r > 0 ? 0 : r;
    }
    if (r < 0) {
        s->req = NULL;
        char line[256];
        snprintf(line, sizeof(line), "cannot start a call: %s", strerror(-r));
        fail(s, "start", r, line);
    }
}

static void step_timer(kdp__timer *t, void *ud)
{
    (void)t;
    step(ud);
}

static void resync_timer(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__slices *s = ud;
    s->relist = s->dirty = true;
    step(s);
}

/* --- the API --- */

static int cmp_dev(const void *x, const void *y)
{
    json_t *const *a = x;
    json_t *const *b = y;
    return strcmp(json_string_value(json_object_get(*a, "name")),
                  json_string_value(json_object_get(*b, "name")));
}

static void devs_free(json_t **devs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_decref(devs[i]);
    }
    free(devs);
}

/* Sorts devs by name and drops the second of a name (logged). Returns
 * how many are left. */
static size_t sort_unique(json_t **devs, size_t n)
{
    if (n < 2) {
        return n;
    }
    qsort(devs, n, sizeof(json_t *), cmp_dev);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && cmp_dev(&devs[w - 1], &devs[i]) == 0) {
            log_warn("k8s: device name %s is there twice: the second one is left out of the "
                     "ResourceSlices",
                     json_string_value(json_object_get(devs[i], "name")));
            json_decref(devs[i]);
            continue;
        }
        devs[w++] = devs[i];
    }
    return w;
}

int kdp__slices_set(kdp__slices *s, const kdp__slice_dev *devs, size_t n)
{
    if (!s || (n && !devs)) {
        return -EINVAL;
    }
    if (n > KDP__SLICES_MAX_POOL) {
        log_error("k8s: %zu devices for %s: more than the %u a pool of kdp holds", n, s->driver,
                  KDP__SLICES_MAX_POOL);
        return -E2BIG;
    }
    json_t **out = n ? calloc(n, sizeof(json_t *)) : NULL;
    if (n && !out) {
        return -ENOMEM;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        char why[400];
        json_t *d = kdp__slices_device(&devs[i], why, sizeof(why));
        if (!d && !why[0]) {
            devs_free(out, kept);
            return -ENOMEM;
        }
        if (!d) {
            log_warn("k8s: %s: left out of the ResourceSlices", why);
            continue;
        }
        out[kept++] = d;
    }
    size_t w = sort_unique(out, kept);
    bool same = s->started && w == s->ndevs;
    for (size_t i = 0; same && i < w; i++) {
        same = json_equal(out[i], s->devs[i]);
    }
    if (same) {
        devs_free(out, w);
        return (int)w;
    }
    devs_free(s->devs, s->ndevs);
    s->devs = out;
    s->ndevs = w;
    s->started = true;
    s->dirty = true;
    s->round_gen = 0;
    s->st.published = false;
    notify(s);
    if (!s->req && !kdp__timer_armed(s->t_step)) {
        kdp__timer_start(s->t_step, KDP__SLICES_COALESCE_MS * 1000ULL);
    }
    return (int)w;
}

void kdp__slices_get_status(const kdp__slices *s, kdp__slices_status *ret)
{
    *ret = s->st;
}

int kdp__slices_new(kdp__api *a, const char *driver, const char *node, const char *node_uid,
                    unsigned resync_ms, kdp__slices_status_cb status, void *ud, kdp__slices **ret)
{
    const char *why = NULL;
    if (!a || !ret || kdp__k8snames_driver_name(driver, &why) < 0) {
        log_error("k8s: driver name \"%s\" %s", driver ? driver : "", why ? why : "is missing");
        return -EINVAL;
    }
    if (kdp__k8snames_dns_subdomain(node, &why) < 0) {
        log_error("k8s: node name \"%s\" %s", node ? node : "", why);
        return -EINVAL;
    }
    if (node_uid && (strlen(node_uid) >= 128 || !*node_uid)) {
        return -EINVAL;
    }
    kdp__slices *s = calloc(1, sizeof(*s));
    if (!s) {
        return -ENOMEM;
    }
    s->a = a;
    s->loop = kdp__api_loop(a);
    snprintf(s->driver, sizeof(s->driver), "%s", driver);
    snprintf(s->node, sizeof(s->node), "%s", node);
    snprintf(s->node_uid, sizeof(s->node_uid), "%s", node_uid ? node_uid : "");
    s->resync_ms = resync_ms ? resync_ms : KDP__SLICES_DEFAULT_RESYNC_MS;
    s->status_cb = status;
    s->ud = ud;
    s->relist = s->dirty = true;
    kdp__backoff_init(&s->bo, KDP__SLICES_MIN_BACKOFF_MS * 1000ULL,
                      KDP__SLICES_MAX_BACKOFF_MS * 1000ULL, 0);
    kdp__backoff_init(&s->conflict_bo, KDP__SLICES_MIN_CONFLICT_MS * 1000ULL,
                      KDP__SLICES_MAX_CONFLICT_MS * 1000ULL, 0);
    kdp__backoff_init(&s->watch_bo, KDP__SLICES_MIN_BACKOFF_MS * 1000ULL,
                      KDP__SLICES_MAX_BACKOFF_MS * 1000ULL, 0);
    int r = kdp__timer_new(s->loop, step_timer, s, &s->t_step);
    if (r == 0) {
        r = kdp__timer_new(s->loop, resync_timer, s, &s->t_resync);
    }
    if (r == 0) {
        r = kdp__timer_new(s->loop, watch_timer, s, &s->t_watch);
    }
    if (r < 0) {
        kdp__slices_free(s);
        return r;
    }
    kdp__timer_start(s->t_step, 0);
    *ret = s;
    return 0;
}

void kdp__slices_free(kdp__slices *s)
{
    if (!s) {
        return;
    }
    kdp__api_cancel(s->req);
    kdp__api_cancel(s->watch);
    kdp__timer_free(s->t_step);
    kdp__timer_free(s->t_resync);
    kdp__timer_free(s->t_watch);
    have_clear(s);
    devs_free(s->devs, s->ndevs);
    free(s);
}
