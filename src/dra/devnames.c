/* SPDX-License-Identifier: MIT */
/*
 * devnames: the devices as the slices show them. At every change of the
 * table, the devices new to it (by ID) are described by the describe op on
 * the worker (kdp_dra_device: name, attributes, capacities; without the op,
 * the name from the ID), the ones gone are dropped; then the names are
 * checked for duplicates (both left out, logged) and the slices published.
 * The descriptions are kept by ID in `cache` (JSON: {"name", "attributes":
 * {name: {"int"|"bool"|"string"|"version": v}}, "capacity": {name:
 * {"value": q}}}, the API's shapes, or null for a device left out).
 * A describe that overruns its deadline or cannot be run is tried again on
 * a timer (backoff 1 s .. 60 s): a static table is never left unpublished.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "dra/describe.h"
#include "dra/dra_int.h"
#include "plugin/jobs.h"

#define RETRY_MIN_US (1000ULL * 1000ULL)
#define RETRY_MAX_US (60ULL * 1000ULL * 1000ULL)

/* The descriptions by ID (loop thread). */
static json_t *cache(kdp__dra *d)
{
    return json_object_get(d->described, "by_id");
}

static void on_describe_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__dra_names_changed(ud, false);
}

int kdp__dra_names_init(kdp__dra *d)
{
    d->name_of = json_object();
    d->id_of = json_object();
    d->described = json_pack("{s:{}, s:{}}", "by_id", "devices");
    kdp__backoff_init(&d->describe_backoff, RETRY_MIN_US, RETRY_MAX_US, 0);
    if (!d->name_of || !d->id_of || !d->described) {
        return -ENOMEM;
    }
    return kdp__timer_new(d->loop, on_describe_retry, d, &d->describe_retry);
}

void kdp__dra_names_done(kdp__dra *d)
{
    kdp__timer_free(d->describe_retry);
    d->describe_retry = NULL;
    json_decref(d->name_of);
    json_decref(d->id_of);
    json_decref(d->described);
    d->name_of = d->id_of = d->described = NULL;
}

bool kdp__dra_name_of(kdp__dra *d, const kdp__dev *dev, char out[64])
{
    const char *n = json_string_value(json_object_get(d->name_of, dev->id));
    if (n) {
        snprintf(out, 64, "%s", n);
        return true;
    }
    if (json_object_get(cache(d), dev->id)) {
        return false; /* described: left out */
    }
    return kdp__dra_default_name(dev->id, out) == 0; /* not described yet */
}

const kdp__dev *kdp__dra_device_by_name(kdp__dra *d, const char *name)
{
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    const char *id = json_string_value(json_object_get(d->id_of, name));
    if (id) {
        return kdp__devtab_find(tab, id);
    }
    char buf[64];
    for (size_t i = 0; i < tab->n; i++) {
        if (!json_object_get(cache(d), tab->devs[i].id) &&
            kdp__dra_default_name(tab->devs[i].id, buf) == 0 && strcmp(buf, name) == 0) {
            return &tab->devs[i];
        }
    }
    return NULL;
}

/* ---- the description of one device, as JSON ---- */

static json_t *attr_json(const kdp_dra_attr *a)
{
    switch (a->type) {
    case KDP_DRA_ATTR_INT:
        return json_pack("{s:I}", "int", (json_int_t)a->int_value);
    case KDP_DRA_ATTR_BOOL:
        return json_pack("{s:b}", "bool", a->bool_value);
    case KDP_DRA_ATTR_STRING:
        return json_pack("{s:s}", "string", a->string_value);
    case KDP_DRA_ATTR_VERSION:
        return json_pack("{s:s}", "version", a->string_value);
    }
    return NULL;
}

static json_t *desc_json(const kdp_dra_device *dd, const char *name)
{
    json_t *attrs = json_object();
    json_t *caps = json_object();
    for (size_t i = 0; attrs && i < dd->n_attrs; i++) {
        json_object_set_new(attrs, dd->attrs[i].name, attr_json(&dd->attrs[i]));
    }
    for (size_t i = 0; caps && i < dd->n_caps; i++) {
        json_object_set_new(caps, dd->caps[i].name,
                            json_pack("{s:s}", "value", dd->caps[i].quantity));
    }
    if (!attrs || !caps) {
        json_decref(attrs);
        json_decref(caps);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o}", "name", name, "attributes", attrs, "capacity", caps);
}

/* One device described: its JSON, or json_null() when it is left out. */
static json_t *describe_one(kdp_plugin *p, const kdp_dra_ops *ops, void *ud, const kdp_device *dev)
{
    kdp_dra_device dd;
    kdp__dra_device_init(&dd, dev->id);
    int r = ops->describe ? ops->describe(p, dev, &dd, ud) : 0;
    char name[64];
    json_t *out = NULL;
    if (r < 0) {
        log_warn("device %s: left out of the slices: the describe callback failed: %s", dev->id,
                 strerror(-r));
    } else if (!dd.name && kdp__dra_default_name(dev->id, name) < 0) {
        log_warn("device %s: left out of the slices: its ID gives no valid device name (a DNS "
                 "label): name it with kdp_dra_device_set_name()",
                 dev->id);
    } else {
        out = desc_json(&dd, dd.name ? dd.name : name);
    }
    kdp__dra_device_done(&dd);
    return out ? out : json_null();
}

/* ---- the describe job ---- */

typedef struct djob {
    kdp_plugin *p;
    kdp_dra_ops ops;
    void *ud;
    kdp_device *devs; /* one allocation (kdp__devtab_export) */
    size_t n;
    json_t *out; /* ID -> description */
} djob;

