/* SPDX-License-Identifier: MIT */
/* slicerec: the decisions of publishing a node's ResourceSlices (see
 * slicerec.h). */
#include "k8s/slicerec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define MS                 1000ULL
#define DEFAULT_RESYNC_MS  (10U * 60U * 1000U)
#define WATCH_QUICK_END_US (1000ULL * MS)

/* ---- small pieces ---- */

const char *const kdp__sr_fail_names[KDP__SR_NFAIL] = {"discovery", "node",  "list", "write",
                                                       "conflict",  "watch", "start"};

static void count_failure(kdp__sr *s, const char *key)
{
    size_t i = 0;
    while (i + 1 < KDP__SR_NFAIL && strcmp(kdp__sr_fail_names[i], key) != 0) {
        i++;
    }
    s->st.failures[i]++;
}

static kdp__sr_want want_of(const kdp__sr *s)
{
    return (kdp__sr_want){.devs = s->devs,
                          .ndevs = s->ndevs,
                          .starts = s->starts,
                          .ndchunks = s->ndchunks,
                          .sets = s->sets,
                          .nsets = s->nsets,
                          .nchunks = s->nchunks,
                          .pool = s->node,
                          .node_uid = s->node_uid,
                          .version = s->st.version};
}

void kdp__sr_chunk(const kdp__sr *s, size_t i, kdp__sr_chunkv *ret)
{
    kdp__sr_want w = want_of(s);
    kdp__sr_want_chunk(&w, i, ret);
}

static void make_plan(kdp__sr *s, uint64_t gen, kdp__sr_plan *p)
{
    kdp__sr_want w = want_of(s);
    kdp__sr_plan_make(s->known, s->nknown, &w, gen, p);
}

