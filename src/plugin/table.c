/* SPDX-License-Identifier: MIT */
#include "plugin/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "plugin/replicas.h"

/* Over this, a warning: the message nears the kubelet's limit. */
#define WARN_MESSAGE ((size_t)3 * 1024 * 1024)
/* A table refused by the loop is said this often. */
#define REJECT_LOG_US (60ULL * 1000000ULL)
/* At most this many device lines per table change, then one summary line:
 * a list of 100,000 devices must not cost 100,000 log lines (about a tenth
 * of the time of its first ListAndWatch, measured with bench/). */
#define LOG_CHANGES_MAX 16

static void sync(kdp__table *t);

/* What other threads read through kdp_plugin_get_status(). */
static void publish_status(kdp__table *t)
{
    kdp_plugin_status *st = kdp__status_lock(t->status);
    st->devices = t->tab.n;
    st->message_bytes = t->msg_len;
    st->rejected_devices = t->rejected_n;
    st->rejected_bytes = t->rejected_bytes;
    st->list_error = kdp__lister_error(&t->lister);
    kdp__status_unlock(t->status);
}

/* ---- taking the shared table ---- */

typedef struct change_log {
    const char *resource;
    size_t n, added, removed, health;
} change_log;

static void log_change(const kdp__dev *old_dev, const kdp__dev *new_dev, void *ud)
{
    change_log *c = ud;
    if (c->n++ >= LOG_CHANGES_MAX) {
        c->added += !old_dev;
        c->removed += !new_dev;
        c->health += old_dev && new_dev && old_dev->health != new_dev->health;
        return;
    }
    if (!old_dev) {
        log_info("%s: device %s added (%s)", c->resource, new_dev->id,
                 new_dev->health == KDP_HEALTHY ? "Healthy" : "Unhealthy");
    } else if (!new_dev) {
        log_info("%s: device %s removed", c->resource, old_dev->id);
    } else if (old_dev->health != new_dev->health) {
        log_info("%s: device %s is now %s", c->resource, new_dev->id,
                 new_dev->health == KDP_HEALTHY ? "Healthy" : "Unhealthy");
    }
}

static void log_changes(kdp__table *t, const kdp__devtab *fresh)
{
    if (!kdp__log_enabled(KDP_LOG_INFO)) {
        return;
    }
    change_log c = {.resource = t->resource};
    (void)kdp__devtab_diff(&t->tab, fresh, log_change, &c);
    if (c.n > LOG_CHANGES_MAX) {
        log_info("%s: ... and %zu more: %zu added, %zu removed, %zu health (%zu devices now)",
                 t->resource, c.n - LOG_CHANGES_MAX, c.added, c.removed, c.health, fresh->n);
    }
}

static int encode(kdp__table *t, const kdp__devtab *tab, uint8_t **buf, size_t *len)
{
    int r = kdp__devtab_encode_replicas(tab, t->shared.replicas, buf, len);
    if (r < 0) {
        log_error("%s: cannot encode %zu devices: %s", t->resource, tab->n, strerror(-r));
    }
    return r;
}

/* The table that would make a message over the kubelet's limit is not sent
 * (the kubelet would fail its stream, and we would restart for nothing):
 * the kubelet keeps the last list that fit. Said at most once a minute. */
static void reject(kdp__table *t, size_t n, size_t len)
{
    uint64_t now = kdp__now_us();
    bool first = t->rejected_bytes == 0;
    t->rejected_n = n;
    t->rejected_bytes = len;
    publish_status(t);
    if (!first && now - t->rejected_logged_us < REJECT_LOG_US) {
        return;
    }
    t->rejected_logged_us = now;
    log_error("%s: not sending the device list: its %zu devices make a %zu-byte ListAndWatch "
              "message, over the kubelet's limit of %u bytes (4 MiB); the kubelet keeps the "
              "last list that fit (%zu devices). Use fewer devices or shorter IDs, or split them "
              "over several resources (said at most once a minute)",
              t->resource, n, len, KDP_MAX_LIST_MESSAGE, t->tab.n);
}

