/* SPDX-License-Identifier: MIT */
/* kdp's own metrics and /healthz from made-up plugin views. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/builtins.h"
#include "plugin/probe.h"

static kdp__pstats stats;

static kdp__pview view(const char *res, kdp_plugin_state state)
{
    kdp__pview v = {.resource = res, .stats = &stats};
    v.st.state = state;
    return v;
}

static char *healthz(const kdp__pview *v, size_t n, int *status)
{
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    *status = kdp__builtins_healthz(v, n, &w);
    return kdp__expfmt_take(&w, NULL);
}

static void expect(const kdp__pview *v, size_t n, int status, const char *body)
{
    int st = 0;
    char *s = healthz(v, n, &st);
    assert_int_equal(st, status);
    assert_string_equal(s, body);
    free(s);
}

static void test_healthz_reasons(void **state)
{
    (void)state;
    kdp__pstats_init(&stats);
    expect(NULL, 0, 503, "no plugins\n");
    kdp__pview v = view("a.b/c", KDP_PLUGIN_REGISTERED);
    expect(&v, 1, 200, "ok\n");
    v.st.state = KDP_PLUGIN_WAITING;
    expect(&v, 1, 503, "a.b/c: waiting for kubelet.sock\n");
    v.watcher = true;
    expect(&v, 1, 503, "a.b/c: waiting for the kubelet's plugin watcher (GetInfo)\n");
    v.watcher = false;
    v.st.state = KDP_PLUGIN_REGISTERING;
    expect(&v, 1, 503, "a.b/c: registering\n");
    strcpy(v.reg_error, "INVALID_ARGUMENT: Unsupported version");
    expect(&v, 1, 503, "a.b/c: registration refused: INVALID_ARGUMENT: Unsupported version\n");
    v.st.state = KDP_PLUGIN_STARTING;
    expect(&v, 1, 503, "a.b/c: starting\n");
    v.st.list_error = -EIO;
    expect(&v, 1, 503, "a.b/c: starting; list op failing: Input/output error\n");
    v.st.state = KDP_PLUGIN_WAITING;
    expect(&v, 1, 503, "a.b/c: waiting for kubelet.sock; list op failing: Input/output error\n");
    v.st.state = KDP_PLUGIN_REGISTERED; /* registered: up, whatever the list op does */
    expect(&v, 1, 200, "ok\n");
    v.st.state = KDP_PLUGIN_STARTING;
    v.st.list_error = 0;
    v.st.dir_error = -ENOENT;
    expect(&v, 1, 503, "a.b/c: device-plugin directory unusable: No such file or directory\n");
    v.st.state = KDP_PLUGIN_IDLE;
    expect(&v, 1, 503, "a.b/c: not started\n");
    v.st.state = KDP_PLUGIN_STOPPING;
    expect(&v, 1, 503, "a.b/c: stopping\n");
    v.st.state = KDP_PLUGIN_STOPPED;
    expect(&v, 1, 503, "a.b/c: stopped\n");
    v.st.superseded = true;
    expect(&v, 1, 503, "a.b/c: superseded by a newer instance\n");
    /* one line per plugin that is not up */
    kdp__pview two[3] = {view("x.y/one", KDP_PLUGIN_REGISTERED),
                         view("x.y/two", KDP_PLUGIN_WAITING),
                         view("x.y/three", KDP_PLUGIN_STOPPED)};
    expect(two, 3, 503, "x.y/two: waiting for kubelet.sock\nx.y/three: stopped\n");
    two[1].st.state = KDP_PLUGIN_REGISTERED;
    two[2].st.state = KDP_PLUGIN_REGISTERED;
    expect(two, 3, 200, "ok\n");
}

/* A plugin with a DRA driver: each side said on its own; up when both
 * are (DRA only: that side alone, never "waiting for kubelet.sock"). */
