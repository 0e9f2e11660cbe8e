/* SPDX-License-Identifier: MIT */
/*
 * discover: device nodes on the host (globs under a root), the string arrays
 * they come in, and the path rules every discovery call shares (a root, a
 * host path, resolving links inside the root). Pure file I/O, no state, no
 * threads. Their sysfs entry, USB identity and NUMA node: sysfs.c.
 */
#include "discovery/discover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "kdp.h"

#define MAX_PATH_LEN     4095
#define MAX_GLOB_MATCHES 4096
#define MAX_LINK_HOPS    32

/* ---- string arrays ---- */

int kdp__strv_add(kdp__strv *s, const char *str, size_t max)
{
    if (s->n >= max) {
        return -E2BIG;
    }
    if (s->n + 1 >= s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char **v = realloc(s->v, cap * sizeof(*v));
        if (!v) {
            return -ENOMEM;
        }
        v[s->n] = NULL; /* stays a NULL-terminated array if strdup fails */
        s->v = v;
        s->cap = cap;
    }
    char *c = strdup(str);
    if (!c) {
        return -ENOMEM;
    }
    s->v[s->n++] = c;
    s->v[s->n] = NULL;
    return 0;
}

char **kdp__strv_take(kdp__strv *s)
{
    char **v = s->v;
    if (!v) {
        v = calloc(1, sizeof(*v));
    }
    s->v = NULL;
    s->n = 0;
    s->cap = 0;
    return v;
}

void kdp__strv_clear(kdp__strv *s)
{
    kdp_strv_free(s->v);
    s->v = NULL;
    s->n = 0;
    s->cap = 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void kdp__strv_sort(kdp__strv *s)
{
    if (s->n > 1) {
        qsort(s->v, s->n, sizeof(*s->v), cmp_str);
    }
}

KDP_EXPORT void kdp_strv_free(char **v)
{
    if (!v) {
        return;
    }
    for (char **p = v; *p; p++) {
        free(*p);
    }
    free(v);
}

/* ---- paths ---- */

bool kdp__root_ok(const char *root)
{
    return !root || !*root || (root[0] == '/' && strlen(root) <= MAX_PATH_LEN);
}

/* root without its trailing slashes ("/" and NULL become ""). */
static size_t root_len(const char *root)
{
    size_t n = root ? strlen(root) : 0;
    while (n > 0 && root[n - 1] == '/') {
        n--;
    }
    return n;
}

/* An absolute host path of at most 4095 bytes without a ".." component. */
bool kdp__host_path_ok(const char *path)
{
    if (!path || path[0] != '/' || strlen(path) > MAX_PATH_LEN) {
        return false;
    }
    for (const char *p = path; (p = strstr(p, "..")); p += 2) {
        bool start = p[-1] == '/';
        bool end = p[2] == '/' || p[2] == '\0';
        if (start && end) {
            return false;
        }
    }
    return true;
}

int kdp__join_root(const char *root, const char *host, char *out, size_t n)
{
    int w = snprintf(out, n, "%.*s%s", (int)root_len(root), root ? root : "", host);
    return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/* Lexically collapses "//", "." and ".." (at "/", ".." stays there). */
static void normalize(char *path)
{
    char out[PATH_MAX];
    size_t o = 0;
    char *save = NULL;
    for (char *c = strtok_r(path, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0) {
            continue;
        }
        if (strcmp(c, "..") == 0) {
            while (o > 0 && out[o - 1] != '/') {
                o--;
            }
            o = o > 0 ? o - 1 : 0;
            continue;
        }
        size_t len = strlen(c);
        if (o + 1 + len >= sizeof(out)) {
            break; /* cannot happen: the input fits PATH_MAX */
        }
        out[o++] = '/';
        memcpy(out + o, c, len);
        o += len;
    }
    if (o == 0) {
        out[o++] = '/';
    }
    out[o] = '\0';
    memcpy(path, out, o + 1);
}

/* Follows the symlink chain of the last component of host path `path`
 * inside root (an absolute target is taken as a host path too). */
int kdp__resolve_in_root(const char *root, const char *path, char out[PATH_MAX])
{
    char cur[PATH_MAX];
    char full[PATH_MAX];
    snprintf(cur, sizeof(cur), "%s", path);
    normalize(cur);
    for (int hop = 0; hop < MAX_LINK_HOPS; hop++) {
        struct stat st;
        if (kdp__join_root(root, cur, full, sizeof(full)) < 0) {
            return -ENAMETOOLONG;
        }
        if (lstat(full, &st) < 0) {
            return -errno;
        }
        if (!S_ISLNK(st.st_mode)) {
            memcpy(out, cur, strlen(cur) + 1);
            return 0;
        }
        char target[PATH_MAX];
        ssize_t n = readlink(full, target, sizeof(target) - 1);
        if (n < 0) {
            return -errno;
        }
        target[n] = '\0';
        char next[PATH_MAX];
        int w = target[0] == '/' ? snprintf(next, sizeof(next), "%s", target)
                                 : snprintf(next, sizeof(next), "%.*s/%s",
                                            (int)(strrchr(cur, '/') - cur), cur, target);
        if (w < 0 || (size_t)w >= sizeof(next)) {
            return -ENAMETOOLONG;
        }
        normalize(next);
        memcpy(cur, next, strlen(next) + 1);
    }
    return -ELOOP;
}

/* ---- glob ---- */

/* root with glob's special characters escaped, then pattern. */
static char *glob_pattern(const char *root, const char *pattern)
{
    size_t rl = root_len(root);
    char *s = malloc(2 * rl + strlen(pattern) + 1);
    if (!s) {
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < rl; i++) {
        if (strchr("*?[]\\", root[i])) {
            s[o++] = '\\';
        }
        s[o++] = root[i];
    }
    memcpy(s + o, pattern, strlen(pattern) + 1);
    return s;
}

KDP_EXPORT int kdp_glob_devices(const char *root, const char *pattern, char ***ret_paths)
{
    if (!ret_paths || !kdp__root_ok(root) || !kdp__host_path_ok(pattern)) {
        return -EINVAL;
    }
    char *full = glob_pattern(root, pattern);
    if (!full) {
        return -ENOMEM;
    }
    glob_t g;
    memset(&g, 0, sizeof(g));
    int gr = glob(full, GLOB_NOSORT, NULL, &g);
    free(full);
    if (gr == GLOB_NOSPACE) {
        globfree(&g);
        return -ENOMEM;
    }
    size_t n = gr == 0 ? g.gl_pathc : 0;
    if (n > MAX_GLOB_MATCHES) {
        globfree(&g);
        return -E2BIG;
    }
    size_t rl = root_len(root);
    kdp__strv s = {0};
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        const char *m = g.gl_pathv[i];
        if (strlen(m) > rl && m[rl] == '/') {
            r = kdp__strv_add(&s, m + rl, MAX_GLOB_MATCHES);
        }
    }
    globfree(&g);
    kdp__strv_sort(&s);
    char **v = r == 0 ? kdp__strv_take(&s) : NULL;
    kdp__strv_clear(&s);
    if (!v) {
        return r < 0 ? r : -ENOMEM;
    }
    *ret_paths = v;
    return (int)n;
}
