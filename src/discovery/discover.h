/* SPDX-License-Identifier: MIT */
/* discover: helpers shared by the discovery modules (discover.c, cdi.c). */
#ifndef KDP_DISCOVER_H
#define KDP_DISCOVER_H

#include <stddef.h>

/* A growing NULL-terminated string array (the kdp_strv_free kind). */
typedef struct kdp__strv {
    char **v; /* NULL until the first add; always NULL-terminated after */
    size_t n;
    size_t cap;
} kdp__strv;

/* Appends a copy of s (at most max entries: -E2BIG past it). Returns 0,
 * -E2BIG, -ENOMEM. */
int kdp__strv_add(kdp__strv *s, const char *str, size_t max);
/* Hands the array out (an empty one if nothing was added), or NULL on
 * allocation failure; s is empty afterwards. */
char **kdp__strv_take(kdp__strv *s);
void kdp__strv_clear(kdp__strv *s);
/* Sorts with strcmp. */
void kdp__strv_sort(kdp__strv *s);

#endif
