/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic: a resource's devices from its entries, through the
 * discovery calls of kdp.h. A path entry gives one device per match, a
 * group one device made of every match (present only when each of its
 * patterns matches), a usb or pci entry one device per USB or PCI device
 * with its nodes. A usb or pci filter on a path or a group keeps the
 * matches on such a device. The sharedNodes are matched here too.
 */
#include "scan.h"

#include <errno.h>
#include <kdp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

/* ---- a growing string vector (NULL-terminated once taken) ---- */

typedef struct svec {
    char **v;
    size_t n;
    size_t cap;
} svec;

static int svec_add(svec *s, const char *str)
{
    if (s->n + 1 >= s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char **v = realloc(s->v, cap * sizeof(*v));
        if (!v) {
            return -ENOMEM;
        }
        s->v = v;
        s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(str))) {
        return -ENOMEM;
    }
    s->v[++s->n] = NULL;
    return 0;
}

static void svec_clear(svec *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i]);
    }
    free(s->v);
    memset(s, 0, sizeof(*s));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts and drops duplicates. */
static void svec_sort_unique(svec *s)
{
    if (s->n < 2) {
        return;
    }
    qsort(s->v, s->n, sizeof(*s->v), cmp_str);
    size_t o = 1;
    for (size_t i = 1; i < s->n; i++) {
        if (strcmp(s->v[o - 1], s->v[i]) == 0) {
            free(s->v[i]);
        } else {
            s->v[o++] = s->v[i];
        }
    }
    s->n = o;
    s->v[o] = NULL;
}

/* ---- building the device list ---- */

typedef struct builder {
    const gen_resource *r;
    size_t entry; /* the entry being scanned */
    gen_dev *devs;
    size_t *seq; /* order of addition, to keep the first of two equal IDs */
    size_t n;
    size_t cap;
    bool capped;
} builder;

static void add_numa(const gen_resource *r, gen_dev *d)
{
    for (size_t i = 0; i < d->n_paths && d->n_numa < GEN_MAX_NUMA; i++) {
        int node = -1;
        if (kdp_numa_node_of(r->root, r->sysfs, d->paths[i], &node) < 0 || node < 0) {
            continue;
        }
        size_t j = 0;
        while (j < d->n_numa && d->numa[j] != node) {
            j++;
        }
        if (j == d->n_numa) {
            d->numa[d->n_numa++] = node;
        }
    }
}

static int set_pci(gen_dev *d, const kdp_pci_device *pci)
{
    d->pci.vendor = pci->vendor;
    d->pci.device = pci->device;
    d->pci.class_code = pci->class_code;
    d->pci.address = strdup(pci->address);
    d->pci.driver = pci->driver ? strdup(pci->driver) : NULL;
    d->pci.pcie_root = pci->pcie_root ? strdup(pci->pcie_root) : NULL;
    if (pci->numa_node >= 0) { /* its nodes' NUMA node is the device's */
        d->numa[d->n_numa++] = pci->numa_node;
    }
    return d->pci.address && (d->pci.driver || !pci->driver) &&
                   (d->pci.pcie_root || !pci->pcie_root)
               ? 0
               : -ENOMEM;
}

static void dev_clear(gen_dev *d);

/* Adds a device made of paths (taken, emptied); pci: its PCI identity, or
 * NULL. */
static int add_dev(builder *b, const char *id, svec *paths, const kdp_pci_device *pci)
{
    if (b->n >= GEN_MAX_DEVICES) {
        if (!b->capped) {
            log_e("%s: more than %u devices: the rest are left out", b->r->name, GEN_MAX_DEVICES);
        }
        b->capped = true;
        svec_clear(paths);
        return 0;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        gen_dev *d = realloc(b->devs, cap * sizeof(*d));
        if (d) {
            b->devs = d;
        }
        size_t *s = d ? realloc(b->seq, cap * sizeof(*s)) : NULL;
        if (!s) {
            svec_clear(paths);
            return -ENOMEM;
        }
        b->seq = s;
        b->cap = cap;
    }
    gen_dev *d = &b->devs[b->n];
    memset(d, 0, sizeof(*d));
    svec_sort_unique(paths);
    d->id = strdup(id);
    if (!d->id) {
        svec_clear(paths);
        return -ENOMEM;
    }
    d->paths = paths->v;
    d->n_paths = paths->n;
    d->entry = b->entry;
    memset(paths, 0, sizeof(*paths));
    if (!pci) {
        add_numa(b->r, d); /* a pci entry's device has its own (set_pci) */
    }
    if (pci && set_pci(d, pci) < 0) {
        dev_clear(d);
        return -ENOMEM;
    }
    b->seq[b->n] = b->n;
    b->n++;
    return 0;
}

