/* SPDX-License-Identifier: MIT */
/*
 * kfile: the bytes a kubeconfig points at, for k8s/kconfig: a file read
 * whole (the kubeconfig itself, a token file), with a bound on its size,
 * and base64 data (certificate-authority-data and the other *-data keys,
 * which stand in for a file). No log lines and no messages: the caller
 * says what the file was for.
 *
 * Threading: none (reads files; no state).
 */
#ifndef KDP_K8S_KFILE_H
#define KDP_K8S_KFILE_H

#include <stddef.h>

/* The largest kubeconfig, token or certificate file read. */
#define KDP__KFILE_MAX (4U << 20)

/* Reads the whole regular file at path into *ret (malloc'd, NUL-terminated;
 * its length in *ret_len if ret_len != NULL). Returns 0, -errno of open,
 * fstat or read (-ENOENT, -EACCES, ...), -EISDIR (a directory), -EFBIG (not
 * a regular file, or over KDP__KFILE_MAX bytes), -ENOMEM. *ret untouched
 * on failure. */
int kdp__kfile_read(const char *path, char **ret, size_t *ret_len);

/* Decodes base64 (RFC 4648, padding optional, whitespace skipped) into a
 * malloc'd NUL-terminated buffer. Returns 0, -EINVAL or -ENOMEM. */
int kdp__kfile_base64(const char *in, char **ret, size_t *ret_len);

#endif
