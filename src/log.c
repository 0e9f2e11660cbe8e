/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_int min_level = KDP_LOG_WARNING;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static kdp_log_fn sink_fn;
static void *sink_ud;

KDP_EXPORT const char *kdp_version(void)
{
    return KDP_VERSION_STRING;
}

KDP_EXPORT void kdp_log_set(kdp_log_level level, kdp_log_fn fn, void *ud)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_ud = ud;
    atomic_store(&min_level, (int)level);
    pthread_mutex_unlock(&sink_lock);
}

bool kdp__log_enabled(kdp_log_level level)
{
    return (int)level >= atomic_load_explicit(&min_level, memory_order_relaxed);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void kdp__log(kdp_log_level level, const char *file, int line, const char *fmt, ...)
{
    static const char letters[] = "DIWE";
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    /* Never let a peer's bytes forge a second log line (or rub one out on a
     * terminal with DEL). */
    for (char *c = msg; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            *c = ' ';
        }
    }

    pthread_mutex_lock(&sink_lock);
    if (sink_fn) {
        sink_fn(level, msg, sink_ud);
    } else {
        struct timeval tv;
        struct tm tm;
        gettimeofday(&tv, NULL);
        localtime_r(&tv.tv_sec, &tm);
        /* klog: Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg */
        fprintf(stderr, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] %s\n",
                letters[level < 0 || level > KDP_LOG_ERROR ? 0 : level], tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec, (int)gettid(), base_name(file),
                line, msg);
    }
    pthread_mutex_unlock(&sink_lock);
}