static void test_healthz_two_sides(void **state)
{
    (void)state;
    kdp__pstats_init(&stats);
    kdp__pview v = view("a.b/c", KDP_PLUGIN_STARTING);
    v.ext = true;
    v.ext_name = "DRA";
    v.device_plugin = true;
    v.ext_up = true;
    strcpy(v.ext_why, "registered; 4 devices published in 1 slices");
    v.st.dir_error = -ENOENT;
    expect(&v, 1, 503,
           "a.b/c: device-plugin side: device-plugin directory unusable: No such file or "
           "directory; DRA side: registered; 4 devices published in 1 slices\n");
    v.st.state = KDP_PLUGIN_REGISTERED;
    expect(&v, 1, 200, "ok\n");
    v.ext_up = false;
    strcpy(v.ext_why, "registered; slices not published: HTTP 403");
    expect(&v, 1, 503,
           "a.b/c: device-plugin side: registered; DRA side: registered; slices not published: "
           "HTTP 403\n");
    /* DRA only: the plugin's state follows the DRA registration */
    v.device_plugin = false;
    v.st.state = KDP_PLUGIN_WAITING;
    strcpy(v.ext_why, "not registered: waiting for the kubelet's plugin watcher");
    expect(&v, 1, 503, "a.b/c: DRA: not registered: waiting for the kubelet's plugin watcher\n");
    v.ext_up = true;
    v.st.state = KDP_PLUGIN_REGISTERED;
    expect(&v, 1, 200, "ok\n");
    v.st.state = KDP_PLUGIN_STOPPED;
    expect(&v, 1, 503, "a.b/c: stopped\n");
}

static void test_page(void **state)
{
    (void)state;
    kdp__pstats_init(&stats);
    kdp__count(&stats.allocations[0], 3);
    kdp__count(&stats.allocations[3], 2);                                  /* INVALID_ARGUMENT */
    kdp__hist_observe(&stats.callbacks[KDP__OP_ALLOCATE], 150000);         /* 0.15 ms */
    kdp__hist_observe(&stats.callbacks[KDP__OP_ALLOCATE], 20000000000ULL); /* 20 s: +Inf */
    kdp__count(&stats.health_to[1], 1);
    kdp__pview v = view("a.b/c", KDP_PLUGIN_REGISTERED);
    v.healthy = 3;
    v.unhealthy = 1;
    v.streams = 1;
    v.st.message_bytes = 120;
    v.st.restarts = 2;
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    kdp__builtins_render(&v, 1, &w);
    char *s = kdp__expfmt_take(&w, NULL);
    const char *want[] = {
        "kdp_build_info{version=\"" KDP_VERSION_STRING "\"} 1\n",
        "# TYPE kdp_plugin_up gauge\nkdp_plugin_up{resource=\"a.b/c\"} 1\n",
        "kdp_devices{resource=\"a.b/c\",health=\"healthy\"} 3\n",
        "kdp_devices{resource=\"a.b/c\",health=\"unhealthy\"} 1\n",
        "kdp_allocations_total{resource=\"a.b/c\",code=\"OK\"} 3\n",
        "kdp_allocations_total{resource=\"a.b/c\",code=\"INVALID_ARGUMENT\"} 2\n",
        "kdp_callback_duration_seconds_bucket{resource=\"a.b/c\",op=\"allocate\",le=\"0.0001\"} "
        "0\n",
        "kdp_callback_duration_seconds_bucket{resource=\"a.b/c\",op=\"allocate\",le=\"0.00025\"} "
        "1\n",
        "kdp_callback_duration_seconds_bucket{resource=\"a.b/c\",op=\"allocate\",le=\"10\"} 1\n",
        "kdp_callback_duration_seconds_bucket{resource=\"a.b/c\",op=\"allocate\",le=\"+Inf\"} 2\n",
        "kdp_callback_duration_seconds_sum{resource=\"a.b/c\",op=\"allocate\"} 20.00015\n",
        "kdp_callback_duration_seconds_count{resource=\"a.b/c\",op=\"allocate\"} 2\n",
        "kdp_kubelet_restarts_total{resource=\"a.b/c\"} 2\n",
        "kdp_listandwatch_streams{resource=\"a.b/c\"} 1\n",
        "kdp_listandwatch_last_message_bytes{resource=\"a.b/c\"} 120\n",
        "kdp_listandwatch_message_limit_bytes{resource=\"a.b/c\"} 4194304\n",
        "kdp_health_transitions_total{resource=\"a.b/c\",to=\"unhealthy\"} 1\n",
        "# TYPE kdp_callback_duration_seconds histogram\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!strstr(s, want[i])) {
            fail_msg("not on the page: %s\n--- page ---\n%s", want[i], s);
        }
    }
    /* ops never called have no histogram series; codes never seen no series */
    assert_null(strstr(s, "op=\"list\",le="));
    assert_null(strstr(s, "code=\"INTERNAL\""));
    /* no probe op: no probe families */
    assert_null(strstr(s, "kdp_probe"));
    free(s);
}

