/* SPDX-License-Identifier: MIT */
/* tabshared: the device table other threads set (see tabshared.h). */
#include "plugin/tabshared.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "plugin/replicas.h"

/* A set call's refusal (over the message limit) is said this often. */
#define REJECT_LOG_US (60ULL * 1000000ULL)

/* ---- health checks: the probe's state follows the ID ---- */

/* The count of devices the probe holds Unhealthy, for the stats; s->mu
 * held. */
static void held_changed_locked(kdp__tabshared *s)
{
    if (s->probe_stats) {
        atomic_store_explicit(&s->probe_stats->held_unhealthy, s->probe_bad, memory_order_relaxed);
    }
}

/* d (a new whole table) gets the probe state of the devices `shared` has
 * (by ID), and the health that makes; *bytes (its message's size) follows.
 * A device of d may carry an older verdict (a replacement kept for a list's
 * result): the health is made again from the verdict of now either way.
 * s->mu held. O(n). */
static void carry_probe_state_locked(kdp__tabshared *s, kdp__devtab *d, size_t *bytes)
{
    if (!s->probe_stats) {
        return;
    }
    size_t held = 0;
    for (size_t i = 0; i < d->n; i++) {
        kdp__dev *nd = &d->devs[i];
        const kdp__dev *od = kdp__devtab_find(&s->devs, nd->id);
        nd->probe = od ? od->probe : (kdp__devprobe){0};
        held += nd->probe.bad;
        if (kdp__dev_effective(nd->author_health, nd->probe.bad) != nd->health) {
            size_t before = kdp__dev_encoded_size(nd, s->replicas);
            kdp__dev_apply_overlay(nd);
            *bytes = *bytes - before + kdp__dev_encoded_size(nd, s->replicas);
        }
    }
    s->probe_bad = held;
    held_changed_locked(s);
}

/* d (taken) becomes the shared table; s->mu held. The loop takes it whole
 * (the queued single changes are of no use against it). */
static void replace_shared_locked(kdp__tabshared *s, kdp__devtab *d, size_t bytes)
{
    carry_probe_state_locked(s, d, &bytes);
    kdp__devtab_move(&s->devs, d);
    s->bytes = bytes;
    kdp__tabops_clear(&s->pending);
    s->pending.lost = true;
    s->ver++;
}

static void publish(kdp__tabshared *s, kdp__devtab *d, size_t bytes)
{
    pthread_mutex_lock(&s->mu);
    replace_shared_locked(s, d, bytes);
    pthread_mutex_unlock(&s->mu);
    kdp__wakeup_signal(s->wake);
}

/* ---- the list op's results (loop thread) ---- */

void kdp__tabshared_listing(kdp__tabshared *s, bool on)
{
    pthread_mutex_lock(&s->mu);
    s->listing = on;
    kdp__tabops_clear(&s->since_list);
    pthread_mutex_unlock(&s->mu);
}

bool kdp__tabshared_list_result(kdp__tabshared *s, kdp__devtab *d)
{
    pthread_mutex_lock(&s->mu);
    bool lost = s->since_list.lost;
    int r = kdp__tabops_replay(d, &s->since_list);
    s->listing = false;
    /* under the lock with the replay: a change made in between would be
     * in neither */
    replace_shared_locked(s, d, kdp__devtab_encoded_size_replicas(d, s->replicas));
    pthread_mutex_unlock(&s->mu);
    kdp__wakeup_signal(s->wake);
    if (lost || r < 0) {
        log_info("%s: more device changes than kdp keeps (%d) were made while the list "
                 "callback ran: listing again",
                 s->resource, KDP__TABOPS_MAX);
        return true;
    }
    return false;
}

/* ---- the loop takes it ---- */

