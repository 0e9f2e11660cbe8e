/* SPDX-License-Identifier: MIT */
/* statusw: the claims' status writes (see statusw.h). */
#include "dra/statusw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define RETRY_MIN_US (1000ULL * 1000ULL)
#define RETRY_MAX_US (30ULL * 1000ULL * 1000ULL)

typedef struct item {
    kdp__link link;
    kdp__statusw *w;
    char *ns, *name, *uid;
    kdp__cstat_entry *e; /* owned strings */
    size_t n;
    bool again;  /* newer entries came while the write was under way */
    bool queued; /* waiting for the retry timer */
    unsigned tries;
    uint64_t due_us;
    kdp__cstat_req *req;
} item;

static void entries_free(kdp__cstat_entry *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++) {
        free((char *)e[i].device);
        free((char *)e[i].share_id);
        free((char *)e[i].fields);
    }
    free(e);
}

static void item_free(item *it)
{
    kdp__link_remove(&it->link);
    it->w->n--;
    kdp__cstat_cancel(it->req);
    entries_free(it->e, it->n);
    free(it->ns);
    free(it->name);
    free(it->uid);
    free(it);
}

/* rec's entries (remove: none). Returns 0 or -ENOMEM. */
static int entries_of(const kdp__dra_rec *rec, bool remove, kdp__cstat_entry **ret, size_t *n)
{
    *ret = NULL;
    *n = 0;
    size_t m = 0;
    for (size_t i = 0; !remove && i < rec->n_devs; i++) {
        m += rec->devs[i].status || rec->devs[i].keep_entry;
    }
    kdp__cstat_entry *e = calloc(m ? m : 1, sizeof(*e));
    if (!e) {
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; !remove && i < rec->n_devs; i++) {
        const kdp__dra_rdev *d = &rec->devs[i];
        if (!d->status && !d->keep_entry) {
            continue;
        }
        e[k].device = strdup(d->device);
        e[k].share_id = d->share_id ? strdup(d->share_id) : NULL;
        e[k].fields = d->keep_entry || !d->status ? NULL : strdup(d->status);
        e[k].keep = d->keep_entry;
        k++;
        if (!e[k - 1].device || (d->status && !d->keep_entry && !e[k - 1].fields) ||
            (d->share_id && !e[k - 1].share_id)) {
            entries_free(e, k);
            return -ENOMEM;
        }
    }
    *ret = e;
    *n = k;
    return 0;
}

static void arm(kdp__statusw *w)
{
    uint64_t next = 0;
    kdp__link *l;
    kdp__list_for_each(l, &w->items)
    {
        item *it = KDP__CONTAINER_OF(l, item, link);
        if (it->queued && (!next || it->due_us < next)) {
            next = it->due_us;
        }
    }
    if (next) {
        kdp__timer_start_at(w->retry, next);
    }
}

/* The end of a write: done (freed), dropped (logged), or queued for a
 * retry. Returns true when it is to be written again now (newer entries
 * came while it was under way). */
static bool settle(item *it, int err, const char *why)
{
    kdp__statusw *w = it->w;
    it->req = NULL;
    bool passing = err == -EAGAIN || err == -EACCES || err == -ETIMEDOUT || err == -ECONNREFUSED ||
                   err == -EHOSTUNREACH || err == -EIO || err == -ESTALE;
    bool gone = err == -ENOENT || (err == -ESTALE && why && strstr(why, "UID"));
    if (err == 0 || gone || !passing || ++it->tries >= KDP__STATUSW_TRIES) {
        if (err < 0) {
            log_error("%s: claim %s/%s: cannot write its status: %s%s", w->cfg.driver, it->ns,
                      it->name, why ? why : strerror(-err),
                      gone      ? " (the claim is gone: nothing to write)"
                      : passing ? " (given up after tries with backoff)"
                                : "");
        }
        if (err == 0 && it->again) {
            it->again = false;
            it->tries = 0;
            return true;
        }
        item_free(it);
        return false;
    }
    uint64_t us = RETRY_MIN_US << (it->tries - 1);
    us = us > RETRY_MAX_US ? RETRY_MAX_US : us;
    log_warn("%s: claim %s/%s: cannot write its status yet: %s (again in %llu ms)", w->cfg.driver,
             it->ns, it->name, why ? why : strerror(-err), (unsigned long long)(us / 1000U));
    it->queued = true;
    it->due_us = kdp__now_us() + us;
    arm(w);
    return false;
}

static void on_done(int err, const char *why, void *ud);

static void start(item *it)
{
    kdp__statusw *w = it->w;
    it->queued = false;
    kdp_dra_claim_ref ref = {it->ns, it->name, it->uid};
    int err = w->cfg.write(w->cfg.ud, &ref, it->e, it->n, on_done, it, &it->req);
    if (err < 0) {
        (void)settle(it, err, "cannot start the write"); /* never again at once: err < 0 */
    }
}

