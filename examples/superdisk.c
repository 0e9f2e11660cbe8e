/* SPDX-License-Identifier: MIT */
/*
 * kdp-example-superdisk: the flexible mode. Devices are the disk images
 * (*.img) in --devices-dir. Before a container starts, PreStartContainer
 * "formats" its images (writes a recognisable header); Allocate mounts each
 * image into the container; the preferred allocation keeps images in name
 * order; refresh and destroy log each server (re)start and stop.
 *
 *   kdp-example-superdisk [--devices-dir DIR] [--resource NAME]
 *       [--device-plugin-dir DIR | --kubelet-root ROOT] [--registration MODE]
 *       [--metrics-address ADDR]
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <kdp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define HEADER "SUPERDISK v1 formatted "

static const char *devices_dir = "/var/lib/superdisk";

static int image_path(char *buf, size_t cap, const char *id)
{
    int n = snprintf(buf, cap, "%s/%s", devices_dir, id);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int list_images(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)ud;
    DIR *d = opendir(devices_dir);
    if (!d) {
        kdp_plugin_set_error(p, "cannot read %s: %s", devices_dir, strerror(errno));
        return -ENOENT;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".img") == 0) {
            kdp_device dev = {.id = e->d_name, .health = KDP_HEALTHY};
            (void)kdp_device_list_add(out, &dev);
        }
    }
    closedir(d);
    return 0;
}

static int allocate(kdp_plugin *p, const kdp_alloc_request *req, kdp_alloc_response *resp, void *ud)
{
    (void)ud;
    for (size_t i = 0; i < req->n_ids; i++) {
        char host[4096];
        char container[4096];
        if (image_path(host, sizeof(host), req->ids[i]) < 0) {
            kdp_plugin_set_error(p, "path of %s is too long", req->ids[i]);
            return -EINVAL;
        }
        snprintf(container, sizeof(container), "/superdisk/%s", req->ids[i]);
        int r = kdp_response_add_mount(resp, container, host, false);
        if (r < 0) {
            return r;
        }
    }
    return kdp_response_add_env(resp, "SUPERDISK_MOUNT", "/superdisk");
}

/* "Formats" the images: a header the container can check. */
static int prestart(kdp_plugin *p, const char *const *ids, size_t n, void *ud)
{
    (void)ud;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        char header[512]; /* an ID is at most 255 bytes: the header always fits */
        if (image_path(path, sizeof(path), ids[i]) < 0) {
            return -EINVAL;
        }
        int len =
            snprintf(header, sizeof(header), HEADER "%s at %lld\n", ids[i], (long long)time(NULL));
        int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || pwrite(fd, header, (size_t)len, 0) != len || fsync(fd) < 0) {
            int r = -errno;
            kdp_plugin_set_error(p, "cannot format %s: %s", path, strerror(errno));
            if (fd >= 0) {
                close(fd);
            }
            return r;
        }
        close(fd);
    }
    return 0;
}

static int compare(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Prefers the images already chosen, then the rest in name order. */
static int preferred(kdp_plugin *p, const kdp_preferred_request *req, kdp_id_list *out, void *ud)
{
    (void)p;
    (void)ud;
    size_t taken = 0;
    for (size_t i = 0; i < req->n_must_include && taken < req->size; i++, taken++) {
        kdp_id_list_add(out, req->must_include[i]);
    }
    const char **sorted = calloc(req->n_available ? req->n_available : 1, sizeof(*sorted));
    if (!sorted) {
        return -ENOMEM;
    }
    memcpy(sorted, req->available, req->n_available * sizeof(*sorted));
    qsort(sorted, req->n_available, sizeof(*sorted), compare);
    for (size_t i = 0; i < req->n_available && taken < req->size; i++) {
        bool dup = false;
        for (size_t k = 0; k < req->n_must_include; k++) {
            dup = dup || strcmp(req->must_include[k], sorted[i]) == 0;
        }
        if (!dup) {
            kdp_id_list_add(out, sorted[i]);
            taken++;
        }
    }
    free(sorted);
    return 0;
}

static int refresh(kdp_plugin *p, void *ud)
{
    (void)ud;
    fprintf(stderr, "superdisk: refresh: (re)starting %s\n", kdp_plugin_resource(p));
    return 0;
}

static void destroy(kdp_plugin *p, void *ud)
{
    (void)ud;
    fprintf(stderr, "superdisk: destroy: %s stopped serving\n", kdp_plugin_resource(p));
}

int main(int argc, char **argv)
{
    kdp_config cfg = {.resource_name = "example.com/superdisk", .socket_name = "superdisk.sock"};
    const char *metrics = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = flag_value(argc, argv, &i, "--metrics-address"))) {
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
                    "[--metrics-address ADDR]\n",
                    argv[0]);
            return 2;
        }
    }
    kdp_log_set(KDP_LOG_INFO, NULL, NULL);
    kdp_ops ops = {.list = list_images,
                   .allocate = allocate,
                   .prestart = prestart,
                   .preferred = preferred,
                   .refresh = refresh,
                   .destroy = destroy};
    kdp_plugin *p;
    if (kdp_plugin_new(NULL, &cfg, &ops, NULL, &p) < 0) {
        return 1;
    }
    if (serve_metrics(p, metrics) < 0) {
        kdp_plugin_free(p);
        return 1;
    }
    int r = kdp_plugin_run(p);
    kdp_plugin_free(p);
    return r == 0 ? 0 : 1;
}
