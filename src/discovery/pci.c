/* SPDX-License-Identifier: MIT */
/*
 * pci: the PCI devices of a sysfs tree, with the nodes their drivers
 * publish for them, and the PCI device behind a node. Pure file I/O, no
 * state, no threads.
 *
 * A device's nodes come from three places: the class devices below its
 * sysfs directory (DRM, accel, NVMe, VFIO cdev), the NVIDIA driver's
 * /proc/driver/nvidia/gpus/<address>/information ("Device Minor: N" for
 * /dev/nvidiaN, whose sysfs entry has no PCI parent), and, for a device
 * bound to vfio-pci, its IOMMU group's /dev/vfio/<group> with the VFIO
 * container node /dev/vfio/vfio.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discovery/discover.h"
#include "discovery/sysattr.h"
#include "kdp.h"

#define MAX_PCI_DEVICES 1024
#define MAX_NVIDIA_GPUS 256
#define NVIDIA_GPUS_DIR "/proc/driver/nvidia/gpus"
#define NVIDIA_MINOR    "Device Minor:"

/* ---- names ---- */

static bool hex_run(const char *s, size_t min, size_t max, size_t *len)
{
    size_t n = 0;
    while (n < max && ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f'))) {
        n++;
    }
    *len = n;
    return n >= min;
}

/* "DDDD:BB:DD.F" as sysfs names PCI devices (a domain of 4 to 8 hex
 * digits: VMD domains have 5). */
static bool is_pci_address(const char *s)
{
    size_t n;
    if (!hex_run(s, 4, 8, &n) || s[n] != ':') {
        return false;
    }
    s += n + 1;
    if (!hex_run(s, 2, 2, &n) || s[2] != ':') {
        return false;
    }
    s += 3;
    if (!hex_run(s, 2, 2, &n) || s[2] != '.') {
        return false;
    }
    return s[3] >= '0' && s[3] <= '7' && s[4] == '\0';
}

/* Child PCI devices (behind a bridge) and USB devices have their own
 * nodes. */
static bool is_child_device(const char *dir, const char *name)
{
    return is_pci_address(name) || kdp__sys_has(dir, "idVendor");
}

/* The last component of the link dir/name, or -ENOENT. */
static int link_base(const char *dir, const char *name, char *out, size_t size)
{
    char path[PATH_MAX];
    char target[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) {
        return -ENOENT;
    }
    target[n] = '\0';
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (!*base || strlen(base) >= size) {
        return -ENOENT;
    }
    snprintf(out, size, "%s", base);
    return 0;
}

/* ---- NVIDIA ---- */

/* Where the NVIDIA driver's per-GPU files are: under root if root has
 * them, else /proc's (the host's /proc/driver in a container too). */
static void nvidia_dir(const char *root, char out[PATH_MAX])
{
    struct stat st;
    if (root && *root && kdp__join_root(root, NVIDIA_GPUS_DIR, out, PATH_MAX) == 0 &&
        stat(out, &st) == 0) {
        return;
    }
    snprintf(out, PATH_MAX, "%s", NVIDIA_GPUS_DIR);
}

/* The "Device Minor" of <gpus>/<address>/information, or -1. */
static int nvidia_minor(const char *gpus, const char *address)
{
    char dir[PATH_MAX];
    char buf[4096];
    int w = snprintf(dir, sizeof(dir), "%s/%s", gpus, address);
    if (w < 0 || (size_t)w >= sizeof(dir) ||
        kdp__sys_read(dir, "information", buf, sizeof(buf)) <= 0) {
        return -1;
    }
    for (char *line = buf; line && *line; line = strchr(line, '\n')) {
        line += *line == '\n';
        if (strncmp(line, NVIDIA_MINOR, strlen(NVIDIA_MINOR)) != 0) {
            continue;
        }
        char *v = line + strlen(NVIDIA_MINOR);
        v += strspn(v, " \t");
        char *end = NULL;
        long m = strtol(v, &end, 10);
        /* 255 is nvidiactl's */
        return end != v && (*end == '\n' || *end == '\0' || *end == ' ') && m >= 0 && m < 255
                   ? (int)m
                   : -1;
    }
    return -1;
}

/* The address of the GPU whose minor is `minor`, into out. */
static int nvidia_address_of(const char *root, int minor, char *out, size_t size)
{
    char gpus[PATH_MAX];
    nvidia_dir(root, gpus);
    DIR *d = opendir(gpus);
    if (!d) {
        return -ENOENT;
    }
    int r = -ENOENT;
    struct dirent *e;
    for (int i = 0; r < 0 && i < MAX_NVIDIA_GPUS && (e = readdir(d)); i++) {
        if (is_pci_address(e->d_name) && strlen(e->d_name) < size &&
            nvidia_minor(gpus, e->d_name) == minor) {
            snprintf(out, size, "%s", e->d_name);
            r = 0;
        }
    }
    closedir(d);
    return r;
}

/* ---- one device ---- */

KDP_EXPORT void kdp_pci_device_clear(kdp_pci_device *d)
{
    if (!d) {
        return;
    }
    free(d->address);
    free(d->driver);
    free(d->pcie_root);
    kdp_strv_free(d->nodes);
    memset(d, 0, sizeof(*d));
}

