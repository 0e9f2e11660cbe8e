/* SPDX-License-Identifier: MIT */
/* discover: helpers shared by the discovery modules (discover.c, sysfs.c, cdi.c). */
#ifndef KDP_DISCOVER_H
#define KDP_DISCOVER_H

#include <limits.h>
#include <stdbool.h>
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

/* A root directory argument: NULL, "" or an absolute path of at most 4095
 * bytes. */
bool kdp__root_ok(const char *root);
/* An absolute host path of at most 4095 bytes without a ".." component. */
bool kdp__host_path_ok(const char *path);
/* root (without its trailing slashes) then host into out[n]. Returns 0 or
 * -ENAMETOOLONG. */
int kdp__join_root(const char *root, const char *host, char *out, size_t n);
/* Follows the symlink chain of the last component of host path `path` inside
 * root (an absolute link target is taken as a host path too): the result, a
 * host path, in out. Returns 0 or -errno (-ELOOP past 32 links). */
int kdp__resolve_in_root(const char *root, const char *path, char out[PATH_MAX]);

#endif
