/* SPDX-License-Identifier: MIT */
#include "plugin/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

typedef struct series {
    char **values; /* n_labels strings */
    double v;
} series;

struct kdp_metric {
    kdp__link link;
    kdp__registry *reg;
    kdp_metric_type type;
    char *name;
    char *help;
    char *labels[KDP_METRIC_MAX_LABELS];
    size_t n_labels;
    series *series;
    size_t n_series;
    size_t cap;
    bool cap_logged;
};

void kdp__registry_init(kdp__registry *r)
{
    pthread_mutex_init(&r->mu, NULL);
    kdp__link_init(&r->metrics);
}

static void series_free(series *s, size_t n_labels)
{
    for (size_t i = 0; s->values && i < n_labels; i++) {
        free(s->values[i]);
    }
    free(s->values);
}

static void metric_free(kdp_metric *m)
{
    if (!m) {
        return;
    }
    for (size_t i = 0; i < m->n_series; i++) {
        series_free(&m->series[i], m->n_labels);
    }
    free(m->series);
    for (size_t i = 0; i < m->n_labels; i++) {
        free(m->labels[i]);
    }
    free(m->name);
    free(m->help);
    free(m);
}

void kdp__registry_done(kdp__registry *r)
{
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &r->metrics)
    {
        metric_free(KDP__CONTAINER_OF(l, kdp_metric, link));
    }
    kdp__link_init(&r->metrics);
    pthread_mutex_destroy(&r->mu);
}

/* ---- the rules ---- */

static bool name_char(char c, bool first, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
           (!first && c >= '0' && c <= '9');
}

static int rule(const char *name, bool colon, const char **why)
{
    if (!name || !*name) {
        *why = "it is empty";
        return -EINVAL;
    }
    for (size_t i = 0; name[i]; i++) {
        if (!name_char(name[i], i == 0, colon)) {
            *why = colon ? "it does not follow Prometheus's rule [a-zA-Z_:][a-zA-Z0-9_:]*"
                         : "it does not follow Prometheus's rule [a-zA-Z_][a-zA-Z0-9_]*";
            return -EINVAL;
        }
    }
    if (strlen(name) > 200) {
        *why = "it is over 200 characters";
        return -EINVAL;
    }
    return 0;
}

int kdp__metric_check_name(const char *name, const char **why)
{
    int r = rule(name, true, why);
    if (r == 0 && strncmp(name, "kdp_", 4) == 0) {
        *why = "names starting \"kdp_\" are kdp's own";
        return -EINVAL;
    }
    return r;
}

int kdp__metric_check_label(const char *name, const char **why)
{
    int r = rule(name, false, why);
    if (r == 0 && strncmp(name, "__", 2) == 0) {
        *why = "label names starting \"__\" are Prometheus's own";
        return -EINVAL;
    }
    if (r == 0 && strcmp(name, "le") == 0) {
        *why = "\"le\" is the label of histogram buckets";
        return -EINVAL;
    }
    return r;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s);
    size_t k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int check_labels(const char *name, const char *const *labels, size_t n_labels)
{
    const char *why = NULL;
    if (n_labels > KDP_METRIC_MAX_LABELS || (n_labels && !labels)) {
        log_error("kdp_metric_new: %s: %zu labels: %s", name, n_labels,
                  n_labels > KDP_METRIC_MAX_LABELS ? "at most KDP_METRIC_MAX_LABELS (4)"
                                                   : "labels is NULL");
        return -EINVAL;
    }
    for (size_t i = 0; i < n_labels; i++) {
        if (kdp__metric_check_label(labels[i], &why) < 0) {
            log_error("kdp_metric_new: %s: invalid label name \"%.200s\": %s", name,
                      labels[i] ? labels[i] : "(null)", why);
            return -EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(labels[i], labels[j]) == 0) {
                log_error("kdp_metric_new: %s: the label \"%s\" is named twice", name, labels[i]);
                return -EINVAL;
            }
        }
    }
    return 0;
}

static int check_new(kdp_metric_type type, const char *name, const char *help,
                     const char *const *labels, size_t n_labels)
{
    const char *why = NULL;
    if (type != KDP_METRIC_COUNTER && type != KDP_METRIC_GAUGE) {
        log_error("kdp_metric_new: invalid type %d: KDP_METRIC_COUNTER or KDP_METRIC_GAUGE",
                  (int)type);
        return -EINVAL;
    }
    if (kdp__metric_check_name(name, &why) < 0) {
        log_error("kdp_metric_new: invalid name \"%.200s\": %s", name ? name : "(null)", why);
        return -EINVAL;
    }
    if (type == KDP_METRIC_COUNTER && !ends_with(name, "_total")) {
        log_error("kdp_metric_new: invalid name \"%s\": a counter's name ends in \"_total\"", name);
        return -EINVAL;
    }
    if (!help || strchr(help, '\n') || strlen(help) > 1000) {
        log_error("kdp_metric_new: %s: invalid help: %s", name,
                  !help ? "it is NULL" : "it is more than one line of at most 1000 bytes");
        return -EINVAL;
    }
    return check_labels(name, labels, n_labels);
}

static kdp_metric *find(kdp__registry *r, const char *name)
{
    kdp__link *l;
    kdp__list_for_each(l, &r->metrics)
    {
        kdp_metric *m = KDP__CONTAINER_OF(l, kdp_metric, link);
        if (strcmp(m->name, name) == 0) {
            return m;
        }
    }
    return NULL;
}

