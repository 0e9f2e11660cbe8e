/* SPDX-License-Identifier: MIT */
/*
 * list: kdp's one linked list, intrusive and circular (a head is a link that
 * points to itself when the list is empty). Embed a kdp__link in each
 * element, find the element back with KDP__CONTAINER_OF. No allocation, O(1)
 * insert and remove, and removing a link that is in no list is harmless
 * (kdp__link_init'ed links and removed links point to themselves).
 */
#ifndef KDP_LIST_H
#define KDP_LIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kdp__link {
    struct kdp__link *prev, *next;
} kdp__link;

/* The element of type `type` whose member `member` is at ptr. */
#define KDP__CONTAINER_OF(ptr, type, member)                                                       \
    ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* An empty list (a head), or a link in no list. */
static inline void kdp__link_init(kdp__link *l)
{
    l->prev = l;
    l->next = l;
}

static inline bool kdp__list_empty(const kdp__link *head)
{
    return head->next == head;
}

/* Whether the link is in a list (it was inserted and not removed since). */
static inline bool kdp__link_linked(const kdp__link *l)
{
    return l->next != l;
}

/* Inserts l after pos (at the head of a list when pos is its head). */
static inline void kdp__list_insert_after(kdp__link *pos, kdp__link *l)
{
    l->prev = pos;
    l->next = pos->next;
    pos->next->prev = l;
    pos->next = l;
}

/* Appends l at the end of the list head. */
static inline void kdp__list_append(kdp__link *head, kdp__link *l)
{
    kdp__list_insert_after(head->prev, l);
}

/* Takes l out of its list (nothing if it is in none). */
static inline void kdp__link_remove(kdp__link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    kdp__link_init(l);
}

/* The first link of the list, or NULL when it is empty. */
static inline kdp__link *kdp__list_first(const kdp__link *head)
{
    return kdp__list_empty(head) ? NULL : head->next;
}

/* for (each link l of head) ...; l may not be removed in the body. */
#define kdp__list_for_each(l, head) for ((l) = (head)->next; (l) != (head); (l) = (l)->next)

/* The same, where the body may remove l (tmp keeps the next link). */
#define kdp__list_for_each_safe(l, tmp, head)                                                      \
    for ((l) = (head)->next, (tmp) = (l)->next; (l) != (head); (l) = (tmp), (tmp) = (l)->next)

#endif
