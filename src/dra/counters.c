/* SPDX-License-Identifier: MIT */
/* counters: the pool's counter sets (see counters.h). */
#include "dra/counters.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "k8s/sharecheck.h"

static void setv_free(kdp__dra_setv *s)
{
    for (size_t i = 0; s->v && i < s->n; i++) {
        free((char *)s->v[i].name);
        kdp__share_quantities_free((kdp_dra_quantity *)s->v[i].counters, s->v[i].n_counters);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static int setv_copy(kdp__dra_setv *dst, const kdp_dra_counter_set *sets, size_t n)
{
    kdp__dra_setv c = {.v = calloc(n ? n : 1, sizeof(*c.v))};
    if (!c.v) {
        return -ENOMEM;
    }
    for (; c.n < n; c.n++) {
        kdp_dra_counter_set *s = &c.v[c.n];
        s->name = strdup(sets[c.n].name);
        s->counters = kdp__share_quantities_dup(sets[c.n].counters, sets[c.n].n_counters);
        s->n_counters = sets[c.n].n_counters;
        if (!s->name || !s->counters) {
            c.n++;
            setv_free(&c);
            return -ENOMEM;
        }
    }
    *dst = c;
    return 0;
}

int kdp__dra_counters_set(kdp__dra_counters *c, const kdp_dra_counter_set *sets, size_t n)
{
    if (n && !sets) {
        return -EINVAL;
    }
    if (n > KDP__DRA_COUNTER_SETS_MAX) {
        log_error("%s: kdp_plugin_set_dra_counter_sets: %zu counter sets: at most %u", c->driver, n,
                  KDP__DRA_COUNTER_SETS_MAX);
        return -E2BIG;
    }
    kdp__share_err e;
    if (kdp__share_check_sets(sets, n, &e) < 0) {
        log_error("%s: kdp_plugin_set_dra_counter_sets: %s: %s (nothing changed)", c->driver,
                  e.field, e.why);
        return -EINVAL;
    }
    kdp__dra_setv copy;
    int r = setv_copy(&copy, sets, n);
    if (r < 0) {
        return r;
    }
    pthread_mutex_lock(&c->mu);
    kdp__dra_setv old = c->pending;
    c->pending = copy;
    c->has_pending = true;
    pthread_mutex_unlock(&c->mu);
    setv_free(&old);
    kdp__wakeup_signal(c->wake);
    return 0;
}

static void on_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    kdp__dra_counters *c = ud;
    pthread_mutex_lock(&c->mu);
    bool take = c->has_pending;
    kdp__dra_setv got = c->pending;
    c->pending = (kdp__dra_setv){0};
    c->has_pending = false;
    pthread_mutex_unlock(&c->mu);
    if (!take) {
        return;
    }
    setv_free(&c->loop);
    c->loop = got;
    c->changed(c->ud);
}

const kdp__dra_setv *kdp__dra_counters_get(const kdp__dra_counters *c)
{
    return &c->loop;
}

int kdp__dra_counters_init(kdp__dra_counters *c, kdp__loop *l, const char *driver,
                           void (*changed)(void *), void *ud)
{
    memset(c, 0, sizeof(*c));
    c->driver = driver;
    c->changed = changed;
    c->ud = ud;
    pthread_mutex_init(&c->mu, NULL);
    return kdp__wakeup_new(l, on_wake, c, &c->wake);
}

void kdp__dra_counters_done(kdp__dra_counters *c)
{
    kdp__wakeup_free(c->wake);
    c->wake = NULL;
    setv_free(&c->pending);
    setv_free(&c->loop);
    pthread_mutex_destroy(&c->mu);
}
