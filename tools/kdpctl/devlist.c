/* SPDX-License-Identifier: MIT */
/* devlist: device tables from ListAndWatch messages, and their changes. */
#include "devlist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"

const char *kc_health_name(kdp_health h)
{
    return h == KDP_HEALTHY ? "Healthy" : "Unhealthy";
}

static int by_id(const void *a, const void *b)
{
    const V1beta1__Device *const *x = a;
    const V1beta1__Device *const *y = b;
    const char *ix = (*x)->id ? (*x)->id : "";
    const char *iy = (*y)->id ? (*y)->id : "";
    return strcmp(ix, iy);
}

/* Adds one device of the message; -ENOMEM is the only error returned. */
static int add_device(kdp__devtab *t, const V1beta1__Device *d, kc_buf *warn)
{
    const char *id = d->id ? d->id : "";
    const char *health = d->health ? d->health : "";
    int64_t nodes[64];
    size_t n = 0;
    for (size_t i = 0; d->topology && i < d->topology->n_nodes; i++) {
        if (d->topology->nodes[i] && n < sizeof(nodes) / sizeof(nodes[0])) {
            nodes[n++] = d->topology->nodes[i]->id;
        }
    }
    kdp_device dev = {
        .id = id,
        .health = strcmp(health, "Healthy") == 0 ? KDP_HEALTHY : KDP_UNHEALTHY,
        .numa_nodes = n ? nodes : NULL,
        .n_numa_nodes = n,
    };
    if (warn && dev.health == KDP_UNHEALTHY && strcmp(health, "Unhealthy") != 0) {
        kc_buf_printf(warn,
                      "device \"%s\": health \"%s\" is neither Healthy nor Unhealthy: "
                      "counted as Unhealthy (the kubelet does the same)\n",
                      id, health);
    }
    const char *why = "invalid";
    int r = kdp__devtab_add(t, &dev, &why);
    if (r == -ENOMEM) {
        return r;
    }
    if (r < 0 && warn) {
        kc_buf_printf(warn, "device \"%s\" skipped: %s\n", id, why);
    }
    return 0;
}

int kc_devtab_decode(const uint8_t *msg, size_t len, kdp__devtab *t, kc_buf *warn)
{
    V1beta1__ListAndWatchResponse *m = v1beta1__list_and_watch_response__unpack(NULL, len, msg);
    if (!m) {
        return -EBADMSG;
    }
    /* Sorted first, so each add appends (kdp's table inserts in place). */
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    V1beta1__Device **devs = calloc(m->n_devices ? m->n_devices : 1, sizeof(*devs));
    int r = devs ? 0 : -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; devs && i < m->n_devices; i++) {
        if (m->devices[i]) {
            devs[n++] = m->devices[i];
        }
    }
    if (devs) {
        // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
        qsort(devs, n, sizeof(*devs), by_id);
    }
    kdp__devtab nt;
    kdp__devtab_init(&nt);
    for (size_t i = 0; r == 0 && i < n; i++) {
        r = add_device(&nt, devs[i], warn);
    }
    if (r == 0) {
        kdp__devtab_move(t, &nt);
    }
    kdp__devtab_clear(&nt);
    free(devs);
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    return r;
}

void kc_devices_summary(kc_buf *out, const kdp__devtab *t)
{
    size_t healthy = kdp__devtab_count_healthy(t);
    if (t->n == 0) {
        kc_buf_puts(out, "no devices");
        return;
    }
    kc_buf_printf(out, "%zu device%s: %zu healthy, %zu unhealthy", t->n, t->n == 1 ? "" : "s",
                  healthy, t->n - healthy);
}

static const char *numa_text(const kdp__dev *d, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < d->n_numa && off < cap; i++) {
        int n = snprintf(buf + off, cap - off, "%s%lld", i ? "," : "", (long long)d->numa[i]);
        off += n > 0 ? (size_t)n : 0;
    }
    return d->n_numa ? buf : "-";
}

void kc_devices_table(kc_buf *out, const kdp__devtab *t, const char *indent)
{
    kc_table tab;
    kc_table_init(&tab, 3);
    const char *head[] = {"ID", "HEALTH", "NUMA"};
    kc_table_row(&tab, head);
    const kdp__dev **sorted = NULL;
    (void)kdp__devtab_sorted(t, &sorted); /* NULL on ENOMEM: message order */
    for (size_t i = 0; i < t->n; i++) {
        const kdp__dev *d = sorted ? sorted[i] : &t->devs[i];
        char numa[256];
        const char *row[] = {d->id, kc_health_name(d->health), numa_text(d, numa, sizeof(numa))};
        kc_table_row(&tab, row);
    }
    free(sorted);
    kc_table_render(&tab, out, indent);
    kc_table_free(&tab);
}

