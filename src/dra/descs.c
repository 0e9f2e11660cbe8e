/* SPDX-License-Identifier: MIT */
/* descs: the plugin's devices as the slices show them (see descs.h). */
#include "dra/descs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/utf8.h"
#include "plugin/plugin.h"

#define RETRY_MIN_US (1000ULL * 1000ULL)
#define RETRY_MAX_US (60ULL * 1000ULL * 1000ULL)

/* ---- the descriptions ---- */

static void desc_clear(kdp__dra_desc *x)
{
    free(x->id);
    kdp__dra_device_done(&x->d);
    memset(x, 0, sizeof(*x));
}

/* The description of id among v[0..n), or NULL (binary search: sorted by
 * ID). */
static kdp__dra_desc *find_in(kdp__dra_desc *v, size_t n, const char *id)
{
    size_t lo = 0;
    size_t hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid].id, id);
        if (c == 0) {
            return &v[mid];
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

static kdp__dra_desc *find(const kdp__dra_descs *dv, const char *id)
{
    return find_in(dv->descs, dv->n, id);
}

static int cmp_desc(const void *a, const void *b)
{
    return strcmp(((const kdp__dra_desc *)a)->id, ((const kdp__dra_desc *)b)->id);
}

typedef struct named {
    const char *name;
    size_t i;
} named;

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

/* The published list from the descriptions: a name used twice is left
 * out, both devices logged. Returns 0 or -ENOMEM. */
static int rebuild(kdp__dra_descs *dv)
{
    named *v = calloc(dv->n ? dv->n : 1, sizeof(*v));
    size_t *pub = calloc(dv->n ? dv->n : 1, sizeof(*pub));
    if (!v || !pub) {
        free(v);
        free(pub);
        return -ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < dv->n; i++) {
        if (dv->descs[i].name[0]) {
            v[m++] = (named){dv->descs[i].name, i};
        }
    }
    qsort(v, m, sizeof(*v), cmp_named);
    size_t w = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i + 1;
        while (j < m && strcmp(v[j].name, v[i].name) == 0) {
            log_warn("devices %s and %s: left out of the slices: both are named %s",
                     dv->descs[v[i].i].id, dv->descs[v[j].i].id, v[i].name);
            j++;
        }
        if (j == i + 1) {
            pub[w++] = v[i].i;
        }
        i = j;
    }
    free(v);
    free(dv->pub);
    dv->pub = pub;
    dv->n_pub = w;
    return 0;
}