static const char *meta_str(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static json_t *spec_get(json_t *obj, const char *key)
{
    return json_object_get(json_object_get(obj, "spec"), key);
}

static bool ours(const kdp__sr *s, json_t *obj)
{
    const char *d = json_string_value(spec_get(obj, "driver"));
    const char *n = json_string_value(spec_get(obj, "nodeName"));
    return d && n && strcmp(d, s->driver) == 0 && strcmp(n, s->node) == 0;
}

/* ---- what the API server has ---- */

static kdp__sr_slice *find(kdp__sr *s, const char *name)
{
    for (size_t i = 0; name && i < s->nknown; i++) {
        if (strcmp(s->known[i].name, name) == 0) {
            return &s->known[i];
        }
    }
    return NULL;
}

/* What obj (or its deletion) says of its slice, unless something newer was
 * seen for it. Returns 0, -ENOSPC (too many kept: list again), -ENOMEM. */
static int observe(kdp__sr *s, json_t *obj, bool deleted, const char *name_if_none)
{
    const char *name = obj ? meta_str(obj, "name") : name_if_none;
    const char *rv_text = obj ? meta_str(obj, "resourceVersion") : NULL;
    uint64_t rv = kdp__sr_rv(rv_text);
    if (!name) {
        return 0;
    }
    if (rv && s->list_rv && rv <= s->list_rv) {
        return 0; /* the last list has it (or what came after it) */
    }
    kdp__sr_slice *k = find(s, name);
    if (k && rv && k->rv && rv <= k->rv) {
        return 0; /* older than what we have */
    }
    if (k && k->gone && !deleted && (!rv || !k->rv)) {
        return 0; /* deleted, order unknown: names are not reused */
    }
    if (!k) {
        if (s->nknown >= KDP__SR_MAX_KNOWN) {
            return -ENOSPC;
        }
        kdp__sr_slice *nk = realloc(s->known, (s->nknown + 1) * sizeof(*nk));
        if (!nk) {
            return -ENOMEM;
        }
        s->known = nk;
        k = &s->known[s->nknown];
        memset(k, 0, sizeof(*k));
        if (!(k->name = strdup(name))) {
            return -ENOMEM;
        }
        s->nknown++;
    }
    char *t = rv_text ? strdup(rv_text) : NULL;
    if (rv_text && !t) {
        return -ENOMEM;
    }
    free(k->rv_text);
    k->rv_text = t;
    k->rv = rv;
    k->gone = deleted;
    json_decref(k->obj);
    k->obj = deleted ? NULL : json_incref(obj);
    json_t *g = json_object_get(spec_get(obj, "pool"), "generation");
    /* an int64 in the API: a negative one (not ours) counts as 0 */
    k->gen = !deleted && json_is_integer(g) && json_integer_value(g) > 0
                 ? (uint64_t)json_integer_value(g)
                 : 0;
    return 0;
}

/* ---- failures ---- */

static void fail_with(kdp__sr *s, const char *key, int err, const char *why, kdp__backoff *bo,
                      uint64_t now)
{
    const char *w = why ? why : strerror(-err);
    /* logged once per kind of failure, not per retry nor per wording */
    if (!s->failing || s->st.err != err || strncmp(s->st.error, key, strlen(key)) != 0) {
        log_warn("k8s: slices of %s on %s: %s: %s (retrying with backoff up to %u s)", s->driver,
                 s->node, key, w, KDP__SR_MAX_BACKOFF_MS / 1000);
        s->st.said++;
    }
    s->failing = true;
    s->st.err = err;
    count_failure(s, key);
    snprintf(s->st.error, sizeof(s->st.error), "%s: %s", key, w);
    s->st.published = false;
    s->retry_at_us = now + kdp__backoff_next(bo);
}

static void fail(kdp__sr *s, const char *key, int err, const char *why, uint64_t now)
{
    fail_with(s, key, err, why, &s->bo, now);
}

static void call_ended(kdp__sr *s)
{
    s->inflight = KDP__SR_NONE;
    s->inflight_name[0] = '\0';
}

/* ---- the answers ---- */

void kdp__sr_discovered(kdp__sr *s, int err, const char *version, const char *why, uint64_t now)
{
    call_ended(s);
    if (err < 0 || !version || strlen(version) >= sizeof(s->st.version)) {
        fail(s, "discovery", err < 0 ? err : -EPROTO, why, now);
        return;
    }
    snprintf(s->st.version, sizeof(s->st.version), "%s", version);
}

void kdp__sr_node(kdp__sr *s, int err, json_t *node, const char *why, uint64_t now)
{
    call_ended(s);
    char line[512];
    if (err == -ENOENT) {
        snprintf(line, sizeof(line),
                 "node %s not found at the API server: the node name must be the Node's "
                 "(spec.nodeName through the downward API, $NODE_NAME)",
                 s->node);
        why = line;
    }
    const char *uid = err == 0 ? meta_str(node, "uid") : NULL;
    if (err == 0 && (!uid || !*uid || strlen(uid) >= sizeof(s->node_uid))) {
        err = -EPROTO;
        why = "the Node object has no metadata.uid";
    }
    if (err < 0) {
        fail(s, "node", err, why, now);
        return;
    }
    snprintf(s->node_uid, sizeof(s->node_uid), "%s", uid);
}

/* The list replaces what was known, except what came after it; all of it
 * when the resourceVersion went back (a new or restored API server): our
 * writes and lists, each answered before this list was asked, are below. */
static int take_list(kdp__sr *s, json_t *items, uint64_t list_rv)
{
    bool reset = list_rv && list_rv < s->floor_rv;
    if (reset) {
        log_warn("k8s: slices of %s on %s: the API server's resourceVersion went back from %llu "
                 "to %llu (a new or restored API server): publishing anew",
                 s->driver, s->node, (unsigned long long)s->floor_rv, (unsigned long long)list_rv);
    }
    s->floor_rv = list_rv;
    for (size_t i = 0; i < s->nknown;) {
        kdp__sr_slice *k = &s->known[i];
        if (reset || !list_rv || !k->rv || k->rv <= list_rv) {
            kdp__sr_forget(s->known, &s->nknown, (size_t)(k - s->known));
        } else {
            i++;
        }
    }
    uint64_t keep = s->list_rv;
    s->list_rv = 0; /* every item counts */
    size_t i;
    json_t *it;
    int r = 0;
    json_array_foreach(items, i, it)
    {
        if (r == 0 && ours(s, it)) {
            r = observe(s, it, false, NULL);
        }
    }
    s->list_rv = r == 0 ? list_rv : keep;
    return r;
}

void kdp__sr_listed(kdp__sr *s, int err, json_t *list, const char *why, uint64_t now)
{
    call_ended(s);
    json_t *items = err == 0 ? json_object_get(list, "items") : NULL;
    const char *rv = err == 0 ? meta_str(list, "resourceVersion") : NULL;
    if (err == 0 && (!rv || strlen(rv) >= sizeof(s->watch_rv) ||
                     (items && !json_is_null(items) && !json_is_array(items)))) {
        err = -EPROTO;
        why = "the ResourceSlice list has no metadata.resourceVersion or items";
    }
    if (err == 0) {
        err = take_list(s, items, kdp__sr_rv(rv));
        why = err == -ENOSPC ? "too many slices of this driver on the node" : "out of memory";
    }
    if (err < 0) {
        fail(s, "list", err, why, now);
        return;
    }
    s->st.lists++;
    s->need_list = false;
    s->resync_at_us = now + s->resync_us;
    s->watch_wanted = true;
    if (!s->watching) {
        snprintf(s->watch_rv, sizeof(s->watch_rv), "%s", rv);
        s->watch_at_us = now;
    }
    if (!s->failing) {
        kdp__backoff_reset(&s->bo);
    }
}

/* A write's answer without fields that were sent: the API server drops
 * those of a feature gate that is off. Writing again would drop them
 * again: a failure (backoff), said once. */
static void check_dropped(kdp__sr *s, json_t *obj, uint64_t now)
{
    const kdp__sr_action *a = &s->inflight_a;
    kdp__sr_want w = want_of(s);
    char why[512];
    if (s->inflight_ver == s->want_ver &&
        kdp__sr_dropped(&w, obj, a->chunk, a->generation, a->count, why, sizeof(why))) {
        fail(s, "write", -EPROTO, why, now); /* logged once */
    }
}

void kdp__sr_written(kdp__sr *s, int err, json_t *obj, const char *why, uint64_t now)
{
    kdp__sr_kind kind = s->inflight;
    char name[sizeof(s->inflight_name)];
    snprintf(name, sizeof(name), "%s", s->inflight_name);
    call_ended(s);
    if (kind == KDP__SR_DELETE && (err == 0 || err == -ENOENT)) {
        (void)observe(s, NULL, true, name); /* gone either way */
        return;
    }
    if (kind == KDP__SR_UPDATE && err == -ENOENT) {
        (void)observe(s, NULL, true, name); /* deleted meanwhile: create instead */
        return;
    }
    if (err == -ESTALE || err == -EEXIST) {
        /* someone else wrote meanwhile: read again, then write again */
        s->need_list = true;
        s->st.conflicts++;
        char line[512];
        snprintf(line, sizeof(line), "%s (conflict: listing again)", why ? why : "409");
        fail_with(s, "conflict", -ESTALE, line, &s->conflict_bo, now);
        return;
    }
    if (err < 0) {
        s->need_list = true; /* done or not: the list says */
        fail(s, "write", err, why, now);
        return;
    }
    s->st.writes++;
    if (!obj || !meta_str(obj, "name") || !ours(s, obj)) {
        s->need_list = true;
        fail(s, "write", -EPROTO, "the API server's answer to a write is not the slice", now);
        return;
    }
    uint64_t rv = kdp__sr_rv(meta_str(obj, "resourceVersion"));
    s->floor_rv = rv > s->floor_rv ? rv : s->floor_rv;
    s->need_list |= observe(s, obj, false, NULL) < 0;
    check_dropped(s, obj, now);
}

void kdp__sr_watch_event(kdp__sr *s, const char *type, json_t *obj, uint64_t now)
{
    (void)now;
    const char *rv = meta_str(obj, "resourceVersion");
    if (rv && strlen(rv) < sizeof(s->watch_rv)) {
        snprintf(s->watch_rv, sizeof(s->watch_rv), "%s", rv);
    }
    kdp__backoff_reset(&s->watch_bo); /* the watch works */
    if (strcmp(type, "BOOKMARK") == 0) {
        return;
    }
    const char *name = meta_str(obj, "name");
    if (!name || (!ours(s, obj) && !find(s, name))) {
        return;
    }
    if (observe(s, obj, strcmp(type, "DELETED") == 0, NULL) < 0) {
        s->need_list = true;
    }
}

void kdp__sr_watch_ended(kdp__sr *s, int err, const char *why, uint64_t now)
{
    s->watching = false;
    uint64_t lasted = now - s->watch_since_us;
    if (err == 0) {
        /* a quick end again and again: back off; one that lasted works */
        if (lasted >= KDP__SR_WATCH_OK_MS * MS) {
            kdp__backoff_reset(&s->watch_bo);
        }
        s->watch_at_us = now + (lasted < WATCH_QUICK_END_US ? kdp__backoff_next(&s->watch_bo) : 0);
        return;
    }
    log_info("k8s: the slices' watch ended: %s: listing again", why ? why : strerror(-err));
    count_failure(s, "watch"); /* a gap: list again (the watch resumes from the list) */
    s->need_list = true;
    s->watch_rv[0] = '\0';
    if (err != -EIDRM) {
        uint64_t at = now + kdp__backoff_next(&s->watch_bo);
        s->retry_at_us = at > s->retry_at_us ? at : s->retry_at_us;
    }
}

void kdp__sr_not_started(kdp__sr *s, kdp__sr_kind kind, int err, uint64_t now)
{
    if (kind == KDP__SR_WATCH) {
        s->watching = false;
        s->watch_at_us = now + kdp__backoff_next(&s->watch_bo);
        return;
    }
    call_ended(s);
    fail(s, "start", err, "cannot start a call", now);
}

/* ---- what should be ---- */

static void devs_free(json_t **devs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_decref(devs[i]);
    }
    free(devs);
}

