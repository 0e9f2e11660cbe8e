/* SPDX-License-Identifier: MIT */
/* The author's metrics: every rule of kdp_metric_new, the values and the
 * series cap, and the page they make. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdp.h"
#include "plugin/metrics.h"

static int new_metric(kdp_ctx *ctx, kdp_metric_type t, const char *name, const char *help,
                      const char *const *labels, size_t n)
{
    kdp_metric *m = (kdp_metric *)(uintptr_t)1; /* untouched on failure */
    int r = kdp_metric_new(ctx, t, name, help, labels, n, &m);
    if (r < 0) {
        assert_ptr_equal(m, (kdp_metric *)(uintptr_t)1);
    }
    return r;
}

static void test_rules(void **state)
{
    (void)state;
    kdp_ctx *ctx;
    assert_int_equal(kdp_ctx_new(&ctx), 0);
    const char *one[] = {"gpu"};
    const char *two_same[] = {"a", "a"};
    const char *under[] = {"__x"};
    const char *le[] = {"le"};
    const char *colon[] = {"a:b"};
    const char *null_label[] = {NULL};
    const char *five[] = {"a", "b", "c", "d", "e"};
    const char *G = "a gauge";
    kdp_metric_type C = KDP_METRIC_COUNTER;
    kdp_metric_type Gg = KDP_METRIC_GAUGE;
    /* names */
    assert_int_equal(new_metric(ctx, Gg, "", G, NULL, 0), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, NULL, G, NULL, 0), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "1abc", G, NULL, 0), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "a-b", G, NULL, 0), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "a b", G, NULL, 0), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "kdp_mine", G, NULL, 0), -EINVAL);
    assert_int_equal(new_metric(ctx, C, "requests", G, NULL, 0), -EINVAL); /* no _total */
    assert_int_equal(new_metric(ctx, (kdp_metric_type)7, "x", G, NULL, 0), -EINVAL);
    /* help */
    assert_int_equal(new_metric(ctx, Gg, "x", NULL, NULL, 0), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "x", "two\nlines", NULL, 0), -EINVAL);
    /* labels */
    assert_int_equal(new_metric(ctx, Gg, "x", G, NULL, 1), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "x", G, two_same, 2), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "x", G, under, 1), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "x", G, le, 1), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "x", G, colon, 1), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "x", G, null_label, 1), -EINVAL);
    assert_int_equal(new_metric(ctx, Gg, "x", G, five, 5), -EINVAL);
    assert_int_equal(kdp_metric_new(NULL, Gg, "x", G, NULL, 0, NULL), -EINVAL);
    /* good ones, and a second of one name */
    assert_int_equal(new_metric(ctx, Gg, "x:y_z", G, one, 1), 0);
    assert_int_equal(new_metric(ctx, Gg, "x:y_z", G, NULL, 0), -EEXIST);
    assert_int_equal(new_metric(ctx, C, "_ok_total", "", five, 4), 0);
    kdp_ctx_free(ctx);
}

