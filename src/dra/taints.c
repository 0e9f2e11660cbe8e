/* SPDX-License-Identifier: MIT */
/* taints: the author's taints on devices (see taints.h). */
#include "dra/taints.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/k8snames.h"
#include "base/log.h"

const char *kdp__dra_taints_effect(kdp_dra_taint_effect e)
{
    switch (e) {
    case KDP_DRA_TAINT_NO_SCHEDULE:
        return "NoSchedule";
    case KDP_DRA_TAINT_NO_EXECUTE:
        return "NoExecute";
    case KDP_DRA_TAINT_INFORMATIONAL:
        return "None";
    case KDP_DRA_TAINT_NONE:
        break;
    }
    return NULL;
}

static void set_free(kdp__dra_taintset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].id);
    }
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static int set_copy(kdp__dra_taintset *dst, const kdp__dra_taintset *src)
{
    kdp__dra_taintset c = {.v = calloc(src->n ? src->n : 1, sizeof(*c.v)), .cap = src->n};
    if (!c.v) {
        return -ENOMEM;
    }
    for (; c.n < src->n; c.n++) {
        c.v[c.n] = src->v[c.n];
        c.v[c.n].id = strdup(src->v[c.n].id);
        if (!c.v[c.n].id) {
            set_free(&c);
            return -ENOMEM;
        }
    }
    set_free(dst);
    *dst = c;
    return 0;
}

/* The index of id in s, or where it goes (*found false). */
static size_t set_find(const kdp__dra_taintset *s, const char *id, bool *found)
{
    size_t lo = 0;
    size_t hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->v[mid].id, id);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

/* Taint i of the call, checked (logged, naming it); copied into *out. */
static int check_one(const kdp__dra_taints *t, const char *id, const kdp_dra_taint *v, size_t i,
                     kdp__dra_taint *out)
{
    const char *why = NULL;
    const char *field = "key";
    const char *value = v->value ? v->value : "";
    if (!v->key || kdp__k8snames_label_name(v->key, &why) != 0) {
        why = v->key ? why : "is NULL";
    } else if (strcmp(v->key, t->own_key) == 0) {
        why = "is kdp's own (the taint of an Unhealthy device): choose another";
    } else if (kdp__k8snames_label_value(value, &why) != 0) {
        field = "value";
    } else if (!kdp__dra_taints_effect(v->effect)) {
        field = "effect";
        why = "must be KDP_DRA_TAINT_NO_SCHEDULE, _NO_EXECUTE or _INFORMATIONAL";
    } else {
        snprintf(out->key, sizeof(out->key), "%s", v->key);
        snprintf(out->value, sizeof(out->value), "%s", value);
        out->effect = v->effect;
        return 0;
    }
    log_error("%s: kdp_plugin_set_dra_taints: device %s: taints[%zu].%s %s", t->driver, id, i,
              field, why);
    return -EINVAL;
}

/* The call's taints, checked, into out (their timeAdded from *old where
 * the same taint was there, else now). */
static int check_all(const kdp__dra_taints *t, const char *id, const kdp_dra_taint *v, size_t n,
                     const kdp__dra_tainted *old, kdp__dra_taint *out)
{
    if (n > KDP_DRA_MAX_TAINTS || (n && !v)) {
        log_error("%s: kdp_plugin_set_dra_taints: device %s: %zu taints: at most %d, and not "
                  "NULL",
                  t->driver, id, n, KDP_DRA_MAX_TAINTS);
        return -EINVAL;
    }
    int64_t now = (int64_t)time(NULL);
    for (size_t i = 0; i < n; i++) {
        int r = check_one(t, id, &v[i], i, &out[i]);
        if (r < 0) {
            return r;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(out[j].key, out[i].key) == 0 && out[j].effect == out[i].effect) {
                log_error("%s: kdp_plugin_set_dra_taints: device %s: taints[%zu] has the key "
                          "and effect of taints[%zu]",
                          t->driver, id, i, j);
                return -EINVAL;
            }
        }
        out[i].time_added = now;
        for (size_t k = 0; old && k < old->n; k++) {
            const kdp__dra_taint *o = &old->t[k];
            if (strcmp(o->key, out[i].key) == 0 && strcmp(o->value, out[i].value) == 0 &&
                o->effect == out[i].effect) {
                out[i].time_added = o->time_added;
            }
        }
    }
    return 0;
}