int kdp__sr_set_devices(kdp__sr *s, json_t **devs, size_t n, json_t **sets, size_t nsets)
{
    bool same = s->started && n == s->ndevs && nsets == s->nsets;
    for (size_t i = 0; same && i < n; i++) {
        same = json_equal(devs[i], s->devs[i]);
    }
    for (size_t i = 0; same && i < nsets; i++) {
        same = json_equal(sets[i], s->sets[i]);
    }
    size_t *starts = same ? NULL : malloc((n / KDP__SR_MAX_DEVICES_TAINTED + 2) * sizeof(*starts));
    if (same || !starts) {
        devs_free(devs, n);
        devs_free(sets, nsets);
        return same ? 0 : -ENOMEM;
    }
    devs_free(s->devs, s->ndevs);
    devs_free(s->sets, s->nsets);
    free(s->starts);
    s->devs = devs;
    s->ndevs = n;
    s->sets = sets;
    s->nsets = nsets;
    s->starts = starts;
    /* no empty device slice beside counter sets */
    s->ndchunks = n == 0 && nsets > 0 ? 0 : kdp__sr_chunks(devs, n, starts);
    s->nchunks = s->ndchunks + (nsets + KDP__SR_MAX_SETS - 1) / KDP__SR_MAX_SETS;
    s->started = true;
    s->want_ver++;
    s->round_gen = 0;
    s->st.published = false;
    return 1;
}

