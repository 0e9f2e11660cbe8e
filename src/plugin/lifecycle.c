/* SPDX-License-Identifier: MIT */
/*
 * lifecycle: lock -> refresh -> list -> serve -> register, and back again.
 *
 * Restarts come from three signals: kubelet.sock re-created (a new kubelet),
 * our own socket deleted (the kubelet cleans the directory when it starts),
 * and the kubelet's ListAndWatch stream ending. Each restart runs destroy,
 * then refresh, re-creates the socket and registers again. Registration is
 * retried with capped exponential backoff, forever; a missing kubelet.sock is
 * waited for through inotify, with a slow fallback check.
 */
#include "plugin/lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "deviceplugin.pb-c.h"
#include "grpc/wire.h"
#include "plugin/jobs.h"
#include "plugin/service.h"
#include "runtime/sock.h"

enum { RETRY_NONE = 0, RETRY_START, RETRY_REGISTER };

static void serve(kdp_plugin *p);
static void do_register(kdp_plugin *p);
static int take_lock(kdp_plugin *p);
static int ensure_lock(kdp_plugin *p);
static void fatal(kdp_plugin *p, int err);
static void after_job(kdp_plugin *p);
static void run_destroy(kdp_plugin *p);

static void await_dir(kdp_plugin *p);
static void publish_status(kdp_plugin *p);

static void schedule_retry(kdp_plugin *p, int what, uint64_t delay_us)
{
    p->retry_what = what;
    kdp__timer_start(p->retry_timer, delay_us);
    if (what == RETRY_START) {
        await_dir(p);
    }
}

/* The device-plugin directory is gone (a kubelet being reinstalled, a test
 * removing it): watch its parent, so that the start is retried the moment
 * it is back rather than at the next backoff step. */
static void on_parent_watch(int what, const char *name, void *ud)
{
    kdp_plugin *p = ud;
    const char *base = strrchr(p->dir, '/');
    base = base ? base + 1 : p->dir;
    if (what != KDP__WATCH_CREATED || !name || strcmp(name, base) != 0 ||
        p->retry_what != RETRY_START) {
        return;
    }
    log_info("%s: %s is back: starting", p->resource, p->dir);
    kdp__watch_free(p->parent_watch); /* safe from its own callback */
    p->parent_watch = NULL;
    kdp__timer_start(p->retry_timer, 0);
}

static void await_dir(kdp_plugin *p)
{
    struct stat st;
    if (p->parent_watch || stat(p->dir, &st) == 0) {
        return;
    }
    char *parent = strdup(p->dir);
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
    if (kdp__watch_new(p->ctx->loop, parent, on_parent_watch, p, &p->parent_watch) == 0 &&
        stat(p->dir, &st) == 0) {
        kdp__timer_start(p->retry_timer, 0); /* it came back meanwhile */
    }
    free(parent);
}

static void stop_awaiting_dir(kdp_plugin *p)
{
    kdp__watch_free(p->parent_watch);
    p->parent_watch = NULL;
}

/* Why the device-plugin directory cannot be used (err: the failure that
 * made us look), or 0 if it looks fine and err is something else. */
static int dir_problem(const kdp_plugin *p, int err)
{
    struct stat st;
    if (stat(p->dir, &st) < 0) {
        return -errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return -ENOTDIR;
    }
    if (access(p->dir, W_OK | X_OK) < 0) {
        return -errno;
    }
    return err == -EACCES || err == -EPERM || err == -EROFS ? err : 0;
}

/* Says what is wrong with the directory once, then only when it changes;
 * returns true if the directory is the problem. */
static bool report_dir(kdp_plugin *p, int err)
{
    int why = dir_problem(p, err);
    if (why == p->dir_error) {
        return why != 0;
    }
    p->dir_error = why;
    publish_status(p);
    switch (why) {
    case 0:
        break;
    case -ENOENT:
        log_error("%s: the device-plugin directory %s does not exist: is the kubelet installed, "
                  "and is this its directory? (set kdp_config.device_plugin_dir or "
                  "$KDP_DEVICE_PLUGIN_DIR; in a pod, mount the host's directory with a hostPath "
                  "volume). Starting as soon as it appears",
                  p->resource, p->dir);
        break;
    case -ENOTDIR:
        log_error("%s: the device-plugin directory %s is not a directory (or a path component "
                  "is not): point kdp at the kubelet's device-plugin directory. Retrying",
                  p->resource, p->dir);
        break;
    case -EROFS:
        log_error("%s: the device-plugin directory %s is on a read-only file system: mount it "
                  "read-write (a hostPath volume without readOnly). Retrying",
                  p->resource, p->dir);
        break;
    case -EACCES:
    case -EPERM:
        log_error("%s: cannot create files in the device-plugin directory %s (%s): run the "
                  "plugin as root (or as the directory's owner). Retrying",
                  p->resource, p->dir, strerror(-why));
        break;
    default:
        log_error("%s: cannot use the device-plugin directory %s: %s. Retrying", p->resource,
                  p->dir, strerror(-why));
        break;
    }
    return why != 0;
}