static void djob_cleanup(kdp__pjob *j)
{
    djob *dj = j->data;
    if (dj) {
        free(dj->devs);
        json_decref(dj->out);
        free(dj);
        j->data = NULL;
    }
}

static void djob_fn(kdp__pjob *j)
{
    djob *dj = j->data;
    for (size_t i = 0; i < dj->n; i++) {
        json_object_set_new(dj->out, dj->devs[i].id,
                            describe_one(dj->p, &dj->ops, dj->ud, &dj->devs[i]));
    }
    j->result = 0;
}

static void rebuild(kdp__dra *d);
static void describe_new(kdp__dra *d, bool force);

/* The devices not described yet: again later. */
static void retry_later(kdp__dra *d)
{
    uint64_t us = kdp__backoff_next(&d->describe_backoff);
    log_warn("%s: describing the devices again in %llu ms", d->driver,
             (unsigned long long)(us / 1000U));
    kdp__timer_start(d->describe_retry, us);
}

static void djob_complete(kdp__pjob *j, bool timed_out)
{
    kdp__dra *d = j->owner;
    djob *dj = j->data;
    d->describing = false;
    if (timed_out) {
        log_error("%s: the describe callback overran its deadline: the slices keep the last "
                  "descriptions",
                  d->driver);
    } else {
        kdp__backoff_reset(&d->describe_backoff);
        json_object_update(cache(d), dj->out);
    }
    rebuild(d);
    if (d->describe_again) {
        describe_new(d, false);
    } else if (timed_out) {
        retry_later(d);
    }
}

/* The IDs of the table not yet described go to the describe job. */
static void describe_new(kdp__dra *d, bool force)
{
    d->describe_again = false;
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    json_t *c = cache(d);
    /* drop what left the table */
    const char *id;
    json_t *v;
    void *tmp;
    size_t dropped = 0;
    json_object_foreach_safe(c, tmp, id, v)
    {
        if (!kdp__devtab_find(tab, id)) {
            json_object_del(c, id);
            dropped++;
        }
    }
    kdp__devtab fresh;
    kdp__devtab_init(&fresh);
    int r = 0;
    for (size_t i = 0; i < tab->n && r == 0; i++) {
        if (!json_object_get(c, tab->devs[i].id)) {
            kdp_device view = kdp__dev_view(&tab->devs[i]);
            r = kdp__devtab_add(&fresh, &view, NULL);
        }
    }
    if (r == 0 && fresh.n == 0) {
        kdp__devtab_clear(&fresh);
        if (dropped || force) { /* else only health changed: nothing to publish */
            rebuild(d);
        }
        return;
    }
    djob *dj = r == 0 ? calloc(1, sizeof(*dj)) : NULL;
    kdp__pjob *j = dj ? kdp__pjob_new(kdp__plugin_jobs(d->p), "describe", d) : NULL;
    if (j && (kdp__devtab_export(&fresh, &dj->devs, &dj->n) < 0 || !(dj->out = json_object()))) {
        j->base.free(&j->base); /* never submitted; no data yet, so no cleanup */
        j = NULL;
    }
    kdp__devtab_clear(&fresh);
    if (!j) {
        if (dj) {
            free(dj->devs);
            json_decref(dj->out);
            free(dj);
        }
        log_error("%s: out of memory describing the devices", d->driver);
        retry_later(d);
        return;
    }
    dj->p = d->p;
    dj->ops = d->ops;
    dj->ud = d->ud;
    j->data = dj;
    j->fn = djob_fn;
    j->complete = djob_complete;
    j->cleanup = djob_cleanup;
    d->describing = true;
    r = kdp__pjob_submit(j, 0);
    if (r < 0) {
        d->describing = false;
        log_error("%s: cannot run the describe callback: %s", d->driver, strerror(-r));
        retry_later(d);
    }
}

void kdp__dra_names_changed(kdp__dra *d, bool force)
{
    kdp__timer_stop(d->describe_retry); /* this one describes what is left */
    if (d->describing) {
        d->describe_again = true;
        return;
    }
    describe_new(d, force);
}

/* The name maps and the slices' devices from the cache: a name used twice
 * is left out, both devices logged. */
static void rebuild(kdp__dra *d)
{
    json_t *by_name = json_object();
    json_t *dups = json_object();
    json_t *c = cache(d);
    const char *id;
    json_t *v;
    if (!by_name || !dups) {
        json_decref(by_name);
        json_decref(dups);
        return;
    }
    json_object_foreach(c, id, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (!name) {
            continue;
        }
        const char *other = json_string_value(json_object_get(by_name, name));
        if (other) {
            log_warn("devices %s and %s: left out of the slices: both are named %s", other, id,
                     name);
            json_object_set_new(dups, name, json_true());
        } else {
            json_object_set_new(by_name, name, json_string(id));
        }
    }
    json_object_clear(d->name_of);
    json_object_clear(d->id_of);
    json_t *devices = json_object_get(d->described, "devices");
    json_object_clear(devices);
    json_object_foreach(by_name, id, v) /* id: the name here */
    {
        if (json_object_get(dups, id)) {
            continue;
        }
        json_object_set(d->id_of, id, v);
        json_object_set_new(d->name_of, json_string_value(v), json_string(id));
        json_object_set(devices, id, json_object_get(c, json_string_value(v)));
    }
    json_decref(by_name);
    json_decref(dups);
    kdp_dra_status *st = kdp__dra_status_lock(d);
    st->devices = json_object_size(devices);
    kdp__dra_status_unlock(d);
    kdp__dra_health_changed(d);
    if (d->api) {
        kdp__dra_api_publish(d->api);
    }
}
