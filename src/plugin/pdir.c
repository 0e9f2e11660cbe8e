/* SPDX-License-Identifier: MIT */
#include "plugin/pdir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"

void kdp__pdir_init(kdp__pdir *d, kdp__loop *l, const char *path, const char *resource,
                    kdp__status *status, const kdp__pdir_cbs *cbs)
{
    memset(d, 0, sizeof(*d));
    d->loop = l;
    d->path = path;
    d->resource = resource;
    d->status = status;
    d->cbs = *cbs;
}

void kdp__pdir_done(kdp__pdir *d)
{
    kdp__pdir_unwatch(d);
    kdp__pdir_stop_awaiting(d);
}

static void on_watch(int what, const char *name, void *ud)
{
    kdp__pdir *d = ud;
    if (what == KDP__WATCH_GONE) {
        /* The watch died with the directory: drop it, so that the next
         * kdp__pdir_watch watches the directory that is there then. */
        kdp__watch_free(d->watch); /* safe from its own callback */
        d->watch = NULL;
    }
    d->cbs.event(d->cbs.ud, what, name);
}

void kdp__pdir_watch(kdp__pdir *d)
{
    if (d->watch) {
        return;
    }
    int r = kdp__watch_new(d->loop, d->path, on_watch, d, &d->watch);
    if (r < 0) {
        log_warn("%s: cannot watch %s: %s (kubelet restarts are then noticed only when the "
                 "stream ends or Register fails)",
                 d->resource, d->path, strerror(-r));
    }
}

void kdp__pdir_unwatch(kdp__pdir *d)
{
    kdp__watch_free(d->watch);
    d->watch = NULL;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void on_parent_watch(int what, const char *name, void *ud)
{
    kdp__pdir *d = ud;
    if (what != KDP__WATCH_CREATED || !name || strcmp(name, base_name(d->path)) != 0) {
        return;
    }
    log_info("%s: %s is back: starting", d->resource, d->path);
    kdp__pdir_stop_awaiting(d); /* safe from its own callback */
    d->cbs.back(d->cbs.ud);
}

void kdp__pdir_await(kdp__pdir *d)
{
    struct stat st;
    if (d->parent_watch || stat(d->path, &st) == 0) {
        return;
    }
    char *parent = strdup(d->path);
    char *slash = parent ? strrchr(parent, '/') : NULL;
    if (!slash) {
        free(parent);
        return;
    }
    if (slash == parent) {
        slash[1] = '\0'; /* "/" */
    } else {
        *slash = '\0';
    }
    if (kdp__watch_new(d->loop, parent, on_parent_watch, d, &d->parent_watch) == 0 &&
        stat(d->path, &st) == 0) {
        kdp__pdir_stop_awaiting(d);
        d->cbs.back(d->cbs.ud); /* it came back meanwhile */
    }
    free(parent);
}

void kdp__pdir_stop_awaiting(kdp__pdir *d)
{
    kdp__watch_free(d->parent_watch);
    d->parent_watch = NULL;
}

/* Why the directory cannot be used (err: the failure that made us look),
 * or 0 if it looks fine and err is something else. */
static int problem(const kdp__pdir *d, int err)
{
    struct stat st;
    if (stat(d->path, &st) < 0) {
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return -ENOTDIR;
    }
    if (access(d->path, W_OK | X_OK) < 0) {
        return -errno;
    }
    if (kdp__dir_trusted(d->path, NULL) == -KDP__EUNTRUSTED) {
        return -KDP__EUNTRUSTED;
    }
    return err == -EACCES || err == -EPERM || err == -EROFS ? err : 0;
}

static void publish(kdp__pdir *d)
{
    kdp_plugin_status *st = kdp__status_lock(d->status);
    st->dir_error = d->error;
    kdp__status_unlock(d->status);
}

bool kdp__pdir_report(kdp__pdir *d, int err)
{
    int why = problem(d, err);
    if (why == d->error) {
        return why != 0;
    }
    d->error = why;
    publish(d);
    switch (why) {
    case 0:
        break;
    case -ENOENT:
        log_error("%s: the device-plugin directory %s does not exist: is the kubelet installed, "
                  "and is this its directory? (set kdp_config.device_plugin_dir or "
                  "$" KDP_DEVICE_PLUGIN_DIR_ENV "; in a pod, mount the host's directory with a "
                  "hostPath volume). Starting as soon as it appears",
                  d->resource, d->path);
        break;
    case -ENOTDIR:
        log_error("%s: the device-plugin directory %s is not a directory (or a path component "
                  "is not): point kdp at the kubelet's device-plugin directory. Retrying",
                  d->resource, d->path);
        break;
    case -EROFS:
        log_error("%s: the device-plugin directory %s is on a read-only file system: mount it "
                  "read-write (a hostPath volume without readOnly). Retrying",
                  d->resource, d->path);
        break;
    case -KDP__EUNTRUSTED: {
        const char *what = "is writable by others";
        (void)kdp__dir_trusted(d->path, &what);
        log_error("%s: the device-plugin directory %s %s: whoever can write there can plant "
                  "files the plugin trusts. The kubelet's is root's, mode 0750: fix the owner "
                  "and mode. Retrying",
                  d->resource, d->path, what);
        break;
    }
    case -EACCES:
    case -EPERM:
        log_error("%s: cannot create files in the device-plugin directory %s (%s): run the "
                  "plugin as root (or as the directory's owner). Retrying",
                  d->resource, d->path, strerror(-why));
        break;
    default:
        log_error("%s: cannot use the device-plugin directory %s: %s. Retrying", d->resource,
                  d->path, strerror(-why));
        break;
    }
    return why != 0;
}

void kdp__pdir_ok(kdp__pdir *d)
{
    if (d->error) {
        d->error = 0;
        publish(d);
        log_info("%s: the device-plugin directory %s is usable now", d->resource, d->path);
    }
}
