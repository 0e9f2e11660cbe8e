/* SPDX-License-Identifier: MIT */
/*
 * sysfs: a device node's sysfs entry, its USB identity and NUMA node, and the
 * USB devices of a sysfs tree. Pure file I/O, no state, no threads.
 *
 * A device node's sysfs entry is found through <sysfs>/dev/{char,block}/
 * MAJOR:MINOR for a real node; nodes that are not device files (a test
 * tree, where nodes are regular files or fifos) are found by name in
 * <sysfs>/class/ and, for /dev/bus/usb/BBB/DDD, by busnum/devnum.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "discovery/discover.h"
#include "kdp.h"

#define MAX_USB_DEVICES 1024
#define MAX_USB_NODES   64
#define MAX_WALK_DIRS   4096
#define MAX_WALK_DEPTH  8
#define MAX_CLASSES     1024
#define DEFAULT_SYSFS   "/sys"
#define USB_NODE_DIR    "/dev/bus/usb/"

/* ---- sysfs ---- */

/* Reads a small attribute, trailing whitespace trimmed. Returns its length
 * or -errno. */
static int read_attr(const char *dir, const char *name, char *buf, size_t size)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return -errno;
    }
    ssize_t n = read(fd, buf, size - 1);
    int e = errno;
    close(fd);
    if (n < 0) {
        return -e;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) {
        n--;
    }
    buf[n] = '\0';
    return (int)n;
}

static bool has_attr(const char *dir, const char *name)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, name);
    return w > 0 && (size_t)w < sizeof(path) && access(path, F_OK) == 0;
}

static int real_dir(const char *path, char out[PATH_MAX])
{
    return realpath(path, out) ? 0 : -errno;
}

/* <sysfs>/class/{any}/<name>. */
static int find_in_classes(const char *sys, const char *name, char out[PATH_MAX])
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/class", sys);
    DIR *d = opendir(path);
    if (!d) {
        return -ENODEV;
    }
    int r = -ENODEV;
    struct dirent *e;
    for (int i = 0; r < 0 && i < MAX_CLASSES && (e = readdir(d)); i++) {
        if (e->d_name[0] == '.') {
            continue;
        }
        int w = snprintf(path, sizeof(path), "%s/class/%s/%s", sys, e->d_name, name);
        struct stat st;
        if (w > 0 && (size_t)w < sizeof(path) && lstat(path, &st) == 0 &&
            real_dir(path, out) == 0) {
            r = 0;
        }
    }
    closedir(d);
    return r;
}

/* 1 to 3 decimal digits at s: their value in *v and the end, or NULL. */
static const char *parse_3_digits(const char *s, unsigned *v)
{
    unsigned n = 0;
    int i = 0;
    for (; i < 3 && s[i] >= '0' && s[i] <= '9'; i++) {
        n = n * 10 + (unsigned)(s[i] - '0');
    }
    *v = n;
    return i > 0 ? s + i : NULL;
}

/* The USB device of /dev/bus/usb/BBB/DDD, by busnum and devnum. */
static int find_usb_by_number(const char *sys, const char *host_path, char out[PATH_MAX])
{
    unsigned bus;
    unsigned dev;
    size_t dl = strlen(USB_NODE_DIR);
    if (strncmp(host_path, USB_NODE_DIR, dl) != 0) {
        return -ENODEV;
    }
    const char *p = parse_3_digits(host_path + dl, &bus);
    if (!p || *p != '/' || !(p = parse_3_digits(p + 1, &dev)) || *p != '\0') {
        return -ENODEV;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/bus/usb/devices", sys);
    DIR *d = opendir(path);
    if (!d) {
        return -ENODEV;
    }
    int r = -ENODEV;
    struct dirent *e;
    for (int i = 0; r < 0 && i < MAX_USB_DEVICES && (e = readdir(d)); i++) {
        char b[16];
        char n[16];
        int w = snprintf(path, sizeof(path), "%s/bus/usb/devices/%s", sys, e->d_name);
        if (e->d_name[0] == '.' || w < 0 || (size_t)w >= sizeof(path) ||
            read_attr(path, "busnum", b, sizeof(b)) <= 0 ||
            read_attr(path, "devnum", n, sizeof(n)) <= 0) {
            continue;
        }
        if (strtoul(b, NULL, 10) == bus && strtoul(n, NULL, 10) == dev &&
            real_dir(path, out) == 0) {
            r = 0;
        }
    }
    closedir(d);
    return r;
}

/* The sysfs directory of the device behind a node: -ENOENT (or another
 * -errno) if the node does not exist, -ENODEV if it has no sysfs entry. */
static int node_sysfs_dir(const char *root, const char *sys, const char *path, char out[PATH_MAX])
{
    char host[PATH_MAX];
    char full[PATH_MAX];
    int r = kdp__resolve_in_root(root, path, host);
    if (r < 0) {
        return r;
    }
    struct stat st;
    if (kdp__join_root(root, host, full, sizeof(full)) < 0) {
        return -ENAMETOOLONG;
    }
    if (stat(full, &st) < 0) {
        return -errno;
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/dev/%s/%u:%u", sys, S_ISCHR(st.st_mode) ? "char" : "block",
                 major(st.st_rdev), minor(st.st_rdev));
        if (real_dir(p, out) == 0) {
            return 0;
        }
    }
    if (find_in_classes(sys, strrchr(host, '/') + 1, out) == 0) {
        return 0;
    }
    return find_usb_by_number(sys, host, out);
}