static void clear_rejected(kdp__table *t)
{
    bool was = t->rejected_bytes != 0;
    t->rejected_n = 0;
    t->rejected_bytes = 0;
    t->rejected_logged_us = 0;
    publish_status(t);
    if (was) {
        log_info("%s: the device list fits in the kubelet's message limit again (%zu devices, "
                 "%zu bytes)",
                 t->resource, t->tab.n, t->msg_len);
    }
}

/* A new message for the kubelet: encoded, checked against the limit. 0 (buf
 * and len set), or -errno: -EMSGSIZE (rejected, said), -ENOMEM (logged). */
static int new_message(kdp__table *t, const kdp__devtab *tab, bool changed, uint8_t **buf,
                       size_t *len)
{
    size_t would = kdp__devtab_encoded_size_replicas(tab, t->shared.replicas);
    if (would > KDP_MAX_LIST_MESSAGE) { /* refused before encoding it */
        *buf = NULL;
        reject(t, tab->n, would);
        return -EMSGSIZE;
    }
    int r = encode(t, tab, buf, len);
    if (r < 0) {
        return r;
    }
    if (*len > KDP_MAX_LIST_MESSAGE) {
        free(*buf);
        *buf = NULL;
        reject(t, tab->n, *len);
        return -EMSGSIZE;
    }
    if (*len > WARN_MESSAGE && changed) {
        log_warn("%s: the device list is %zu bytes, close to the kubelet's message limit of "
                 "%u bytes (4 MiB)",
                 t->resource, *len, KDP_MAX_LIST_MESSAGE);
    }
    return 0;
}

static void use_message(kdp__table *t, uint8_t *buf, size_t len, bool changed)
{
    if (buf) {
        free(t->msg);
        t->msg = buf;
        t->msg_len = len;
    }
    clear_rejected(t); /* publishes the status */
    if (changed) {
        t->cbs.changed(t->cbs.ud);
    }
}

/* kdp_health_transitions_total: a device in both tables whose health
 * changed (added and removed devices are not transitions). */
static void count_change(const kdp__dev *old_dev, const kdp__dev *new_dev, void *ud)
{
    kdp__pstats *stats = ud;
    if (old_dev && new_dev && old_dev->health != new_dev->health) {
        kdp__count(&stats->health_to[new_dev->health == KDP_HEALTHY ? 0 : 1], 1);
    }
}

/* The whole table: fresh (taken) replaces tab if its message fits. */
static void take_whole(kdp__table *t, kdp__devtab *fresh)
{
    bool changed = !kdp__devtab_same_for_kubelet(&t->tab, fresh);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (changed || !t->msg) {
        int r = new_message(t, fresh, changed, &buf, &len);
        if (r < 0) {
            /* tab is no longer shared's base: the next change takes all */
            t->tab_stale = true;
            kdp__devtab_clear(fresh);
            return;
        }
    }
    if (changed) {
        log_changes(t, fresh);
        if (t->stats) {
            (void)kdp__devtab_diff(&t->tab, fresh, count_change, t->stats);
        }
    }
    kdp__devtab_move(&t->tab, fresh);
    t->tab_stale = false;
    use_message(t, buf, len, changed);
}

static void log_op(const kdp__tabundo *u, change_log *c)
{
    kdp__dev old_dev = {.id = (char *)u->id, .health = u->old_health};
    kdp__dev new_dev = {.id = (char *)u->id, .health = u->new_health};
    if (u->kind == KDP__TABOP_PUT) {
        old_dev.health = u->old.health;
        log_change(u->had ? &old_dev : NULL, &new_dev, c);
    } else if (u->kind == KDP__TABOP_REMOVE) {
        log_change(&u->old, NULL, c);
    } else {
        log_change(&old_dev, &new_dev, c);
    }
}