/* Puts (n > 0) or removes id's taints in s; mu held. */
static int put_locked(kdp__dra_taints *t, const char *id, const kdp__dra_taint *v, size_t n)
{
    kdp__dra_taintset *s = &t->shared;
    bool found = false;
    size_t at = set_find(s, id, &found);
    if (n == 0) {
        if (found) {
            free(s->v[at].id);
            memmove(&s->v[at], &s->v[at + 1], (s->n - at - 1) * sizeof(*s->v));
            s->n--;
        }
        return 0;
    }
    kdp__dra_tainted *e = found ? &s->v[at] : NULL;
    if (!e) {
        if (s->n >= KDP__DRA_TAINTED_MAX) {
            log_error("%s: kdp_plugin_set_dra_taints: device %s: %d devices have taints "
                      "already (the most kdp keeps): remove some first",
                      t->driver, id, KDP__DRA_TAINTED_MAX);
            return -ENOSPC;
        }
        char *copy = strdup(id);
        if (copy && s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 8;
            kdp__dra_tainted *nv = realloc(s->v, cap * sizeof(*nv));
            if (nv) {
                s->v = nv;
                s->cap = cap;
            }
        }
        if (!copy || s->n == s->cap || !s->v) {
            free(copy);
            return -ENOMEM;
        }
        memmove(&s->v[at + 1], &s->v[at], (s->n - at) * sizeof(*s->v));
        s->n++;
        e = &s->v[at];
        *e = (kdp__dra_tainted){.id = copy};
    }
    memcpy(e->t, v, n * sizeof(*v));
    e->n = n;
    return 0;
}

int kdp__dra_taints_set(kdp__dra_taints *t, const char *id, const kdp_dra_taint *v, size_t n)
{
    if (!id || !*id) {
        log_error("%s: kdp_plugin_set_dra_taints: the device ID is %s", t->driver,
                  id ? "empty" : "NULL");
        return -EINVAL;
    }
    kdp__dra_taint checked[KDP_DRA_MAX_TAINTS];
    pthread_mutex_lock(&t->mu);
    bool found = false;
    size_t at = set_find(&t->shared, id, &found);
    int r = check_all(t, id, v, n, found ? &t->shared.v[at] : NULL, checked);
    if (r == 0) {
        r = put_locked(t, id, checked, n);
    }
    if (r == 0) {
        t->ver++;
    }
    pthread_mutex_unlock(&t->mu);
    if (r == 0) {
        kdp__wakeup_signal(t->wake);
    }
    return r;
}

static void on_wake(kdp__wakeup *w, void *ud)
{
    (void)w;
    kdp__dra_taints *t = ud;
    pthread_mutex_lock(&t->mu);
    uint64_t ver = t->ver;
    int r = ver == t->taken ? 1 : set_copy(&t->loop, &t->shared);
    pthread_mutex_unlock(&t->mu);
    if (r < 0) {
        log_error("%s: out of memory taking the devices' taints: trying again", t->driver);
        kdp__wakeup_signal(t->wake); /* coalesced: the loop runs between */
        return;
    }
    if (r == 0) {
        t->taken = ver;
        t->changed(t->ud);
    }
}

size_t kdp__dra_taints_get(const kdp__dra_taints *t, const char *id, kdp__slice_taint *out,
                           size_t cap)
{
    bool found = false;
    size_t at = set_find(&t->loop, id, &found);
    if (!found) {
        return 0;
    }
    const kdp__dra_tainted *d = &t->loop.v[at];
    size_t n = d->n < cap ? d->n : cap;
    for (size_t i = 0; i < n; i++) {
        out[i] = (kdp__slice_taint){.key = d->t[i].key,
                                    .value = d->t[i].value[0] ? d->t[i].value : NULL,
                                    .effect = kdp__dra_taints_effect(d->t[i].effect),
                                    .time_added = d->t[i].time_added};
    }
    return n;
}

int kdp__dra_taints_init(kdp__dra_taints *t, kdp__loop *l, const char *driver, const char *own_key,
                         void (*changed)(void *), void *ud)
{
    memset(t, 0, sizeof(*t));
    t->driver = driver;
    t->own_key = own_key;
    t->changed = changed;
    t->ud = ud;
    pthread_mutex_init(&t->mu, NULL);
    return kdp__wakeup_new(l, on_wake, t, &t->wake);
}

void kdp__dra_taints_done(kdp__dra_taints *t)
{
    kdp__wakeup_free(t->wake);
    t->wake = NULL;
    set_free(&t->shared);
    set_free(&t->loop);
    pthread_mutex_destroy(&t->mu);
}
