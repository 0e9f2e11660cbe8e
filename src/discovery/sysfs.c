/* SPDX-License-Identifier: MIT */
/*
 * sysfs: a device node's USB identity and NUMA node, and the USB devices of
 * a sysfs tree (the node's sysfs entry found by sysattr.c). Pure file I/O,
 * no state, no threads.
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
#include "discovery/sysattr.h"
#include "kdp.h"

#define MAX_USB_DEVICES 1024

static int parse_hex16(const char *s, uint16_t *out)
{
    uint32_t v = 0;
    int r = kdp__parse_hex(s, 0xffff, &v);
    if (r == 0) {
        *out = (uint16_t)v;
    }
    return r;
}

/* ---- USB ---- */

/* A hub's child devices have their own nodes. */
static bool is_usb_device(const char *dir, const char *name)
{
    (void)name;
    return kdp__sys_has(dir, "idVendor");
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
    if (kdp__sys_read(dir, "idVendor", buf, sizeof(buf)) <= 0 || parse_hex16(buf, &d->vendor) < 0 ||
        kdp__sys_read(dir, "idProduct", buf, sizeof(buf)) <= 0 ||
        parse_hex16(buf, &d->product) < 0) {
        return -ENODEV;
    }
    d->busnum = kdp__sys_read_int(dir, "busnum", -1);
    d->devnum = kdp__sys_read_int(dir, "devnum", -1);
    d->name = strdup(strrchr(dir, '/') + 1);
    int r = d->name ? 0 : -ENOMEM;
    if (r == 0 && kdp__sys_read(dir, "serial", buf, sizeof(buf)) > 0) {
        d->serial = strdup(buf);
        r = d->serial ? 0 : -ENOMEM;
    }
    kdp__strv nodes = {0};
    if (r == 0) {
        r = kdp__sys_collect_nodes(dir, is_usb_device, &nodes);
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
        kdp__real_dir(path, real) < 0) {
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
    snprintf(dir, sizeof(dir), "%s/bus/usb/devices", kdp__sysfs_or_default(sysfs));
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

KDP_EXPORT int kdp_usb_device_of(const char *root, const char *sysfs, const char *path,
                                 kdp_usb_device *ret)
{
    char sys_real[PATH_MAX];
    char dir[PATH_MAX];
    if (!ret) {
        return -EINVAL;
    }
    int r = kdp__sys_locate(root, sysfs, path, sys_real, dir);
    if (r == 0) {
        r = kdp__sys_up_to(sys_real, dir, "idVendor");
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
    int r = kdp__sys_locate(root, sysfs, path, sys_real, dir);
    if (r == 0) {
        r = kdp__sys_up_to(sys_real, dir, "numa_node");
    }
    if (r == -ENODEV) {
        /* no sysfs parent with a numa_node: /dev/nvidiaN and /dev/vfio/N
         * have theirs through their PCI device */
        kdp_pci_device pci;
        *ret_node = -1;
        if (kdp_pci_device_of(root, sysfs, path, &pci) == 0) {
            *ret_node = pci.numa_node;
            kdp_pci_device_clear(&pci);
        }
        return 0;
    }
    if (r < 0) {
        return r;
    }
    int node = kdp__sys_read_int(dir, "numa_node", -1);
    *ret_node = node < 0 ? -1 : node;
    return 0;
}
