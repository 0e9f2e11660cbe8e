/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <stdarg.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/safetext.h"

#define ID_MAX 200

bool gen_verbose = true;

void gen_log(char level, const char *fmt, ...)
{
    if (level == 'I' && !gen_verbose) {
        return;
    }
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* paths and names from the host, escaped as kdp's own log lines */
    char safe[2 * sizeof(msg)];
    kdp__safetext(safe, sizeof(safe), msg);
    fprintf(stderr, "%c%02d%02d %02d:%02d:%02d.%06ld %7d kdp-generic] %s\n", level, tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec, (int)getpid(), safe);
}

static bool alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

void gen_sanitize_id(const char *s, char *out)
{
    while (*s && !alnum(*s)) {
        s++;
    }
    size_t o = 0;
    for (; *s && o < ID_MAX; s++) {
        char ch = *s;
        bool keep = alnum(ch) || ch == '_' || ch == '-' || ch == '.' || ch == ':';
        out[o++] = (char)(keep ? ch : '_');
    }
    while (o > 0 && !alnum(out[o - 1])) {
        o--;
    }
    if (o == 0) {
        memcpy(out, "dev", 3);
        o = 3;
    }
    out[o] = '\0';
}

void gen_id_from_path(const char *path, char *out)
{
    if (strncmp(path, "/dev/", 5) == 0) {
        path += 5;
    }
    gen_sanitize_id(path, out);
}
