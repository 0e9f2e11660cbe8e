/* SPDX-License-Identifier: MIT */
/*
 * hotplug: kdp_plugin_watch_path(). inotify watches (src/runtime/watch.h) on a
 * directory and its subdirectories down to a depth, on the plugin's loop;
 * an entry created, deleted or moved there asks the plugin for a rescan.
 *
 * A directory that does not exist (yet) is waited for on its nearest
 * existing ancestor; a subdirectory created within the depth, or the
 * directory going away, rebuilds the set of watches. Rebuilds run from a
 * zero-delay timer, never inside the watch callback that asked for one,
 * and end with a rescan, so nothing created meanwhile goes unseen.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "plugin/ctx.h"
#include "plugin/plugin.h"
#include "runtime/watch.h"

#define MAX_DEPTH      4U
#define MAX_NODES      256U
#define ANCESTOR       UINT_MAX
#define REARM_RETRY_US (5ULL * 1000000ULL)

typedef struct hp_node hp_node;

struct kdp_path_watch {
    kdp_plugin *p;
    kdp__attachment att; /* attached to p: p frees what is left */
    kdp__loop *loop;
    char *dir; /* the directory asked for, normalised (no trailing '/') */
    unsigned depth;
    hp_node *nodes;
    size_t n_nodes;
    char *next_name; /* watching an ancestor: the entry that leads to dir */
    kdp__timer *rearm;
};

struct hp_node {
    hp_node *next;
    kdp_path_watch *pw;
    kdp__watch *w;
    unsigned level; /* 0 = dir itself, ANCESTOR = an existing ancestor */
};

static void on_event(int what, const char *name, void *ud);
static bool free_attached(kdp__attachment *a);
static void path_watch_free(kdp_path_watch *w);
static void request_rearm(kdp_path_watch *pw);

static void free_nodes(kdp_path_watch *pw)
{
    while (pw->nodes) {
        hp_node *n = pw->nodes;
        pw->nodes = n->next;
        kdp__watch_free(n->w);
        free(n);
    }
    pw->n_nodes = 0;
    free(pw->next_name);
    pw->next_name = NULL;
}

static int add_node(kdp_path_watch *pw, const char *dir, unsigned level)
{
    if (pw->n_nodes >= MAX_NODES) {
        log_warn("hot-plug: more than %u directories under %s: not watching %s", MAX_NODES, pw->dir,
                 dir);
        return 0;
    }
    hp_node *n = calloc(1, sizeof(*n));
    if (!n) {
        return -ENOMEM;
    }
    n->pw = pw;
    n->level = level;
    int r = kdp__watch_new(pw->loop, dir, on_event, n, &n->w);
    if (r < 0) {
        free(n);
        return r;
    }
    n->next = pw->nodes;
    pw->nodes = n;
    pw->n_nodes++;
    return 0;
}

static bool is_dir_nofollow(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Watches dir and, within the depth, its subdirectories (links not followed).
 * Recursive, at most MAX_DEPTH deep. */
// NOLINTNEXTLINE(misc-no-recursion): bounded by pw->depth <= MAX_DEPTH
static int add_tree(kdp_path_watch *pw, const char *dir, unsigned level)
{
    int r = add_node(pw, dir, level);
    if (r < 0 || level >= pw->depth) {
        return r;
    }
    DIR *d = opendir(dir);
    if (!d) {
        return 0; /* gone meanwhile: its parent's event rebuilds */
    }
    struct dirent *e;
    while (r == 0 && (e = readdir(d))) {
        char sub[PATH_MAX];
        int w = snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || w < 0 ||
            (size_t)w >= sizeof(sub) || !is_dir_nofollow(sub)) {
            continue;
        }
        r = add_tree(pw, sub, level + 1);
    }
    closedir(d);
    return r;
}

/* dir does not exist: watch the nearest existing ancestor for the entry
 * that leads to it. */
static int add_ancestor(kdp_path_watch *pw)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s", pw->dir);
    for (;;) {
        char *slash = strrchr(path, '/');
        if (!slash) {
            return -ENOENT;
        }
        char next[NAME_MAX + 1];
        snprintf(next, sizeof(next), "%s", slash + 1);
        if (slash == path) {
            slash[1] = '\0'; /* "/" */
        } else {
            *slash = '\0';
        }
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            pw->next_name = strdup(next);
            int r = pw->next_name ? add_node(pw, path, ANCESTOR) : -ENOMEM;
            /* Created between the stat and the watch: no event will come. */
            char child[PATH_MAX + NAME_MAX + 2];
            int w = snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "", next);
            if (r == 0 && w > 0 && (size_t)w < sizeof(child) && stat(child, &st) == 0) {
                request_rearm(pw);
            }
            return r;
        }
        if (slash == path) {
            return -ENOENT;
        }
    }
}

