/* SPDX-License-Identifier: MIT */
#include "plugin/table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "plugin/replicas.h"

/* Over this, a warning: the message nears the kubelet's limit. */
#define WARN_MESSAGE ((size_t)3 * 1024 * 1024)
/* A refused table is said this often. */
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
    int r = kdp__devtab_encode_replicas(tab, t->replicas, buf, len);
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
    size_t would = kdp__devtab_encoded_size_replicas(tab, t->replicas);
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
    pthread_mutex_lock(&t->mu);
    bool newer = t->shared_ver != t->tab_ver;
    bool whole = newer && (t->tab_stale || t->pending.lost);
    int r = whole ? kdp__devtab_copy(&fresh, &t->shared) : 0;
    if (newer && r == 0) {
        if (!whole) {
            q = t->pending; /* O(1): the queue changes hands */
            memset(&t->pending, 0, sizeof(t->pending));
        }
        kdp__tabops_clear(&t->pending);
        t->tab_ver = t->shared_ver;
    }
    pthread_mutex_unlock(&t->mu);
    if (!newer) {
        return;
    }
    if (r < 0) {
        log_error("%s: out of memory copying the device table", t->resource);
        kdp__devtab_clear(&fresh);
        kdp__wakeup_signal(t->wake); /* try again */
        return;
    }
    if (whole) {
        take_whole(t, &fresh);
    } else {
        take_ops(t, &q);
    }
}

/* ---- health checks: the probe's state follows the ID ---- */

/* The count of devices the probe holds Unhealthy, for the stats; t->mu
 * held. */
static void held_changed_locked(kdp__table *t)
{
    if (t->probe_stats) {
        atomic_store_explicit(&t->probe_stats->held_unhealthy, t->shared_probe_bad,
                              memory_order_relaxed);
    }
}

/* d (a new whole table) gets the probe state of the devices `shared` has
 * (by ID), and the health that makes; *bytes (its message's size) follows.
 * A device of d may carry an older verdict (a replacement kept for a list's
 * result): the health is made again from the verdict of now either way.
 * t->mu held. O(n). */
static void carry_probe_state_locked(kdp__table *t, kdp__devtab *d, size_t *bytes)
{
    if (!t->probe_stats) {
        return;
    }
    size_t held = 0;
    for (size_t i = 0; i < d->n; i++) {
        kdp__dev *nd = &d->devs[i];
        const kdp__dev *od = kdp__devtab_find(&t->shared, nd->id);
        nd->probe = od ? od->probe : (kdp__devprobe){0};
        held += nd->probe.bad;
        if (kdp__dev_effective(nd->author_health, nd->probe.bad) != nd->health) {
            size_t before = kdp__dev_encoded_size(nd, t->replicas);
            kdp__dev_apply_overlay(nd);
            *bytes = *bytes - before + kdp__dev_encoded_size(nd, t->replicas);
        }
    }
    t->shared_probe_bad = held;
    held_changed_locked(t);
}

/* Hands a new table to the loop thread (takes d's content). Any thread. */
/* d (taken) becomes the shared table; t->mu held. The loop takes it whole
 * (the queued single changes are of no use against it). */
static void replace_shared_locked(kdp__table *t, kdp__devtab *d, size_t bytes)
{
    carry_probe_state_locked(t, d, &bytes);
    kdp__devtab_move(&t->shared, d);
    t->shared_bytes = bytes;
    kdp__tabops_clear(&t->pending);
    t->pending.lost = true;
    t->shared_ver++;
}

