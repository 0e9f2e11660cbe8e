/* SPDX-License-Identifier: MIT */
/* print: text buffers, JSON lines, aligned tables, terminal-safe text. */
#include "print.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/jsonstr.h"
#include "base/safetext.h"

void kc_buf_free(kc_buf *b)
{
    free(b->s);
    *b = (kc_buf){0};
}

void kc_buf_reset(kc_buf *b)
{
    b->len = 0;
    if (b->s) {
        b->s[0] = '\0';
    }
}

static bool reserve(kc_buf *b, size_t more)
{
    if (b->failed) {
        return false;
    }
    if (b->len + more + 1 <= b->cap) {
        return true;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *s = realloc(b->s, cap);
    if (!s) {
        b->failed = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void kc_buf_add(kc_buf *b, const char *s, size_t len)
{
    if (!reserve(b, len)) {
        return;
    }
    memcpy(b->s + b->len, s, len);
    b->len += len;
    b->s[b->len] = '\0';
}

void kc_buf_puts(kc_buf *b, const char *s)
{
    kc_buf_add(b, s, strlen(s));
}

void kc_buf_printf(kc_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void kc_buf_safe(kc_buf *b, const char *s)
{
    if (kdp__safetext_clean(s)) {
        kc_buf_add(b, s, strlen(s));
        return;
    }
    size_t cap = strlen(s) * 4 + 1; /* \xNN for a byte, \uXXXX for 2 or 3 */
    char *out = malloc(cap);
    if (!out) {
        b->failed = true;
        return;
    }
    kc_buf_add(b, out, kdp__safetext(out, cap, s));
    free(out);
}

static void put_buf(const char *s, size_t len, void *ud)
{
    kc_buf_add(ud, s, len);
}

void kc_buf_json_string(kc_buf *b, const char *s)
{
    kdp__json_string(s, put_buf, b);
}

bool kc_buf_write(const kc_buf *b, FILE *f)
{
    if (b->failed) {
        fputs("kdpctl: out of memory while formatting the output\n", stderr);
        return false;
    }
    bool ok = b->len == 0 || fwrite(b->s, 1, b->len, f) == b->len;
    return fflush(f) == 0 && ok;
}

/* ---- JSON ---- */

static void json_open(kc_json *j, char opener, char closer)
{
    if (j->depth >= KC_JSON_DEPTH) {
        j->b.failed = true;
        return;
    }
    kc_buf_add(&j->b, &opener, 1);
    j->closer[j->depth] = closer;
    j->first[j->depth] = true;
    j->depth++;
}

void kc_json_begin(kc_json *j)
{
    *j = (kc_json){0};
    json_open(j, '{', '}');
}

/* The comma and the key before a value. */
static void json_key(kc_json *j, const char *key)
{
    if (j->depth == 0) {
        j->b.failed = true;
        return;
    }
    if (!j->first[j->depth - 1]) {
        kc_buf_add(&j->b, ",", 1);
    }
    j->first[j->depth - 1] = false;
    if (key) {
        kc_buf_json_string(&j->b, key);
        kc_buf_add(&j->b, ":", 1);
    }
}

void kc_json_str(kc_json *j, const char *key, const char *v)
{
    json_key(j, key);
    if (v) {
        kc_buf_json_string(&j->b, v);
    } else {
        kc_buf_puts(&j->b, "null");
    }
}

void kc_json_int(kc_json *j, const char *key, long long v)
{
    json_key(j, key);
    kc_buf_printf(&j->b, "%lld", v);
}

void kc_json_uint(kc_json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    kc_buf_printf(&j->b, "%llu", (unsigned long long)v);
}

void kc_json_ms(kc_json *j, const char *key, uint64_t us)
{
    json_key(j, key);
    kc_buf_printf(&j->b, "%llu.%03llu", (unsigned long long)(us / 1000),
                  (unsigned long long)(us % 1000));
}

void kc_json_bool(kc_json *j, const char *key, bool v)
{
    json_key(j, key);
    kc_buf_puts(&j->b, v ? "true" : "false");
}

void kc_json_obj(kc_json *j, const char *key)
{
    json_key(j, key);
    json_open(j, '{', '}');
}

void kc_json_arr(kc_json *j, const char *key)
{
    json_key(j, key);
    json_open(j, '[', ']');
}

void kc_json_end(kc_json *j)
{
    if (j->depth == 0) {
        j->b.failed = true;
        return;
    }
    j->depth--;
    kc_buf_add(&j->b, &j->closer[j->depth], 1);
}

void kc_json_emit(kc_json *j)
{
    while (j->depth > 0) {
        kc_json_end(j);
    }
    kc_buf_add(&j->b, "\n", 1);
    (void)kc_buf_write(&j->b, stdout);
    kc_buf_free(&j->b);
}

/* ---- tables ---- */

void kc_table_init(kc_table *t, size_t ncols)
{
    *t = (kc_table){.ncols = ncols};
}

void kc_table_row(kc_table *t, const char *const *cells)
{
    if (t->failed) {
        return;
    }
    char **c = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(*c));
    if (!c) {
        t->failed = true;
        return;
    }
    t->cells = c;
    for (size_t i = 0; i < t->ncols; i++) {
        kc_buf b = {0};
        kc_buf_safe(&b, cells[i] ? cells[i] : "");
        c[t->nrows * t->ncols + i] = b.failed ? NULL : b.s ? b.s : strdup("");
        t->failed = t->failed || !c[t->nrows * t->ncols + i];
    }
    t->nrows++;
}

void kc_table_render(const kc_table *t, kc_buf *out, const char *indent)
{
    if (t->failed) {
        out->failed = true;
        return;
    }
    size_t width[16] = {0};
    for (size_t i = 0; i < t->nrows * t->ncols; i++) {
        size_t n = strlen(t->cells[i]);
        size_t col = i % t->ncols;
        if (col < 16 && n > width[col]) {
            width[col] = n;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        kc_buf_puts(out, indent);
        for (size_t col = 0; col < t->ncols; col++) {
            const char *cell = t->cells[r * t->ncols + col];
            bool last = col + 1 == t->ncols;
            if (last) {
                kc_buf_puts(out, cell);
            } else {
                kc_buf_printf(out, "%-*s  ", col < 16 ? (int)width[col] : 0, cell);
            }
        }
        while (out->len > 0 && out->s[out->len - 1] == ' ') {
            out->s[--out->len] = '\0'; /* an empty last column */
        }
        kc_buf_puts(out, "\n");
    }
}

void kc_table_free(kc_table *t)
{
    for (size_t i = 0; t->cells && i < t->nrows * t->ncols; i++) {
        free(t->cells[i]);
    }
    free(t->cells);
    *t = (kc_table){0};
}

/* ---- time ---- */

const char *kc_clock(char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    snprintf(buf, cap, "%02d:%02d:%02d.%03ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
             ts.tv_nsec / 1000000);
    return buf;
}

uint64_t kc_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000U + (uint64_t)ts.tv_nsec;
}

const char *kc_ms(uint64_t us, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.1f", (double)us / 1000.0);
    return buf;
}

/* ---- errors ---- */

void kc_print_error(bool json, const char *cmd, const char *status_name, int code,
                    const char *message, const char *hint)
{
    kc_buf b = {0};
    kc_buf_printf(&b, "kdpctl %s: ", cmd);
    if (status_name) {
        kc_buf_printf(&b, "%s: ", status_name);
    }
    kc_buf_safe(&b, message && *message ? message : "(no message)");
    kc_buf_puts(&b, "\n");
    if (hint) {
        kc_buf_puts(&b, "  hint: ");
        kc_buf_safe(&b, hint);
        kc_buf_puts(&b, "\n");
    }
    (void)kc_buf_write(&b, stderr);
    kc_buf_free(&b);
    if (!json) {
        return;
    }
    kc_json j;
    kc_json_begin(&j);
    kc_json_str(&j, "error", status_name ? status_name : "LOCAL");
    if (status_name) {
        kc_json_int(&j, "code", code);
    }
    kc_json_str(&j, "message", message ? message : "");
    kc_json_str(&j, "hint", hint);
    kc_json_emit(&j);
}

void kc_print_warnings(const char *cmd, const kc_buf *warn)
{
    const char *p = warn->len ? warn->s : NULL;
    kc_buf b = {0};
    while (p && *p) {
        size_t n = strcspn(p, "\n");
        char *line = strndup(p, n);
        kc_buf_printf(&b, "kdpctl %s: warning: ", cmd);
        kc_buf_safe(&b, line ? line : "?");
        kc_buf_puts(&b, "\n");
        free(line);
        p += n + (p[n] == '\n');
    }
    (void)kc_buf_write(&b, stderr);
    kc_buf_free(&b);
}

void kc_json_event(kc_json *j, const char *event)
{
    kc_json_begin(j);
    kc_json_str(j, "event", event);
    kc_json_uint(j, "t_ns", kc_wall_ns());
}

void kc_say_line(const char *who, const char *text, const char *extra)
{
    char clock[32];
    kc_buf b = {0};
    kc_buf_printf(&b, "%s ", kc_clock(clock, sizeof(clock)));
    kc_buf_safe(&b, who);
    kc_buf_puts(&b, ": ");
    kc_buf_safe(&b, text);
    kc_buf_puts(&b, "\n");
    if (extra) {
        kc_buf_puts(&b, extra);
    }
    (void)kc_buf_write(&b, stdout);
    kc_buf_free(&b);
}