int kdp__registry_add(kdp__registry *r, kdp_metric_type type, const char *name, const char *help,
                      const char *const *labels, size_t n_labels, kdp_metric **ret)
{
    int rc = check_new(type, name, help, labels, n_labels);
    if (rc < 0) {
        return rc;
    }
    kdp_metric *m = calloc(1, sizeof(*m));
    if (!m) {
        return -ENOMEM;
    }
    kdp__link_init(&m->link);
    m->reg = r;
    m->type = type;
    m->name = strdup(name);
    m->help = strdup(help);
    bool ok = m->name && m->help;
    for (size_t i = 0; i < n_labels; i++) {
        m->labels[i] = strdup(labels[i]);
        ok = ok && m->labels[i];
        m->n_labels = i + 1;
    }
    if (!ok) {
        metric_free(m);
        return -ENOMEM;
    }
    pthread_mutex_lock(&r->mu);
    if (find(r, name)) {
        pthread_mutex_unlock(&r->mu);
        log_error("kdp_metric_new: a metric named \"%s\" exists already on this context", name);
        metric_free(m);
        return -EEXIST;
    }
    kdp__list_append(&r->metrics, &m->link);
    pthread_mutex_unlock(&r->mu);
    *ret = m;
    return 0;
}

/* ---- values ---- */

/* Valid UTF-8 (no overlong forms, no surrogates), as Prometheus wants. */
static bool utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        size_t n = 0;
        unsigned min = 0;
        if (c < 0x80) {
            p++;
            continue;
        }
        if ((c & 0xe0) == 0xc0) {
            n = 1;
            min = 0x80;
            c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2;
            min = 0x800;
            c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3;
            min = 0x10000;
            c &= 0x07;
        } else {
            return false;
        }
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80) {
                return false;
            }
            c = (c << 6) | (p[i] & 0x3fU);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
            return false;
        }
        p += n + 1;
    }
    return true;
}

static series *find_series(kdp_metric *m, const char *const *values)
{
    for (size_t i = 0; i < m->n_series; i++) {
        size_t k = 0;
        while (k < m->n_labels && strcmp(m->series[i].values[k], values[k]) == 0) {
            k++;
        }
        if (k == m->n_labels) {
            return &m->series[i];
        }
    }
    return NULL;
}

/* A new series (m->reg->mu held). */
static int new_series(kdp_metric *m, const char *const *values, series **ret)
{
    if (m->n_series >= KDP_METRIC_MAX_SERIES) {
        if (!m->cap_logged) {
            m->cap_logged = true;
            log_error("%s: over KDP_METRIC_MAX_SERIES (%d) label combinations: new ones are "
                      "refused (-ENOSPC; said once): a label's values should be few (not IDs "
                      "of pods or requests)",
                      m->name, KDP_METRIC_MAX_SERIES);
        }
        return -ENOSPC;
    }
    if (m->n_series == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 4;
        cap = cap > KDP_METRIC_MAX_SERIES ? KDP_METRIC_MAX_SERIES : cap;
        series *v = realloc(m->series, cap * sizeof(*v));
        if (!v) {
            return -ENOMEM;
        }
        m->series = v;
        m->cap = cap;
    }
    if (!m->series) {
        return -ENOMEM; /* cannot happen: cap > n_series here */
    }
    series s = {0};
    if (m->n_labels) {
        s.values = calloc(m->n_labels, sizeof(*s.values));
        if (!s.values) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < m->n_labels; i++) {
            s.values[i] = strdup(values[i]);
            if (!s.values[i]) {
                series_free(&s, m->n_labels);
                return -ENOMEM;
            }
        }
    }
    m->series[m->n_series] = s;
    *ret = &m->series[m->n_series++];
    return 0;
}

static int update(kdp_metric *m, const char *const *values, double v, bool set)
{
    if (!m || !isfinite(v) || (m->n_labels && !values)) {
        return -EINVAL;
    }
    if (m->type == KDP_METRIC_COUNTER && (set || v < 0)) {
        return -EINVAL;
    }
    for (size_t i = 0; i < m->n_labels; i++) {
        if (!values[i] || !utf8_ok(values[i])) {
            return -EINVAL;
        }
    }
    pthread_mutex_lock(&m->reg->mu);
    series *s = find_series(m, values);
    int r = 0;
    if (!s) {
        r = new_series(m, values, &s);
    }
    if (r == 0) {
        s->v = set ? v : s->v + v;
    }
    pthread_mutex_unlock(&m->reg->mu);
    return r;
}

KDP_EXPORT int kdp_metric_add(kdp_metric *m, const char *const *label_values, double v)
{
    return update(m, label_values, v, false);
}

KDP_EXPORT int kdp_metric_set(kdp_metric *m, const char *const *label_values, double v)
{
    return update(m, label_values, v, true);
}

/* ---- the page ---- */

void kdp__registry_render(kdp__registry *r, kdp__expfmt *w)
{
    pthread_mutex_lock(&r->mu);
    kdp__link *l;
    kdp__list_for_each(l, &r->metrics)
    {
        const kdp_metric *m = KDP__CONTAINER_OF(l, kdp_metric, link);
        kdp__expfmt_family(w, m->name, m->type == KDP_METRIC_COUNTER ? "counter" : "gauge",
                           m->help);
        for (size_t i = 0; i < m->n_series; i++) {
            kdp__label ls[KDP_METRIC_MAX_LABELS];
            for (size_t k = 0; k < m->n_labels; k++) {
                ls[k].name = m->labels[k];
                ls[k].value = m->series[i].values[k];
            }
            kdp__expfmt_sample(w, m->name, ls, m->n_labels, m->series[i].v);
        }
    }
    pthread_mutex_unlock(&r->mu);
}