int kdp__tabshared_take(kdp__tabshared *s, uint64_t *ver, bool stale, kdp__devtab *ret_whole,
                        kdp__tabops *ret_ops)
{
    pthread_mutex_lock(&s->mu);
    bool newer = s->ver != *ver;
    bool whole = newer && (stale || s->pending.lost);
    int r = whole ? kdp__devtab_copy(ret_whole, &s->devs) : 0;
    if (newer && r == 0) {
        if (!whole) {
            *ret_ops = s->pending; /* O(1): the queue changes hands */
            memset(&s->pending, 0, sizeof(s->pending));
        }
        kdp__tabops_clear(&s->pending);
        *ver = s->ver;
    }
    pthread_mutex_unlock(&s->mu);
    if (!newer) {
        return KDP__TOOK_NOTHING;
    }
    if (r < 0) {
        return r;
    }
    return whole ? KDP__TOOK_WHOLE : KDP__TOOK_OPS;
}

/* ---- any thread ---- */

/* An over-the-limit refusal by a set call, said at most once a minute. */
static void say_too_big(kdp__tabshared *s, const char *call, size_t n, size_t len)
{
    uint64_t now = kdp__now_us();
    uint64_t last = atomic_load(&s->rejected_logged_us);
    if (last && now - last < REJECT_LOG_US) {
        return;
    }
    atomic_store(&s->rejected_logged_us, now);
    log_error("%s: %s: %zu devices make a %zu-byte ListAndWatch message, over the "
              "kubelet's limit of %u bytes (4 MiB): refused, the kubelet keeps the current "
              "list. Use fewer devices or shorter IDs, or split them over several resources "
              "(said at most once a minute)",
              s->resource, call, n, len, KDP_MAX_LIST_MESSAGE);
}

int kdp__tabshared_set(kdp__tabshared *s, const kdp_device *devs, size_t n)
{
    kdp__devtab d;
    kdp__devtab_init(&d);
    const char *why = NULL;
    int r = kdp__devtab_from_array(&d, devs, n, &why);
    if (r < 0) {
        log_error("%s: kdp_plugin_set_devices: %s", s->resource, why ? why : strerror(-r));
        kdp__devtab_clear(&d);
        return r;
    }
    const char *long_id = NULL;
    if (kdp__replica_check_ids(&d, s->replicas, &long_id) < 0) {
        log_error("%s: kdp_plugin_set_devices: device ID \"%s\" is too long for %u replicas: "
                  "\"%s-%u\" would be over %u bytes",
                  s->resource, long_id, s->replicas, long_id, s->replicas - 1, KDP__REPLICA_ID_MAX);
        kdp__devtab_clear(&d);
        return -EINVAL;
    }
    size_t len = kdp__devtab_encoded_size_replicas(&d, s->replicas);
    if (len > KDP_MAX_LIST_MESSAGE) {
        say_too_big(s, "kdp_plugin_set_devices", n, len);
        kdp__devtab_clear(&d);
        return -EMSGSIZE;
    }
    publish(s, &d, len);
    kdp__devtab_clear(&d);
    return 0;
}

/* Queues op (taken) for the loop; s->mu held. */
static void queue_op(kdp__tabshared *s, kdp__tabop *op)
{
    kdp__tabops_push(&s->pending, op);
    s->ver++;
}

/* Keeps spare (a copy of a change; taken) for the result of the list that
 * runs, if one does; s->mu held. Removals and health changes are kept even
 * when the table did not have the device yet: the list's result may. */
