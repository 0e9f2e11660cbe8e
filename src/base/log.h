/* SPDX-License-Identifier: MIT */
/* log: klog-style lines through the sink chosen by kdp_log_set(). */
#ifndef KDP_LOG_H
#define KDP_LOG_H

#include <stdbool.h>

#include "kdp.h"

/* True if a line at this level would be emitted (skip building costly text). */
bool kdp__log_enabled(kdp_log_level level);
void kdp__log(kdp_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* An expression, not a statement: the arguments are evaluated only when the
 * line is emitted, and a log line adds no branch to its function. */
#define KDP__LOG(lvl, ...)                                                                         \
    ((void)(kdp__log_enabled(lvl) && (kdp__log(lvl, __FILE__, __LINE__, __VA_ARGS__), true)))
#define log_debug(...) KDP__LOG(KDP_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  KDP__LOG(KDP_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  KDP__LOG(KDP_LOG_WARNING, __VA_ARGS__)
#define log_error(...) KDP__LOG(KDP_LOG_ERROR, __VA_ARGS__)

#endif