/* kdp_health_transitions_total for a batch of single changes. */
static void count_ops(kdp__pstats *stats, const kdp__tabundo *undo, size_t n)
{
    for (size_t i = 0; stats && i < n; i++) {
        const kdp__tabundo *u = &undo[i];
        if (u->visible && u->kind == KDP__TABOP_PUT && u->had) {
            kdp__dev new_dev = {.health = u->new_health};
            count_change(&u->old, &new_dev, stats);
        } else if (u->visible && (u->kind == KDP__TABOP_HEALTH || u->kind == KDP__TABOP_VERDICT)) {
            kdp__dev old_dev = {.health = u->old_health};
            kdp__dev new_dev = {.health = u->new_health};
            count_change(&old_dev, &new_dev, stats);
        }
    }
}

/* Single changes: applied to tab, and taken back if the message would not
 * fit (or cannot be made). O(changes) plus one message. */
static void take_ops(kdp__table *t, kdp__tabops *q)
{
    kdp__tabundo *undo = calloc(q->n, sizeof(*undo));
    if (!undo || kdp__tabops_apply(&t->tab, q->v, q->n, undo) < 0) {
        log_error("%s: out of memory applying %zu device changes; taking the whole table",
                  t->resource, q->n);
        free(undo);
        kdp__tabops_clear(q);
        t->tab_stale = true;
        kdp__wakeup_signal(t->wake);
        return;
    }
    size_t n = q->n;
    free(q->v); /* the ops were consumed */
    memset(q, 0, sizeof(*q));
    bool changed = false;
    for (size_t i = 0; i < n; i++) {
        changed |= undo[i].visible;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (changed || !t->msg) {
        int r = new_message(t, &t->tab, changed, &buf, &len);
        if (r < 0) {
            kdp__tabops_undo(&t->tab, undo, n);
            kdp__tabundo_free(undo, n);
            free(undo);
            t->tab_stale = true;
            if (r == -ENOMEM) {
                kdp__wakeup_signal(t->wake); /* try again */
            }
            return;
        }
        if (changed && t->msg && len == t->msg_len && memcmp(buf, t->msg, len) == 0) {
            changed = false; /* the batch undid itself (a device added, then removed) */
        }
    }
    count_ops(t->stats, undo, n); /* a batch that undid itself changed health twice */
    if (changed && kdp__log_enabled(KDP_LOG_INFO)) {
        change_log c = {.resource = t->resource};
        for (size_t i = 0; i < n; i++) {
            if (undo[i].visible) {
                log_op(&undo[i], &c);
            }
        }
        if (c.n > LOG_CHANGES_MAX) {
            log_info("%s: ... and %zu more: %zu added, %zu removed, %zu health (%zu devices now)",
                     t->resource, c.n - LOG_CHANGES_MAX, c.added, c.removed, c.health, t->tab.n);
        }
    }
    kdp__tabundo_free(undo, n);
    free(undo);
    use_message(t, buf, len, changed);
}

/* Brings tab up to the table other threads published, if newer, and pushes
 * it to the kubelet when what the kubelet sees has changed and its message
 * fits: through the queued changes, or, when there is no usable queue, a
 * copy of the whole table. */
static void take_shared(kdp__table *t)
{
    kdp__devtab fresh;
    kdp__devtab_init(&fresh);
    kdp__tabops q = {0};
    int r = kdp__tabshared_take(&t->shared, &t->tab_ver, t->tab_stale, &fresh, &q);
    if (r == KDP__TOOK_NOTHING) {
        return;
    }
    if (r < 0) {
        log_error("%s: out of memory copying the device table", t->resource);
        kdp__devtab_clear(&fresh);
        kdp__wakeup_signal(t->wake); /* try again */
        return;
    }
    if (r == KDP__TOOK_WHOLE) {
        take_whole(t, &fresh);
    } else {
        take_ops(t, &q);
    }
}

const uint8_t *kdp__table_message(kdp__table *t, size_t *ret_len)
{
    if (!t->msg) {
        uint8_t *buf;
        size_t len;
        if (encode(t, &t->tab, &buf, &len) < 0) {
            return NULL;
        }
        t->msg = buf;
        t->msg_len = len;
        publish_status(t);
    }
    *ret_len = t->msg_len;
    return t->msg;
}

/* ---- the lister's callbacks ---- */

static void lister_listing(void *ud, bool on)
{
    kdp__table *t = ud;
    kdp__tabshared_listing(&t->shared, on);
}

static int lister_check(void *ud, const kdp__devtab *d)
{
    kdp__table *t = ud;
    const char *long_id = NULL;
    if (kdp__replica_check_ids(d, t->shared.replicas, &long_id) < 0) {
        log_error("%s: list callback: device ID \"%s\" is too long for %u replicas: "
                  "\"%s-%u\" would be over %u bytes",
                  t->resource, long_id, t->shared.replicas, long_id, t->shared.replicas - 1,
                  KDP__REPLICA_ID_MAX);
        return -EINVAL;
    }
    return 0;
}

static void lister_result(void *ud, kdp__devtab *d)
{
    kdp__table *t = ud;
    if (kdp__tabshared_list_result(&t->shared, d)) {
        kdp__lister_want(&t->lister);
    }
    take_shared(t);
}

static size_t lister_told(void *ud)
{
    kdp__table *t = ud;
    return t->msg ? t->tab.n : 0;
}

static void lister_status(void *ud)
{
    publish_status(ud);
}

static void lister_sync(void *ud)
{
    sync(ud);
}

static void lister_start_listed(void *ud)
{
    kdp__table *t = ud;
    t->cbs.start_listed(t->cbs.ud);
}

int kdp__table_list_for_start(kdp__table *t)
{
    if (!kdp__lister_has_op(&t->lister)) {
        take_shared(t);
        return 1;
    }
    int r = kdp__lister_start(&t->lister);
    if (r < 0) {
        take_shared(t);
    }
    return r;
}

void kdp__table_serving(kdp__table *t, bool on)
{
    kdp__lister_serving(&t->lister, on);
}

/* Runs the list op if a rescan was asked for and it may run now (the
 * lister's call), then applies a newer shared table. */
static void sync(kdp__table *t)
{
    kdp__lister_poll(&t->lister);
    take_shared(t);
}

static void on_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    sync(ud);
}

