/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the device table as an author fills it: fuzzed
 * kdp_device structs (any health value, NUMA nodes including negative ones,
 * NULL or odd strings) through kdp_device_list_add, kdp_plugin_set_devices
 * and kdp_plugin_set_health on a real (not running) plugin, then the
 * ListAndWatchResponse encoding, decoded back with protobuf-c and compared.
 * abort()s on a broken invariant:
 *   - list_add returns 0 / -EINVAL / -EEXIST exactly as the device's fields
 *     and the IDs added before it say;
 *   - set_devices is all or nothing, with the same verdict as the array;
 *   - the table is sorted with unique IDs; the encoding round-trips: same
 *     IDs, "Healthy"/"Unhealthy", NUMA nodes sorted, unique, non-negative,
 *     no topology for a device without any;
 *   - a copy is "the same for the kubelet", and the diff of two tables
 *     reports exactly the IDs that differ.
 *
 * Input: a sequence of device records, each
 *   flags(1) numa_count(1, & 7; bit 3: a probe's answer too) numa values
 *   (8 bytes each, little-endian)
 *   then NUL-terminated strings: id, host_path, container_path, permissions
 *   flags: bits 0-1 health (0 healthy, 1 unhealthy, 2-3 invalid: 2, -1),
 *          bit 2 id NULL, bit 3 host_path set, bit 4 container_path set,
 *          bit 5 permissions set, bit 6 numa_nodes NULL with a count,
 *          bit 7 also set this device's health through set_health.
 * The probe's answer (in the single changes): the device's verdict turned
 * (N = M = 1) through kdp__tabshared_probe_result, as the prober does.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/validate.h"
#include "deviceplugin.pb-c.h"
#include "kdp.h"
#include "plugin/devices.h"
#include "plugin/plugin_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #x);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_DEVS 64
#define MAX_NUMA 7

typedef struct rec {
    kdp_device d;
    int64_t numa[MAX_NUMA];
    bool set_health;
    bool verdict; /* the probe's verdict on it turns (single changes) */
} rec;

static kdp_ctx *ctx;
static kdp_plugin *plugin;

static void check_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    for (const char *c = msg; *c; c++) {
        CHECK((unsigned char)*c >= 0x20 && *c != 0x7f); /* no forged log lines */
    }
}

static void init(void)
{
    kdp_log_set(KDP_LOG_DEBUG, check_log, NULL);
    CHECK(kdp_ctx_new(&ctx) == 0);
    kdp_config cfg = {.resource_name = "fuzz.test/devices",
                      .socket_name = "devices.sock",
                      .device_plugin_dir = "/nonexistent-kdp-fuzz"};
    CHECK(kdp_plugin_new(ctx, &cfg, NULL, NULL, &plugin) == 0);
}

static const char *take_str(const uint8_t **p, const uint8_t *end)
{
    if (*p >= end) {
        return "";
    }
    const char *s = (const char *)*p;
    const uint8_t *nul = memchr(*p, 0, (size_t)(end - *p));
    if (!nul) {
        return NULL; /* unterminated: the caller stops */
    }
    *p = nul + 1;
    return s;
}

/* Parses up to MAX_DEVS records; returns how many. */
static size_t parse(const uint8_t *data, size_t size, rec *out)
{
    const uint8_t *p = data;
    const uint8_t *end = data + size;
    size_t n = 0;
    while (n < MAX_DEVS && end - p >= 2) {
        rec *r = &out[n];
        memset(r, 0, sizeof(*r));
        uint8_t flags = *p++;
        uint8_t nb = *p++;
        size_t nn = nb & MAX_NUMA;
        r->verdict = nb & 8;
        if ((size_t)(end - p) < nn * 8) {
            break;
        }
        for (size_t i = 0; i < nn; i++, p += 8) {
            uint64_t v = 0;
            for (int b = 7; b >= 0; b--) {
                v = (v << 8) | p[b];
            }
            memcpy(&r->numa[i], &v, sizeof(v));
        }
        const char *id = take_str(&p, end);
        const char *host = take_str(&p, end);
        const char *cont = take_str(&p, end);
        const char *perm = take_str(&p, end);
        if (!id || !host || !cont || !perm) {
            break;
        }
        static const int healths[4] = {KDP_HEALTHY, KDP_UNHEALTHY, 2, -1};
        r->d.health = (kdp_health)healths[flags & 3];
        r->d.id = flags & 4 ? NULL : id;
        r->d.host_path = flags & 8 ? host : NULL;
        r->d.container_path = flags & 16 ? cont : NULL;
        r->d.permissions = flags & 32 ? perm : NULL;
        r->d.numa_nodes = flags & 64 ? NULL : (nn ? r->numa : NULL);
        r->d.n_numa_nodes = nn;
        r->set_health = flags & 128;
        n++;
    }
    return n;
}