static bool usb_match(const gen_usb *want, const kdp_usb_device *u)
{
    return u->vendor == want->vendor && (!want->has_product || u->product == want->product) &&
           (!want->serial || (u->serial && strcmp(u->serial, want->serial) == 0));
}

static bool node_on_usb(const gen_resource *r, const gen_usb *want, const char *path)
{
    kdp_usb_device u;
    if (kdp_usb_device_of(r->root, r->sysfs, path, &u) < 0) {
        return false;
    }
    bool ok = usb_match(want, &u);
    kdp_usb_device_clear(&u);
    return ok;
}

static bool pci_match(const gen_pci *want, const kdp_pci_device *d)
{
    return (want->vendor < 0 || d->vendor == want->vendor) &&
           (want->device < 0 || d->device == want->device) &&
           (want->subsystem_vendor < 0 || d->subsystem_vendor == want->subsystem_vendor) &&
           (want->subsystem_device < 0 || d->subsystem_device == want->subsystem_device) &&
           (d->class_code & want->class_mask) == want->class_value &&
           (!want->driver || (d->driver && strcmp(d->driver, want->driver) == 0));
}

static bool node_on_pci(const gen_resource *r, const gen_pci *want, const char *path)
{
    kdp_pci_device d;
    if (kdp_pci_device_of(r->root, r->sysfs, path, &d) < 0) {
        return false;
    }
    bool ok = pci_match(want, &d);
    kdp_pci_device_clear(&d);
    return ok;
}

/* The matches of one pattern (kept by the usb or pci filter, if any) into
 * out. */
static int glob_into(const gen_resource *r, const gen_entry *e, const char *pattern, svec *out)
{
    char **m = NULL;
    int n = kdp_glob_devices(r->root, pattern, &m);
    if (n < 0) {
        log_w("%s: %s: %s", r->name, pattern, strerror(-n));
        return n == -ENOMEM ? n : 0;
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if ((!e->usb.set || node_on_usb(r, &e->usb, m[i])) &&
            (!e->pci.set || node_on_pci(r, &e->pci, m[i]))) {
            rc = svec_add(out, m[i]);
        }
    }
    kdp_strv_free(m);
    return rc;
}

/* path: one device per match. */
static int scan_path(builder *b, const gen_entry *e)
{
    svec m = {0};
    int rc = glob_into(b->r, e, e->paths[0], &m);
    for (size_t i = 0; rc == 0 && i < m.n; i++) {
        char id[256];
        svec one = {0};
        gen_id_from_path(m.v[i], id);
        rc = svec_add(&one, m.v[i]);
        rc = rc < 0 ? rc : add_dev(b, id, &one, NULL);
        svec_clear(&one);
    }
    svec_clear(&m);
    return rc;
}

/* paths: one device made of every match, if each pattern matches. */
static int scan_group(builder *b, const gen_entry *e)
{
    svec all = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < e->n_paths; i++) {
        size_t before = all.n;
        rc = glob_into(b->r, e, e->paths[i], &all);
        if (rc == 0 && all.n == before) {
            svec_clear(&all); /* incomplete: no device */
            return 0;
        }
    }
    if (rc == 0 && all.n > 0) { /* none if the entry had no pattern */
        char id[256];
        if (e->id) {
            snprintf(id, sizeof(id), "%s", e->id);
        } else {
            gen_id_from_path(all.v[0], id);
        }
        rc = add_dev(b, id, &all, NULL);
    }
    svec_clear(&all);
    return rc;
}

static bool exists_in_root(const char *root, const char *path)
{
    char full[PATH_MAX];
    size_t rl = strlen(root);
    while (rl > 0 && root[rl - 1] == '/') {
        rl--;
    }
    int w = snprintf(full, sizeof(full), "%.*s%s", (int)rl, root, path);
    struct stat st;
    return w > 0 && (size_t)w < sizeof(full) && lstat(full, &st) == 0;
}

/* usb without a path: each matching USB device with its existing nodes. */
static int scan_usb(builder *b, const gen_entry *e)
{
    kdp_usb_device *u = NULL;
    size_t n = 0;
    int rc = kdp_usb_list(b->r->sysfs, &u, &n);
    if (rc < 0) {
        return rc == -ENOMEM ? rc : 0; /* no USB bus: no device */
    }
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        svec nodes = {0};
        for (char **p = u[i].nodes; rc == 0 && usb_match(&e->usb, &u[i]) && *p; p++) {
            rc = exists_in_root(b->r->root, *p) ? svec_add(&nodes, *p) : 0;
        }
        if (rc == 0 && nodes.n > 0) {
            char id[216];
            char name[208]; /* 200 bytes at most */
            gen_sanitize_id(u[i].name, name);
            snprintf(id, sizeof(id), "usb-%s", name);
            rc = add_dev(b, id, &nodes, NULL);
        }
        svec_clear(&nodes);
    }
    kdp_usb_list_free(u, n);
    return rc;
}