static void test_values_and_page(void **state)
{
    (void)state;
    kdp__registry reg;
    kdp__registry_init(&reg);
    const char *labels[] = {"device", "why"};
    kdp_metric *c;
    kdp_metric *g;
    kdp_metric *n;
    assert_int_equal(kdp__registry_add(&reg, KDP_METRIC_COUNTER, "resets_total",
                                       "Resets, by \\ device", labels, 2, &c),
                     0);
    assert_int_equal(
        kdp__registry_add(&reg, KDP_METRIC_GAUGE, "temp_celsius", "Temperature.", labels, 1, &g),
        0);
    assert_int_equal(kdp__registry_add(&reg, KDP_METRIC_GAUGE, "plain", "No labels.", NULL, 0, &n),
                     0);
    const char *v1[] = {"gpu0", "ecc \"error\""};
    const char *v2[] = {"gpu1", "x"};
    assert_int_equal(kdp_metric_add(c, v1, 1), 0);
    assert_int_equal(kdp_metric_add(c, v1, 2.5), 0);
    assert_int_equal(kdp_metric_add(c, v2, 0), 0);
    assert_int_equal(kdp_metric_add(c, v1, -1), -EINVAL);  /* a counter goes up */
    assert_int_equal(kdp_metric_set(c, v1, 5), -EINVAL);   /* and is not set */
    assert_int_equal(kdp_metric_add(c, v1, NAN), -EINVAL); /* finite */
    assert_int_equal(kdp_metric_add(c, v1, INFINITY), -EINVAL);
    assert_int_equal(kdp_metric_add(c, NULL, 1), -EINVAL);
    const char *bad_utf8[] = {"gpu\xff", "x"};
    assert_int_equal(kdp_metric_add(c, bad_utf8, 1), -EINVAL);
    const char *null_value[] = {"gpu0", NULL};
    assert_int_equal(kdp_metric_add(c, null_value, 1), -EINVAL);
    assert_int_equal(kdp_metric_set(g, v1, 40), 0);
    assert_int_equal(kdp_metric_add(g, v1, -2.5), 0);
    const char *utf8[] = {"h\xc3\xa9"};
    assert_int_equal(kdp_metric_set(g, utf8, -1), 0);
    assert_int_equal(kdp_metric_set(n, NULL, 1e-3), 0);
    assert_int_equal(kdp_metric_add(NULL, NULL, 1), -EINVAL);
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    kdp__registry_render(&reg, &w);
    char *s = kdp__expfmt_take(&w, NULL);
    assert_string_equal(s, "# HELP resets_total Resets, by \\\\ device\n"
                           "# TYPE resets_total counter\n"
                           "resets_total{device=\"gpu0\",why=\"ecc \\\"error\\\"\"} 3.5\n"
                           "resets_total{device=\"gpu1\",why=\"x\"} 0\n"
                           "# HELP temp_celsius Temperature.\n"
                           "# TYPE temp_celsius gauge\n"
                           "temp_celsius{device=\"gpu0\"} 37.5\n"
                           "temp_celsius{device=\"h\xc3\xa9\"} -1\n"
                           "# HELP plain No labels.\n"
                           "# TYPE plain gauge\n"
                           "plain 0.001\n");
    free(s);
    kdp__registry_done(&reg);
}

static void test_series_cap(void **state)
{
    (void)state;
    kdp__registry reg;
    kdp__registry_init(&reg);
    const char *labels[] = {"id"};
    kdp_metric *m;
    assert_int_equal(
        kdp__registry_add(&reg, KDP_METRIC_GAUGE, "per_id", "One per ID.", labels, 1, &m), 0);
    char id[32];
    const char *v[] = {id};
    for (int i = 0; i < KDP_METRIC_MAX_SERIES; i++) {
        snprintf(id, sizeof(id), "id%d", i);
        assert_int_equal(kdp_metric_set(m, v, i), 0);
    }
    snprintf(id, sizeof(id), "one-more");
    assert_int_equal(kdp_metric_set(m, v, 1), -ENOSPC);
    assert_int_equal(kdp_metric_set(m, v, 1), -ENOSPC); /* logged once, refused each time */
    snprintf(id, sizeof(id), "id%d", KDP_METRIC_MAX_SERIES - 1);
    assert_int_equal(kdp_metric_add(m, v, 1), 0); /* an existing series still moves */
    kdp__registry_done(&reg);
}

static void test_check_helpers(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(kdp__metric_check_name("a:b_c9", &why), 0);
    assert_int_equal(kdp__metric_check_name("kdp_x", &why), -EINVAL);
    assert_non_null(strstr(why, "kdp's own"));
    assert_int_equal(kdp__metric_check_label("a:b", &why), -EINVAL);
    assert_int_equal(kdp__metric_check_label("_a9", &why), 0);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(kdp__metric_check_name(longname, &why), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_values_and_page),
        cmocka_unit_test(test_series_cap),
        cmocka_unit_test(test_check_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
