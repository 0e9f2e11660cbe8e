/* SPDX-License-Identifier: MIT */
/* regdir: see regdir.h. */
#include "regdir.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/files.h"
#include "kdpctl.h"
#include "runtime/watch.h"

struct kc_regdir {
    char *dir;
    bool slash; /* dir ends with '/' */
    kdp__watch *watch;
    kc_regdir_ops ops;
    void *ud;
};

/* DIR/name (malloc'd), or NULL. */
static char *join(const kc_regdir *d, const char *name)
{
    char *path;
    return asprintf(&path, "%s%s%s", d->dir, d->slash ? "" : "/", name) < 0 ? NULL : path;
}

static void found(kc_regdir *d, const char *name, const char *source)
{
    if (name[0] == '.') {
        return;
    }
    char *path = join(d, name);
    struct stat st;
    if (path && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        d->ops.found(name, path, source, d->ud);
    }
    free(path);
}

static void on_dir(int what, const char *name, void *ud)
{
    kc_regdir *d = ud;
    if (what == KDP__WATCH_CREATED) {
        found(d, name, "inotify");
    } else if (what == KDP__WATCH_DELETED) {
        char *path = join(d, name);
        if (path) {
            d->ops.gone(name, path, d->ud);
        }
        free(path);
    } else {
        kdp__watch_free(d->watch); /* safe from its callback */
        d->watch = NULL;
        d->ops.dir_gone(d->ud);
    }
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every name in the directory, sorted; found() for each. */
static int walk(kc_regdir *d, size_t walk_max)
{
    DIR *dir = opendir(d->dir);
    if (!dir) {
        return -errno;
    }
    kc_strv names = {0};
    int r = 0;
    struct dirent *de;
    while ((walk_max == 0 || names.n < walk_max) && (de = readdir(dir))) {
        if (kc_strv_add(&names, de->d_name) < 0) {
            r = -ENOMEM;
            break;
        }
    }
    closedir(dir);
    if (names.n > 1) {
        qsort(names.v, names.n, sizeof(*names.v), cmp_names);
    }
    for (size_t i = 0; r == 0 && i < names.n; i++) {
        found(d, names.v[i], "walk");
    }
    kc_strv_free(&names);
    return r;
}

int kc_regdir_start(kdp__loop *l, const char *dir, size_t walk_max, const kc_regdir_ops *ops,
                    void *ud, kc_regdir **ret)
{
    kc_regdir *d = calloc(1, sizeof(*d));
    if (!d || !(d->dir = strdup(dir))) {
        free(d);
        return -ENOMEM;
    }
    size_t n = strlen(dir);
    d->slash = n > 0 && dir[n - 1] == '/';
    d->ops = *ops;
    d->ud = ud;
    int r = kdp__mkdir_p(dir, 0750);
    if (r == 0) {
        r = kdp__watch_new(l, dir, on_dir, d, &d->watch);
    }
    if (r == 0) {
        r = walk(d, walk_max);
    }
    if (r < 0) {
        kc_regdir_free(d);
        return r;
    }
    *ret = d;
    return 0;
}

void kc_regdir_free(kc_regdir *d)
{
    if (!d) {
        return;
    }
    kdp__watch_free(d->watch);
    free(d->dir);
    free(d);
}
