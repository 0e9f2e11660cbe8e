/* SPDX-License-Identifier: MIT */
/*
 * cdi: CDI spec files (the public kdp_cdi_write_spec and, here, what the
 * DRA driver needs besides: a file name of the caller's choosing, one per
 * claim, and environment variables and mounts among a device's edits).
 */
#ifndef KDP_CDI_H
#define KDP_CDI_H

#include <stdbool.h>
#include <stddef.h>

#include "kdp.h"

/* A bind mount of a host path into the container (CDI's mounts: options
 * "nosuid", "nodev", "bind", and "ro" when read_only). */
typedef struct kdp__cdi_mount {
    const char *host_path;
    const char *container_path;
    bool read_only;
} kdp__cdi_mount;

/* A device of a spec: its container edits, device nodes, "KEY=VALUE"
 * variables and mounts (at least one edit; all borrowed). */
typedef struct kdp__cdi_dev {
    const char *name;
    const kdp_cdi_node *nodes;
    size_t n_nodes;
    const char *const *env;
    size_t n_env;
    const kdp__cdi_mount *mounts;
    size_t n_mounts;
} kdp__cdi_dev;

/* Whether mode is one a spec may have: read and write bits only (at most
 * 0666), the owner's read and write included. */
bool kdp__cdi_mode_ok(unsigned mode);
/* Writes kind's spec with devs as <dir>/<file> (file: a name ending in
 * ".json", no '/', not hidden) with file mode `mode`, atomically, left
 * alone when unchanged (content and mode); dir absolute, created if
 * missing. n == 0 removes it. Returns 1 (written), 0 (unchanged), -EINVAL
 * (a bad kind, name, path, variable or file name), -EEXIST (two devices
 * with one name), -KDP__EUNTRUSTED (dir writable by others:
 * kdp__dir_trusted), -ENOMEM, -errno. */
int kdp__cdi_write_file(const char *dir, const char *file, const char *kind,
                        const kdp__cdi_dev *devs, size_t n, unsigned mode);
/* Removes <dir>/<file>. Returns 1 (removed), 0 (there was none), -EINVAL,
 * -errno. */
int kdp__cdi_remove_file(const char *dir, const char *file);
/* <dir>/<file> is a regular file. */
bool kdp__cdi_file_exists(const char *dir, const char *file);

#endif