const char *kdp__dra_descs_id_of(const kdp__dra_descs *dv, const char *name)
{
    size_t lo = 0;
    size_t hi = dv->n_pub;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const kdp__dra_desc *x = &dv->descs[dv->pub[mid]];
        int c = strcmp(x->name, name);
        if (c == 0) {
            return x->id;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

const char *kdp__dra_descs_name_of(const kdp__dra_descs *dv, const char *id)
{
    const kdp__dra_desc *x = find(dv, id);
    if (!x || !x->name[0]) {
        return NULL;
    }
    const char *back = kdp__dra_descs_id_of(dv, x->name);
    return back && strcmp(back, id) == 0 ? x->name : NULL; /* a duplicate is not published */
}

int64_t kdp__dra_descs_health(kdp__dra_descs *dv, const char *id, bool unhealthy, int64_t now)
{
    kdp__dra_desc *x = find(dv, id);
    if (!x) {
        return 0;
    }
    if (!unhealthy) {
        x->unhealthy_since = 0;
    } else if (!x->unhealthy_since) {
        x->unhealthy_since = now > 0 ? now : 1;
    }
    return x->unhealthy_since;
}

static bool note_one(kdp__dra_desc *x, kdp__probe_note note, const char *why)
{
    char w[KDP__DRA_WHY_MAX];
    kdp__utf8_copy(w, sizeof(w), why);
    if (x->note == note && strcmp(x->why, w) == 0) {
        return false;
    }
    x->note = note;
    memcpy(x->why, w, sizeof(w));
    return true;
}

bool kdp__dra_descs_note(kdp__dra_descs *dv, const char *id, kdp__probe_note note, const char *why)
{
    if (id) {
        kdp__dra_desc *x = find(dv, id);
        return x && note_one(x, note, why);
    }
    bool changed = false;
    for (size_t i = 0; i < dv->n; i++) {
        changed |= note_one(&dv->descs[i], note, why);
    }
    return changed;
}

const kdp__dra_desc *kdp__dra_descs_find(const kdp__dra_descs *dv, const char *id)
{
    return find(dv, id);
}

size_t kdp__dra_descs_count(const kdp__dra_descs *dv)
{
    return dv->n_pub;
}

/* ---- the describe job (the worker) ---- */

typedef struct djob {
    kdp_plugin *p;
    int (*describe)(kdp_plugin *, const kdp_device *, kdp_dra_device *, void *);
    void *ud;
    kdp_device *devs; /* one allocation (kdp__devtab_export) */
    size_t n;
    kdp__dra_desc *out; /* one per device */
} djob;

static void djob_free(djob *dj)
{
    for (size_t i = 0; dj->out && i < dj->n; i++) {
        desc_clear(&dj->out[i]);
    }
    free(dj->out);
    free(dj->devs);
    free(dj);
}

static void djob_cleanup(kdp__pjob *j)
{
    if (j->data) {
        djob_free(j->data);
        j->data = NULL;
    }
}

/* One device described into x (name "" when it is left out). */
static void describe_one(djob *dj, const kdp_device *dev, kdp__dra_desc *x)
{
    kdp__dra_device_init(&x->d, NULL);
    x->id = strdup(dev->id);
    x->d.id = x->id;
    int r = x->id ? 0 : -ENOMEM;
    if (r == 0 && dj->describe) {
        r = dj->describe(dj->p, dev, &x->d, dj->ud);
    }
    char name[64];
    if (r < 0) {
        log_warn("device %s: left out of the slices: the describe callback failed: %s", dev->id,
                 strerror(-r));
    } else if (!x->d.name && kdp__dra_default_name(dev->id, name) < 0) {
        log_warn("device %s: left out of the slices: its ID gives no valid device name (a DNS "
                 "label): name it with kdp_dra_device_set_name()",
                 dev->id);
    } else {
        snprintf(x->name, sizeof(x->name), "%s", x->d.name ? x->d.name : name);
    }
}

static void djob_fn(kdp__pjob *j)
{
    djob *dj = j->data;
    for (size_t i = 0; i < dj->n; i++) {
        describe_one(dj, &dj->devs[i], &dj->out[i]);
    }
    j->result = 0;
}

static void describe_new(kdp__dra_descs *dv);

static void retry_later(kdp__dra_descs *dv)
{
    uint64_t us = kdp__backoff_next(&dv->backoff);
    log_warn("%s: describing the devices again in %llu ms", dv->driver,
             (unsigned long long)(us / 1000U));
    kdp__timer_start(dv->retry, us);
}

static void tell(kdp__dra_descs *dv)
{
    dv->force = false;
    if (rebuild(dv) < 0) {
        log_error("%s: out of memory naming the devices", dv->driver);
        retry_later(dv);
        return;
    }
    dv->cbs.changed(dv->cbs.ud);
}

/* x (described again) replaces old: the health noted stays. */
static void replace(kdp__dra_desc *old, kdp__dra_desc *x)
{
    x->unhealthy_since = old->unhealthy_since;
    x->note = old->note;
    memcpy(x->why, old->why, sizeof(x->why));
    desc_clear(old);
    *old = *x;
    memset(x, 0, sizeof(*x));
}

/* The job's descriptions, of devices still in the plugin's table, into
 * the descriptions: new ones added, stale ones replaced (the table does
 * not change while a describe job runs, updates wait for it). */
static void take(kdp__dra_descs *dv, djob *dj)
{
    const kdp__devtab *tab = kdp__plugin_devices(dv->p);
    size_t add = 0;
    for (size_t i = 0; i < dj->n; i++) {
        add += dj->out[i].id && kdp__devtab_find(tab, dj->out[i].id);
    }
    kdp__dra_desc *v = realloc(dv->descs, (dv->n + add + 1) * sizeof(*v));
    if (!v) {
        return; /* described again at the next update */
    }
    dv->descs = v;
    size_t sorted = dv->n;
    for (size_t i = 0; i < dj->n; i++) {
        kdp__dra_desc *x = &dj->out[i];
        if (!x->id || !kdp__devtab_find(tab, x->id)) {
            continue;
        }
        kdp__dra_desc *old = find_in(dv->descs, sorted, x->id);
        if (old && !x->name[0] && old->name[0]) {
            log_warn("device %s: described again without success: the slices keep its last "
                     "description",
                     x->id);
            old->stale = false;
            desc_clear(x);
        } else if (old) {
            replace(old, x);
        } else {
            dv->descs[dv->n++] = *x;
            memset(x, 0, sizeof(*x));
        }
    }
    qsort(dv->descs, dv->n, sizeof(*dv->descs), cmp_desc);
}

static void djob_complete(kdp__pjob *j, bool timed_out)
{
    kdp__dra_descs *dv = j->owner;
    dv->describing = false;
    if (timed_out) {
        log_error("%s: the describe callback overran its deadline: the slices keep the last "
                  "descriptions",
                  dv->driver);
    } else {
        kdp__backoff_reset(&dv->backoff);
        take(dv, j->data);
    }
    tell(dv);
    if (dv->again) {
        describe_new(dv);
    } else if (timed_out) {
        retry_later(dv);
    }
}

/* Drops the descriptions of devices gone from the table; returns how many. */
static size_t drop_gone(kdp__dra_descs *dv, const kdp__devtab *tab)
{
    size_t w = 0;
    size_t dropped = 0;
    for (size_t i = 0; i < dv->n; i++) {
        if (kdp__devtab_find(tab, dv->descs[i].id)) {
            dv->descs[w++] = dv->descs[i];
        } else {
            desc_clear(&dv->descs[i]);
            dropped++;
        }
    }
    dv->n = w;
    return dropped;
}

static djob *make_job(kdp__dra_descs *dv, const kdp__devtab *tab)
{
    kdp__devtab fresh;
    kdp__devtab_init(&fresh);
    int r = 0;
    for (size_t i = 0; i < tab->n && r == 0; i++) {
        const kdp__dra_desc *x = find(dv, tab->devs[i].id);
        if (!x || x->stale) {
            kdp_device view = kdp__dev_view(&tab->devs[i]);
            r = kdp__devtab_add(&fresh, &view, NULL);
        }
    }
    djob *dj = r == 0 && fresh.n ? calloc(1, sizeof(*dj)) : NULL;
    if (dj && (kdp__devtab_export(&fresh, &dj->devs, &dj->n) < 0 ||
               !(dj->out = calloc(dj->n ? dj->n : 1, sizeof(*dj->out))))) {
        djob_free(dj);
        dj = NULL;
    }
    if (dj) {
        dj->p = dv->p;
        dj->describe = dv->describe;
        dj->ud = dv->ud;
    }
    bool oom = r < 0 || (fresh.n && !dj);
    kdp__devtab_clear(&fresh);
    if (oom) {
        log_error("%s: out of memory describing the devices", dv->driver);
        retry_later(dv);
    }
    return dj;
}

/* The inbox's IDs marked stale (loop thread). */
static void take_inbox(kdp__dra_descs *dv)
{
    pthread_mutex_lock(&dv->in_mu);
    char **ids = dv->inbox;
    size_t n = dv->n_inbox;
    bool all = dv->inbox_all;
    dv->inbox = NULL;
    dv->n_inbox = 0;
    dv->inbox_all = false;
    pthread_mutex_unlock(&dv->in_mu);
    for (size_t i = 0; i < dv->n; i++) {
        dv->descs[i].stale |= all;
    }
    for (size_t i = 0; i < n; i++) {
        kdp__dra_desc *x = find(dv, ids[i]);
        if (x) {
            x->stale = true;
        }
        free(ids[i]);
    }
    free((void *)ids);
}

static void describe_new(kdp__dra_descs *dv)
{
    dv->again = false;
    take_inbox(dv);
    const kdp__devtab *tab = kdp__plugin_devices(dv->p);
    size_t dropped = drop_gone(dv, tab);
    djob *dj = make_job(dv, tab);
    if (!dj) {
        if (dropped || dv->force) { /* else only health changed: nothing to publish */
            tell(dv);
        }
        return;
    }
    kdp__pjob *j = kdp__pjob_new(dv->jobs, "describe", dv);
    if (!j) {
        djob_free(dj);
        log_error("%s: out of memory describing the devices", dv->driver);
        retry_later(dv);
        return;
    }
    j->data = dj;
    j->fn = djob_fn;
    j->complete = djob_complete;
    j->cleanup = djob_cleanup;
    dv->describing = true;
    int r = kdp__pjob_submit(j, 0);
    if (r < 0) {
        dv->describing = false;
        log_error("%s: cannot run the describe callback: %s", dv->driver, strerror(-r));
        retry_later(dv);
    }
}

void kdp__dra_descs_update(kdp__dra_descs *dv, bool force)
{
    kdp__timer_stop(dv->retry); /* this one describes what is left */
    dv->force |= force;
    if (dv->describing) {
        dv->again = true;
        return;
    }
    describe_new(dv);
}

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra_descs_update(ud, false);
}

static void on_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    kdp__dra_descs_update(ud, false);
}