static int arm(kdp_path_watch *pw)
{
    free_nodes(pw);
    struct stat st;
    int r = stat(pw->dir, &st) == 0 && S_ISDIR(st.st_mode) ? add_tree(pw, pw->dir, 0)
                                                           : add_ancestor(pw);
    if (r < 0) {
        free_nodes(pw);
    }
    return r;
}

static void on_rearm(kdp__timer *t, void *ud)
{
    kdp_path_watch *pw = ud;
    int r = arm(pw);
    if (r < 0) {
        log_error("%s: hot-plug: cannot watch %s: %s; trying again in %llu s",
                  kdp_plugin_resource(pw->p), pw->dir, strerror(-r),
                  (unsigned long long)(REARM_RETRY_US / 1000000ULL));
        kdp__timer_start(t, REARM_RETRY_US);
    }
    kdp_plugin_rescan(pw->p);
}

static void request_rearm(kdp_path_watch *pw)
{
    if (!kdp__timer_armed(pw->rearm)) {
        kdp__timer_start(pw->rearm, 0);
    }
}

static void on_event(int what, const char *name, void *ud)
{
    hp_node *n = ud;
    kdp_path_watch *pw = n->pw;
    if (n->level == ANCESTOR) {
        if (what == KDP__WATCH_GONE ||
            (what == KDP__WATCH_CREATED && name && strcmp(name, pw->next_name) == 0)) {
            request_rearm(pw);
        }
        return;
    }
    if (what == KDP__WATCH_GONE) {
        request_rearm(pw); /* a dead watch: rebuild (and fall back if dir went) */
        return;
    }
    if (what == KDP__WATCH_CREATED && name && n->level < pw->depth) {
        request_rearm(pw); /* maybe a subdirectory to watch; the rebuild rescans */
    }
    kdp_plugin_rescan(pw->p);
}

/* What is wrong with kdp_plugin_watch_path's arguments, or NULL. */
static const char *bad_watch_args(const kdp_plugin *p, const char *dir, unsigned depth)
{
    if (!p) {
        return "the plugin is NULL";
    }
    if (!dir) {
        return "dir is NULL";
    }
    if (dir[0] != '/') {
        return "dir must be an absolute path";
    }
    if (depth > MAX_DEPTH) {
        return "depth is over 4";
    }
    return strlen(dir) >= PATH_MAX ? "dir is too long" : NULL;
}

/* pw->dir, without its trailing slashes ("/" stays). */
static int set_dir(kdp_path_watch *pw, const char *dir)
{
    pw->dir = strdup(dir);
    if (!pw->dir) {
        return -ENOMEM;
    }
    size_t n = strlen(pw->dir);
    while (n > 1 && pw->dir[n - 1] == '/') {
        pw->dir[--n] = '\0';
    }
    return 0;
}

KDP_EXPORT int kdp_plugin_watch_path(kdp_plugin *p, const char *dir, unsigned depth,
                                     kdp_path_watch **ret)
{
    const char *bad = bad_watch_args(p, dir, depth);
    if (bad) {
        log_error("kdp_plugin_watch_path: %s", bad);
        return -EINVAL;
    }
    int r = kdp__ctx_check_caller(kdp__plugin_ctx(p), "kdp_plugin_watch_path",
                                  "set watches up before the context runs, or on its thread "
                                  "(kdp_ctx_post() runs a function there)");
    if (r < 0) {
        return r;
    }
    kdp_path_watch *pw = calloc(1, sizeof(*pw));
    if (!pw) {
        return -ENOMEM;
    }
    pw->p = p;
    pw->loop = kdp__plugin_loop(p);
    kdp__link_init(&pw->att.link);
    pw->att.free = free_attached;
    pw->depth = depth;
    r = set_dir(pw, dir);
    if (r == 0) {
        r = kdp__timer_new(pw->loop, on_rearm, pw, &pw->rearm);
    }
    if (r == 0) {
        r = arm(pw);
    }
    if (r < 0) {
        path_watch_free(pw);
        return r;
    }
    kdp__plugin_attach(p, &pw->att);
    if (ret) {
        *ret = pw;
    }
    return 0;
}

KDP_EXPORT void kdp_path_watch_free(kdp_path_watch *w)
{
    if (!w || kdp__ctx_check_caller(kdp__plugin_ctx(w->p), "kdp_path_watch_free",
                                    "free watches on the thread that runs the context "
                                    "(kdp_ctx_post() runs a function there), or let "
                                    "kdp_plugin_free() free them") < 0) {
        return;
    }
    path_watch_free(w);
}

static bool free_attached(kdp__attachment *a)
{
    path_watch_free(KDP__CONTAINER_OF(a, kdp_path_watch, att));
    return false; /* it runs no callback */
}

static void path_watch_free(kdp_path_watch *w)
{
    if (!w) {
        return;
    }
    kdp__plugin_detach(&w->att);
    free_nodes(w);
    kdp__timer_free(w->rearm);
    free(w->dir);
    free(w);
}
