/* SPDX-License-Identifier: MIT */
/*
 * print: kdpctl's output. A growable text buffer, a JSON writer (one object
 * per line, strings escaped as RFC 8259 asks, invalid UTF-8 replaced by
 * U+FFFD), tables with aligned columns, and text made safe for a terminal
 * (control characters from the peer shown as '?').
 *
 * Memory errors are sticky in the buffer: the output is then dropped and
 * kc_buf_failed() says so, so callers check once at the end.
 */
#ifndef KDPCTL_PRINT_H
#define KDPCTL_PRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct kc_buf {
    char *s; /* NUL-terminated when len > 0 */
    size_t len;
    size_t cap;
    bool failed;
} kc_buf;

void kc_buf_free(kc_buf *b);
void kc_buf_reset(kc_buf *b);
void kc_buf_add(kc_buf *b, const char *s, size_t len);
void kc_buf_puts(kc_buf *b, const char *s);
void kc_buf_printf(kc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s escaped as the logs escape a peer's text (base/safetext.h:
 * controls, line separators, bidi controls, invalid UTF-8). */
void kc_buf_safe(kc_buf *b, const char *s);
/* Appends s as a JSON string literal, quotes included (base/jsonstr.h). */
void kc_buf_json_string(kc_buf *b, const char *s);
/* Writes the buffer to f and flushes; returns false on a write error. */
bool kc_buf_write(const kc_buf *b, FILE *f);

#define KC_JSON_DEPTH 16

typedef struct kc_json {
    kc_buf b;
    unsigned depth;
    char closer[KC_JSON_DEPTH]; /* '}' or ']' of each open level */
    bool first[KC_JSON_DEPTH];  /* nothing written at that level yet */
} kc_json;

/* Starts a line's top-level object. */
void kc_json_begin(kc_json *j);
/* The value writers take a key inside objects and NULL inside arrays. */
void kc_json_str(kc_json *j, const char *key, const char *v);
void kc_json_int(kc_json *j, const char *key, long long v);
void kc_json_uint(kc_json *j, const char *key, uint64_t v);
void kc_json_ms(kc_json *j, const char *key, uint64_t us); /* milliseconds, 3 decimals */
void kc_json_bool(kc_json *j, const char *key, bool v);
void kc_json_obj(kc_json *j, const char *key);
void kc_json_arr(kc_json *j, const char *key);
/* Closes the innermost object or array. */
void kc_json_end(kc_json *j);
/* Closes everything still open, prints the line on stdout, flushes, and
 * frees the buffer. */
void kc_json_emit(kc_json *j);

/* A table of strings with columns aligned on output. */
typedef struct kc_table {
    size_t ncols;
    char **cells; /* row-major, each malloc'ed and terminal-safe */
    size_t nrows;
    bool failed;
} kc_table;

void kc_table_init(kc_table *t, size_t ncols);
/* Adds a row of t->ncols strings (copied, made terminal-safe). */
void kc_table_row(kc_table *t, const char *const *cells);
/* Appends the table, each line starting with indent. */
void kc_table_render(const kc_table *t, kc_buf *out, const char *indent);
void kc_table_free(kc_table *t);

/* Wall-clock "HH:MM:SS.mmm" (local time) in buf (at least 16 bytes). */
const char *kc_clock(char *buf, size_t cap);
/* Wall-clock nanoseconds since the epoch (comparable with time.time_ns()). */
uint64_t kc_wall_ns(void);

/* Begins an event line of the emulators' --json output: {"event": EVENT,
 * "t_ns": wall clock}; the caller adds its fields and ends it. */
void kc_json_event(kc_json *j, const char *event);
/* Prints "HH:MM:SS.mmm WHO: TEXT\n" (terminal-safe), then extra as it is
 * (NULL: nothing), in one write to stdout. */
void kc_say_line(const char *who, const char *text, const char *extra);
/* "%.1f" milliseconds of a microsecond count. */
const char *kc_ms(uint64_t us, char *buf, size_t cap);

/* Prints a failure: "kdpctl CMD: what" and, if hint is not NULL,
 * "  hint: ..." on stderr; with json, also one {"error": ...} line on
 * stdout. status_name may be NULL (a local error, not a gRPC status). */
void kc_print_error(bool json, const char *cmd, const char *status_name, int code,
                    const char *message, const char *hint);

/* Prints each line of warn as "kdpctl CMD: warning: LINE" on stderr,
 * terminal-safe. */
void kc_print_warnings(const char *cmd, const kc_buf *warn);

#endif
