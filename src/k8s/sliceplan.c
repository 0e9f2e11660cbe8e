/* SPDX-License-Identifier: MIT */
/* sliceplan: what a publish round writes (see sliceplan.h). */
#include "k8s/sliceplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/quantity.h"

size_t kdp__sr_count(size_t n)
{
    return n == 0 ? 1 : (n + KDP__SR_MAX_DEVICES - 1) / KDP__SR_MAX_DEVICES;
}

size_t kdp__sr_chunks(json_t *const *devs, size_t n, size_t *starts)
{
    size_t k = 0;
    size_t in = 0; /* devices in the chunk being filled */
    /* one of them has taints or consumes counters (binding conditions do
     * not lower the limit: validation.go's haveDeviceTaints and
     * haveConsumesCounters are the only two) */
    bool tainted = false;
    starts[k++] = 0;
    for (size_t i = 0; i < n; i++) {
        bool t = json_array_size(json_object_get(devs[i], "taints")) > 0 ||
                 json_array_size(json_object_get(devs[i], "consumesCounters")) > 0;
        if (in == KDP__SR_MAX_DEVICES || (in >= KDP__SR_MAX_DEVICES_TAINTED && (tainted || t))) {
            starts[k++] = i;
            in = 0;
            tainted = false;
        }
        in++;
        tainted |= t;
    }
    starts[k] = n;
    return k;
}

void kdp__sr_want_chunk(const kdp__sr_want *w, size_t i, kdp__sr_chunkv *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (i >= w->nchunks) {
        return;
    }
    if (i < w->ndchunks) {
        ret->n = w->starts[i + 1] - w->starts[i];
        ret->items = ret->n ? w->devs + w->starts[i] : NULL;
        return;
    }
    size_t from = (i - w->ndchunks) * KDP__SR_MAX_SETS;
    size_t left = w->nsets > from ? w->nsets - from : 0;
    ret->sets = true;
    ret->n = left < KDP__SR_MAX_SETS ? left : KDP__SR_MAX_SETS;
    ret->items = ret->n ? w->sets + from : NULL;
}

/* Two strings the same, or quantities of one value. */
static bool same_string(const char *a, const char *b)
{
    kdp__qty x = 0;
    kdp__qty y = 0;
    return strcmp(a, b) == 0 ||
           (kdp__qty_parse(a, &x, NULL) == 0 && kdp__qty_parse(b, &y, NULL) == 0 && x == y);
}

// NOLINTNEXTLINE(misc-no-recursion): as deep as a slice's JSON (jansson parses 2048 at most)
bool kdp__sr_json_same(json_t *a, json_t *b)
{
    if (json_is_string(a) && json_is_string(b)) {
        return same_string(json_string_value(a), json_string_value(b));
    }
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) {
            return false;
        }
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v)
        {
            json_t *o = json_object_get(b, k);
            if (!o || !kdp__sr_json_same(v, o)) {
                return false;
            }
        }
        return true;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) {
            return false;
        }
        for (size_t i = 0; i < json_array_size(a); i++) {
            if (!kdp__sr_json_same(json_array_get(a, i), json_array_get(b, i))) {
                return false;
            }
        }
        return true;
    }
    return json_equal(a, b);
}

static json_t *spec_get(json_t *obj, const char *key)
{
    return json_object_get(json_object_get(obj, "spec"), key);
}

bool kdp__sr_in_pool(json_t *obj, const char *pool)
{
    const char *p = json_string_value(json_object_get(spec_get(obj, "pool"), "name"));
    return p && strcmp(p, pool) == 0;
}

/* Two lists of strings, absent the same as empty. */
static bool same_list(json_t *a, json_t *b)
{
    return json_array_size(a) == json_array_size(b) && (!a || !b || json_equal(a, b));
}

/* A device as the server has it against one we want (v1 shape; v1beta1
 * nests every field but the name under "basic"). */
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
    json_t *wt = json_object_get(want, "taints");
    json_t *gt = json_object_get(g, "taints");
    json_t *wn = json_object_get(want, "consumesCounters");
    json_t *gn = json_object_get(g, "consumesCounters");
    bool eq = json_equal(wa ? wa : empty, ga ? ga : empty) &&
              kdp__sr_json_same(wc ? wc : empty, gc ? gc : empty) &&
              json_array_size(wt) == json_array_size(gt) && (!wt || !gt || json_equal(wt, gt)) &&
              json_array_size(wn) == json_array_size(gn) &&
              (!wn || !gn || kdp__sr_json_same(wn, gn)) &&
              json_is_true(json_object_get(want, "allowMultipleAllocations")) ==
                  json_is_true(json_object_get(g, "allowMultipleAllocations")) &&
              json_is_true(json_object_get(want, "bindsToNode")) ==
                  json_is_true(json_object_get(g, "bindsToNode")) &&
              same_list(json_object_get(want, "bindingConditions"),
                        json_object_get(g, "bindingConditions")) &&
              same_list(json_object_get(want, "bindingFailureConditions"),
                        json_object_get(g, "bindingFailureConditions"));
    json_decref(empty);
    return eq;
}