static void test_probe_families(void **state)
{
    (void)state;
    kdp__pstats_init(&stats);
    static kdp__probe_stats ps; /* zero: all-zero atomics are zero-valued */
    kdp__probe_count(&ps.probes, 12);
    kdp__probe_count(&ps.failures, 4);
    kdp__probe_count(&ps.down_answers, 1);
    kdp__pview v[2] = {view("a.b/probed", KDP_PLUGIN_REGISTERED),
                       view("a.b/plain", KDP_PLUGIN_REGISTERED)};
    v[0].probe = &ps;
    v[0].st.probe_unhealthy = 2;
    v[0].st.probe_down = true;
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    kdp__builtins_render(v, 2, &w);
    char *s = kdp__expfmt_take(&w, NULL);
    const char *want[] = {
        "# TYPE kdp_probes_total counter\nkdp_probes_total{resource=\"a.b/probed\"} 12\n",
        "kdp_probe_failures_total{resource=\"a.b/probed\"} 4\n",
        "kdp_probe_down_answers_total{resource=\"a.b/probed\"} 1\n",
        "kdp_probe_rounds_skipped_total{resource=\"a.b/probed\"} 0\n",
        "# TYPE kdp_probe_unhealthy_devices gauge\n",
        "kdp_probe_unhealthy_devices{resource=\"a.b/probed\"} 2\n",
        "kdp_probe_down{resource=\"a.b/probed\"} 1\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!strstr(s, want[i])) {
            fail_msg("not on the page: %s\n--- page ---\n%s", want[i], s);
        }
    }
    /* only the plugin with a probe op has probe series */
    assert_null(strstr(s, "kdp_probes_total{resource=\"a.b/plain\"}"));
    free(s);
}

/* An extension's families: its header once, every plugin's samples under
 * it, whichever plugins have it (a plugin without one in between). */
static const kdp__ext_family fams[2] = {{"x_up", "gauge", "Up."}, {"x_total", "counter", "T."}};

static void ext_metrics(void *ud, size_t f, const char *resource, kdp__expfmt *w)
{
    kdp__label l = {"resource", resource};
    kdp__expfmt_sample_u64(w, fams[f].name, &l, 1, (uint64_t)(uintptr_t)ud * 10 + f);
}

static void test_ext_families(void **state)
{
    (void)state;
    kdp__pstats_init(&stats);
    kdp__ext_metrics e1 = {
        .families = fams, .n_families = 2, .write = ext_metrics, .ud = (void *)1};
    kdp__ext_metrics e2 = e1;
    e2.ud = (void *)2;
    kdp__pview v[3] = {view("a/one", KDP_PLUGIN_REGISTERED), view("a/none", KDP_PLUGIN_REGISTERED),
                       view("a/two", KDP_PLUGIN_REGISTERED)};
    v[0].ext_metrics = e1;
    v[2].ext_metrics = e2;
    kdp__expfmt w;
    kdp__expfmt_init(&w);
    kdp__builtins_render(v, 3, &w);
    char *s = kdp__expfmt_take(&w, NULL);
    const char *want = "# HELP x_up Up.\n# TYPE x_up gauge\nx_up{resource=\"a/one\"} 10\n"
                       "x_up{resource=\"a/two\"} 20\n# HELP x_total T.\n# TYPE x_total counter\n"
                       "x_total{resource=\"a/one\"} 11\nx_total{resource=\"a/two\"} 21\n";
    if (!strstr(s, want)) {
        fail_msg("not on the page:\n%s--- page ---\n%s", want, s);
    }
    assert_null(strstr(strstr(s, "# HELP x_up") + 1, "# HELP x_up")); /* once */
    free(s);
}

static void test_op_of(void **state)
{
    (void)state;
    assert_int_equal(kdp__op_of("list"), KDP__OP_LIST);
    assert_int_equal(kdp__op_of("allocate"), KDP__OP_ALLOCATE);
    assert_int_equal(kdp__op_of("preferred allocation"), KDP__OP_PREFERRED);
    assert_int_equal(kdp__op_of("pre-start"), KDP__OP_PRESTART);
    assert_int_equal(kdp__op_of("refresh"), KDP__OP_REFRESH);
    assert_int_equal(kdp__op_of("destroy"), KDP__OP_DESTROY);
    assert_int_equal(kdp__op_of("probe"), KDP__OP_PROBE);
    assert_int_equal(kdp__op_of("zzz"), KDP__OP_N);
    assert_int_equal(kdp__op_of(NULL), KDP__OP_N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthz_reasons),
        cmocka_unit_test(test_healthz_two_sides),
        cmocka_unit_test(test_page),
        cmocka_unit_test(test_probe_families),
        cmocka_unit_test(test_ext_families),
        cmocka_unit_test(test_op_of),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