int kdp__dra_descs_redescribe(kdp__dra_descs *dv, const char *id)
{
    char *copy = id ? strdup(id) : NULL;
    if (id && !copy) {
        return -ENOMEM;
    }
    pthread_mutex_lock(&dv->in_mu);
    if (!id || dv->inbox_all || dv->n_inbox >= KDP__DRA_REDESCRIBE_MAX) {
        dv->inbox_all = true; /* all of them: the inbox's IDs go then */
        free(copy);
    } else {
        char **v = realloc((void *)dv->inbox, (dv->n_inbox + 1) * sizeof(*v));
        if (v) {
            dv->inbox = v;
            v[dv->n_inbox++] = copy;
        } else {
            dv->inbox_all = true;
            free(copy);
        }
    }
    pthread_mutex_unlock(&dv->in_mu);
    kdp__wakeup_signal(dv->wake);
    return 0;
}

/* ---- the slices' view ---- */

int kdp__dra_descs_view_init(const kdp__dra_descs *dv, kdp__dra_descs_view *v)
{
    memset(v, 0, sizeof(*v));
    size_t n_caps = 0;
    for (size_t i = 0; i < dv->n_pub; i++) {
        n_caps += dv->descs[dv->pub[i]].d.n_caps;
    }
    v->devs = calloc(dv->n_pub ? dv->n_pub : 1, sizeof(*v->devs));
    v->caps = calloc(n_caps ? n_caps : 1, sizeof(*v->caps));
    if (!v->devs || !v->caps) {
        kdp__dra_descs_view_done(v);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < dv->n_pub; i++) {
        const kdp__dra_desc *x = &dv->descs[dv->pub[i]];
        kdp__slice_dev *sd = &v->devs[v->n++];
        *sd = (kdp__slice_dev){.name = x->name,
                               .attrs = x->d.attrs,
                               .n_attrs = x->d.n_attrs,
                               .caps = v->caps + k,
                               .n_caps = x->d.n_caps,
                               .consumes = x->d.consumes,
                               .n_consumes = x->d.n_consumes,
                               .allow_multiple = x->d.allow_multiple,
                               .bind_conds = x->d.bind_conds,
                               .n_bind_conds = x->d.n_bind_conds,
                               .bind_fails = x->d.bind_fails,
                               .n_bind_fails = x->d.n_bind_fails,
                               .binds_to_node = x->d.binds_to_node};
        for (size_t c = 0; c < x->d.n_caps; c++, k++) {
            v->caps[k] = (kdp__slice_cap){.name = x->d.caps[c].name,
                                          .value = x->d.caps[c].quantity,
                                          .policy = x->d.caps[c].policy};
        }
    }
    return 0;
}