static bool owned_by_node(const kdp__sr_want *w, json_t *obj)
{
    json_t *owners = json_object_get(json_object_get(obj, "metadata"), "ownerReferences");
    size_t k;
    json_t *o;
    json_array_foreach(owners, k, o)
    {
        const char *uid = json_string_value(json_object_get(o, "uid"));
        const char *kind = json_string_value(json_object_get(o, "kind"));
        if (uid && kind && strcmp(uid, w->node_uid) == 0 && strcmp(kind, "Node") == 0 &&
            json_is_true(json_object_get(o, "controller"))) {
            return true;
        }
    }
    return false;
}

bool kdp__sr_holds(const kdp__sr_want *w, json_t *obj, size_t c, uint64_t gen, size_t count)
{
    json_t *pool = spec_get(obj, "pool");
    json_t *rc = json_object_get(pool, "resourceSliceCount");
    json_t *g = json_object_get(pool, "generation");
    if (!json_is_integer(g) || (uint64_t)json_integer_value(g) != gen || !json_is_integer(rc) ||
        (size_t)json_integer_value(rc) != count || !owned_by_node(w, obj)) {
        return false;
    }
    kdp__sr_chunkv want;
    kdp__sr_want_chunk(w, c, &want);
    json_t *have = spec_get(obj, want.sets ? "sharedCounters" : "devices");
    if (json_array_size(have) != want.n ||
        json_array_size(spec_get(obj, want.sets ? "devices" : "sharedCounters")) > 0) {
        return false;
    }
    for (size_t j = 0; j < want.n; j++) {
        json_t *h = json_array_get(have, j);
        if (want.sets ? !kdp__sr_json_same(want.items[j], h)
                      : !dev_equal(w->version, want.items[j], h)) {
            return false;
        }
    }
    return true;
}

/* Does slice k hold chunk c at generation gen and count? */
static bool matches(const kdp__sr_want *w, const kdp__sr_slice *k, size_t c, uint64_t gen,
                    size_t count)
{
    return k->gen == gen && kdp__sr_holds(w, k->obj, c, gen, count);
}

static uint64_t max_gen(const kdp__sr_slice *known, size_t n)
{
    uint64_t g = 0;
    for (size_t i = 0; i < n; i++) {
        if (!known[i].gone && known[i].gen > g) {
            g = known[i].gen;
        }
    }
    return g;
}

/* The slice of the pool holding chunk c at gen that holds no other chunk
 * yet (holds: the chunk each slice holds, plus one); its index or -1. */
static long holder(const kdp__sr_slice *known, size_t n, const kdp__sr_want *w,
                   const uint16_t *holds, size_t c, uint64_t gen, size_t count)
{
    for (size_t i = 0; i < n; i++) {
        const kdp__sr_slice *k = &known[i];
        if (!k->gone && holds[i] == 0 && kdp__sr_in_pool(k->obj, w->pool) &&
            matches(w, k, c, gen, count)) {
            return (long)i;
        }
    }
    return -1;
}

