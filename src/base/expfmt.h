/* SPDX-License-Identifier: MIT */
/*
 * expfmt: a writer of the Prometheus text exposition format 0.0.4 into a
 * growing buffer. Pure: no fds, no threads, no locks. It escapes what the
 * format says to escape (HELP: backslash and newline; label values:
 * backslash, double quote and newline), writes numbers the way Prometheus
 * parses them (+Inf, -Inf, NaN; integers without an exponent), and writes a
 * histogram's cumulative buckets, its +Inf bucket, _sum and _count.
 *
 * Errors are sticky: after a failed allocation every call does nothing and
 * kdp__expfmt_take() returns NULL, so a page is written without checking
 * each line.
 */
#ifndef KDP_EXPFMT_H
#define KDP_EXPFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kdp__expfmt {
    char *buf;
    size_t len;
    size_t cap;
    bool failed; /* an allocation failed: the page is lost */
} kdp__expfmt;

/* One label of a series: name="value". */
typedef struct kdp__label {
    const char *name;
    const char *value;
} kdp__label;

void kdp__expfmt_init(kdp__expfmt *w);
/* The page (NUL-terminated, *ret_len without the NUL), which the caller
 * frees; NULL after a failed allocation (the buffer is freed then). The
 * writer is empty again after. */
char *kdp__expfmt_take(kdp__expfmt *w, size_t *ret_len);
void kdp__expfmt_done(kdp__expfmt *w);

/* "# HELP name help" (escaped) and "# TYPE name type" (type: "counter",
 * "gauge", "histogram"). Once per family, before its series. */
void kdp__expfmt_family(kdp__expfmt *w, const char *name, const char *type, const char *help);
/* One sample: name{labels} value. n may be 0. */
void kdp__expfmt_sample(kdp__expfmt *w, const char *name, const kdp__label *labels, size_t n,
                        double value);
/* The same with an integer value (exact beyond 2^53). */
void kdp__expfmt_sample_u64(kdp__expfmt *w, const char *name, const kdp__label *labels, size_t n,
                            uint64_t value);
/* One histogram series: name_bucket{labels,le="bound"} for each bound
 * (counts[i] observations fell in (bounds[i-1], bounds[i]], made
 * cumulative here), le="+Inf" (counts[n_bounds] = those above the last
 * bound), name_sum and name_count. n_labels < 8. */
void kdp__expfmt_histogram(kdp__expfmt *w, const char *name, const kdp__label *labels,
                           size_t n_labels, const double *bounds, const uint64_t *counts,
                           size_t n_bounds, double sum);

/* Helpers, also for tests: the value as the format writes it ("+Inf",
 * "-Inf", "NaN", "42", "0.25", "1e-05"); out has at least 32 bytes. */
void kdp__expfmt_value(double v, char *out, size_t cap);
/* Appends raw bytes (no escaping). */
void kdp__expfmt_raw(kdp__expfmt *w, const char *s, size_t n);

#endif