/* The verdict on one device's own fields. */
static bool device_ok(const kdp_device *d)
{
    return kdp__validate_device_id(d->id, NULL) == 0 &&
           (d->health == KDP_HEALTHY || d->health == KDP_UNHEALTHY) &&
           !(d->n_numa_nodes > 0 && !d->numa_nodes) &&
           (!d->permissions || kdp__validate_permissions(d->permissions, NULL) == 0) &&
           (!d->host_path || kdp__validate_abs_path(d->host_path, NULL) == 0) &&
           (!d->container_path || kdp__validate_abs_path(d->container_path, NULL) == 0);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The NUMA nodes kdp must send for d: sorted, unique, non-negative. */
static size_t want_numa(const kdp_device *d, int64_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < d->n_numa_nodes; i++) {
        if (d->numa_nodes[i] >= 0) {
            out[k++] = d->numa_nodes[i];
        }
    }
    qsort(out, k, sizeof(*out), cmp_i64);
    size_t u = 0;
    for (size_t i = 0; i < k; i++) {
        if (u == 0 || out[u - 1] != out[i]) {
            out[u++] = out[i];
        }
    }
    return u;
}

static const kdp_device *find_dev(const rec *recs, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++) {
        if (device_ok(&recs[i].d) && strcmp(recs[i].d.id, id) == 0) {
            return &recs[i].d;
        }
    }
    return NULL;
}

static void check_table(const kdp__devtab *t)
{
    const kdp__dev **sorted = NULL;
    CHECK(kdp__devtab_sorted(t, &sorted) == 0);
    for (size_t i = 1; i < t->n; i++) {
        CHECK(strcmp(sorted[i - 1]->id, sorted[i]->id) < 0); /* no ID twice */
    }
    free(sorted);
    for (size_t i = 0; i < t->n; i++) {
        CHECK(kdp__devtab_find(t, t->devs[i].id) == &t->devs[i]);
    }
}

/* Encodes t, decodes it, compares with the devices it came from. */
static void check_encoding(const kdp__devtab *t, const rec *recs, size_t n)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    CHECK(kdp__devtab_encode(t, &buf, &len) == 0);
    V1beta1__ListAndWatchResponse *m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
    CHECK(m);
    CHECK(m->n_devices == t->n);
    for (size_t i = 0; i < m->n_devices; i++) {
        const V1beta1__Device *pd = m->devices[i];
        CHECK(strcmp(pd->id, t->devs[i].id) == 0);
        /* the first valid device added with this ID is the one in the table */
        const kdp_device *src = find_dev(recs, n, pd->id);
        CHECK(src);
        CHECK(strcmp(pd->health, t->devs[i].health == KDP_HEALTHY ? "Healthy" : "Unhealthy") == 0);
        int64_t want[MAX_NUMA];
        size_t nw = want_numa(src, want);
        if (nw == 0) {
            CHECK(pd->topology == NULL);
            continue;
        }
        CHECK(pd->topology && pd->topology->n_nodes == nw);
        for (size_t k = 0; k < nw; k++) {
            CHECK(pd->topology->nodes[k]->id == want[k]);
        }
    }
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    free(buf);
}

static void on_diff(const kdp__dev *a, const kdp__dev *b, void *ud)
{
    size_t *count = ud;
    CHECK(a || b);
    (*count)++;
}

