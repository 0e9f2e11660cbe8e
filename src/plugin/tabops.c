/* SPDX-License-Identifier: MIT */
#include "plugin/tabops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void kdp__tabop_free(kdp__tabop *op)
{
    kdp__dev_free(&op->dev);
    free(op->id);
    memset(op, 0, sizeof(*op));
}

int kdp__tabop_dup(kdp__tabop *dst, const kdp__tabop *op)
{
    memset(dst, 0, sizeof(*dst));
    dst->kind = op->kind;
    dst->health = op->health;
    dst->bad = op->bad;
    if (op->kind == KDP__TABOP_PUT) {
        return kdp__dev_dup(&dst->dev, &op->dev);
    }
    dst->id = strdup(op->id);
    return dst->id ? 0 : -ENOMEM;
}

void kdp__tabops_clear(kdp__tabops *q)
{
    for (size_t i = 0; i < q->n; i++) {
        kdp__tabop_free(&q->v[i]);
    }
    free(q->v);
    memset(q, 0, sizeof(*q));
}

void kdp__tabops_push(kdp__tabops *q, kdp__tabop *op)
{
    if (!q->lost && q->n == KDP__TABOPS_MAX) {
        q->lost = true;
    }
    if (!q->lost && q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        kdp__tabop *v = realloc(q->v, cap * sizeof(*v));
        if (v) {
            q->v = v;
            q->cap = cap;
        } else {
            q->lost = true;
        }
    }
    if (q->lost) {
        /* the reader takes the whole table: the queue is of no use now */
        for (size_t i = 0; i < q->n; i++) {
            kdp__tabop_free(&q->v[i]);
        }
        q->n = 0;
        kdp__tabop_free(op);
        return;
    }
    q->v[q->n++] = *op;
    memset(op, 0, sizeof(*op));
}

/* Applies one op; fills u if given. Returns 0 or -ENOMEM (nothing done). */
static int apply_one(kdp__devtab *t, kdp__tabop *op, kdp__tabundo *u)
{
    kdp__tabundo none;
    if (!u) {
        u = &none;
    }
    memset(u, 0, sizeof(*u));
    u->kind = op->kind;
    switch (op->kind) {
    case KDP__TABOP_PUT: {
        const char *id = op->dev.id;
        const kdp__dev *cur = kdp__devtab_find(t, id);
        bool visible = !cur || !kdp__dev_same_for_kubelet(cur, &op->dev);
        kdp__dev old;
        int r = kdp__devtab_put(t, &op->dev, &old);
        if (r < 0) {
            return r;
        }
        u->id = id; /* the string moved into t with the device */
        u->did = true;
        u->visible = visible;
        u->had = r == 1;
        u->old = old;
        u->new_health = kdp__devtab_find(t, id)->health;
        break;
    }
    case KDP__TABOP_REMOVE:
        u->owned_id = op->id;
        op->id = NULL;
        u->id = u->owned_id;
        u->had = kdp__devtab_take(t, u->id, &u->old) == 0;
        u->did = u->visible = u->had;
        break;
    case KDP__TABOP_HEALTH:
    case KDP__TABOP_VERDICT: {
        u->owned_id = op->id;
        op->id = NULL;
        u->id = u->owned_id;
        const kdp__dev *cur = kdp__devtab_find(t, u->id);
        if (!cur) {
            break;
        }
        u->old_health = cur->health;
        u->old_author = cur->author_health;
        u->old_bad = cur->probe.bad;
        u->did = (op->kind == KDP__TABOP_HEALTH ? kdp__devtab_set_health(t, u->id, op->health)
                                                : kdp__devtab_set_verdict(t, u->id, op->bad)) == 1;
        u->new_health = cur->health; /* cur stays where it is: set in place */
        u->visible = u->new_health != u->old_health;
        break;
    }
    }
    kdp__tabop_free(op);
    if (u == &none) {
        kdp__tabundo_free(u, 1);
    }
    return 0;
}

int kdp__tabops_replay(kdp__devtab *t, kdp__tabops *q)
{
    int err = 0;
    for (size_t i = 0; i < q->n; i++) {
        if (apply_one(t, &q->v[i], NULL) < 0) {
            err = -ENOMEM;
        }
    }
    kdp__tabops_clear(q);
    return err;
}

int kdp__tabops_apply(kdp__devtab *t, kdp__tabop *ops, size_t n, kdp__tabundo *undo)
{
    for (size_t i = 0; i < n; i++) {
        if (apply_one(t, &ops[i], &undo[i]) < 0) {
            kdp__tabops_undo(t, undo, i);
            kdp__tabundo_free(undo, i);
            for (size_t k = i; k < n; k++) {
                kdp__tabop_free(&ops[k]);
            }
            return -ENOMEM;
        }
    }
    return 0;
}

void kdp__tabops_undo(kdp__devtab *t, kdp__tabundo *undo, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        kdp__tabundo *u = &undo[i];
        if (!u->did) {
            continue;
        }
        switch (u->kind) {
        case KDP__TABOP_PUT:
            if (u->had) {
                kdp__dev now;
                /* a replacement: same ID, in place, no allocation */
                (void)kdp__devtab_put(t, &u->old, &now);
                kdp__dev_free(&now);
            } else {
                (void)kdp__devtab_remove(t, u->id);
            }
            break;
        case KDP__TABOP_REMOVE: {
            kdp__dev none;
            /* back where the removal left room: the array and the index
             * only grow, so this append does not allocate */
            (void)kdp__devtab_put(t, &u->old, &none);
            break;
        }
        case KDP__TABOP_HEALTH:
            (void)kdp__devtab_set_health(t, u->id, u->old_author);
            break;
        case KDP__TABOP_VERDICT:
            (void)kdp__devtab_set_verdict(t, u->id, u->old_bad);
            break;
        }
        u->did = false;
        u->had = false;
    }
}

void kdp__tabundo_free(kdp__tabundo *undo, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        kdp__dev_free(&undo[i].old);
        free(undo[i].owned_id);
        undo[i].owned_id = NULL;
        undo[i].id = NULL;
    }
}