void kdp__dra_descs_view_done(kdp__dra_descs_view *v)
{
    free(v->devs);
    free(v->caps);
    memset(v, 0, sizeof(*v));
}

/* ---- life ---- */

int kdp__dra_descs_init(kdp__dra_descs *dv, kdp_plugin *p, kdp__jobs *jobs,
                        int (*describe)(kdp_plugin *, const kdp_device *, kdp_dra_device *, void *),
                        void *ud, const char *driver, const kdp__dra_descs_cbs *cbs)
{
    memset(dv, 0, sizeof(*dv));
    dv->loop = kdp__plugin_loop(p);
    dv->p = p;
    dv->jobs = jobs;
    dv->describe = describe;
    dv->ud = ud;
    dv->driver = driver;
    dv->cbs = *cbs;
    kdp__backoff_init(&dv->backoff, RETRY_MIN_US, RETRY_MAX_US, 0);
    pthread_mutex_init(&dv->in_mu, NULL);
    int r = kdp__timer_new(dv->loop, on_retry, dv, &dv->retry);
    return r < 0 ? r : kdp__wakeup_new(dv->loop, on_wake, dv, &dv->wake);
}

void kdp__dra_descs_done(kdp__dra_descs *dv)
{
    kdp__timer_free(dv->retry);
    dv->retry = NULL;
    kdp__wakeup_free(dv->wake);
    dv->wake = NULL;
    for (size_t i = 0; i < dv->n_inbox; i++) {
        free(dv->inbox[i]);
    }
    free((void *)dv->inbox);
    dv->inbox = NULL;
    dv->n_inbox = 0;
    pthread_mutex_destroy(&dv->in_mu);
    for (size_t i = 0; i < dv->n; i++) {
        desc_clear(&dv->descs[i]);
    }
    free(dv->descs);
    free(dv->pub);
    dv->descs = NULL;
    dv->pub = NULL;
    dv->n = dv->n_pub = 0;
}