/* The directory was the problem and is not any more. */
static void dir_ok(kdp_plugin *p)
{
    if (p->dir_error) {
        p->dir_error = 0;
        publish_status(p);
        log_info("%s: the device-plugin directory %s is usable now", p->resource, p->dir);
    }
}

void kdp__plugin_on_retry(kdp__timer *t, void *ud)
{
    (void)t;
    kdp_plugin *p = ud;
    int what = p->retry_what;
    p->retry_what = RETRY_NONE;
    if (what == RETRY_START) {
        kdp__plugin_start(p);
    } else if (what == RETRY_REGISTER && (p->state == P_WAITING || p->state == P_REGISTERING)) {
        do_register(p);
    }
}

/* ---- the device table ---- */

/* At most this many device lines per table change, then one summary line:
 * a list of 100,000 devices must not cost 100,000 log lines (about a tenth
 * of the time of its first ListAndWatch, measured with bench/). */
#define KDP_LOG_CHANGES_MAX 16

typedef struct change_log {
    kdp_plugin *p;
    size_t n, added, removed, health;
} change_log;

static void log_change(const kdp__dev *old_dev, const kdp__dev *new_dev, void *ud)
{
    change_log *c = ud;
    kdp_plugin *p = c->p;
    if (c->n++ >= KDP_LOG_CHANGES_MAX) {
        c->added += !old_dev;
        c->removed += !new_dev;
        c->health += old_dev && new_dev && old_dev->health != new_dev->health;
        return;
    }
    if (!old_dev) {
        log_info("%s: device %s added (%s)", p->resource, new_dev->id,
                 new_dev->health == KDP_HEALTHY ? "Healthy" : "Unhealthy");
    } else if (!new_dev) {
        log_info("%s: device %s removed", p->resource, old_dev->id);
    } else if (old_dev->health != new_dev->health) {
        log_info("%s: device %s is now %s", p->resource, new_dev->id,
                 new_dev->health == KDP_HEALTHY ? "Healthy" : "Unhealthy");
    }
}

/* What other threads read through kdp_plugin_get_status(). */
static void publish_status(kdp_plugin *p)
{
    pthread_mutex_lock(&p->mu);
    p->pub.devices = p->tab.n;
    p->pub.message_bytes = p->law_len;
    p->pub.rejected_devices = p->rejected_n;
    p->pub.rejected_bytes = p->rejected_bytes;
    p->pub.list_error = p->list_error;
    p->pub.dir_error = p->dir_error;
    p->pub.restarts = p->restarts;
    pthread_mutex_unlock(&p->mu);
}

static int encode(kdp_plugin *p, const kdp__devtab *t, uint8_t **buf, size_t *len)
{
    int r = kdp__devtab_encode(t, buf, len);
    if (r < 0) {
        log_error("%s: cannot encode %zu devices: %s", p->resource, t->n, strerror(-r));
    }
    return r;
}

/* The table that would make a message over the kubelet's limit is not sent
 * (the kubelet would fail its stream, and we would restart for nothing):
 * the kubelet keeps the last list that fit. Said at most once a minute. */
static void reject_table(kdp_plugin *p, size_t n, size_t len)
{
    uint64_t now = kdp__now_us();
    bool first = p->rejected_bytes == 0;
    p->rejected_n = n;
    p->rejected_bytes = len;
    publish_status(p);
    if (!first && now - p->rejected_logged_us < KDP_REJECT_LOG_US) {
        return;
    }
    p->rejected_logged_us = now;
    log_error("%s: not sending the device list: its %zu devices make a %zu-byte ListAndWatch "
              "message, over the kubelet's limit of %u bytes (4 MiB); the kubelet keeps the "
              "last list that fit (%zu devices). Use fewer devices or shorter IDs, or split them "
              "over several resources (said at most once a minute)",
              p->resource, n, len, KDP_MAX_LIST_MESSAGE, p->tab.n);
}

static void clear_rejected(kdp_plugin *p)
{
    bool was = p->rejected_bytes != 0;
    p->rejected_n = 0;
    p->rejected_bytes = 0;
    p->rejected_logged_us = 0;
    publish_status(p);
    if (was) {
        log_info("%s: the device list fits in the kubelet's message limit again (%zu devices, "
                 "%zu bytes)",
                 p->resource, p->tab.n, p->law_len);
    }
}

/* Encodes the table the kubelet is served (for the first start, an empty
 * one). */
static int encode_table(kdp_plugin *p)
{
    uint8_t *buf;
    size_t len;
    int r = encode(p, &p->tab, &buf, &len);
    if (r == 0) {
        free(p->law_msg);
        p->law_msg = buf;
        p->law_len = len;
    }
    return r;
}

/* Takes the table other threads published, if newer, and pushes it to the
 * kubelet when what the kubelet sees has changed and its message fits. */
