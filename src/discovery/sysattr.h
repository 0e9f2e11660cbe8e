/* SPDX-License-Identifier: MIT */
/*
 * sysattr: reading sysfs, shared by the USB (sysfs.c) and PCI (pci.c)
 * discovery: small attributes, a device node's sysfs entry, the nodes a
 * device publishes below its directory. Pure file I/O, no state.
 */
#ifndef KDP_SYSATTR_H
#define KDP_SYSATTR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discovery/discover.h"

#define KDP__DEFAULT_SYSFS "/sys"
/* Nodes kept per device (the rest left out). */
#define KDP__MAX_DEV_NODES 64

/* The sysfs to use: sysfs, or "/sys" when NULL or empty. */
const char *kdp__sysfs_or_default(const char *sysfs);
/* Reads the small attribute dir/name (O_NOFOLLOW), trailing whitespace
 * trimmed, into buf. Returns its length or -errno. */
int kdp__sys_read(const char *dir, const char *name, char *buf, size_t size);
bool kdp__sys_has(const char *dir, const char *name);
/* A decimal attribute, or dflt when missing or not a number. */
int kdp__sys_read_int(const char *dir, const char *name, int dflt);
/* Hexadecimal s ("0x10de", "10de") of at most max into *out: 0 or -EINVAL. */
int kdp__parse_hex(const char *s, uint32_t max, uint32_t *out);
/* realpath(): 0 or -errno. */
int kdp__real_dir(const char *path, char out[PATH_MAX]);
/* The real path of sysfs and the sysfs directory of the device behind the
 * node at host path `path` (root, sysfs and path checked): through
 * <sysfs>/dev/{char,block}/MAJOR:MINOR, else <sysfs>/class/{any}/<basename>,
 * else /dev/bus/usb/BBB/DDD by busnum and devnum. Returns 0, -EINVAL,
 * -ENOENT (or another -errno: no such node), -ENODEV (no sysfs entry). */
int kdp__sys_locate(const char *root, const char *sysfs, const char *path, char sys_real[PATH_MAX],
                    char dir[PATH_MAX]);
/* Walks up from dir (inside sys_real, both real paths), in place, to the
 * first directory that has attr. Returns 0 or -ENODEV. */
int kdp__sys_up_to(const char *sys_real, char *dir, const char *attr);
/* Whether the subdirectory dir (named name) is a child device whose nodes
 * are its own. */
typedef bool (*kdp__sys_stop_fn)(const char *dir, const char *name);
/* "/dev/" + the DEVNAME of every uevent in and below dir, not descending
 * into a directory for which stop says so nor following links; bounded in
 * depth, directories and KDP__MAX_DEV_NODES nodes. Returns 0 or -ENOMEM. */
int kdp__sys_collect_nodes(const char *dir, kdp__sys_stop_fn stop, kdp__strv *nodes);

#endif