static void on_done(int err, const char *why, void *ud)
{
    item *it = ud;
    if (settle(it, err, why)) {
        start(it);
    }
}

static void on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__statusw *w = ud;
    uint64_t now = kdp__now_us();
    kdp__link *l;
    kdp__link *next;
    for (l = w->items.next; l != &w->items; l = next) {
        next = l->next; /* start may free it */
        item *it = KDP__CONTAINER_OF(l, item, link);
        if (it->queued && it->due_us <= now) {
            start(it);
        }
    }
    arm(w);
}

static item *find(kdp__statusw *w, const char *uid)
{
    kdp__link *l;
    kdp__list_for_each(l, &w->items)
    {
        item *it = KDP__CONTAINER_OF(l, item, link);
        if (strcmp(it->uid, uid) == 0) {
            return it;
        }
    }
    return NULL;
}

void kdp__statusw_put(kdp__statusw *w, const kdp__dra_rec *rec, bool remove)
{
    kdp__cstat_entry *e = NULL;
    size_t n = 0;
    if (entries_of(rec, remove, &e, &n) < 0) {
        log_error("%s: claim %s/%s: out of memory for its status", w->cfg.driver, rec->ns,
                  rec->name);
        return;
    }
    item *it = find(w, rec->uid);
    if (!it && !remove && n == 0) {
        free(e); /* nothing to tell */
        return;
    }
    if (!it) {
        if (w->n >= KDP__STATUSW_MAX) {
            log_error("%s: claim %s/%s: its status is not written: %d claims wait already",
                      w->cfg.driver, rec->ns, rec->name, KDP__STATUSW_MAX);
            entries_free(e, n);
            return;
        }
        it = calloc(1, sizeof(*it));
        if (it) {
            it->ns = strdup(rec->ns);
            it->name = strdup(rec->name);
            it->uid = strdup(rec->uid);
        }
        if (!it || !it->ns || !it->name || !it->uid) {
            if (it) {
                free(it->ns);
                free(it->name);
                free(it->uid);
                free(it);
            }
            entries_free(e, n);
            log_error("%s: claim %s/%s: out of memory for its status", w->cfg.driver, rec->ns,
                      rec->name);
            return;
        }
        it->w = w;
        kdp__list_append(&w->items, &it->link);
        w->n++;
    }
    entries_free(it->e, it->n);
    it->e = e;
    it->n = n;
    it->tries = 0;
    if (it->req) {
        it->again = true; /* after the write under way */
    } else {
        start(it);
    }
}

int kdp__statusw_post(kdp__statusw *w, kdp__dra_rec *rec)
{
    pthread_mutex_lock(&w->in_mu);
    int r = w->n_inbox >= KDP__STATUSW_MAX ? -EAGAIN : 0;
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    kdp__dra_rec **v = r ? NULL : realloc((void *)w->inbox, (w->n_inbox + 1) * sizeof(*v));
    if (v) {
        w->inbox = v;
        v[w->n_inbox++] = rec;
    } else if (!r) {
        r = -ENOMEM;
    }
    pthread_mutex_unlock(&w->in_mu);
    if (r < 0) {
        kdp__dra_rec_free(rec);
        return r;
    }
    kdp__wakeup_signal(w->wake);
    return 0;
}

static void on_wake(kdp__wakeup *wk, void *ud)
{
    (void)wk;
    kdp__statusw *w = ud;
    pthread_mutex_lock(&w->in_mu);
    kdp__dra_rec **v = w->inbox;
    size_t n = w->n_inbox;
    w->inbox = NULL;
    w->n_inbox = 0;
    pthread_mutex_unlock(&w->in_mu);
    for (size_t i = 0; i < n; i++) {
        kdp__statusw_put(w, v[i], false);
        kdp__dra_rec_free(v[i]);
    }
    free((void *)v);
}

int kdp__statusw_init(kdp__statusw *w, kdp__loop *l, const kdp__statusw_cfg *cfg)
{
    memset(w, 0, sizeof(*w));
    w->loop = l;
    w->cfg = *cfg;
    kdp__link_init(&w->items);
    pthread_mutex_init(&w->in_mu, NULL);
    int r = kdp__timer_new(l, on_retry, w, &w->retry);
    return r < 0 ? r : kdp__wakeup_new(l, on_wake, w, &w->wake);
}

void kdp__statusw_done(kdp__statusw *w)
{
    kdp__link *next;
    for (kdp__link *l = w->items.next; l != &w->items; l = next) {
        next = l->next;
        item_free(KDP__CONTAINER_OF(l, item, link));
    }
    kdp__timer_free(w->retry);
    w->retry = NULL;
    kdp__wakeup_free(w->wake);
    w->wake = NULL;
    for (size_t i = 0; i < w->n_inbox; i++) {
        kdp__dra_rec_free(w->inbox[i]);
    }
    free((void *)w->inbox);
    w->inbox = NULL;
    w->n_inbox = 0;
    pthread_mutex_destroy(&w->in_mu);
}