/* Walks up from dir (inside sysfs, both real paths) to the first directory
 * that has attr; dir is changed in place. */
static int up_to(const char *sys_real, char *dir, const char *attr)
{
    size_t sl = strlen(sys_real);
    for (;;) {
        if (strncmp(dir, sys_real, sl) != 0 || dir[sl] != '/') {
            return -ENODEV;
        }
        if (has_attr(dir, attr)) {
            return 0;
        }
        char *slash = strrchr(dir, '/');
        *slash = '\0';
    }
}

/* ---- USB ---- */

static int parse_hex16(const char *s, uint16_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 16);
    if (errno || end == s || *end || v > 0xffff) {
        return -EINVAL;
    }
    *out = (uint16_t)v;
    return 0;
}

static int read_int_attr(const char *dir, const char *name, int dflt)
{
    char buf[32];
    if (read_attr(dir, name, buf, sizeof(buf)) <= 0) {
        return dflt;
    }
    char *end = NULL;
    long v = strtol(buf, &end, 10);
    return *end || v < INT_MIN || v > INT_MAX ? dflt : (int)v;
}

/* "/dev/" + the DEVNAME of dir/uevent, if it has one. */
static int add_devname(kdp__strv *nodes, const char *dir)
{
    char buf[4096];
    if (read_attr(dir, "uevent", buf, sizeof(buf)) <= 0) {
        return 0;
    }
    for (char *line = buf; line && *line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, "DEVNAME=", 8) != 0) {
            continue;
        }
        char *v = line + 8;
        size_t len = strcspn(v, "\n");
        char path[300];
        if (len == 0 || len > 255 || v[0] == '/') {
            return 0;
        }
        snprintf(path, sizeof(path), "/dev/%.*s", (int)len, v);
        int r = kdp__host_path_ok(path) ? kdp__strv_add(nodes, path, MAX_USB_NODES) : 0;
        return r == -E2BIG ? 0 : r; /* past the cap: the rest is left out */
    }
    return 0;
}

static bool is_subdir(DIR *d, const struct dirent *e)
{
    if (e->d_type == DT_DIR) {
        return true;
    }
    struct stat st;
    return e->d_type == DT_UNKNOWN && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           S_ISDIR(st.st_mode);
}

/* Every DEVNAME below a USB device's directory, not descending into child
 * USB devices (a hub's) nor following links. Recursive, MAX_WALK_DEPTH deep
 * at most, MAX_WALK_DIRS directories in all (budget). */
// NOLINTNEXTLINE(misc-no-recursion): bounded by MAX_WALK_DEPTH
static int collect_nodes(const char *dir, int depth, int *budget, kdp__strv *nodes)
{
    int r = add_devname(nodes, dir);
    if (r < 0 || depth >= MAX_WALK_DEPTH) {
        return r;
    }
    DIR *d = opendir(dir);
    if (!d) {
        return 0;
    }
    struct dirent *e;
    while (r == 0 && (e = readdir(d)) && --*budget > 0) {
        char sub[PATH_MAX];
        int w = snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || w < 0 || (size_t)w >= sizeof(sub) || !is_subdir(d, e) ||
            has_attr(sub, "idVendor")) {
            continue;
        }
        r = collect_nodes(sub, depth + 1, budget, nodes);
    }
    closedir(d);
    return r;
}

KDP_EXPORT void kdp_usb_device_clear(kdp_usb_device *d)
{
    if (!d) {
        return;
    }
    free(d->name);
    free(d->serial);
    kdp_strv_free(d->nodes);
    memset(d, 0, sizeof(*d));
}

