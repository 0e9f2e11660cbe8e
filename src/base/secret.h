/* SPDX-License-Identifier: MIT */
/*
 * secret: credentials (a bearer token, a private key) wiped from memory
 * when freed, and the process made non-dumpable while it holds them (no
 * core file, /proc/<pid>/mem and friends readable by root only), so that a
 * crash or another process of the same user does not get them.
 */
#ifndef KDP_BASE_SECRET_H
#define KDP_BASE_SECRET_H

#include <stddef.h>

/* Zeroes len bytes at p (NULL ok) in a way the compiler keeps, then frees. */
void kdp__secret_free(void *p, size_t len);
/* kdp__secret_free of a NUL-terminated string. */
void kdp__secret_free_str(char *s);
/* Marks the process non-dumpable (once; logged at debug level). */
void kdp__secret_held(void);

#endif
