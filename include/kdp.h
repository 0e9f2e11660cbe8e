/* SPDX-License-Identifier: MIT */
/*
 * kdp: Kubernetes device plugins in C.
 *
 * This header is the whole public API. Every call documents its ownership
 * rules, its thread-safety and its errors. Functions return >= 0 on success
 * and a negative errno on failure unless stated otherwise.
 */
#ifndef KDP_H
#define KDP_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KDP_BUILDING)
#define KDP_EXPORT __attribute__((visibility("default")))
#else
#define KDP_EXPORT
#endif

#define KDP_VERSION_MAJOR 0
#define KDP_VERSION_MINOR 1
#define KDP_VERSION_PATCH 0
/* The version this header belongs to, as one comparable number. */
#define KDP_VERSION (KDP_VERSION_MAJOR * 10000 + KDP_VERSION_MINOR * 100 + KDP_VERSION_PATCH)

/* The version of the library actually linked, as "MAJOR.MINOR.PATCH".
 * Static storage; thread-safe. */
KDP_EXPORT const char *kdp_version(void);

/* Log levels, in the order of klog's severities. */
typedef enum kdp_log_level {
    KDP_LOG_DEBUG = 0,
    KDP_LOG_INFO = 1,
    KDP_LOG_WARNING = 2,
    KDP_LOG_ERROR = 3,
} kdp_log_level;

/* A log sink: gets each line that passes the level filter, without a trailing
 * newline. msg is valid only during the call. Called from kdp's threads
 * (the loop thread and the worker thread), one line at a time. */
typedef void (*kdp_log_fn)(kdp_log_level level, const char *msg, void *ud);

/* Sets the minimum level and the sink for the whole process. fn NULL means
 * the default sink: klog-style lines on stderr
 * ("I1122 00:28:46.123456    1234 file.c:42] message"). The default level is
 * KDP_LOG_WARNING. Thread-safe. */
KDP_EXPORT void kdp_log_set(kdp_log_level min_level, kdp_log_fn fn, void *ud);

#ifdef __cplusplus
}
#endif

#endif
