/* SPDX-License-Identifier: MIT */
/*
 * kdp-example-gopher: every regular file in --devices-dir is a device. Files
 * come and go at run time (hot-plug, through inotify); a file that contains
 * the word "unhealthy" is an Unhealthy device, and Healthy again once it no
 * longer does. Allocate hands the container GOPHER=<comma-separated IDs>.
 *
 * The list op reads the whole directory at every (re)start; after that,
 * each inotify event changes just its file's device (kdp_plugin_set_device,
 * kdp_plugin_remove_device): one file among 100,000 costs one device, not a
 * relist.
 *
 * DRA mode (kdp-example-gopher-dra, the same source linked with libkdp-dra):
 * with --dra DRIVER (or $KDP_DRA_DRIVER) the same gophers are also a DRA
 * driver's devices: each described with a string attribute "model", an int
 * attribute "index" (the digits at the end of its file name, else 0) and a
 * capacity "memory"; a prepared claim gives each container
 * GOPHER_<n>=<file name> for its n-th device. Only DRA unless
 * --device-plugin-too.
 *
 *   kdp-example-gopher [--devices-dir DIR] [--resource NAME]
 *       [--device-plugin-dir DIR | --kubelet-root ROOT] [--registration MODE]
 *       [--metrics-address ADDR]
 *       [--dra DRIVER [--kubeconfig FILE] [--node NAME] [--cdi-dir DIR]
 *        [--state-dir DIR] [--device-plugin-too]]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <kdp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#ifdef KDP_EXAMPLE_DRA
#include <kdp_dra.h>

static int describe(kdp_plugin *p, const kdp_device *d, kdp_dra_device *out, void *ud)
{
    (void)p;
    (void)ud;
    size_t n = strlen(d->id);
    size_t k = n;
    while (k > 0 && d->id[k - 1] >= '0' && d->id[k - 1] <= '9' && n - k < 9) {
        k--;
    }
    kdp_dra_attr model = {.name = "model", .type = KDP_DRA_ATTR_STRING, .string_value = "gopher"};
    kdp_dra_attr index = {.name = "index",
                          .type = KDP_DRA_ATTR_INT,
                          .int_value = k < n ? strtoll(d->id + k, NULL, 10) : 0};
    int r = kdp_dra_device_add_attr(out, &model);
    if (r == 0) {
        r = kdp_dra_device_add_attr(out, &index);
    }
    return r < 0 ? r : kdp_dra_device_add_capacity(out, "memory", "1Gi");
}

static int prepare(kdp_plugin *p, const kdp_dra_claim *c, kdp_dra_prepared *out, void *ud)
{
    (void)p;
    (void)ud;
    for (size_t i = 0; i < c->n_devices; i++) {
        char key[32];
        snprintf(key, sizeof(key), "GOPHER_%zu", i);
        int r = kdp_dra_prepared_add_env(out, i, key, c->devices[i].device_id);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* The DRA flags: true if argv[*i] was one. */
static bool dra_flag(int argc, char **argv, int *i, kdp_dra_config *dc)
{
    const char *v;
    if ((v = flag_value(argc, argv, i, "--kubeconfig"))) {
        dc->kubeconfig = v;
    } else if ((v = flag_value(argc, argv, i, "--node"))) {
        dc->node_name = v;
    } else if ((v = flag_value(argc, argv, i, "--cdi-dir"))) {
        dc->cdi_dir = v;
    } else if ((v = flag_value(argc, argv, i, "--state-dir"))) {
        dc->state_dir = v;
    } else if (*i < argc && argv[*i] && strcmp(argv[*i], "--device-plugin-too") == 0) {
        dc->device_plugin_too = true;
    } else {
        return false;
    }
    return true;
}

static int enable_dra(kdp_plugin *p, const char *driver, kdp_dra_config *dc)
{
    dc->driver_name = driver;
    kdp_dra_ops dops = {.describe = describe, .prepare = prepare};
    return kdp_plugin_enable_dra(p, dc, &dops);
}
#endif

static const char *devices_dir = "/etc/gophers";

static kdp_health file_health(int dirfd, const char *name)
{
    char buf[4096];
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return KDP_UNHEALTHY;
    }
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, "unhealthy") ? KDP_UNHEALTHY : KDP_HEALTHY;
}

static int list_gophers(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)ud;
    DIR *d = opendir(devices_dir);
    if (!d) {
        int r = -errno;
        kdp_plugin_set_error(p, "cannot read %s: %s", devices_dir, strerror(errno));
        return r;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
            continue;
        }
        kdp_device dev = {.id = e->d_name, .health = file_health(dirfd(d), e->d_name)};
        if (kdp_device_list_add(out, &dev) < 0) {
            fprintf(stderr, "gopher: skipping %s: not a valid device ID\n", e->d_name);
        }
    }
    closedir(d);
    return 0;
}

static int allocate(kdp_plugin *p, const kdp_alloc_request *req, kdp_alloc_response *resp, void *ud)
{
    (void)p;
    (void)req;
    (void)ud;
    return kdp_response_add_env_ids(resp, "GOPHER", ","); /* GOPHER=gopher-a,gopher-b */
}

static int stop_fd = -1; /* written by main to end the watcher thread */