static void take_shared(kdp_plugin *p)
{
    kdp__devtab fresh;
    kdp__devtab_init(&fresh);
    pthread_mutex_lock(&p->mu);
    bool newer = p->shared_ver != p->tab_ver;
    int r = newer ? kdp__devtab_copy(&fresh, &p->shared) : 0;
    uint64_t ver = p->shared_ver;
    pthread_mutex_unlock(&p->mu);
    if (!newer) {
        return;
    }
    if (r < 0) {
        log_error("%s: out of memory copying the device table", p->resource);
        kdp__devtab_clear(&fresh);
        kdp__wakeup_signal(p->wake); /* try again */
        return;
    }
    p->tab_ver = ver;
    bool changed = !kdp__devtab_same_for_kubelet(&p->tab, &fresh);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (changed || !p->law_msg) {
        if (encode(p, &fresh, &buf, &len) < 0) {
            kdp__devtab_clear(&fresh);
            return;
        }
        if (len > KDP_MAX_LIST_MESSAGE) {
            free(buf);
            reject_table(p, fresh.n, len);
            kdp__devtab_clear(&fresh);
            return;
        }
        if (len > KDP_WARN_MESSAGE && changed) {
            log_warn("%s: the device list is %zu bytes, close to the kubelet's message limit of "
                     "%u bytes (4 MiB)",
                     p->resource, len, KDP_MAX_LIST_MESSAGE);
        }
    }
    if (changed && kdp__log_enabled(KDP_LOG_INFO)) {
        change_log c = {.p = p};
        kdp__devtab_diff(&p->tab, &fresh, log_change, &c);
        if (c.n > KDP_LOG_CHANGES_MAX) {
            log_info("%s: ... and %zu more: %zu added, %zu removed, %zu health (%zu devices now)",
                     p->resource, c.n - KDP_LOG_CHANGES_MAX, c.added, c.removed, c.health, fresh.n);
        }
    }
    kdp__devtab_move(&p->tab, &fresh);
    if (buf) {
        free(p->law_msg);
        p->law_msg = buf;
        p->law_len = len;
    }
    clear_rejected(p); /* publishes the status */
    if (changed) {
        kdp__service_broadcast(p);
    }
}

/* ---- lifecycle jobs: refresh, list, destroy ---- */

static void fn_refresh(kdp__pjob *j)
{
    j->result = kdp__pjob_checked(j, j->p->ops.refresh(j->p, j->p->ud));
}

static void fn_destroy(kdp__pjob *j)
{
    atomic_store(&j->p->destroy_ran, true); /* kdp_plugin_free must not run it again */
    j->p->ops.destroy(j->p, j->p->ud);
}

static void fn_list(kdp__pjob *j)
{
    kdp_device_list *list = j->data;
    j->result = kdp__pjob_checked(j, j->p->ops.list(j->p, list, j->p->ud));
}

static void cleanup_list(kdp__pjob *j)
{
    kdp_device_list *list = j->data;
    if (list) {
        kdp__devtab_clear(&list->tab);
        free(list);
    }
}

static void job_failed(kdp_plugin *p, kdp__pjob *j, bool timed_out)
{
    if (timed_out) {
        return; /* logged by the deadline already */
    }
    log_error("%s: %s callback failed: %s%s%s", p->resource, j->what, strerror(-j->result),
              j->has_msg ? ": " : "", j->has_msg ? j->msg : "");
}

/* The rescan timer: the retry of a failed list (with backoff), else the
 * periodic rescan if there is one. Only while serving. */
static void arm_rescan(kdp_plugin *p)
{
    if (!p->ops.list) {
        return;
    }
    if (p->list_error) {
        kdp__timer_start(p->rescan_timer, p->list_retry_us);
    } else if (p->rescan_ms) {
        kdp__timer_start(p->rescan_timer, (uint64_t)p->rescan_ms * 1000U);
    } else {
        kdp__timer_stop(p->rescan_timer);
    }
}

static bool serving(const kdp_plugin *p);

/* A list call failed (err: its -errno), or could not be made: call it again
 * with backoff, and say so. */
static void list_failed(kdp_plugin *p, int err)
{
    p->list_error = err;
    p->list_retry_us = kdp__backoff_next(&p->list_backoff);
    publish_status(p);
    if (p->law_msg && p->tab.n > 0) {
        log_warn("%s: keeping the previous device list (%zu devices); calling the list "
                 "callback again in %llu ms",
                 p->resource, p->tab.n, (unsigned long long)(p->list_retry_us / 1000));
    } else {
        log_warn("%s: no device list yet (the kubelet is told of no devices); calling the list "
                 "callback again in %llu ms",
                 p->resource, (unsigned long long)(p->list_retry_us / 1000));
    }
}

static void complete_list(kdp__pjob *j, bool timed_out)
{
    kdp_plugin *p = j->p;
    bool for_start = p->start_list == j;
    if (for_start) {
        p->start_list = NULL;
    }
    p->list_running = false;
    if (timed_out || j->result < 0) {
        job_failed(p, j, timed_out);
        list_failed(p, timed_out ? -ETIMEDOUT : j->result);
    } else {
        bool was_failing = p->list_error != 0;
        p->list_error = 0;
        kdp__backoff_reset(&p->list_backoff);
        kdp_device_list *list = j->data;
        kdp__plugin_publish(p, &list->tab);
        take_shared(p);
        publish_status(p);
        if (was_failing) {
            log_info("%s: the list callback succeeded again", p->resource);
        }
    }
    if (!for_start && serving(p)) {
        arm_rescan(p);
    }
    if (!for_start && atomic_load(&p->rescan_wanted)) {
        kdp__plugin_sync(p); /* asked again while this list ran */
    }
    if (for_start) {
        p->busy = false;
        if (!p->stop_pending && !p->restart_pending) {
            serve(p);
            return;
        }
        after_job(p);
    }
}

