/* SPDX-License-Identifier: MIT */
#include "k8s/lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void kdp__lines_init(kdp__lines *lb, size_t max)
{
    memset(lb, 0, sizeof(*lb));
    lb->max = max;
}

void kdp__lines_free(kdp__lines *lb)
{
    free(lb->buf);
    lb->buf = NULL;
    lb->len = 0;
    lb->cap = 0;
}

size_t kdp__lines_pending(const kdp__lines *lb)
{
    return lb->len;
}

static int deliver(const char *line, size_t len, kdp__lines_cb cb, void *ud)
{
    if (len > 0 && line[len - 1] == '\r') {
        len--;
    }
    return cb(line, len, ud);
}

/* Appends n bytes to the unfinished line, growing the buffer (doubling,
 * never past max + 1 bytes). */
static int append(kdp__lines *lb, const char *data, size_t n)
{
    if (n > lb->max - lb->len) {
        return -EMSGSIZE;
    }
    size_t need = lb->len + n;
    if (need > lb->cap) {
        size_t cap = lb->cap ? lb->cap : 256;
        while (cap < need) {
            cap = cap > lb->max / 2 ? lb->max : cap * 2;
        }
        char *b = realloc(lb->buf, cap);
        if (!b) {
            return -ENOMEM;
        }
        lb->buf = b;
        lb->cap = cap;
    }
    memcpy(lb->buf + lb->len, data, n);
    lb->len = need;
    return 0;
}

/* The stream is broken: drop what is held and keep answering err. */
static int broken(kdp__lines *lb, int err)
{
    kdp__lines_free(lb);
    lb->err = err;
    return err;
}

int kdp__lines_feed(kdp__lines *lb, const char *data, size_t n, kdp__lines_cb cb, void *ud)
{
    if (lb->err < 0) {
        return lb->err;
    }
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        if (!nl) {
            int r = append(lb, data, n);
            return r < 0 ? broken(lb, r) : 0;
        }
        size_t part = (size_t)(nl - data);
        int r;
        if (lb->len == 0) {
            /* the whole line is in this chunk: no copy */
            if (part > lb->max) {
                return broken(lb, -EMSGSIZE);
            }
            r = deliver(data, part, cb, ud);
        } else {
            r = append(lb, data, part);
            if (r < 0) {
                return broken(lb, r);
            }
            size_t total = lb->len;
            lb->len = 0; /* before the callback, which may feed again */
            r = deliver(lb->buf, total, cb, ud);
        }
        if (r != 0) {
            return r;
        }
        data = nl + 1;
        n -= part + 1;
    }
    return 0;
}
