/* SPDX-License-Identifier: MIT */
/*
 * sysattr: reading sysfs for the discovery modules (sysattr.h).
 *
 * A device node's sysfs entry is found through <sysfs>/dev/{char,block}/
 * MAJOR:MINOR for a real node; nodes that are not device files (a test
 * tree, where nodes are regular files or fifos) are found by name in
 * <sysfs>/class/ and, for /dev/bus/usb/BBB/DDD, by busnum/devnum.
 */
#include "discovery/sysattr.h"

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

#define MAX_USB_DEVICES 1024
#define MAX_WALK_DIRS   4096
#define MAX_WALK_DEPTH  8
#define MAX_CLASSES     1024
#define USB_NODE_DIR    "/dev/bus/usb/"

const char *kdp__sysfs_or_default(const char *sysfs)
{
    return sysfs && *sysfs ? sysfs : KDP__DEFAULT_SYSFS;
}

/* Reads a small attribute, trailing whitespace trimmed. Returns its length
 * or -errno. */
int kdp__sys_read(const char *dir, const char *name, char *buf, size_t size)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
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

bool kdp__sys_has(const char *dir, const char *name)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, name);
    return w > 0 && (size_t)w < sizeof(path) && access(path, F_OK) == 0;
}

int kdp__real_dir(const char *path, char out[PATH_MAX])
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
            kdp__real_dir(path, out) == 0) {
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
            kdp__sys_read(path, "busnum", b, sizeof(b)) <= 0 ||
            kdp__sys_read(path, "devnum", n, sizeof(n)) <= 0) {
            continue;
        }
        if (strtoul(b, NULL, 10) == bus && strtoul(n, NULL, 10) == dev &&
            kdp__real_dir(path, out) == 0) {
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
        if (kdp__real_dir(p, out) == 0) {
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
int kdp__sys_up_to(const char *sys_real, char *dir, const char *attr)
{
    size_t sl = strlen(sys_real);
    for (;;) {
        if (strncmp(dir, sys_real, sl) != 0 || dir[sl] != '/') {
            return -ENODEV;
        }
        if (kdp__sys_has(dir, attr)) {
            return 0;
        }
        char *slash = strrchr(dir, '/');
        *slash = '\0';
    }
}

int kdp__parse_hex(const char *s, uint32_t max, uint32_t *out)
{
    char *end = NULL;
    errno = 0;
    if (*s == '-' || *s == '+' || *s == ' ') {
        return -EINVAL;
    }
    unsigned long v = strtoul(s, &end, 16);
    if (errno || end == s || *end || v > max) {
        return -EINVAL;
    }
    *out = (uint32_t)v;
    return 0;
}

int kdp__sys_read_int(const char *dir, const char *name, int dflt)
{
    char buf[32];
    if (kdp__sys_read(dir, name, buf, sizeof(buf)) <= 0) {
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
    if (kdp__sys_read(dir, "uevent", buf, sizeof(buf)) <= 0) {
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
        int r = kdp__host_path_ok(path) ? kdp__strv_add(nodes, path, KDP__MAX_DEV_NODES) : 0;
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

/* Every DEVNAME below a device's directory, not descending into child
 * devices (those with a stop attribute) nor following links. Recursive,
 * MAX_WALK_DEPTH deep at most, MAX_WALK_DIRS directories in all (budget). */
// NOLINTNEXTLINE(misc-no-recursion): bounded by MAX_WALK_DEPTH
static int collect_nodes(const char *dir, kdp__sys_stop_fn stop, int depth, int *budget,
                         kdp__strv *nodes)
{
    int r = add_devname(nodes, dir);
    if (r < 0 || depth >= MAX_WALK_DEPTH) {
        return r;
    }
    DIR *d = opendir(dir);
    if (!d) {
        return errno == ENOMEM ? -ENOMEM : 0; /* unreadable: skipped */
    }
    struct dirent *e;
    while (r == 0 && (e = readdir(d)) && --*budget > 0) {
        char sub[PATH_MAX];
        int w = snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || w < 0 || (size_t)w >= sizeof(sub) || !is_subdir(d, e) ||
            stop(sub, e->d_name)) {
            continue;
        }
        r = collect_nodes(sub, stop, depth + 1, budget, nodes);
    }
    closedir(d);
    return r;
}

int kdp__sys_collect_nodes(const char *dir, kdp__sys_stop_fn stop, kdp__strv *nodes)
{
    int budget = MAX_WALK_DIRS;
    return collect_nodes(dir, stop, 0, &budget, nodes);
}

int kdp__sys_locate(const char *root, const char *sysfs, const char *path, char sys_real[PATH_MAX],
                    char dir[PATH_MAX])
{
    if (!kdp__root_ok(root) || !kdp__root_ok(sysfs) || !kdp__host_path_ok(path)) {
        return -EINVAL;
    }
    const char *sys = kdp__sysfs_or_default(sysfs);
    int r = node_sysfs_dir(root, sys, path, dir);
    if (r == 0 && kdp__real_dir(sys, sys_real) < 0) {
        r = -ENODEV;
    }
    return r;
}
