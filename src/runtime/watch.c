/* SPDX-License-Identifier: MIT */
#include "runtime/watch.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/log.h"

struct kdp__watch {
    int fd;
    kdp__io *io;
    kdp__watch_fn fn;
    void *ud;
    bool *alive; /* set by the dispatcher: false once freed mid-batch */
};

static int classify(uint32_t mask)
{
    if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
        return KDP__WATCH_GONE;
    }
    if (mask & (IN_CREATE | IN_MOVED_TO)) {
        return KDP__WATCH_CREATED;
    }
    if (mask & (IN_DELETE | IN_MOVED_FROM)) {
        return KDP__WATCH_DELETED;
    }
    return 0;
}

static void on_io(kdp__io *io, uint32_t events, void *ud)
{
    (void)io;
    (void)events;
    kdp__watch *w = ud;
    _Alignas(struct inotify_event) char buf[4096];
    bool alive = true;
    w->alive = &alive;
    for (;;) {
        ssize_t n = read(w->fd, buf, sizeof(buf));
        if (n <= 0) {
            break;
        }
        for (char *p = buf; p < buf + n && alive;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof(*ev) + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                log_warn("inotify queue overflow: events lost");
                continue;
            }
            int what = classify(ev->mask);
            if (what) {
                w->fn(what, what == KDP__WATCH_GONE || ev->len == 0 ? NULL : ev->name, w->ud);
            }
        }
        if (!alive) {
            return;
        }
    }
    w->alive = NULL;
}

int kdp__watch_new(kdp__loop *l, const char *dir, kdp__watch_fn fn, void *ud, kdp__watch **ret)
{
    kdp__watch *w = calloc(1, sizeof(*w));
    if (!w) {
        return -ENOMEM;
    }
    w->fn = fn;
    w->ud = ud;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        int r = -errno;
        free(w);
        return r;
    }
    uint32_t mask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                    IN_MOVE_SELF | IN_ONLYDIR;
    int r = 0;
    if (inotify_add_watch(w->fd, dir, mask) < 0) {
        r = -errno;
    } else {
        r = kdp__io_add(l, w->fd, EPOLLIN, on_io, w, &w->io);
    }
    if (r < 0) {
        close(w->fd);
        free(w);
        return r;
    }
    *ret = w;
    return 0;
}

void kdp__watch_free(kdp__watch *w)
{
    if (!w) {
        return;
    }
    if (w->alive) {
        *w->alive = false;
    }
    kdp__io_del(w->io);
    close(w->fd);
    free(w);
}