static int read_hex(const char *dir, const char *name, uint32_t max, uint32_t *out)
{
    char buf[64];
    if (kdp__sys_read(dir, name, buf, sizeof(buf)) <= 0) {
        return -ENODEV;
    }
    return kdp__parse_hex(buf, max, out) == 0 ? 0 : -ENODEV;
}

/* "pci0000:00" from <sys_real>/devices/pci0000:00/...: NULL if none. */
static int pcie_root_of(const char *sys_real, const char *dir, char **out)
{
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof(prefix), "%s/devices/", sys_real);
    size_t pl = strlen(prefix);
    *out = NULL;
    if (strncmp(dir, prefix, pl) != 0 || strncmp(dir + pl, "pci", 3) != 0) {
        return 0;
    }
    size_t len = strcspn(dir + pl, "/");
    *out = strndup(dir + pl, len);
    return *out ? 0 : -ENOMEM;
}

/* The nodes of d (its other fields filled) from its real directory. */
static int collect_pci_nodes(const char *root, const char *dir, const kdp_pci_device *d,
                             kdp__strv *nodes)
{
    int r = kdp__sys_collect_nodes(dir, is_child_device, nodes);
    char node[64];
    if (r == 0 && d->driver && strcmp(d->driver, "nvidia") == 0) {
        char gpus[PATH_MAX];
        nvidia_dir(root, gpus);
        int minor = nvidia_minor(gpus, d->address);
        if (minor >= 0) {
            snprintf(node, sizeof(node), "/dev/nvidia%d", minor);
            r = kdp__strv_add(nodes, node, KDP__MAX_DEV_NODES);
        }
    }
    if (r == 0 && d->driver && strcmp(d->driver, "vfio-pci") == 0 && d->iommu_group >= 0) {
        snprintf(node, sizeof(node), "/dev/vfio/%d", d->iommu_group);
        r = kdp__strv_add(nodes, node, KDP__MAX_DEV_NODES);
        r = r == 0 ? kdp__strv_add(nodes, "/dev/vfio/vfio", KDP__MAX_DEV_NODES) : r;
    }
    return r == -E2BIG ? 0 : r;
}

/* Fills d from a PCI device's real sysfs directory: -ENODEV if it is not
 * one. */
static int fill_pci(const char *root, const char *sys_real, const char *dir, kdp_pci_device *d)
{
    uint32_t vendor;
    uint32_t device;
    uint32_t cls;
    uint32_t sv = 0;
    uint32_t sd = 0;
    const char *base = strrchr(dir, '/');
    base = base ? base + 1 : dir;
    memset(d, 0, sizeof(*d));
    if (!is_pci_address(base) || read_hex(dir, "vendor", 0xffff, &vendor) < 0 ||
        read_hex(dir, "device", 0xffff, &device) < 0 ||
        read_hex(dir, "class", 0xffffff, &cls) < 0) {
        return -ENODEV;
    }
    (void)read_hex(dir, "subsystem_vendor", 0xffff, &sv);
    (void)read_hex(dir, "subsystem_device", 0xffff, &sd);
    d->vendor = (uint16_t)vendor;
    d->device = (uint16_t)device;
    d->class_code = cls;
    d->subsystem_vendor = (uint16_t)sv;
    d->subsystem_device = (uint16_t)sd;
    int node = kdp__sys_read_int(dir, "numa_node", -1);
    d->numa_node = node < 0 ? -1 : node;
    char buf[256];
    d->iommu_group = -1;
    if (link_base(dir, "iommu_group", buf, sizeof(buf)) == 0) {
        char *end = NULL;
        long g = strtol(buf, &end, 10);
        d->iommu_group = *end == '\0' && end != buf && g >= 0 && g < INT_MAX ? (int)g : -1;
    }
    int r = (d->address = strdup(base)) ? 0 : -ENOMEM;
    if (r == 0 && link_base(dir, "driver", buf, sizeof(buf)) == 0) {
        r = (d->driver = strdup(buf)) ? 0 : -ENOMEM;
    }
    if (r == 0) {
        r = pcie_root_of(sys_real, dir, &d->pcie_root);
    }
    kdp__strv nodes = {0};
    if (r == 0) {
        r = collect_pci_nodes(root, dir, d, &nodes);
    }
    kdp__strv_sort(&nodes);
    d->nodes = r == 0 ? kdp__strv_take(&nodes) : NULL;
    kdp__strv_clear(&nodes);
    if (r == 0 && !d->nodes) {
        r = -ENOMEM;
    }
    if (r < 0) {
        kdp_pci_device_clear(d);
    }
    return r;
}

/* The device <sys>/bus/pci/devices/<address>. */
static int fill_by_address(const char *root, const char *sys, const char *sys_real,
                           const char *address, kdp_pci_device *d)
{
    char path[PATH_MAX];
    char real[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", sys, address);
    if (!is_pci_address(address) || w < 0 || (size_t)w >= sizeof(path) ||
        kdp__real_dir(path, real) < 0) {
        return -ENODEV;
    }
    return fill_pci(root, sys_real, real, d);
}

/* ---- the list ---- */

KDP_EXPORT void kdp_pci_list_free(kdp_pci_device *devs, size_t n)
{
    if (!devs) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        kdp_pci_device_clear(&devs[i]);
    }
    free(devs);
}