void kdp__sr_plan_make(const kdp__sr_slice *known, size_t n, const kdp__sr_want *w, uint64_t gen,
                       kdp__sr_plan *p)
{
    memset(p, 0, sizeof(*p));
    size_t count = w->nchunks;
    p->count = count;
    p->first_missing = count;
    p->maxgen = max_gen(known, n);
    /* the chunk each slice holds, plus one (0: none); one slice per chunk */
    uint16_t holds[KDP__SR_MAX_KNOWN];
    n = n < KDP__SR_MAX_KNOWN ? n : KDP__SR_MAX_KNOWN;
    memset(holds, 0, sizeof(holds[0]) * n);
    for (size_t c = 0; c < count; c++) {
        long i = holder(known, n, w, holds, c, gen ? gen : p->maxgen, count);
        if (i >= 0) {
            holds[i] = (uint16_t)(c + 1);
        } else if (p->missing++ == 0) {
            p->first_missing = c;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const kdp__sr_slice *k = &known[i];
        if (k->gone || holds[i]) {
            continue;
        }
        if (!kdp__sr_in_pool(k->obj, w->pool)) {
            p->foreign = p->foreign ? p->foreign : k;
            continue;
        }
        p->spares++;
        /* the one to reuse or delete first: by name, for a stable order */
        if (!p->spare || strcmp(k->name, p->spare->name) < 0) {
            p->spare = k;
        }
    }
}

uint64_t kdp__sr_rv(const char *rv)
{
    if (!rv || !*rv || strlen(rv) > 19) {
        return 0;
    }
    uint64_t v = 0;
    for (const char *p = rv; *p; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
        v = v * 10U + (uint64_t)(*p - '0');
    }
    return v;
}

/* The fields of want that got lacks, into out (as many as fit). */
static void missing_keys(json_t *want, json_t *got, char *out, size_t len)
{
    const char *k;
    json_t *v;
    json_object_foreach(want, k, v)
    {
        size_t at = strlen(out);
        if (!json_object_get(got, k) && !strstr(out, k) && at + strlen(k) + 3 < len) {
            snprintf(out + at, len - at, "%s%s", at ? ", " : "", k);
        }
    }
}

bool kdp__sr_dropped(const kdp__sr_want *w, json_t *obj, size_t c, uint64_t gen, size_t count,
                     char *why, size_t why_len)
{
    if (kdp__sr_holds(w, obj, c, gen, count)) {
        return false;
    }
    char keys[200] = "";
    size_t len = sizeof(keys);
    kdp__sr_chunkv v;
    kdp__sr_want_chunk(w, c, &v);
    json_t *have = spec_get(obj, v.sets ? "sharedCounters" : "devices");
    if (v.sets && json_array_size(have) == 0) {
        snprintf(keys, len, "sharedCounters");
    }
    for (size_t i = 0; !v.sets && i < v.n && i < json_array_size(have); i++) {
        json_t *h = json_array_get(have, i);
        json_t *basic = json_object_get(h, "basic");
        missing_keys(v.items[i], basic ? basic : h, keys, len);
    }
    /* the gates of the fields missing, each once (the whole line fits the
     * reconciler's 256 bytes of error) */
    static const char *const gates[][2] = {
        {"consumesCounters", "DRAPartitionableDevices"},
        {"sharedCounters", "DRAPartitionableDevices"},
        {"allowMultipleAllocations", "DRAConsumableCapacity"},
        {"compatibilityGroups", "DRADeviceCompatibilityGroups"},
        {"bindsToNode", "DRADeviceBindingConditions"},
        {"bindingConditions", "DRADeviceBindingConditions"},
        {"bindingFailureConditions", "DRADeviceBindingConditions"},
    };
    char off[160] = "";
    for (size_t i = 0; i < sizeof(gates) / sizeof(gates[0]); i++) {
        size_t at = strlen(off);
        if (strstr(keys, gates[i][0]) && !strstr(off, gates[i][1]) &&
            at + strlen(gates[i][1]) + 3 < sizeof(off)) {
            snprintf(off + at, sizeof(off) - at, "%s%s", at ? ", " : "", gates[i][1]);
        }
    }
    snprintf(why, why_len,
             "the API server dropped fields it was sent (%s): a feature gate of the cluster is "
             "off (%s)",
             keys[0] ? keys : "the slice differs from what was sent",
             off[0] ? off
                    : "DRAPartitionableDevices, DRAConsumableCapacity, "
                      "DRADeviceCompatibilityGroups or DRADeviceBindingConditions");
    return true;
}

static void slice_clear(kdp__sr_slice *k)
{
    free(k->name);
    free(k->rv_text);
    json_decref(k->obj);
    memset(k, 0, sizeof(*k));
}

void kdp__sr_forget(kdp__sr_slice *known, size_t *n, size_t i)
{
    slice_clear(&known[i]);
    memmove(&known[i], &known[i + 1], (*n - i - 1) * sizeof(*known));
    (*n)--;
}

void kdp__sr_forget_all(kdp__sr_slice **known, size_t *n)
{
    for (size_t i = 0; i < *n; i++) {
        slice_clear(&(*known)[i]);
    }
    free(*known);
    *known = NULL;
    *n = 0;
}