static int run_list(kdp_plugin *p, bool for_start)
{
    kdp__pjob *j = kdp__pjob_new(p, "list");
    kdp_device_list *list = calloc(1, sizeof(*list));
    if (!j || !list) {
        free(j);
        free(list);
        return -ENOMEM;
    }
    kdp__devtab_init_lazy(&list->tab); /* any order, sorted once */
    j->data = list;
    j->fn = fn_list;
    j->cleanup = cleanup_list;
    j->complete = complete_list;
    p->list_running = true;
    if (for_start) {
        p->start_list = j;
        atomic_store(&p->rescan_wanted, false); /* this list is a fresh one */
    }
    int r = kdp__pjob_submit(j, 0);
    if (r < 0) {
        p->list_running = false;
        p->start_list = NULL;
    }
    return r;
}

static void after_refresh(kdp_plugin *p)
{
    if (p->ops.list) {
        int r = run_list(p, true);
        if (r == 0) {
            return; /* complete_list goes on */
        }
        log_error("%s: cannot run the list callback: %s", p->resource, strerror(-r));
        list_failed(p, r);
    }
    p->busy = false;
    take_shared(p);
    serve(p);
}

static void complete_refresh(kdp__pjob *j, bool timed_out)
{
    kdp_plugin *p = j->p;
    if (timed_out || j->result < 0) {
        job_failed(p, j, timed_out);
        p->busy = false;
        uint64_t delay = kdp__backoff_next(&p->backoff);
        log_warn("%s: starting again in %llu ms", p->resource, (unsigned long long)(delay / 1000));
        if (!p->stop_pending) {
            p->restart_pending = false;
            schedule_retry(p, RETRY_START, delay);
        }
        after_job(p);
        return;
    }
    if (p->stop_pending || p->restart_pending) {
        p->busy = false;
        after_job(p);
        return;
    }
    after_refresh(p);
}

void kdp__plugin_start(kdp_plugin *p)
{
    if (p->ctx->stop_requested || p->stop_pending) {
        return;
    }
    /* The lock first: a second instance must fail before it runs any of
     * the author's callbacks. */
    int lr = ensure_lock(p);
    if (lr == -EADDRINUSE) {
        fatal(p, lr);
        return;
    }
    if (lr < 0) {
        uint64_t delay = kdp__backoff_next(&p->backoff);
        if (!report_dir(p, lr)) {
            log_error("%s: cannot take the lock %s: %s; trying again in %llu ms", p->resource,
                      p->lock_path, strerror(-lr), (unsigned long long)(delay / 1000));
        }
        p->state = P_STARTING;
        schedule_retry(p, RETRY_START, delay);
        return;
    }
    dir_ok(p);
    p->state = P_STARTING;
    p->busy = true;
    p->started = true;
    atomic_store(&p->destroy_ran, false);
    if (p->ops.refresh) {
        kdp__pjob *j = kdp__pjob_new(p, "refresh");
        int r = -ENOMEM;
        if (j) {
            j->fn = fn_refresh;
            j->complete = complete_refresh;
            r = kdp__pjob_submit(j, 0);
        }
        if (r == 0) {
            return;
        }
        log_error("%s: cannot run the refresh callback: %s", p->resource, strerror(-r));
        p->busy = false;
        schedule_retry(p, RETRY_START, kdp__backoff_next(&p->backoff));
        return;
    }
    after_refresh(p);
}

/* ---- lock, socket, server ---- */

/* flock() on <dir>/<socket>.lock: released by the kernel when the process
 * dies, so a crash never leaves it stale. Re-checked by inode so that a lock
 * file removed and re-created meanwhile is not trusted. */
static int take_lock(kdp_plugin *p)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        int fd = open(p->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            return -errno;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            char pid[32] = "";
            ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
            pid[n > 0 ? n : 0] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
            close(fd);
            if (e != EWOULDBLOCK) {
                return -e;
            }
            log_error("%s: another instance (pid %s) already serves %s: refusing to start "
                      "(lock %s is held)",
                      p->resource, *pid ? pid : "?", p->socket_path, p->lock_path);
            return -EADDRINUSE;
        }
        struct stat a;
        struct stat b;
        if (fstat(fd, &a) == 0 && stat(p->lock_path, &b) == 0 && a.st_ino == b.st_ino) {
            char pid[32];
            int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
            if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
                log_warn("%s: cannot write pid to %s", p->resource, p->lock_path);
            }
            p->lock_fd = fd;
            return 0;
        }
        close(fd);
    }
    return -EAGAIN;
}

/* Takes the lock, or checks that the one held still guards the file on disk:
 * the directory may have been deleted and re-created (with our lock file in
 * it) before the deletion of the file itself was noticed. */
static int ensure_lock(kdp_plugin *p)
{
    if (p->lock_fd >= 0) {
        struct stat held;
        struct stat now;
        if (fstat(p->lock_fd, &held) == 0 && stat(p->lock_path, &now) == 0 &&
            held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
            return 0;
        }
        close(p->lock_fd); /* a lock on a file that is gone guards nothing */
        p->lock_fd = -1;
    }
    return take_lock(p);
}

