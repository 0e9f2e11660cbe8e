/* SPDX-License-Identifier: MIT */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/safetext.h"

static atomic_int min_level = KDP_LOG_WARNING;
/* Held while a line is written (the sink is called under it, so lines never
 * interleave and kdp_log_set() returns only once the old sink is done). */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static kdp_log_fn sink_fn;
static void *sink_ud;
/* This thread is inside the sink, holding sink_lock. */
static _Thread_local bool in_sink;

KDP_EXPORT void kdp_log_set(kdp_log_level level, kdp_log_fn fn, void *ud)
{
    if (in_sink) {
        /* From the sink itself: this thread holds the lock already. The
         * change applies from the next line on. */
        sink_fn = fn;
        sink_ud = ud;
        atomic_store(&min_level, (int)level);
        return;
    }
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

static void write_stderr(kdp_log_level level, const char *file, int line, const char *msg)
{
    static const char letters[] = "DIWE";
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

void kdp__log(kdp_log_level level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    /* Never let a peer's bytes forge a second log line, rub one out on a
     * terminal, or hide and reorder text (C1 controls, line separators,
     * bidi overrides): escaped, as kdpctl escapes them. */
    char safe[2 * sizeof(msg)];
    const char *line_text = msg;
    if (!kdp__safetext_clean(msg)) {
        kdp__safetext(safe, sizeof(safe), msg);
        line_text = safe;
    }

    if (in_sink) {
        /* A line logged by kdp code the sink called (on this thread, which
         * holds the lock): never back into the sink, never a deadlock. */
        write_stderr(level, file, line, line_text);
        return;
    }
    pthread_mutex_lock(&sink_lock);
    if (sink_fn) {
        in_sink = true;
        sink_fn(level, line_text, sink_ud);
        in_sink = false;
    } else {
        write_stderr(level, file, line, line_text);
    }
    pthread_mutex_unlock(&sink_lock);
}