static void keep_for_list(kdp__tabshared *s, kdp__tabop *spare)
{
    if (s->listing) {
        kdp__tabops_push(&s->since_list, spare);
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

int kdp__tabshared_put(kdp__tabshared *s, const kdp_device *d)
{
    const char *why = NULL;
    kdp__tabop op = {.kind = KDP__TABOP_PUT};
    int r = kdp__dev_from_public(&op.dev, d, &why);
    if (r < 0) {
        log_error("%s: kdp_plugin_set_device: device \"%.255s\": %s", s->resource,
                  d && d->id ? d->id : "(null)", why ? why : strerror(-r));
        return r;
    }
    if (strlen(op.dev.id) + kdp__replica_suffix_max(s->replicas) > KDP__REPLICA_ID_MAX) {
        log_error("%s: kdp_plugin_set_device: device ID \"%s\" is too long for %u replicas: "
                  "\"%s-%u\" would be over %u bytes",
                  s->resource, op.dev.id, s->replicas, op.dev.id, s->replicas - 1,
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
    pthread_mutex_lock(&s->mu);
    const kdp__dev *cur = kdp__devtab_find(&s->devs, shared_dev.id);
    if (cur) { /* a replacement keeps the probe's state (the ID's) */
        shared_dev.probe = op.dev.probe = spare.dev.probe = cur->probe;
        kdp__dev_apply_overlay(&shared_dev);
        kdp__dev_apply_overlay(&op.dev);
        kdp__dev_apply_overlay(&spare.dev);
    }
    size_t bytes = s->bytes - (cur ? kdp__dev_encoded_size(cur, s->replicas) : 0) +
                   kdp__dev_encoded_size(&shared_dev, s->replicas);
    size_t n = s->devs.n + !cur;
    r = bytes > KDP_MAX_LIST_MESSAGE ? -EMSGSIZE : kdp__devtab_put(&s->devs, &shared_dev, &old);
    if (r >= 0) {
        s->bytes = bytes;
        queue_op(s, &op);
        keep_for_list(s, &spare);
    }
    pthread_mutex_unlock(&s->mu);
    if (r == -EMSGSIZE) {
        say_too_big(s, "kdp_plugin_set_device", n, bytes);
    }
    kdp__dev_free(&old);
    kdp__dev_free(&shared_dev);
    kdp__tabop_free(&op);
    kdp__tabop_free(&spare);
    if (r < 0) {
        return r;
    }
    kdp__wakeup_signal(s->wake);
    return 0;
}

int kdp__tabshared_remove(kdp__tabshared *s, const char *id)
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
    pthread_mutex_lock(&s->mu);
    int r = kdp__devtab_take(&s->devs, id, &old);
    if (r == 0) {
        s->bytes -= kdp__dev_encoded_size(&old, s->replicas);
        queue_op(s, &op);
        if (old.probe.bad) { /* its probe state goes with it */
            s->probe_bad--;
            held_changed_locked(s);
        }
    }
    keep_for_list(s, &spare);
    pthread_mutex_unlock(&s->mu);
    kdp__dev_free(&old);
    kdp__tabop_free(&op);
    kdp__tabop_free(&spare);
    if (r == 0) {
        kdp__wakeup_signal(s->wake);
    }
    return r;
}

int kdp__tabshared_set_health(kdp__tabshared *s, const char *id, kdp_health health)
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
    pthread_mutex_lock(&s->mu);
    /* a replica ID stands for its device: the queued change names that */
    const kdp__dev *cur = kdp__replica_find_any(&s->devs, s->replicas, id);
    if (cur && strcmp(cur->id, id) != 0) {
        char *dev_id = strdup(cur->id);
        if (!dev_id) {
            pthread_mutex_unlock(&s->mu);
            kdp__tabop_free(&op);
            kdp__tabop_free(&spare);
            return -ENOMEM;
        }
        free(op.id);
        op.id = dev_id;
    }
    size_t before = cur ? kdp__dev_encoded_size(cur, s->replicas) : 0;
    int r = cur ? kdp__devtab_set_health(&s->devs, cur->id, health) : -ENOENT;
    if (r > 0) {
        s->bytes += kdp__dev_encoded_size(cur, s->replicas) - before;
        queue_op(s, &op);
    }
    keep_for_list(s, &spare);
    pthread_mutex_unlock(&s->mu);
    kdp__tabop_free(&op);
    kdp__tabop_free(&spare);
    if (r > 0) {
        kdp__wakeup_signal(s->wake);
    }
    return r < 0 ? r : 0;
}

/* d's verdict turned (it is in shared): its health, the message's size,
 * the count, and a single change for the loop. s->mu held. */
static void verdict_turned_locked(kdp__tabshared *s, kdp__dev *d, kdp__tabop *op)
{
    size_t before = kdp__dev_encoded_size(d, s->replicas);
    kdp__dev_apply_overlay(d);
    s->bytes = s->bytes - before + kdp__dev_encoded_size(d, s->replicas);
    if (d->probe.bad) {
        s->probe_bad++;
    } else {
        s->probe_bad--;
    }
    held_changed_locked(s);
    op->bad = d->probe.bad;
    queue_op(s, op);
}

int kdp__tabshared_probe_result(kdp__tabshared *s, const char *id, kdp__probe_answer a,
                                const kdp__probe_cfg *c, kdp__devprobe *ret)
{
    kdp__tabop op = {.kind = KDP__TABOP_VERDICT, .id = strdup(id)};
    if (!op.id) {
        return -ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    kdp__dev *d = kdp__devtab_find_mut(&s->devs, id);
    int turn = -ENOENT;
    if (d) {
        bool was = d->probe.bad;
        turn = (int)kdp__probe_step(&d->probe, a, c);
        if (d->probe.bad != was) {
            verdict_turned_locked(s, d, &op);
        }
        *ret = d->probe;
    }
    pthread_mutex_unlock(&s->mu);
    kdp__tabop_free(&op);
    if (turn > 0) {
        kdp__wakeup_signal(s->wake);
    }
    return turn;
}

size_t kdp__tabshared_probe_all(kdp__tabshared *s, kdp__probe_answer a, const kdp__probe_cfg *c)
{
    size_t turned = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->devs.n; i++) {
        kdp__dev *d = &s->devs.devs[i];
        bool was = d->probe.bad;
        if (kdp__probe_step(&d->probe, a, c) == KDP__PROBE_SAME || d->probe.bad == was) {
            continue;
        }
        turned += d->probe.bad;
        /* out of memory for the op: the queue is lost, the loop takes the
         * whole table (which has the verdict) */
        kdp__tabop op = {.kind = KDP__TABOP_VERDICT, .id = strdup(d->id)};
        if (!op.id) {
            kdp__tabops_clear(&s->pending);
            s->pending.lost = true;
        }
        verdict_turned_locked(s, d, &op);
        kdp__tabop_free(&op);
    }
    pthread_mutex_unlock(&s->mu);
    if (turned) {
        kdp__wakeup_signal(s->wake);
    }
    return turned;
}

int kdp__tabshared_get_health(kdp__tabshared *s, const char *id, kdp_health *ret)
{
    pthread_mutex_lock(&s->mu);
    const kdp__dev *d = kdp__replica_find_any(&s->devs, s->replicas, id);
    if (d) {
        *ret = d->health;
    }
    pthread_mutex_unlock(&s->mu);
    return d ? 0 : -ENOENT;
}

int kdp__tabshared_get_data(kdp__tabshared *s, const char *id, void **ret)
{
    pthread_mutex_lock(&s->mu);
    const kdp__dev *d = kdp__replica_find_any(&s->devs, s->replicas, id);
    if (d) {
        *ret = d->data;
    }
    pthread_mutex_unlock(&s->mu);
    return d ? 0 : -ENOENT;
}

int kdp__tabshared_get_devices(kdp__tabshared *s, kdp_device **ret, size_t *ret_n)
{
    pthread_mutex_lock(&s->mu);
    int r = kdp__devtab_export(&s->devs, ret, ret_n);
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ---- life ---- */

void kdp__tabshared_init(kdp__tabshared *s, const char *resource)
{
    memset(s, 0, sizeof(*s));
    s->resource = resource;
    pthread_mutex_init(&s->mu, NULL);
    kdp__devtab_init(&s->devs);
}

void kdp__tabshared_done(kdp__tabshared *s)
{
    kdp__devtab_clear(&s->devs);
    kdp__tabops_clear(&s->pending);
    kdp__tabops_clear(&s->since_list);
    pthread_mutex_destroy(&s->mu);
}