/* Waits for the inotify fd (or timeout_ms); false once main asks to stop. */
static bool wait_for(int fd, int timeout_ms)
{
    struct pollfd fds[2] = {{.fd = fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
    return poll(fds, 2, timeout_ms) >= 0 && !(fds[1].revents & POLLIN);
}

/* One event: the file's device as it is now (added, replaced: its health
 * may have changed), or gone. */
static void file_changed(kdp_plugin *p, int dirfd, const struct inotify_event *ev)
{
    struct stat st;
    bool is_file = !(ev->mask & (IN_DELETE | IN_MOVED_FROM)) &&
                   fstatat(dirfd, ev->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    if (!is_file) {
        (void)kdp_plugin_remove_device(p, ev->name); /* -ENOENT: it was no device */
        return;
    }
    kdp_device dev = {.id = ev->name, .health = file_health(dirfd, ev->name)};
    if (kdp_plugin_set_device(p, &dev) < 0) {
        fprintf(stderr, "gopher: skipping %s: not a valid device ID\n", ev->name);
    }
}

/* Hot-plug: each event in the directory changes its file's device; a lost
 * event (queue overflow) or a re-created directory asks for a fresh list. */
static void *watch_devices(void *arg)
{
    kdp_plugin *p = arg;
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gopher: no hot-plug: inotify: %s\n", strerror(errno));
        return NULL;
    }
    uint32_t mask =
        IN_CREATE | IN_DELETE | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB;
    bool watching = false;
    int dirfd = -1;
    for (;;) {
        while (!watching && inotify_add_watch(fd, devices_dir, mask) < 0) {
            if (!wait_for(fd, 2000)) { /* the directory does not exist (yet, again) */
                close(fd);
                return NULL;
            }
        }
        if (dirfd < 0) {
            dirfd = open(devices_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            kdp_plugin_rescan(p); /* what happened before the watch */
        }
        watching = true;
        if (!wait_for(fd, -1)) {
            break;
        }
        _Alignas(struct inotify_event) char buf[4096];
        ssize_t n;
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
            for (char *e = buf; e < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)e;
                if (ev->mask & IN_Q_OVERFLOW) {
                    kdp_plugin_rescan(p);
                } else if (ev->mask & IN_IGNORED) {
                    watching = false; /* the directory went away: watch it again once back */
                    close(dirfd);
                    dirfd = -1;
                } else if (ev->len > 0 && dirfd >= 0) {
                    file_changed(p, dirfd, ev);
                }
                e += sizeof(*ev) + ev->len;
            }
        }
    }
    if (dirfd >= 0) {
        close(dirfd);
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    kdp_config cfg = {.resource_name = "example.com/gopher", .socket_name = "gopher.sock"};
    const char *metrics = NULL;
    const char *dra = getenv("KDP_DRA_DRIVER");
#ifdef KDP_EXAMPLE_DRA
    kdp_dra_config dc = {0};
#endif
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = flag_value(argc, argv, &i, "--dra"))) {
            dra = v;
#ifdef KDP_EXAMPLE_DRA
        } else if (dra_flag(argc, argv, &i, &dc)) {
            continue;
#endif
        } else if ((v = flag_value(argc, argv, &i, "--metrics-address"))) {
            metrics = v;
        } else if ((v = flag_value(argc, argv, &i, "--devices-dir"))) {
            devices_dir = v;
        } else if ((v = flag_value(argc, argv, &i, "--resource"))) {
            cfg.resource_name = v;
        } else if ((v = flag_value(argc, argv, &i, "--device-plugin-dir"))) {
            cfg.device_plugin_dir = v;
        } else if ((v = flag_value(argc, argv, &i, "--kubelet-root"))) {
            cfg.kubelet_root = v;
        } else if ((v = flag_value(argc, argv, &i, "--registration"))) {
            if (kdp_registration_parse(v, &cfg.registration) < 0) {
                fprintf(stderr, "--registration: kubelet, watcher or auto, not \"%s\"\n", v);
                return 2;
            }
        } else {
            fprintf(stderr,
                    "usage: %s [--devices-dir DIR] [--resource NAME] "
                    "[--device-plugin-dir DIR | --kubelet-root ROOT] [--registration MODE] "
                    "[--metrics-address ADDR] [--dra DRIVER [--kubeconfig FILE] [--node NAME] "
                    "[--cdi-dir DIR] [--state-dir DIR] [--device-plugin-too]]\n",
                    argv[0]);
            return 2;
        }
    }
#ifndef KDP_EXAMPLE_DRA
    if (dra && *dra) {
        fprintf(stderr, "gopher: --dra needs kdp-example-gopher-dra (linked with libkdp-dra)\n");
        return 2;
    }
#endif
    kdp_log_set(KDP_LOG_INFO, NULL, NULL);
    kdp_ops ops = {.list = list_gophers, .allocate = allocate};
    kdp_plugin *p;
    if (kdp_plugin_new(NULL, &cfg, &ops, NULL, &p) < 0) {
        return 1;
    }
#ifdef KDP_EXAMPLE_DRA
    if (dra && *dra && enable_dra(p, dra, &dc) < 0) {
        kdp_plugin_free(p);
        return 1;
    }
#endif
    if (serve_metrics(p, metrics) < 0) {
        kdp_plugin_free(p);
        return 1;
    }
    pthread_t tid;
    stop_fd = eventfd(0, EFD_CLOEXEC);
    if (stop_fd < 0 || pthread_create(&tid, NULL, watch_devices, p) != 0) {
        fprintf(stderr, "gopher: cannot start the watcher thread\n");
        kdp_plugin_free(p);
        return 1;
    }
    int r = kdp_plugin_run(p);
    (void)eventfd_write(stop_fd, 1);
    pthread_join(tid, NULL);
    close(stop_fd);
    kdp_plugin_free(p);
    return r == 0 ? 0 : 1;
}
