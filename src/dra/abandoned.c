/* SPDX-License-Identifier: MIT */
#include "dra/abandoned.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    struct entry *next;
    char *uid;
} entry;

struct kdp__abandoned {
    atomic_uint refs;
    pthread_mutex_t mu;
    entry *head; /* one entry per abandoned job */
};

kdp__abandoned *kdp__abandoned_new(void)
{
    kdp__abandoned *a = calloc(1, sizeof(*a));
    if (a) {
        atomic_init(&a->refs, 1);
        pthread_mutex_init(&a->mu, NULL);
    }
    return a;
}

kdp__abandoned *kdp__abandoned_ref(kdp__abandoned *a)
{
    atomic_fetch_add(&a->refs, 1);
    return a;
}

void kdp__abandoned_unref(kdp__abandoned *a)
{
    if (!a || atomic_fetch_sub(&a->refs, 1) != 1) {
        return;
    }
    while (a->head) {
        entry *e = a->head;
        a->head = e->next;
        free(e->uid);
        free(e);
    }
    pthread_mutex_destroy(&a->mu);
    free(a);
}

int kdp__abandoned_add(kdp__abandoned *a, const char *uid)
{
    entry *e = calloc(1, sizeof(*e));
    char *s = strdup(uid);
    if (!e || !s) {
        free(e);
        free(s);
        return -ENOMEM;
    }
    e->uid = s;
    pthread_mutex_lock(&a->mu);
    e->next = a->head;
    a->head = e;
    pthread_mutex_unlock(&a->mu);
    return 0;
}

void kdp__abandoned_del(kdp__abandoned *a, const char *uid)
{
    entry *gone = NULL;
    pthread_mutex_lock(&a->mu);
    for (entry **pp = &a->head; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->uid, uid) == 0) {
            gone = *pp;
            *pp = gone->next;
            break;
        }
    }
    pthread_mutex_unlock(&a->mu);
    if (gone) {
        free(gone->uid);
        free(gone);
    }
}

bool kdp__abandoned_has(kdp__abandoned *a, const char *uid)
{
    bool found = false;
    pthread_mutex_lock(&a->mu);
    for (const entry *e = a->head; e && !found; e = e->next) {
        found = strcmp(e->uid, uid) == 0;
    }
    pthread_mutex_unlock(&a->mu);
    return found;
}