static void release_lock(kdp_plugin *p)
{
    if (p->lock_fd < 0) {
        return;
    }
    (void)unlink(p->lock_path);
    close(p->lock_fd);
    p->lock_fd = -1;
}

/* A stale socket from a crashed run of ours (we hold the lock) is removed;
 * anything else in its place (a file, a symlink) is refused. */
static int clear_socket_path(kdp_plugin *p)
{
    struct stat st;
    if (lstat(p->socket_path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        log_error("%s: %s exists and is not a socket: refusing to replace it", p->resource,
                  p->socket_path);
        return -EEXIST;
    }
    /* ENOENT: a restarting kubelet removed it meanwhile, which is as good */
    return unlink(p->socket_path) < 0 && errno != ENOENT ? -errno : 0;
}

static void on_watch(int what, const char *name, void *ud);

static int start_server(kdp_plugin *p)
{
    kdp__method methods[KDP__SERVICE_METHODS];
    kdp__service_methods(p, methods);
    kdp__server_config cfg = {.max_recv_message = KDP_MAX_LIST_MESSAGE};
    int r = kdp__server_new(p->ctx->loop, methods, KDP__SERVICE_METHODS, &cfg, &p->server);
    if (r < 0) {
        return r;
    }
    r = kdp__server_listen(p->server, p->socket_path);
    if (r < 0) {
        kdp__server_free(p->server);
        p->server = NULL;
    }
    return r;
}

static void fatal(kdp_plugin *p, int err)
{
    p->state = P_STOPPED;
    release_lock(p);
    kdp__ctx_plugin_stopped(p->ctx, p, err);
}

static void serve(kdp_plugin *p)
{
    /* The watch first: a deletion of our socket right after we create it
     * (a starting kubelet cleaning the directory) must not go unseen. */
    if (!p->watch) {
        int w = kdp__watch_new(p->ctx->loop, p->dir, on_watch, p, &p->watch);
        if (w < 0) {
            log_warn("%s: cannot watch %s: %s (kubelet restarts are then noticed only when "
                     "the stream ends or Register fails)",
                     p->resource, p->dir, strerror(-w));
        }
    }
    int r = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        r = clear_socket_path(p);
        if (r == 0) {
            r = start_server(p);
        }
        /* -ENOENT: the socket file went away between bind() and stat(): a
         * restarting kubelet cleaning the directory. Bind again at once (a
         * few times: it may also be the directory missing) rather than after
         * the backoff, 50 ms and more. */
        if (r != -ENOENT) {
            break;
        }
    }
    if (r < 0) {
        uint64_t delay = kdp__backoff_next(&p->backoff);
        if (!report_dir(p, r)) {
            log_error("%s: cannot serve %s: %s; trying again in %llu ms", p->resource,
                      p->socket_path, strerror(-r), (unsigned long long)(delay / 1000));
        }
        p->state = P_STARTING;
        schedule_retry(p, RETRY_START, delay);
        return;
    }
    stop_awaiting_dir(p);
    if (!p->law_msg) {
        (void)encode_table(p); /* the kubelet gets a first list, even an empty one */
    }
    p->starts++;
    log_info("%s: serving on %s (%zu devices)", p->resource, p->socket_path, p->tab.n);
    arm_rescan(p);
    do_register(p);
}

/* ---- registration ---- */

/* Our socket file is still there and still the one we listen on. */
static bool own_socket_intact(const kdp_plugin *p)
{
    struct stat st;
    ino_t ours = p->server ? kdp__server_socket_ino(p->server) : 0;
    return lstat(p->socket_path, &st) == 0 && st.st_ino == ours;
}

static void on_registered(int status, const char *message, const uint8_t *resp, size_t len,
                          void *ud)
{
    (void)resp;
    (void)len;
    kdp_plugin *p = ud;
    p->reg_call = NULL;
    if (p->state != P_REGISTERING) {
        return;
    }
    if (status == KDP__ST_OK) {
        p->state = P_REGISTERED;
        p->registered_us = kdp__now_us();
        p->fast_retries = 0;
        kdp__backoff_reset(&p->backoff);
        log_info("%s: registered with the kubelet (endpoint %s)", p->resource, p->socket_name);
        return;
    }
    if (!own_socket_intact(p)) {
        kdp__plugin_restart(p, "Register failed and our socket is gone");
        return;
    }
    if (p->kubelet_creates != p->reg_creates) {
        /* A restarting kubelet: this attempt reached the old (stale)
         * kubelet.sock and a new one has appeared since (possibly with the
         * same inode, so the watch could not tell): try it now, not after a
         * backoff. Bounded: each retry needs another creation. */
        log_info("%s: Register failed (%s) but %s was re-created since: registering again",
                 p->resource, message, KDP_KUBELET_SOCKET);
        kdp__backoff_reset(&p->backoff);
        do_register(p);
        return;
    }
    /* kubelet.sock appears at bind(), a moment before listen(): a connect in
     * between is refused. Right after the file appeared, retry at once. */
    uint64_t delay = p->fast_retries > 0 ? KDP_FAST_RETRY_US : kdp__backoff_next(&p->backoff);
    if (p->fast_retries > 0) {
        p->fast_retries--;
        log_debug("%s: Register refused right after kubelet.sock appeared: %s; retrying",
                  p->resource, message);
    } else {
        log_warn("%s: Register failed: %s: %s; retrying in %llu ms", p->resource,
                 kdp__status_name(status), message, (unsigned long long)(delay / 1000));
    }
    p->expect_kubelet_law = false;
    schedule_retry(p, RETRY_REGISTER, delay);
}