static kdp__sr_action at(uint64_t us)
{
    return (kdp__sr_action){.kind = KDP__SR_NONE, .at_us = us};
}

static void published(kdp__sr *s, uint64_t gen)
{
    bool was = s->st.published;
    s->st.published = true;
    s->st.generation = gen;
    s->st.slices = s->nchunks;
    s->st.devices = s->ndevs;
    s->st.counter_sets = s->nsets;
    s->st.error[0] = '\0';
    s->st.err = 0;
    if (s->failing || !was) {
        char sets[64] = "";
        if (s->nsets) {
            snprintf(sets, sizeof(sets), " and %zu counter set(s)", s->nsets);
        }
        log_info("k8s: %zu device(s)%s of %s published in %zu ResourceSlice(s) of pool %s, "
                 "generation %llu%s",
                 s->ndevs, sets, s->driver, s->st.slices, s->node, (unsigned long long)gen,
                 s->failing ? " (the API server answers again)" : "");
    }
    s->failing = false;
    kdp__backoff_reset(&s->bo);
    kdp__backoff_reset(&s->conflict_bo);
}

/* The next write of the round, or NONE when the pool is as wanted. */
static kdp__sr_action publish(kdp__sr *s)
{
    kdp__sr_plan p;
    if (s->round_gen == 0) {
        make_plan(s, 0, &p);
        if (p.missing == 0 && p.spares == 0 && !p.foreign) {
            if (!s->st.published || s->st.generation != p.maxgen) {
                published(s, p.maxgen);
            }
            return at(s->resync_at_us);
        }
        if (s->st.published) {
            log_info("k8s: the slices of %s on %s are not as published (changed or deleted by "
                     "someone else): publishing again",
                     s->driver, s->node);
            s->st.published = false;
        }
    }
    make_plan(s, s->round_gen, &p);
    if (s->round_gen == 0 || s->round_gen < p.maxgen) {
        /* a new round, or someone else went past ours: above them all (at
         * most the API's int64 maximum: then that one again) */
        s->round_gen = p.maxgen >= (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : p.maxgen + 1;
        make_plan(s, s->round_gen, &p);
    }
    kdp__sr_action a = {.count = p.count, .generation = s->round_gen};
    if (p.foreign || p.spares > p.missing) {
        const kdp__sr_slice *k = p.foreign ? p.foreign : p.spare;
        a.kind = KDP__SR_DELETE;
        a.name = k->name;
    } else if (p.missing && p.spare) {
        a.kind = KDP__SR_UPDATE;
        a.chunk = p.first_missing;
        a.name = p.spare->name;
        a.rv = p.spare->rv_text;
    } else if (p.missing) {
        a.kind = KDP__SR_CREATE;
        a.chunk = p.first_missing;
    } else {
        published(s, s->round_gen);
        s->round_gen = 0;
        return at(s->resync_at_us);
    }
    return a;
}

static uint64_t earliest(uint64_t a, uint64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

static kdp__sr_action call(kdp__sr *s, kdp__sr_action a)
{
    s->inflight = a.kind;
    s->inflight_ver = s->want_ver;
    snprintf(s->inflight_name, sizeof(s->inflight_name), "%s", a.name ? a.name : "");
    if (a.name) {
        a.name = s->inflight_name; /* valid until the answer */
    }
    s->inflight_a = a;
    return a;
}

kdp__sr_action kdp__sr_next(kdp__sr *s, uint64_t now)
{
    if (s->watch_wanted && !s->watching && s->watch_rv[0] && !s->need_list &&
        now >= s->watch_at_us) {
        s->watching = true;
        s->watch_since_us = now;
        return (kdp__sr_action){.kind = KDP__SR_WATCH, .rv = s->watch_rv};
    }
    uint64_t watch_at =
        s->watch_wanted && !s->watching && s->watch_rv[0] && !s->need_list ? s->watch_at_us : 0;
    if (s->inflight != KDP__SR_NONE) {
        return at(watch_at);
    }
    if (now < s->retry_at_us) {
        return at(earliest(s->retry_at_us, watch_at));
    }
    if (!s->st.version[0]) {
        return call(s, (kdp__sr_action){.kind = KDP__SR_DISCOVER});
    }
    if (!s->node_uid[0]) {
        return call(s, (kdp__sr_action){.kind = KDP__SR_GET_NODE});
    }
    if (s->need_list || (s->resync_at_us && now >= s->resync_at_us) ||
        s->nknown >= KDP__SR_MAX_KNOWN) {
        return call(s, (kdp__sr_action){.kind = KDP__SR_LIST});
    }
    if (!s->started) {
        return at(earliest(s->resync_at_us, watch_at));
    }
    kdp__sr_action a = publish(s);
    if (a.kind == KDP__SR_NONE) {
        a.at_us = earliest(a.at_us, watch_at);
        return a;
    }
    return call(s, a);
}

/* ---- life ---- */

int kdp__sr_init(kdp__sr *s, const char *driver, const char *node, const char *node_uid,
                 unsigned resync_ms, uint32_t seed)
{
    memset(s, 0, sizeof(*s));
    const char *why = NULL;
    if (kdp__k8snames_driver_name(driver, &why) < 0) {
        log_error("k8s: driver name \"%s\" %s", driver ? driver : "", why);
        return -EINVAL;
    }
    if (kdp__k8snames_dns_subdomain(node, &why) < 0) {
        log_error("k8s: node name \"%s\" %s", node ? node : "", why);
        return -EINVAL;
    }
    if (node_uid && (!*node_uid || strlen(node_uid) >= sizeof(s->node_uid))) {
        log_error("k8s: node UID \"%s\": 1 to 127 characters", node_uid);
        return -EINVAL;
    }
    snprintf(s->driver, sizeof(s->driver), "%s", driver);
    snprintf(s->node, sizeof(s->node), "%s", node);
    snprintf(s->node_uid, sizeof(s->node_uid), "%s", node_uid ? node_uid : "");
    s->resync_us = (uint64_t)(resync_ms ? resync_ms : DEFAULT_RESYNC_MS) * MS;
    s->need_list = true;
    kdp__backoff_init(&s->bo, KDP__SR_MIN_BACKOFF_MS * MS, KDP__SR_MAX_BACKOFF_MS * MS, seed);
    kdp__backoff_init(&s->conflict_bo, KDP__SR_MIN_CONFLICT_MS * MS, KDP__SR_MAX_CONFLICT_MS * MS,
                      seed);
    kdp__backoff_init(&s->watch_bo, KDP__SR_MIN_BACKOFF_MS * MS, KDP__SR_MAX_BACKOFF_MS * MS, seed);
    return 0;
}

void kdp__sr_done(kdp__sr *s)
{
    kdp__sr_forget_all(&s->known, &s->nknown);
    devs_free(s->devs, s->ndevs);
    devs_free(s->sets, s->nsets);
    free(s->starts);
    s->devs = NULL;
    s->sets = NULL;
    s->starts = NULL;
    s->ndevs = s->nsets = s->ndchunks = s->nchunks = 0;
}
