/* SPDX-License-Identifier: MIT */
#include "base/expfmt.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HIST_LABELS 8

void kdp__expfmt_init(kdp__expfmt *w)
{
    memset(w, 0, sizeof(*w));
}

void kdp__expfmt_done(kdp__expfmt *w)
{
    free(w->buf);
    kdp__expfmt_init(w);
}

char *kdp__expfmt_take(kdp__expfmt *w, size_t *ret_len)
{
    char *out = NULL;
    size_t len = 0;
    if (!w->failed) {
        kdp__expfmt_raw(w, "", 1); /* the NUL, also for an empty page */
    }
    if (!w->failed) {
        out = w->buf;
        len = w->len - 1;
        w->buf = NULL;
    }
    kdp__expfmt_done(w);
    if (ret_len) {
        *ret_len = len;
    }
    return out;
}

void kdp__expfmt_raw(kdp__expfmt *w, const char *s, size_t n)
{
    if (w->failed || n == 0) {
        return; /* n 0: no buffer may exist yet, and memcpy wants one */
    }
    if (n > w->cap - w->len) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap - w->len < n) {
            if (cap > SIZE_MAX / 2) {
                w->failed = true;
                return;
            }
            cap *= 2;
        }
        char *buf = realloc(w->buf, cap);
        if (!buf) {
            w->failed = true;
            return;
        }
        w->buf = buf;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void put(kdp__expfmt *w, const char *s)
{
    kdp__expfmt_raw(w, s, strlen(s));
}

/* Escapes backslash and newline, and with quote also the double quote. */
static void put_escaped(kdp__expfmt *w, const char *s, bool quote)
{
    const char *run = s;
    for (; *s; s++) {
        const char *esc = NULL;
        if (*s == '\\') {
            esc = "\\\\";
        } else if (*s == '\n') {
            esc = "\\n";
        } else if (quote && *s == '"') {
            esc = "\\\"";
        }
        if (esc) {
            kdp__expfmt_raw(w, run, (size_t)(s - run));
            put(w, esc);
            run = s + 1;
        }
    }
    kdp__expfmt_raw(w, run, (size_t)(s - run));
}

void kdp__expfmt_value(double v, char *out, size_t cap)
{
    if (isnan(v)) {
        snprintf(out, cap, "NaN");
    } else if (isinf(v)) {
        snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
    } else if (v > -1e15 && v < 1e15 && v == (double)(long long)v) {
        snprintf(out, cap, "%lld", (long long)v);
    } else {
        /* the shortest of 15..17 digits that reads back as v */
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(out, cap, "%.*g", prec, v);
            if (strtod(out, NULL) == v) {
                break;
            }
        }
    }
}

void kdp__expfmt_family(kdp__expfmt *w, const char *name, const char *type, const char *help)
{
    put(w, "# HELP ");
    put(w, name);
    put(w, " ");
    put_escaped(w, help, false);
    put(w, "\n# TYPE ");
    put(w, name);
    put(w, " ");
    put(w, type);
    put(w, "\n");
}

static void series(kdp__expfmt *w, const char *name, const char *suffix, const kdp__label *labels,
                   size_t n)
{
    put(w, name);
    put(w, suffix);
    if (n == 0) {
        return;
    }
    put(w, "{");
    for (size_t i = 0; i < n; i++) {
        put(w, i ? "," : "");
        put(w, labels[i].name);
        put(w, "=\"");
        put_escaped(w, labels[i].value, true);
        put(w, "\"");
    }
    put(w, "}");
}

/* One sample line: name+suffix{labels} value. */
static void line(kdp__expfmt *w, const char *name, const char *suffix, const kdp__label *labels,
                 size_t n, const char *value)
{
    series(w, name, suffix, labels, n);
    put(w, " ");
    put(w, value);
    put(w, "\n");
}

void kdp__expfmt_sample(kdp__expfmt *w, const char *name, const kdp__label *labels, size_t n,
                        double value)
{
    char v[40];
    kdp__expfmt_value(value, v, sizeof(v));
    line(w, name, "", labels, n, v);
}

void kdp__expfmt_sample_u64(kdp__expfmt *w, const char *name, const kdp__label *labels, size_t n,
                            uint64_t value)
{
    char v[32];
    snprintf(v, sizeof(v), "%" PRIu64, value);
    line(w, name, "", labels, n, v);
}

void kdp__expfmt_histogram(kdp__expfmt *w, const char *name, const kdp__label *labels,
                           size_t n_labels, const double *bounds, const uint64_t *counts,
                           size_t n_bounds, double sum)
{
    if (n_labels >= MAX_HIST_LABELS) {
        w->failed = true; /* a caller's mistake: no page rather than a wrong one */
        return;
    }
    kdp__label ls[MAX_HIST_LABELS];
    if (n_labels > 0) {
        memcpy(ls, labels, n_labels * sizeof(*ls));
    }
    char le[40];
    ls[n_labels].name = "le";
    ls[n_labels].value = le;
    uint64_t cum = 0;
    for (size_t i = 0; i <= n_bounds; i++) {
        cum += counts[i];
        if (i < n_bounds) {
            kdp__expfmt_value(bounds[i], le, sizeof(le));
        } else {
            snprintf(le, sizeof(le), "+Inf");
        }
        char v[32];
        snprintf(v, sizeof(v), "%" PRIu64, cum);
        line(w, name, "_bucket", ls, n_labels + 1, v);
    }
    char v[40];
    kdp__expfmt_value(sum, v, sizeof(v));
    line(w, name, "_sum", labels, n_labels, v);
    snprintf(v, sizeof(v), "%" PRIu64, cum);
    line(w, name, "_count", labels, n_labels, v);
}