/* The records once more as single changes (a valid device is put, flag 128
 * on an ID in the table removes it instead), through the plugin's calls and
 * as one batch applied to a copy of base: the plugin's table and the batch's
 * agree, the tracked message size is exact, and undoing the batch gives base
 * back. */
static void check_single_changes(const kdp__devtab *base, const rec *recs, size_t n)
{
    CHECK(kdp__tabshared_set(&plugin->table.shared, NULL, 0) == 0);
    kdp__devtab t;
    kdp__devtab_init(&t);
    CHECK(kdp__devtab_copy(&t, base) == 0);
    for (size_t i = 0; i < base->n; i++) {
        kdp_device pd = kdp__dev_view(&base->devs[i]);
        CHECK(kdp_plugin_set_device(plugin, &pd) == 0);
    }
    static kdp__tabop ops[2 * MAX_DEVS];
    static kdp__tabundo undo[2 * MAX_DEVS];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const kdp_device *d = &recs[i].d;
        if (recs[i].set_health && d->id) {
            pthread_mutex_lock(&plugin->table.shared.mu);
            bool known = kdp__devtab_find(&plugin->table.shared.devs, d->id) != NULL;
            pthread_mutex_unlock(&plugin->table.shared.mu);
            CHECK(kdp_plugin_remove_device(plugin, d->id) == (known ? 0 : -ENOENT));
            ops[k] = (kdp__tabop){.kind = KDP__TABOP_REMOVE, .id = strdup(d->id)};
            CHECK(ops[k++].id);
            continue;
        }
        int r = kdp_plugin_set_device(plugin, d);
        CHECK(r == (device_ok(d) ? 0 : -EINVAL));
        if (r == 0) {
            ops[k] = (kdp__tabop){.kind = KDP__TABOP_PUT};
            CHECK(kdp__dev_from_public(&ops[k].dev, d, NULL) == 0);
            /* a replacement keeps the probe's state, as the plugin's put does */
            pthread_mutex_lock(&plugin->table.shared.mu);
            ops[k].dev.probe = kdp__devtab_find(&plugin->table.shared.devs, d->id)->probe;
            pthread_mutex_unlock(&plugin->table.shared.mu);
            kdp__dev_apply_overlay(&ops[k++].dev);
        }
        if (r == 0 && recs[i].verdict) {
            /* the probe's verdict turns, a single change too */
            static const kdp__probe_cfg one = {
                .interval_ms = 1000, .unhealthy_after = 1, .healthy_after = 1};
            pthread_mutex_lock(&plugin->table.shared.mu);
            bool was = kdp__devtab_find(&plugin->table.shared.devs, d->id)->probe.bad;
            pthread_mutex_unlock(&plugin->table.shared.mu);
            kdp__devprobe st;
            int turn = kdp__tabshared_probe_result(
                &plugin->table.shared, d->id, was ? KDP__PROBE_OK : KDP__PROBE_FAIL, &one, &st);
            CHECK(turn == (was ? KDP__PROBE_TURNED_HEALTHY : KDP__PROBE_TURNED_UNHEALTHY));
            CHECK(st.bad == !was);
            ops[k] = (kdp__tabop){.kind = KDP__TABOP_VERDICT, .id = strdup(d->id), .bad = !was};
            CHECK(ops[k++].id);
        }
    }
    CHECK(kdp__tabops_apply(&t, ops, k, undo) == 0);
    pthread_mutex_lock(&plugin->table.shared.mu);
    CHECK(kdp__devtab_same_for_kubelet(&plugin->table.shared.devs, &t));
    CHECK(plugin->table.shared.bytes == kdp__devtab_encoded_size(&plugin->table.shared.devs));
    pthread_mutex_unlock(&plugin->table.shared.mu);
    check_table(&t);
    kdp__tabops_undo(&t, undo, k);
    kdp__tabundo_free(undo, k);
    CHECK(kdp__devtab_same_for_kubelet(&t, base));
    check_table(&t);
    kdp__devtab_clear(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        init();
    }
    static rec recs[MAX_DEVS];
    size_t n = parse(data, size, recs);

    /* kdp_device_list_add, one by one. */
    kdp_device_list list;
    kdp__devtab_init(&list.tab);
    bool all_ok = true;
    bool dup = false;
    size_t added = 0;
    for (size_t i = 0; i < n; i++) {
        const kdp_device *d = &recs[i].d;
        bool ok = device_ok(d);
        bool seen = ok && kdp__devtab_find(&list.tab, d->id) != NULL;
        int r = kdp_device_list_add(&list, d);
        CHECK(r == (!ok ? -EINVAL : seen ? -EEXIST : 0));
        all_ok &= ok;
        dup |= seen;
        added += r == 0;
    }
    CHECK(list.tab.n == added);
    CHECK(kdp_device_list_add(NULL, n ? &recs[0].d : NULL) == -EINVAL);
    CHECK(kdp_device_list_add(&list, NULL) == -EINVAL);
    check_table(&list.tab);

    /* The same devices as one array: all or nothing, same verdict. */
    kdp_device devs[MAX_DEVS];
    for (size_t i = 0; i < n; i++) {
        devs[i] = recs[i].d;
    }
    int want = !all_ok ? -EINVAL : dup ? -EEXIST : 0;
    kdp__devtab arr;
    kdp__devtab_init(&arr);
    CHECK(kdp__devtab_from_array(&arr, devs, n, NULL) == want);
    pthread_mutex_lock(&plugin->table.shared.mu);
    uint64_t ver = plugin->table.shared.ver;
    pthread_mutex_unlock(&plugin->table.shared.mu);
    CHECK(kdp_plugin_set_devices(plugin, devs, n) == want);
    pthread_mutex_lock(&plugin->table.shared.mu);
    CHECK(plugin->table.shared.ver == ver + (want == 0)); /* nothing changed on failure */
    if (want == 0) {
        CHECK(kdp__devtab_same_for_kubelet(&plugin->table.shared.devs, &arr));
        CHECK(plugin->table.shared.devs.n == list.tab.n);
    }
    pthread_mutex_unlock(&plugin->table.shared.mu);

    /* set_health on what is in the plugin's table now. */
    for (size_t i = 0; i < n; i++) {
        if (!recs[i].set_health) {
            continue;
        }
        const kdp_device *d = &recs[i].d;
        kdp_health h = d->health == KDP_HEALTHY ? KDP_UNHEALTHY : KDP_HEALTHY;
        pthread_mutex_lock(&plugin->table.shared.mu);
        bool known = d->id && kdp__devtab_find(&plugin->table.shared.devs, d->id);
        pthread_mutex_unlock(&plugin->table.shared.mu);
        int r = kdp_plugin_set_health(plugin, d->id, h);
        CHECK(r == (!d->id ? -EINVAL : known ? 0 : -ENOENT));
        CHECK(kdp_plugin_set_health(plugin, d->id ? d->id : "x", (kdp_health)7) == -EINVAL);
        if (known) {
            /* the list's copy too, for the encoding check below */
            (void)kdp__devtab_set_health(&list.tab, d->id, h);
        }
    }

    check_encoding(&list.tab, recs, n);

    /* A copy is the same for the kubelet; the diff with the array's table
     * names exactly the devices that differ. */
    kdp__devtab copy;
    kdp__devtab_init(&copy);
    CHECK(kdp__devtab_copy(&copy, &list.tab) == 0);
    CHECK(kdp__devtab_same_for_kubelet(&copy, &list.tab));
    size_t diffs = 0;
    (void)kdp__devtab_diff(&copy, &list.tab, on_diff, &diffs);
    CHECK(diffs == 0);
    diffs = 0;
    (void)kdp__devtab_diff(&arr, &list.tab, on_diff, &diffs);
    CHECK((diffs == 0) == kdp__devtab_same_for_kubelet(&arr, &list.tab));
    CHECK(kdp__devtab_count_healthy(&list.tab) <= list.tab.n);

    check_single_changes(&list.tab, recs, n);

    kdp__devtab_clear(&copy);
    kdp__devtab_clear(&arr);
    kdp__devtab_clear(&list.tab);
    return 0;
}