/* pci without a path: each matching PCI device with its existing nodes
 * (none: unbound, or its driver publishes none: left out). */
static int scan_pci(builder *b, const gen_entry *e)
{
    kdp_pci_device *d = NULL;
    size_t n = 0;
    int rc = kdp_pci_list(b->r->root, b->r->sysfs, &d, &n);
    if (rc < 0) {
        return rc == -ENOMEM ? rc : 0; /* no PCI bus: no device */
    }
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        svec nodes = {0};
        for (char **p = d[i].nodes; rc == 0 && pci_match(&e->pci, &d[i]) && *p; p++) {
            rc = exists_in_root(b->r->root, *p) ? svec_add(&nodes, *p) : 0;
        }
        if (rc == 0 && nodes.n > 0) {
            char id[80];
            snprintf(id, sizeof(id), "pci-%s", d[i].address); /* 12 to 16 characters */
            rc = add_dev(b, id, &nodes, &d[i]);
        }
        svec_clear(&nodes);
    }
    kdp_pci_list_free(d, n);
    return rc;
}

/* sharedNodes: every match; the first pattern without one is missing. */
static int scan_shared(const gen_resource *r, gen_scan *out)
{
    svec all = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < r->n_shared; i++) {
        char **m = NULL;
        int n = kdp_glob_devices(r->root, r->shared[i], &m);
        for (int k = 0; rc == 0 && k < n; k++) {
            rc = svec_add(&all, m[k]);
        }
        kdp_strv_free(m);
        if (rc == 0 && n <= 0 && !out->shared_missing) {
            rc = (out->shared_missing = strdup(r->shared[i])) ? 0 : -ENOMEM;
        }
    }
    svec_sort_unique(&all);
    if (rc == 0 && r->n_shared > 0 && !all.v) { /* an empty, NULL-terminated array */
        rc = (all.v = calloc(1, sizeof(*all.v))) ? 0 : -ENOMEM;
    }
    out->shared = rc == 0 ? all.v : NULL;
    out->n_shared = rc == 0 ? all.n : 0;
    if (rc < 0) {
        svec_clear(&all);
    }
    return rc;
}

/* ---- the device list ---- */

static void dev_clear(gen_dev *d)
{
    for (size_t i = 0; i < d->n_paths; i++) {
        free(d->paths[i]);
    }
    free(d->paths);
    free(d->id);
    free(d->pci.address);
    free(d->pci.driver);
    free(d->pci.pcie_root);
}

static int cmp_dev_seq(const void *a, const void *b, void *ud)
{
    const builder *bl = ud;
    size_t ia = *(const size_t *)a;
    size_t ib = *(const size_t *)b;
    int c = strcmp(bl->devs[ia].id, bl->devs[ib].id);
    return c ? c : (ia > ib) - (ia < ib);
}

/* Sorts the devices by ID; of two with one ID the first added stays. */
static int finish_devs(builder *b, gen_scan *out)
{
    if (b->n > 1) {
        qsort_r(b->seq, b->n, sizeof(*b->seq), cmp_dev_seq, b);
    }
    out->devs = calloc(b->n ? b->n : 1, sizeof(*out->devs));
    out->n = 0;
    if (!out->devs) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < b->n; i++) {
        gen_dev *d = &b->devs[b->seq[i]];
        if (out->n > 0 && strcmp(out->devs[out->n - 1].id, d->id) == 0) {
            log_w("%s: two devices named %s: keeping %s, leaving out %s", b->r->name, d->id,
                  out->devs[out->n - 1].paths[0], d->paths[0]);
            dev_clear(d);
            continue;
        }
        out->devs[out->n++] = *d;
    }
    b->n = 0;
    return 0;
}

static int check_ids(const gen_resource *r, gen_scan *s)
{
    s->n_ids = s->n * r->count;
    if (s->n_ids > GEN_MAX_IDS) {
        log_e("%s: %zu devices x count %u = %zu device IDs, over the cap of %u", r->name, s->n,
              r->count, s->n_ids, GEN_MAX_IDS);
        return -E2BIG;
    }
    return 0;
}