void kdp__table_rescan(kdp__table *t)
{
    kdp__lister_want(&t->lister);
    kdp__wakeup_signal(t->wake);
}

/* ---- life ---- */

int kdp__table_init(kdp__table *t, kdp__loop *l, const char *resource, kdp__status *status,
                    kdp__jobs *jobs, kdp_plugin *owner, kdp_list_fn list_fn, void *list_ud,
                    unsigned rescan_ms, const kdp__table_cbs *cbs)
{
    memset(t, 0, sizeof(*t));
    t->resource = resource;
    t->status = status;
    t->cbs = *cbs;
    kdp__tabshared_init(&t->shared, resource);
    kdp__devtab_init(&t->tab);
    kdp__lister_cbs lcbs = {
        .listing = lister_listing,
        .check = lister_check,
        .result = lister_result,
        .told = lister_told,
        .status = lister_status,
        .sync = lister_sync,
        .start_listed = lister_start_listed,
        .ud = t,
    };
    kdp__lister_init(&t->lister, resource, jobs, owner, list_fn, list_ud, rescan_ms, &lcbs);
    int r = kdp__wakeup_new(l, on_wake, t, &t->wake);
    t->shared.wake = t->wake;
    if (r == 0) {
        r = kdp__lister_init_loop(&t->lister, l);
    }
    return r;
}

void kdp__table_release_loop(kdp__table *t)
{
    kdp__lister_release_loop(&t->lister);
    kdp__wakeup_free(t->wake);
    t->wake = NULL;
    t->shared.wake = NULL;
}

void kdp__table_done(kdp__table *t)
{
    kdp__table_release_loop(t);
    kdp__tabshared_done(&t->shared);
    kdp__devtab_clear(&t->tab);
    free(t->msg);
    t->msg = NULL;
}