static int cmp_pci(const void *a, const void *b)
{
    return strcmp(((const kdp_pci_device *)a)->address, ((const kdp_pci_device *)b)->address);
}

KDP_EXPORT int kdp_pci_list(const char *root, const char *sysfs, kdp_pci_device **ret,
                            size_t *ret_n)
{
    if (!ret || !ret_n || !kdp__root_ok(root) || !kdp__root_ok(sysfs)) {
        return -EINVAL;
    }
    const char *sys = kdp__sysfs_or_default(sysfs);
    char sys_real[PATH_MAX];
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/bus/pci/devices", sys);
    if (kdp__real_dir(sys, sys_real) < 0) {
        return -ENOENT;
    }
    DIR *d = opendir(dir);
    if (!d) {
        return -errno;
    }
    kdp_pci_device *devs = calloc(MAX_PCI_DEVICES, sizeof(*devs));
    if (!devs) {
        closedir(d);
        return -ENOMEM;
    }
    size_t n = 0;
    int r = 0;
    struct dirent *e;
    while (r == 0 && n < MAX_PCI_DEVICES && (e = readdir(d))) {
        r = fill_by_address(root, sys, sys_real, e->d_name, &devs[n]);
        n += r == 0;
        r = r == -ENODEV ? 0 : r;
    }
    closedir(d);
    if (r < 0) {
        kdp_pci_list_free(devs, n);
        return r;
    }
    qsort(devs, n, sizeof(*devs), cmp_pci);
    if (n == 0) {
        free(devs);
        devs = NULL;
    }
    *ret = devs;
    *ret_n = n;
    return (int)n;
}

/* ---- the device of a node ---- */

/* The first device (by address) of IOMMU group `group`. */
static int first_in_group(const char *sys, const char *group, char *out, size_t size)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/kernel/iommu_groups/%s/devices", sys, group);
    DIR *d = opendir(path);
    if (!d) {
        return -ENOENT;
    }
    int r = -ENOENT;
    struct dirent *e;
    for (int i = 0; i < MAX_PCI_DEVICES && (e = readdir(d)); i++) {
        if (is_pci_address(e->d_name) && strlen(e->d_name) < size &&
            (r < 0 || strcmp(e->d_name, out) < 0)) {
            snprintf(out, size, "%s", e->d_name);
            r = 0;
        }
    }
    closedir(d);
    return r;
}

/* The address of the device behind a node without a PCI parent in sysfs:
 * /dev/nvidiaN, /dev/vfio/<group>. */
static int address_by_name(const char *root, const char *sys, const char *path, char *out,
                           size_t size)
{
    char host[PATH_MAX];
    if (kdp__resolve_in_root(root, path, host) < 0) {
        return -ENOENT;
    }
    const char *base = strrchr(host, '/') + 1;
    if (strncmp(host, "/dev/nvidia", 11) == 0 && base == host + 5) {
        const char *num = base + 6;
        size_t digits = strspn(num, "0123456789");
        if (digits > 0 && digits < 4 && num[digits] == '\0') {
            return nvidia_address_of(root, (int)strtol(num, NULL, 10), out, size);
        }
        return -ENOENT;
    }
    if (strncmp(host, "/dev/vfio/", 10) == 0 && base == host + 10 && *base &&
        strspn(base, "0123456789") == strlen(base) && strlen(base) < 10) {
        return first_in_group(sys, base, out, size);
    }
    return -ENOENT;
}

KDP_EXPORT int kdp_pci_device_of(const char *root, const char *sysfs, const char *path,
                                 kdp_pci_device *ret)
{
    char sys_real[PATH_MAX];
    char dir[PATH_MAX];
    if (!ret) {
        return -EINVAL;
    }
    int r = kdp__sys_locate(root, sysfs, path, sys_real, dir);
    if (r < 0 && r != -ENODEV) {
        return r;
    }
    const char *sys = kdp__sysfs_or_default(sysfs);
    kdp_pci_device d;
    if (r == 0) {
        /* up to the nearest PCI device */
        for (r = -ENODEV; r == -ENODEV && kdp__sys_up_to(sys_real, dir, "vendor") == 0;) {
            r = fill_pci(root, sys_real, dir, &d);
            if (r == -ENODEV) {
                *strrchr(dir, '/') = '\0';
            }
        }
    }
    if (r == -ENODEV) {
        char address[64];
        if (kdp__real_dir(sys, sys_real) < 0) {
            return -ENOENT;
        }
        r = address_by_name(root, sys, path, address, sizeof(address));
        r = r == 0 ? fill_by_address(root, sys, sys_real, address, &d) : r;
    }
    if (r < 0) {
        return r == -ENODEV ? -ENOENT : r;
    }
    *ret = d;
    return 0;
}
