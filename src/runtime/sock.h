/* SPDX-License-Identifier: MIT */
/* sock: non-blocking unix stream sockets (listen, accept, connect). */
#ifndef KDP_SOCK_H
#define KDP_SOCK_H

#include <sys/types.h>

/* Binds and listens on path with owner-only permissions (0600). The socket
 * listens before path exists (bound at "<dir>/.<name>.<pid>.<n>", then renamed
 * to path; bound at path itself when that name would be too long), so a
 * connect to a path that exists is never refused for want of a listen. Its
 * address (`ss -xl`, /proc/net/unix) stays the hidden name. A
 * path that exists is an error (-EADDRINUSE): removing a stale socket is
 * the caller's decision. Stores the listening fd and the socket's inode (to recognise our
 * own socket later). Returns 0 or -errno (-ENAMETOOLONG over 107 bytes). */
int kdp__sock_listen(const char *path, int backlog, int *ret_fd, ino_t *ret_ino);
/* Starts a non-blocking connect. Returns 0 (connected or in progress) or
 * -errno (-ENOENT no socket, -ECONNREFUSED nobody listening). */
int kdp__sock_connect(const char *path, int *ret_fd);
/* Removes path only if it is still the socket with inode ino (never another
 * instance's socket). Returns 0, or -errno (-ESTALE if it is not ours). */
int kdp__sock_unlink_if_ours(const char *path, ino_t ino);

#endif
