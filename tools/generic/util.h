/* SPDX-License-Identifier: MIT */
/* kdp-generic: log lines and small string helpers. */
#ifndef KDP_GENERIC_UTIL_H
#define KDP_GENERIC_UTIL_H

#include <stdbool.h>
#include <stdio.h>

/* A klog-style line on stderr ("E0102 15:04:05.123456  1234 kdp-generic] msg"),
 * level 'I', 'W' or 'E'. 'I' only when verbose. Thread-safe. */
void gen_log(char level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern bool gen_verbose;

#define log_i(...) gen_log('I', __VA_ARGS__)
#define log_w(...) gen_log('W', __VA_ARGS__)
#define log_e(...) gen_log('E', __VA_ARGS__)

/* A device ID (and CDI device name) from a host path: the path below /dev
 * (or below /), '/' and every character other than [A-Za-z0-9_.:-] as '_',
 * alphanumeric at both ends, at most 200 bytes: "/dev/ttyUSB0" -> "ttyUSB0",
 * "/dev/net/tun" -> "net_tun". Writes into out (>= 201 bytes). */
void gen_id_from_path(const char *path, char *out);
/* Same sanitising for any string (e.g. a USB device's sysfs name). */
void gen_sanitize_id(const char *s, char *out);

#endif
