/* SPDX-License-Identifier: MIT */
/*
 * lines: reassembles newline-terminated lines from a byte stream that
 * arrives in chunks of any size (a watch response). Pure: no I/O, no loop.
 *
 * A line is delivered without its '\n' (and without a '\r' before it). Bytes
 * of an unfinished line are kept until its '\n' arrives, up to max bytes: a
 * longer line ends the stream with -EMSGSIZE.
 */
#ifndef KDP_K8S_LINES_H
#define KDP_K8S_LINES_H

#include <stddef.h>

/* One complete line (not NUL-terminated; valid only during the call).
 * Returns 0 to go on, anything else to stop feeding (returned by feed). */
typedef int (*kdp__lines_cb)(const char *line, size_t len, void *ud);

typedef struct kdp__lines {
    char *buf;  /* the unfinished line */
    size_t len; /* bytes in buf */
    size_t cap;
    size_t max; /* the longest line accepted, without its '\n' */
    int err;    /* < 0 once the stream is broken */
} kdp__lines;

/* An empty reassembler for lines of at most max bytes (max > 0). */
void kdp__lines_init(kdp__lines *lb, size_t max);
/* Frees the buffer (lb may be reused after kdp__lines_init). */
void kdp__lines_free(kdp__lines *lb);
/* Feeds n bytes: cb runs once per completed line, in order. Returns 0, the
 * callback's non-zero value (the rest of data is dropped), -EMSGSIZE when a
 * line grows past max, or -ENOMEM. After an error the reassembler keeps
 * returning it: the stream is broken. */
int kdp__lines_feed(kdp__lines *lb, const char *data, size_t n, kdp__lines_cb cb, void *ud);
/* Bytes of an unfinished line held (non-zero at the end of a stream means
 * it ended inside a line). */
size_t kdp__lines_pending(const kdp__lines *lb);

#endif