static void publish(kdp__table *t, kdp__devtab *d, size_t bytes)
{
    pthread_mutex_lock(&t->mu);
    replace_shared_locked(t, d, bytes);
    pthread_mutex_unlock(&t->mu);
    kdp__wakeup_signal(t->wake);
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

/* While a list runs, the single changes made meanwhile are kept for its
 * result (see publish_list). */
static void listing(kdp__table *t, bool on)
{
    pthread_mutex_lock(&t->mu);
    t->listing = on;
    kdp__tabops_clear(&t->since_list);
    pthread_mutex_unlock(&t->mu);
}

/* A list's result, with the single changes made while it ran applied on top
 * (they are newer than what it read: a device removed after the list saw
 * it stays removed). Too many of them to keep: one more list. */
static void publish_list(kdp__table *t, kdp__devtab *d)
{
    pthread_mutex_lock(&t->mu);
    bool lost = t->since_list.lost;
    int r = kdp__tabops_replay(d, &t->since_list);
    t->listing = false;
    /* under the lock with the replay: a change made in between would be
     * in neither */
    replace_shared_locked(t, d, kdp__devtab_encoded_size_replicas(d, t->replicas));
    pthread_mutex_unlock(&t->mu);
    kdp__wakeup_signal(t->wake);
    if (lost || r < 0) {
        log_info("%s: more device changes than kdp keeps (%d) were made while the list "
                 "callback ran: listing again",
                 t->resource, KDP__TABOPS_MAX);
        kdp__lister_want(&t->lister);
    }
}

static void lister_listing(void *ud, bool on)
{
    listing(ud, on);
}

static int lister_check(void *ud, const kdp__devtab *d)
{
    kdp__table *t = ud;
    const char *long_id = NULL;
    if (kdp__replica_check_ids(d, t->replicas, &long_id) < 0) {
        log_error("%s: list callback: device ID \"%s\" is too long for %u replicas: "
                  "\"%s-%u\" would be over %u bytes",
                  t->resource, long_id, t->replicas, long_id, t->replicas - 1, KDP__REPLICA_ID_MAX);
        return -EINVAL;
    }
    return 0;
}

static void lister_result(void *ud, kdp__devtab *d)
{
    kdp__table *t = ud;
    publish_list(t, d);
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

/* ---- any thread ---- */

/* An over-the-limit refusal by a set call, said at most once a minute. */
static void say_too_big(kdp__table *t, const char *call, size_t n, size_t len)
{
    uint64_t now = kdp__now_us();
    uint64_t last = atomic_load(&t->set_rejected_logged_us);
    if (last && now - last < REJECT_LOG_US) {
        return;
    }
    atomic_store(&t->set_rejected_logged_us, now);
    log_error("%s: %s: %zu devices make a %zu-byte ListAndWatch message, over the "
              "kubelet's limit of %u bytes (4 MiB): refused, the kubelet keeps the current "
              "list. Use fewer devices or shorter IDs, or split them over several resources "
              "(said at most once a minute)",
              t->resource, call, n, len, KDP_MAX_LIST_MESSAGE);
}

int kdp__table_set(kdp__table *t, const kdp_device *devs, size_t n)
{
    kdp__devtab d;
    kdp__devtab_init(&d);
    const char *why = NULL;
    int r = kdp__devtab_from_array(&d, devs, n, &why);
    if (r < 0) {
        log_error("%s: kdp_plugin_set_devices: %s", t->resource, why ? why : strerror(-r));
        kdp__devtab_clear(&d);
        return r;
    }
    const char *long_id = NULL;
    if (kdp__replica_check_ids(&d, t->replicas, &long_id) < 0) {
        log_error("%s: kdp_plugin_set_devices: device ID \"%s\" is too long for %u replicas: "
                  "\"%s-%u\" would be over %u bytes",
                  t->resource, long_id, t->replicas, long_id, t->replicas - 1, KDP__REPLICA_ID_MAX);
        kdp__devtab_clear(&d);
        return -EINVAL;
    }
    size_t len = kdp__devtab_encoded_size_replicas(&d, t->replicas);
    if (len > KDP_MAX_LIST_MESSAGE) {
        say_too_big(t, "kdp_plugin_set_devices", n, len);
        kdp__devtab_clear(&d);
        return -EMSGSIZE;
    }
    publish(t, &d, len);
    kdp__devtab_clear(&d);
    return 0;
}

/* Queues op (taken) for the loop; t->mu held. */
static void queue_op(kdp__table *t, kdp__tabop *op)
{
    kdp__tabops_push(&t->pending, op);
    t->shared_ver++;
}

/* Keeps spare (a copy of a change; taken) for the result of the list that
 * runs, if one does; t->mu held. Removals and health changes are kept even
 * when the table did not have the device yet: the list's result may. */
static void keep_for_list(kdp__table *t, kdp__tabop *spare)
{
    if (t->listing) {
        kdp__tabops_push(&t->since_list, spare);
    }
}

/* op and a copy of it for a running list (spare). Returns 0 or -ENOMEM. */
static int op_pair(kdp__tabop *op, kdp__tabop *spare)
{
    int r = kdp__tabop_dup(spare, op);
    if (r < 0) {
        kdp__tabop_free(op);
        kdp__tabop_free(spare);
    }
    return r;
}

int kdp__table_put(kdp__table *t, const kdp_device *d)
{
    const char *why = NULL;
    kdp__tabop op = {.kind = KDP__TABOP_PUT};
    int r = kdp__dev_from_public(&op.dev, d, &why);
    if (r < 0) {
        log_error("%s: kdp_plugin_set_device: device \"%.255s\": %s", t->resource,
                  d && d->id ? d->id : "(null)", why ? why : strerror(-r));
        return r;
    }
    if (strlen(op.dev.id) + kdp__replica_suffix_max(t->replicas) > KDP__REPLICA_ID_MAX) {
        log_error("%s: kdp_plugin_set_device: device ID \"%s\" is too long for %u replicas: "
                  "\"%s-%u\" would be over %u bytes",
                  t->resource, op.dev.id, t->replicas, op.dev.id, t->replicas - 1,
                  KDP__REPLICA_ID_MAX);
        kdp__tabop_free(&op);
        return -EINVAL;
    }
    kdp__dev shared_dev;
    kdp__tabop spare;
    r = kdp__dev_dup(&shared_dev, &op.dev);
    if (r < 0 || (r = op_pair(&op, &spare)) < 0) {
        kdp__dev_free(&shared_dev);
        kdp__tabop_free(&op);
        return r;
    }
    kdp__dev old = {0};
    pthread_mutex_lock(&t->mu);
    const kdp__dev *cur = kdp__devtab_find(&t->shared, shared_dev.id);
    if (cur) { /* a replacement keeps the probe's state (the ID's) */
        shared_dev.probe = op.dev.probe = spare.dev.probe = cur->probe;
        kdp__dev_apply_overlay(&shared_dev);
        kdp__dev_apply_overlay(&op.dev);
        kdp__dev_apply_overlay(&spare.dev);
    }
    size_t bytes = t->shared_bytes - (cur ? kdp__dev_encoded_size(cur, t->replicas) : 0) +
                   kdp__dev_encoded_size(&shared_dev, t->replicas);
    size_t n = t->shared.n + !cur;
    r = bytes > KDP_MAX_LIST_MESSAGE ? -EMSGSIZE : kdp__devtab_put(&t->shared, &shared_dev, &old);
    if (r >= 0) {
        t->shared_bytes = bytes;
        queue_op(t, &op);
        keep_for_list(t, &spare);
    }
    pthread_mutex_unlock(&t->mu);
    if (r == -EMSGSIZE) {
        say_too_big(t, "kdp_plugin_set_device", n, bytes);
    }
    kdp__dev_free(&old);
    kdp__dev_free(&shared_dev);
    kdp__tabop_free(&op);
    kdp__tabop_free(&spare);
    if (r < 0) {
        return r;
    }
    kdp__wakeup_signal(t->wake);
    return 0;
}

int kdp__table_remove(kdp__table *t, const char *id)
{
    if (!id) {
        return -EINVAL;
    }
    kdp__tabop op = {.kind = KDP__TABOP_REMOVE, .id = strdup(id)};
    kdp__tabop spare;
    if (!op.id || op_pair(&op, &spare) < 0) {
        free(op.id);
        return -ENOMEM;
    }
    kdp__dev old = {0};
    pthread_mutex_lock(&t->mu);
    int r = kdp__devtab_take(&t->shared, id, &old);
    if (r == 0) {
        t->shared_bytes -= kdp__dev_encoded_size(&old, t->replicas);
        queue_op(t, &op);
        if (old.probe.bad) { /* its probe state goes with it */
            t->shared_probe_bad--;
            held_changed_locked(t);
        }
    }
    keep_for_list(t, &spare);
    pthread_mutex_unlock(&t->mu);
    kdp__dev_free(&old);
    kdp__tabop_free(&op);
    kdp__tabop_free(&spare);
    if (r == 0) {
        kdp__wakeup_signal(t->wake);
    }
    return r;
}

int kdp__table_set_health(kdp__table *t, const char *id, kdp_health health)
{
    if (!id || (health != KDP_HEALTHY && health != KDP_UNHEALTHY)) {
        return -EINVAL;
    }
    kdp__tabop op = {.kind = KDP__TABOP_HEALTH, .id = strdup(id), .health = health};
    kdp__tabop spare;
    if (!op.id || op_pair(&op, &spare) < 0) {
        free(op.id);
        return -ENOMEM;
    }
    pthread_mutex_lock(&t->mu);
    /* a replica ID stands for its device: the queued change names that */
    const kdp__dev *cur = kdp__replica_find_any(&t->shared, t->replicas, id);
    if (cur && strcmp(cur->id, id) != 0) {
        char *dev_id = strdup(cur->id);
        if (!dev_id) {
            pthread_mutex_unlock(&t->mu);
            kdp__tabop_free(&op);
            kdp__tabop_free(&spare);
            return -ENOMEM;
        }
        free(op.id);
        op.id = dev_id;
    }
    size_t before = cur ? kdp__dev_encoded_size(cur, t->replicas) : 0;
    int r = cur ? kdp__devtab_set_health(&t->shared, cur->id, health) : -ENOENT;
    if (r > 0) {
        t->shared_bytes += kdp__dev_encoded_size(cur, t->replicas) - before;
        queue_op(t, &op);
    }
    keep_for_list(t, &spare);
    pthread_mutex_unlock(&t->mu);
    kdp__tabop_free(&op);
    kdp__tabop_free(&spare);
    if (r > 0) {
        kdp__wakeup_signal(t->wake);
    }
    return r < 0 ? r : 0;
}

/* d's verdict turned (it is in shared): its health, the message's size,
 * the count, and a single change for the loop. t->mu held. */
static void verdict_turned_locked(kdp__table *t, kdp__dev *d, kdp__tabop *op)
{
    size_t before = kdp__dev_encoded_size(d, t->replicas);
    kdp__dev_apply_overlay(d);
    t->shared_bytes = t->shared_bytes - before + kdp__dev_encoded_size(d, t->replicas);
    if (d->probe.bad) {
        t->shared_probe_bad++;
    } else {
        t->shared_probe_bad--;
    }
    held_changed_locked(t);
    op->bad = d->probe.bad;
    queue_op(t, op);
}

int kdp__table_probe_result(kdp__table *t, const char *id, kdp__probe_answer a,
                            const kdp__probe_cfg *c, kdp__devprobe *ret)
{
    kdp__tabop op = {.kind = KDP__TABOP_VERDICT, .id = strdup(id)};
    if (!op.id) {
        return -ENOMEM;
    }
    pthread_mutex_lock(&t->mu);
    kdp__dev *d = kdp__devtab_find_mut(&t->shared, id);
    int turn = -ENOENT;
    if (d) {
        bool was = d->probe.bad;
        turn = (int)kdp__probe_step(&d->probe, a, c);
        if (d->probe.bad != was) {
            verdict_turned_locked(t, d, &op);
        }
        *ret = d->probe;
    }
    pthread_mutex_unlock(&t->mu);
    kdp__tabop_free(&op);
    if (turn > 0) {
        kdp__wakeup_signal(t->wake);
    }
    return turn;
}

size_t kdp__table_probe_all(kdp__table *t, kdp__probe_answer a, const kdp__probe_cfg *c)
{
    size_t turned = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->shared.n; i++) {
        kdp__dev *d = &t->shared.devs[i];
        bool was = d->probe.bad;
        if (kdp__probe_step(&d->probe, a, c) == KDP__PROBE_SAME || d->probe.bad == was) {
            continue;
        }
        turned += d->probe.bad;
        /* out of memory for the op: the queue is lost, the loop takes the
         * whole table (which has the verdict) */
        kdp__tabop op = {.kind = KDP__TABOP_VERDICT, .id = strdup(d->id)};
        if (!op.id) {
            kdp__tabops_clear(&t->pending);
            t->pending.lost = true;
        }
        verdict_turned_locked(t, d, &op);
        kdp__tabop_free(&op);
    }
    pthread_mutex_unlock(&t->mu);
    if (turned) {
        kdp__wakeup_signal(t->wake);
    }
    return turned;
}

int kdp__table_get_health(kdp__table *t, const char *id, kdp_health *ret)
{
    pthread_mutex_lock(&t->mu);
    const kdp__dev *d = kdp__replica_find_any(&t->shared, t->replicas, id);
    if (d) {
        *ret = d->health;
    }
    pthread_mutex_unlock(&t->mu);
    return d ? 0 : -ENOENT;
}

int kdp__table_get_data(kdp__table *t, const char *id, void **ret)
{
    pthread_mutex_lock(&t->mu);
    const kdp__dev *d = kdp__replica_find_any(&t->shared, t->replicas, id);
    if (d) {
        *ret = d->data;
    }
    pthread_mutex_unlock(&t->mu);
    return d ? 0 : -ENOENT;
}

int kdp__table_get_devices(kdp__table *t, kdp_device **ret, size_t *ret_n)
{
    pthread_mutex_lock(&t->mu);
    int r = kdp__devtab_export(&t->shared, ret, ret_n);
    pthread_mutex_unlock(&t->mu);
    return r;
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
    pthread_mutex_init(&t->mu, NULL);
    kdp__devtab_init(&t->shared);
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
}

void kdp__table_done(kdp__table *t)
{
    kdp__table_release_loop(t);
    kdp__devtab_clear(&t->shared);
    kdp__devtab_clear(&t->tab);
    kdp__tabops_clear(&t->pending);
    kdp__tabops_clear(&t->since_list);
    free(t->msg);
    t->msg = NULL;
    pthread_mutex_destroy(&t->mu);
}