static void do_register(kdp_plugin *p)
{
    struct stat st;
    if (stat(p->kubelet_path, &st) < 0) {
        if (p->state != P_WAITING) {
            log_info("%s: waiting for the kubelet (%s does not exist yet)", p->resource,
                     p->kubelet_path);
        }
        p->state = P_WAITING;
        schedule_retry(p, RETRY_REGISTER, KDP_WAIT_FALLBACK_US);
        return;
    }
    p->state = P_REGISTERING;
    p->kubelet_ino = st.st_ino;
    p->kubelet_ctime = st.st_ctim;
    p->reg_creates = p->kubelet_creates;
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    kdp__service_options(p, &opts);
    V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
    req.version = (char *)KDP_KUBELET_API_VERSION;
    req.endpoint = p->socket_name;
    req.resource_name = p->resource;
    req.options = &opts;
    kdp__unary_opts o = {.timeout_us = KDP_REGISTER_TIMEOUT_US};
    p->expect_kubelet_law = true;
    kdp__timer_stop(p->retry_timer);
    p->retry_what = RETRY_NONE;
    int r = kdp__client_unary_pb(p->ctx->loop, p->kubelet_path, "/v1beta1.Registration/Register",
                                 &req.base, &o, on_registered, p, &p->reg_call);
    if (r < 0) {
        log_error("%s: cannot start Register: %s", p->resource, strerror(-r));
        schedule_retry(p, RETRY_REGISTER, kdp__backoff_next(&p->backoff));
    }
}

/* ---- restart triggers ---- */

static bool serving(const kdp_plugin *p)
{
    return p->state == P_WAITING || p->state == P_REGISTERING || p->state == P_REGISTERED;
}

static bool is_lock_name(const kdp_plugin *p, const char *name)
{
    size_t n = strlen(p->socket_name);
    return strncmp(name, p->socket_name, n) == 0 && strcmp(name + n, ".lock") == 0;
}

/* Kubelets up to 1.24 delete every file in the directory when they start,
 * our lock file included: the flock would then guard nothing, so take a new
 * one (holding the old until then). */
static void relock(kdp_plugin *p)
{
    struct stat st;
    struct stat ours;
    if (stat(p->lock_path, &st) == 0) {
        if (fstat(p->lock_fd, &ours) == 0 && ours.st_ino != st.st_ino) {
            log_error("%s: the lock file %s was deleted and re-created by someone else: "
                      "another instance may be starting on the same socket",
                      p->resource, p->lock_path);
        }
        return;
    }
    int old = p->lock_fd;
    p->lock_fd = -1;
    int r = take_lock(p);
    close(old);
    if (r < 0) {
        log_error("%s: the lock file %s was deleted and cannot be taken again: %s", p->resource,
                  p->lock_path, strerror(-r));
    } else {
        log_info("%s: the lock file %s was deleted: locked again", p->resource, p->lock_path);
    }
}

static void on_watch(int what, const char *name, void *ud)
{
    kdp_plugin *p = ud;
    if (what == KDP__WATCH_CREATED && name && strcmp(name, KDP_KUBELET_SOCKET) == 0) {
        p->kubelet_creates++; /* counted in every state: see on_registered() */
        /* also while (re)starting, when the events below are ignored: the
         * Register that follows may hit the bind -> listen gap */
        p->fast_retries = KDP_FAST_RETRIES;
        if (p->retry_what == RETRY_START && kdp__timer_armed(p->retry_timer)) {
            log_info("%s: %s appeared (a new kubelet): starting now", p->resource,
                     KDP_KUBELET_SOCKET);
            kdp__timer_start(p->retry_timer, 0);
        }
    }
    if (what == KDP__WATCH_GONE) {
        /* The watch died with the directory, whatever our state: drop it so
         * the next serve() watches the directory that is there then. */
        kdp__watch_free(p->watch);
        p->watch = NULL;
        if (serving(p)) {
            kdp__plugin_restart(p, "the device-plugin directory was removed");
        }
        return;
    }
    if (!serving(p)) {
        return;
    }
    struct stat st;
    if (what == KDP__WATCH_CREATED && name && strcmp(name, KDP_KUBELET_SOCKET) == 0) {
        if (p->state == P_WAITING || (p->state == P_REGISTERING && !p->reg_call)) {
            log_info("%s: %s appeared: registering", p->resource, KDP_KUBELET_SOCKET);
            kdp__backoff_reset(&p->backoff);
            p->fast_retries = KDP_FAST_RETRIES;
            do_register(p);
        } else if (stat(p->kubelet_path, &st) == 0 && st.st_ino != p->kubelet_ino) {
            p->fast_retries = KDP_FAST_RETRIES;
            kdp__plugin_restart(p, "kubelet.sock was re-created (the kubelet restarted)");
        }
        return;
    }
    if (what == KDP__WATCH_DELETED && name && p->lock_fd >= 0 && is_lock_name(p, name)) {
        relock(p);
        return;
    }
    if (what == KDP__WATCH_DELETED && name && strcmp(name, p->socket_name) == 0) {
        if (!own_socket_intact(p)) {
            kdp__plugin_restart(p, "our socket was deleted (the kubelet restarted)");
        }
    }
}