int gen_scan_run(const gen_resource *r, gen_scan *out)
{
    memset(out, 0, sizeof(*out));
    builder b = {.r = r};
    int rc = 0;
    for (size_t i = 0; i < r->n_entries && rc == 0; i++) {
        const gen_entry *e = &r->entries[i];
        b.entry = i;
        rc = e->group     ? scan_group(&b, e)
             : e->n_paths ? scan_path(&b, e)
             : e->usb.set ? scan_usb(&b, e)
                          : scan_pci(&b, e);
    }
    if (rc == 0) {
        rc = scan_shared(r, out);
    }
    if (rc == 0) {
        rc = finish_devs(&b, out);
    }
    if (rc == 0) {
        rc = check_ids(r, out);
    }
    for (size_t i = 0; i < b.n; i++) {
        dev_clear(&b.devs[i]);
    }
    free(b.devs);
    free(b.seq);
    if (rc < 0) {
        gen_scan_clear(out);
    }
    return rc;
}

void gen_scan_clear(gen_scan *s)
{
    for (size_t i = 0; i < s->n; i++) {
        dev_clear(&s->devs[i]);
    }
    free(s->devs);
    for (size_t i = 0; i < s->n_shared; i++) {
        free(s->shared[i]);
    }
    free(s->shared);
    free(s->shared_missing);
    memset(s, 0, sizeof(*s));
}

static int cmp_dev_id(const void *key, const void *elem)
{
    return strcmp(key, ((const gen_dev *)elem)->id);
}

const gen_dev *gen_scan_lookup(const gen_scan *s, const char *id)
{
    return s->n ? bsearch(id, s->devs, s->n, sizeof(*s->devs), cmp_dev_id) : NULL;
}

int gen_dev_copy(gen_dev *dst, const gen_dev *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->id = strdup(src->id);
    dst->paths = calloc(src->n_paths + 1, sizeof(*dst->paths));
    if (!dst->id || !dst->paths) {
        gen_dev_clear(dst);
        return -ENOMEM;
    }
    for (size_t i = 0; i < src->n_paths; i++) {
        if (!(dst->paths[i] = strdup(src->paths[i]))) {
            gen_dev_clear(dst);
            return -ENOMEM;
        }
        dst->n_paths++;
    }
    memcpy(dst->numa, src->numa, sizeof(dst->numa));
    dst->n_numa = src->n_numa;
    dst->entry = src->entry;
    dst->pci = src->pci;
    dst->pci.address = src->pci.address ? strdup(src->pci.address) : NULL;
    dst->pci.driver = src->pci.driver ? strdup(src->pci.driver) : NULL;
    dst->pci.pcie_root = src->pci.pcie_root ? strdup(src->pci.pcie_root) : NULL;
    if ((src->pci.address && !dst->pci.address) || (src->pci.driver && !dst->pci.driver) ||
        (src->pci.pcie_root && !dst->pci.pcie_root)) {
        gen_dev_clear(dst);
        return -ENOMEM;
    }
    return 0;
}

void gen_dev_clear(gen_dev *d)
{
    dev_clear(d);
    memset(d, 0, sizeof(*d));
}

static int cmp_dev(const void *a, const void *b)
{
    return strcmp(((const gen_dev *)a)->id, ((const gen_dev *)b)->id);
}

int gen_scan_keep_missing(const gen_resource *r, gen_scan *s, const gen_scan *old)
{
    size_t missing = 0;
    for (size_t i = 0; i < old->n; i++) {
        missing += !gen_scan_lookup(s, old->devs[i].id);
    }
    if (missing == 0) {
        return 0;
    }
    if (s->n + missing > GEN_MAX_DEVICES || (s->n + missing) * r->count > GEN_MAX_IDS) {
        log_w("%s: %zu devices whose nodes are missing are left out: over the caps of %u "
              "devices and %u device IDs",
              r->name, missing, GEN_MAX_DEVICES, GEN_MAX_IDS);
        return 0;
    }
    gen_dev *v = realloc(s->devs, (s->n + missing) * sizeof(*v));
    if (!v) {
        return -ENOMEM;
    }
    s->devs = v;
    size_t n = s->n;
    for (size_t i = 0; i < old->n; i++) {
        if (!gen_scan_lookup(s, old->devs[i].id)) {
            if (gen_dev_copy(&v[n], &old->devs[i]) < 0) {
                break;
            }
            n++;
        }
    }
    bool complete = n == s->n + missing;
    s->n = n;
    qsort(s->devs, s->n, sizeof(*s->devs), cmp_dev);
    s->n_ids = s->n * r->count;
    return complete ? 0 : -ENOMEM;
}