/* Fills d from a USB device's real sysfs directory. */
static int fill_usb(const char *dir, kdp_usb_device *d)
{
    char buf[256];
    memset(d, 0, sizeof(*d));
    if (read_attr(dir, "idVendor", buf, sizeof(buf)) <= 0 || parse_hex16(buf, &d->vendor) < 0 ||
        read_attr(dir, "idProduct", buf, sizeof(buf)) <= 0 || parse_hex16(buf, &d->product) < 0) {
        return -ENODEV;
    }
    d->busnum = read_int_attr(dir, "busnum", -1);
    d->devnum = read_int_attr(dir, "devnum", -1);
    d->name = strdup(strrchr(dir, '/') + 1);
    int r = d->name ? 0 : -ENOMEM;
    if (r == 0 && read_attr(dir, "serial", buf, sizeof(buf)) > 0) {
        d->serial = strdup(buf);
        r = d->serial ? 0 : -ENOMEM;
    }
    kdp__strv nodes = {0};
    int budget = MAX_WALK_DIRS;
    if (r == 0) {
        r = collect_nodes(dir, 0, &budget, &nodes);
    }
    kdp__strv_sort(&nodes);
    d->nodes = r == 0 ? kdp__strv_take(&nodes) : NULL;
    kdp__strv_clear(&nodes);
    if (r == 0 && !d->nodes) {
        r = -ENOMEM;
    }
    if (r < 0) {
        kdp_usb_device_clear(d);
    }
    return r;
}

KDP_EXPORT void kdp_usb_list_free(kdp_usb_device *devs, size_t n)
{
    if (!devs) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        kdp_usb_device_clear(&devs[i]);
    }
    free(devs);
}

static int cmp_usb(const void *a, const void *b)
{
    return strcmp(((const kdp_usb_device *)a)->name, ((const kdp_usb_device *)b)->name);
}

/* Adds the USB device behind <dir>/<name> to *devs (skipped if it is not
 * one). */
static int list_one(const char *dir, const char *name, kdp_usb_device *devs, size_t *n)
{
    char path[PATH_MAX];
    char real[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (name[0] == '.' || strchr(name, ':') || w < 0 || (size_t)w >= sizeof(path) ||
        real_dir(path, real) < 0) {
        return 0;
    }
    int r = fill_usb(real, &devs[*n]);
    if (r == -ENODEV) {
        return 0;
    }
    if (r == 0) {
        (*n)++;
    }
    return r;
}

KDP_EXPORT int kdp_usb_list(const char *sysfs, kdp_usb_device **ret, size_t *ret_n)
{
    if (!ret || !ret_n || !kdp__root_ok(sysfs)) {
        return -EINVAL;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/bus/usb/devices", sysfs && *sysfs ? sysfs : DEFAULT_SYSFS);
    DIR *d = opendir(dir);
    if (!d) {
        return -errno;
    }
    kdp_usb_device *devs = calloc(MAX_USB_DEVICES, sizeof(*devs));
    if (!devs) {
        closedir(d);
        return -ENOMEM;
    }
    size_t n = 0;
    int r = 0;
    struct dirent *e;
    while (r == 0 && n < MAX_USB_DEVICES && (e = readdir(d))) {
        r = list_one(dir, e->d_name, devs, &n);
    }
    closedir(d);
    if (r < 0) {
        kdp_usb_list_free(devs, n);
        return r;
    }
    qsort(devs, n, sizeof(*devs), cmp_usb);
    if (n == 0) {
        free(devs);
        devs = NULL;
    }
    *ret = devs;
    *ret_n = n;
    return (int)n;
}

/* The real path of sysfs and the sysfs directory of a node's device. */
static int locate(const char *root, const char *sysfs, const char *path, char sys_real[PATH_MAX],
                  char dir[PATH_MAX])
{
    if (!kdp__root_ok(root) || !kdp__root_ok(sysfs) || !kdp__host_path_ok(path)) {
        return -EINVAL;
    }
    const char *sys = sysfs && *sysfs ? sysfs : DEFAULT_SYSFS;
    int r = node_sysfs_dir(root, sys, path, dir);
    if (r == 0 && real_dir(sys, sys_real) < 0) {
        r = -ENODEV;
    }
    return r;
}

KDP_EXPORT int kdp_usb_device_of(const char *root, const char *sysfs, const char *path,
                                 kdp_usb_device *ret)
{
    char sys_real[PATH_MAX];
    char dir[PATH_MAX];
    if (!ret) {
        return -EINVAL;
    }
    int r = locate(root, sysfs, path, sys_real, dir);
    if (r == 0) {
        r = up_to(sys_real, dir, "idVendor");
    }
    kdp_usb_device d;
    if (r == 0) {
        r = fill_usb(dir, &d);
    }
    if (r < 0) {
        return r == -ENODEV ? -ENOENT : r;
    }
    *ret = d;
    return 0;
}

KDP_EXPORT int kdp_numa_node_of(const char *root, const char *sysfs, const char *path,
                                int *ret_node)
{
    char sys_real[PATH_MAX];
    char dir[PATH_MAX];
    if (!ret_node) {
        return -EINVAL;
    }
    int r = locate(root, sysfs, path, sys_real, dir);
    if (r == 0) {
        r = up_to(sys_real, dir, "numa_node");
    }
    if (r == -ENODEV) {
        *ret_node = -1;
        return 0;
    }
    if (r < 0) {
        return r;
    }
    int node = read_int_attr(dir, "numa_node", -1);
    *ret_node = node < 0 ? -1 : node;
    return 0;
}