void kdp__plugin_law_opened(kdp_plugin *p, law *l)
{
    if (p->expect_kubelet_law && !p->kubelet_law) {
        p->kubelet_law = l;
        p->expect_kubelet_law = false;
    }
}

void kdp__plugin_law_ended(kdp_plugin *p, law *l)
{
    if (l != p->kubelet_law) {
        return; /* a tool's stream (kdpctl watch ...), not the kubelet's */
    }
    p->kubelet_law = NULL;
    if (p->state == P_REGISTERING || p->state == P_REGISTERED) {
        kdp__plugin_restart(p, "the kubelet's ListAndWatch stream ended");
    }
}

/* ---- stopping and restarting ---- */

/* Closes what serving opened; leaves the lock held. */
static kdp__server *detach_server(kdp_plugin *p)
{
    kdp__client_call_cancel(p->reg_call);
    p->reg_call = NULL;
    kdp__timer_stop(p->retry_timer);
    kdp__timer_stop(p->rescan_timer);
    kdp__timer_stop(p->restart_timer);
    p->retry_what = RETRY_NONE;
    p->kubelet_law = NULL;
    p->expect_kubelet_law = false;
    kdp__server *s = p->server;
    p->server = NULL;
    return s;
}

/* For a restart: the kubelet is gone or going, close at once. */
static void stop_serving(kdp_plugin *p)
{
    kdp__server_free(detach_server(p)); /* ends every stream; removes our socket */
}

static void on_drained(kdp__server *s, void *ud)
{
    kdp_plugin *p = ud;
    p->draining = NULL;
    kdp__server_free(s);
    run_destroy(p);
}

/* For a stop: the socket goes at once, open streams end with UNAVAILABLE
 * and every connection gets a GOAWAY, then destroy runs. */
static void drain_then_destroy(kdp_plugin *p)
{
    kdp__server *s = detach_server(p);
    if (!s) {
        run_destroy(p);
        return;
    }
    p->draining = s;
    kdp__server_shutdown(s, KDP_DRAIN_LINGER_US, on_drained, p);
}

static void finish_stop(kdp_plugin *p)
{
    stop_awaiting_dir(p);
    kdp__watch_free(p->watch);
    p->watch = NULL;
    release_lock(p);
    p->state = P_STOPPED;
    p->busy = false;
    log_info("%s: stopped", p->resource);
    kdp__ctx_plugin_stopped(p->ctx, p, 0);
}

static void complete_destroy(kdp__pjob *j, bool timed_out)
{
    (void)timed_out;
    kdp_plugin *p = j->p;
    p->busy = false;
    p->destroyed = true;
    after_job(p);
}

/* Runs destroy (if the server was started since the last destroy), then
 * after_job() decides what comes next. */
static void run_destroy(kdp_plugin *p)
{
    if (!p->ops.destroy || !p->started || p->destroyed) {
        p->destroyed = true;
        after_job(p);
        return;
    }
    kdp__pjob *j = kdp__pjob_new(p, "destroy");
    if (j) {
        j->fn = fn_destroy;
        j->complete = complete_destroy;
        p->busy = true;
        if (kdp__pjob_submit(j, 0) == 0) {
            return;
        }
        p->busy = false;
    }
    log_error("%s: cannot run the destroy callback", p->resource);
    p->destroyed = true;
    after_job(p);
}

/* Whether the kubelet we registered with is still the one there: its
 * kubelet.sock exists, the very file it was at our last Register (inode and
 * change time: an inode number comes back at once on tmpfs), and was not
 * created again since. */
static bool same_kubelet(const kdp_plugin *p)
{
    struct stat st;
    return p->kubelet_ino && stat(p->kubelet_path, &st) == 0 && st.st_ino == p->kubelet_ino &&
           st.st_ctim.tv_sec == p->kubelet_ctime.tv_sec &&
           st.st_ctim.tv_nsec == p->kubelet_ctime.tv_nsec && p->kubelet_creates == p->reg_creates;
}

/* At a restart: whether it counts as one more in a loop, that is, it ends a
 * registration that succeeded and did not last, with the same kubelet
 * still there (it keeps failing our stream, or our socket keeps being
 * deleted). A restart of the kubelet itself never counts: a new kubelet
 * wants us at once, and its restarts are its own, bounded by its own
 * backoff. Nor does a Register that failed (that one has its own). */
static void note_restart(kdp_plugin *p)
{
    bool registered = p->state == P_REGISTERED && p->registered_us;
    bool stable = registered && kdp__now_us() - p->registered_us >= KDP_STABLE_REGISTRATION_US;
    if (stable) {
        p->quick_restarts = 0;
        kdp__backoff_reset(&p->restart_backoff);
    }
    p->restart_counts = registered && !stable && same_kubelet(p);
    p->registered_us = 0;
    p->restarts++;
    publish_status(p);
}