static void numa_json(kc_json *j, const char *key, const kdp__dev *d)
{
    kc_json_arr(j, key);
    for (size_t i = 0; i < d->n_numa; i++) {
        kc_json_int(j, NULL, d->numa[i]);
    }
    kc_json_end(j);
}

void kc_devices_json(kc_json *j, const kdp__devtab *t)
{
    kc_json_arr(j, "devices");
    const kdp__dev **sorted = NULL;
    (void)kdp__devtab_sorted(t, &sorted); /* NULL on ENOMEM: message order */
    for (size_t i = 0; i < t->n; i++) {
        const kdp__dev *d = sorted ? sorted[i] : &t->devs[i];
        kc_json_obj(j, NULL);
        kc_json_str(j, "id", d->id);
        kc_json_str(j, "health", kc_health_name(d->health));
        numa_json(j, "numa", d);
        kc_json_end(j);
    }
    free(sorted);
    kc_json_end(j);
    size_t healthy = kdp__devtab_count_healthy(t);
    kc_json_uint(j, "n", t->n);
    kc_json_uint(j, "healthy", healthy);
    kc_json_uint(j, "unhealthy", t->n - healthy);
}

/* ---- changes ---- */

static bool same_numa(const kdp__dev *a, const kdp__dev *b)
{
    return a->n_numa == b->n_numa &&
           (a->n_numa == 0 || memcmp(a->numa, b->numa, a->n_numa * sizeof(*a->numa)) == 0);
}

static void text_change(const kdp__dev *o, const kdp__dev *n, void *ud)
{
    kc_table *tab = ud;
    char a[256];
    char b[256];
    char detail[600];
    if (!o) {
        bool numa = n->n_numa > 0;
        snprintf(detail, sizeof(detail), "%s%s%s", kc_health_name(n->health), numa ? ", NUMA " : "",
                 numa ? numa_text(n, a, sizeof(a)) : "");
        kc_table_row(tab, (const char *[]){"added", n->id, detail});
        return;
    }
    if (!n) {
        kc_table_row(tab, (const char *[]){"removed", o->id, ""});
        return;
    }
    if (o->health != n->health) {
        snprintf(detail, sizeof(detail), "%s -> %s", kc_health_name(o->health),
                 kc_health_name(n->health));
        kc_table_row(tab, (const char *[]){"health", n->id, detail});
    }
    if (!same_numa(o, n)) {
        snprintf(detail, sizeof(detail), "NUMA %s -> %s", numa_text(o, a, sizeof(a)),
                 numa_text(n, b, sizeof(b)));
        kc_table_row(tab, (const char *[]){"numa", n->id, detail});
    }
}

size_t kc_changes_text(kc_buf *out, const kdp__devtab *old_tab, const kdp__devtab *new_tab,
                       const char *indent)
{
    kc_table tab;
    kc_table_init(&tab, 3);
    (void)kdp__devtab_diff(old_tab, new_tab, text_change, &tab);
    size_t n = tab.nrows;
    kc_table_render(&tab, out, indent);
    kc_table_free(&tab);
    return n;
}

static void json_change(const kdp__dev *o, const kdp__dev *n, void *ud)
{
    kc_json *j = ud;
    kc_json_obj(j, NULL);
    kc_json_str(j, "id", o ? o->id : n->id);
    kc_json_str(j, "change", !o ? "added" : !n ? "removed" : "changed");
    if (n) {
        kc_json_str(j, "health", kc_health_name(n->health));
        numa_json(j, "numa", n);
    }
    if (o) {
        kc_json_str(j, "old_health", kc_health_name(o->health));
        numa_json(j, "old_numa", o);
    }
    kc_json_end(j);
}

void kc_changes_json(kc_json *j, const kdp__devtab *old_tab, const kdp__devtab *new_tab)
{
    kc_json_arr(j, "changes");
    (void)kdp__devtab_diff(old_tab, new_tab, json_change, j);
    kc_json_end(j);
}