/* How long to wait before starting again after a restart: nothing unless
 * it is the second or later in a loop (note_restart), so that no restart
 * loop is unbounded. */
static uint64_t restart_delay(kdp_plugin *p)
{
    /* kubelet.sock created since (while destroy ran): a new kubelet */
    bool new_kubelet = p->kubelet_creates != p->reg_creates;
    if (!p->restart_counts || new_kubelet || p->quick_restarts++ == 0) {
        return 0;
    }
    return kdp__backoff_next(&p->restart_backoff);
}

/* Called whenever no lifecycle job runs any more: acts on pending requests. */
static void after_job(kdp_plugin *p)
{
    if (p->busy) {
        return;
    }
    if (p->stop_pending) {
        if (!p->destroyed) {
            p->state = P_STOPPING;
            drain_then_destroy(p);
            return;
        }
        if (p->state != P_STOPPED) {
            finish_stop(p);
        }
        return;
    }
    if (p->restart_pending) {
        if (!p->destroyed) {
            stop_serving(p);
            run_destroy(p);
            return;
        }
        p->restart_pending = false;
        p->destroyed = false;
        p->started = false;
        uint64_t delay = restart_delay(p);
        if (delay == 0) {
            kdp__plugin_start(p);
            return;
        }
        log_warn("%s: starting again in %llu ms: the same kubelet ended %u registrations in "
                 "a row before they lasted %llu s (each restart waits longer, up to %llu s; a "
                 "new kubelet starts it at once)",
                 p->resource, (unsigned long long)(delay / 1000), p->quick_restarts,
                 (unsigned long long)(KDP_STABLE_REGISTRATION_US / 1000000U),
                 (unsigned long long)(KDP_RESTART_BACKOFF_MAX_US / 1000000U));
        p->state = P_STARTING;
        schedule_retry(p, RETRY_START, delay);
    }
}

/* Restart triggers arrive from inside server, watch and stream callbacks, so
 * the restart itself runs from a zero-delay timer: never under the feet of
 * the code that noticed it, and the two or three signals of one kubelet
 * restart become one restart. */
void kdp__plugin_restart(kdp_plugin *p, const char *why)
{
    if (p->state == P_IDLE || p->state == P_STOPPING || p->state == P_STOPPED || p->stop_pending ||
        p->restart_pending || kdp__timer_armed(p->restart_timer)) {
        return;
    }
    p->restart_why = why;
    kdp__timer_start(p->restart_timer, 0);
}

void kdp__plugin_on_restart(kdp__timer *t, void *ud)
{
    (void)t;
    kdp_plugin *p = ud;
    if (p->state == P_IDLE || p->state == P_STOPPING || p->state == P_STOPPED || p->stop_pending ||
        p->restart_pending) {
        return;
    }
    log_info("%s: restarting: %s", p->resource, p->restart_why);
    note_restart(p);
    p->restart_pending = true;
    p->destroyed = false;
    if (p->busy) {
        return; /* after_job() picks it up */
    }
    stop_serving(p);
    p->state = P_STARTING;
    run_destroy(p);
}

void kdp__plugin_begin_stop(kdp_plugin *p)
{
    if (p->stop_pending || p->state == P_STOPPED) {
        return;
    }
    p->stop_pending = true;
    if (p->state == P_IDLE) {
        p->state = P_STOPPED;
        kdp__ctx_plugin_stopped(p->ctx, p, 0);
        return;
    }
    after_job(p);
}

void kdp__plugin_teardown_serving(kdp_plugin *p)
{
    stop_serving(p); /* open calls are cancelled: their jobs are abandoned */
    kdp__server_free(p->draining);
    p->draining = NULL;
}

void kdp__plugin_teardown_finish(kdp_plugin *p)
{
    /* The worker is gone: destroy runs here if its job never started. */
    if (p->started && !p->destroyed && p->ops.destroy && !atomic_load(&p->destroy_ran)) {
        p->ops.destroy(p, p->ud);
    }
    p->destroyed = true;
    stop_awaiting_dir(p);
    kdp__watch_free(p->watch);
    p->watch = NULL;
    release_lock(p);
    p->state = P_STOPPED;
}

/* ---- table sync and rescans ---- */

void kdp__plugin_on_rescan(kdp__timer *t, void *ud)
{
    (void)t;
    kdp_plugin *p = ud;
    atomic_store(&p->rescan_wanted, true);
    kdp__plugin_sync(p); /* the list's completion arms the timer again */
}

void kdp__plugin_sync(kdp_plugin *p)
{
    /* The request stays set while a list runs or before serving: the
     * running list's completion, or the next start, takes it. */
    if (p->ops.list && serving(p) && !p->list_running &&
        atomic_exchange(&p->rescan_wanted, false)) {
        int r = run_list(p, false);
        if (r < 0) {
            log_error("%s: cannot run the list callback: %s", p->resource, strerror(-r));
            list_failed(p, r);
            arm_rescan(p);
        }
    }
    take_shared(p);
}
