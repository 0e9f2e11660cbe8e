/* SPDX-License-Identifier: MIT */
#include "plugin/builtins.h"

#include <stdio.h>
#include <string.h>

#include "grpc/wire.h"
#include "kdp.h"
#include "plugin/probe.h"

static const double bounds[KDP__HIST_N] = KDP__HIST_BOUNDS;
static const char *const op_names[KDP__OP_N] = KDP__OP_NAMES;

/* Why a plugin in state st is not up. */
static void state_reason(const kdp__pview *v, char *why, size_t cap)
{
    const kdp_plugin_status *st = &v->st;
    switch (st->state) {
    case KDP_PLUGIN_IDLE:
        snprintf(why, cap, "not started");
        break;
    case KDP_PLUGIN_STARTING:
        if (st->dir_error) {
            snprintf(why, cap, "device-plugin directory unusable: %s", strerror(-st->dir_error));
        } else {
            snprintf(why, cap, "starting");
        }
        break;
    case KDP_PLUGIN_WAITING:
        if (v->watcher) {
            snprintf(why, cap, "waiting for the kubelet's plugin watcher (GetInfo)");
        } else {
            snprintf(why, cap, "waiting for %s", KDP_KUBELET_SOCKET);
        }
        break;
    case KDP_PLUGIN_REGISTERING:
        if (v->reg_error[0]) {
            snprintf(why, cap, "registration refused: %s", v->reg_error);
        } else {
            snprintf(why, cap, "registering");
        }
        break;
    case KDP_PLUGIN_STOPPING:
        snprintf(why, cap, "stopping");
        break;
    case KDP_PLUGIN_STOPPED:
    default:
        snprintf(why, cap, st->superseded ? "superseded by a newer instance" : "stopped");
        break;
    }
}

/* A plugin with a second API (a DRA driver): each side said on its own, up
 * when both are (the extension alone when it is the only side). */
static bool ext_up(const kdp__pview *v, char *why, size_t cap)
{
    const kdp_plugin_status *st = &v->st;
    bool live = st->state != KDP_PLUGIN_STOPPED && st->state != KDP_PLUGIN_STOPPING;
    if (!live) {
        state_reason(v, why, cap);
        return false;
    }
    bool dp_up = !v->device_plugin || st->state == KDP_PLUGIN_REGISTERED;
    char dp_why[300] = "registered";
    if (v->device_plugin && !dp_up) {
        state_reason(v, dp_why, sizeof(dp_why));
    }
    if (v->device_plugin) {
        snprintf(why, cap, "device-plugin side: %s; %s side: %s", dp_why, v->ext_name, v->ext_why);
    } else {
        snprintf(why, cap, "%s: %s", v->ext_name, v->ext_why);
    }
    return dp_up && v->ext_up;
}

bool kdp__builtins_up(const kdp__pview *v, char *why, size_t cap)
{
    const kdp_plugin_status *st = &v->st;
    if (v->ext) {
        bool up = ext_up(v, why, cap);
        if (!up && st->list_error) {
            size_t n = strlen(why);
            snprintf(why + n, cap - n, "; list op failing: %s", strerror(-st->list_error));
        }
        return up;
    }
    if (st->state == KDP_PLUGIN_REGISTERED) {
        snprintf(why, cap, "registered");
        return true;
    }
    state_reason(v, why, cap);
    /* a failing list op does not keep a plugin from serving (it serves the
     * last list, or none): said along with what does */
    bool live = st->state != KDP_PLUGIN_STOPPED && st->state != KDP_PLUGIN_STOPPING;
    if (st->list_error && live) {
        size_t n = strlen(why);
        snprintf(why + n, cap - n, "; list op failing: %s", strerror(-st->list_error));
    }
    return false;
}

int kdp__builtins_healthz(const kdp__pview *v, size_t n, kdp__expfmt *w)
{
    if (n == 0) {
        kdp__expfmt_raw(w, "no plugins\n", strlen("no plugins\n"));
        return 503;
    }
    int status = 200;
    char why[700];
    for (size_t i = 0; i < n; i++) {
        if (kdp__builtins_up(&v[i], why, sizeof(why))) {
            continue;
        }
        status = 503;
        char line[900];
        int len = snprintf(line, sizeof(line), "%s: %s\n", v[i].resource, why);
        kdp__expfmt_raw(w, line,
                        len < 0                       ? 0
                        : (size_t)len >= sizeof(line) ? sizeof(line) - 1
                                                      : (size_t)len);
    }
    if (status == 200) {
        kdp__expfmt_raw(w, "ok\n", 3);
    }
    return status;
}

typedef uint64_t (*getter)(const kdp__pview *v);

/* A family with one label (resource) and one series per plugin. */
static void per_plugin(kdp__expfmt *w, const kdp__pview *v, size_t n, const char *name,
                       const char *type, const char *help, getter get)
{
    kdp__expfmt_family(w, name, type, help);
    for (size_t i = 0; i < n; i++) {
        kdp__label l = {"resource", v[i].resource};
        kdp__expfmt_sample_u64(w, name, &l, 1, get(&v[i]));
    }
}

static uint64_t get_up(const kdp__pview *v)
{
    char why[8];
    return kdp__builtins_up(v, why, sizeof(why)) ? 1 : 0;
}

static uint64_t get_abandoned(const kdp__pview *v)
{
    return kdp__count_get(&v->stats->threads_abandoned);
}

static uint64_t get_stuck(const kdp__pview *v)
{
    return v->st.stuck_callbacks;
}

static uint64_t get_registrations(const kdp__pview *v)
{
    return kdp__count_get(&v->stats->registrations);
}

static uint64_t get_reg_failures(const kdp__pview *v)
{
    return kdp__count_get(&v->stats->registration_failures);
}

static uint64_t get_restarts(const kdp__pview *v)
{
    return v->st.restarts;
}

static uint64_t get_streams(const kdp__pview *v)
{
    return v->streams;
}

static uint64_t get_lw_messages(const kdp__pview *v)
{
    return kdp__count_get(&v->stats->lw_messages);
}

static uint64_t get_last_bytes(const kdp__pview *v)
{
    return v->st.message_bytes;
}

static uint64_t get_limit(const kdp__pview *v)
{
    (void)v;
    return KDP_MAX_LIST_MESSAGE;
}

static void devices(kdp__expfmt *w, const kdp__pview *v, size_t n)
{
    kdp__expfmt_family(w, "kdp_devices", "gauge",
                       "Physical devices in the plugin's table, by health.");
    for (size_t i = 0; i < n; i++) {
        kdp__label l[2] = {{"resource", v[i].resource}, {"health", "healthy"}};
        kdp__expfmt_sample_u64(w, "kdp_devices", l, 2, v[i].healthy);
        l[1].value = "unhealthy";
        kdp__expfmt_sample_u64(w, "kdp_devices", l, 2, v[i].unhealthy);
    }
}

static void allocations(kdp__expfmt *w, const kdp__pview *v, size_t n)
{
    kdp__expfmt_family(w, "kdp_allocations_total", "counter",
                       "Allocate RPCs answered, by gRPC status code.");
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < KDP__GRPC_CODES; c++) {
            uint64_t x = kdp__count_get(&v[i].stats->allocations[c]);
            if (x == 0 && c != 0) {
                continue; /* OK always; the others once they happen */
            }
            kdp__label l[2] = {{"resource", v[i].resource}, {"code", kdp__status_name(c)}};
            kdp__expfmt_sample_u64(w, "kdp_allocations_total", l, 2, x);
        }
    }
}

static void callbacks(kdp__expfmt *w, const kdp__pview *v, size_t n)
{
    kdp__expfmt_family(w, "kdp_callback_duration_seconds", "histogram",
                       "Time the author's callbacks took on the worker, by op.");
    for (size_t i = 0; i < n; i++) {
        for (int op = 0; op < KDP__OP_N; op++) {
            const kdp__hist *h = &v[i].stats->callbacks[op];
            uint64_t counts[KDP__HIST_N + 1];
            uint64_t total = 0;
            for (int b = 0; b <= KDP__HIST_N; b++) {
                counts[b] = kdp__count_get(&h->buckets[b]);
                total += counts[b];
            }
            if (total == 0) {
                continue; /* an op never called (or not implemented) */
            }
            kdp__label l[2] = {{"resource", v[i].resource}, {"op", op_names[op]}};
            double sum = (double)kdp__count_get(&h->sum_ns) / 1e9;
            kdp__expfmt_histogram(w, "kdp_callback_duration_seconds", l, 2, bounds, counts,
                                  KDP__HIST_N, sum);
        }
    }
    kdp__expfmt_family(w, "kdp_callback_deadline_exceeded_total", "counter",
                       "Callbacks that did not return within their deadline, by op.");
    for (size_t i = 0; i < n; i++) {
        for (int op = 0; op < KDP__OP_N; op++) {
            kdp__label l[2] = {{"resource", v[i].resource}, {"op", op_names[op]}};
            kdp__expfmt_sample_u64(w, "kdp_callback_deadline_exceeded_total", l, 2,
                                   kdp__count_get(&v[i].stats->deadline_exceeded[op]));
        }
    }
}

static void health(kdp__expfmt *w, const kdp__pview *v, size_t n)
{
    kdp__expfmt_family(w, "kdp_health_transitions_total", "counter",
                       "Devices whose health changed, by the health they changed to.");
    for (size_t i = 0; i < n; i++) {
        kdp__label l[2] = {{"resource", v[i].resource}, {"to", "healthy"}};
        kdp__expfmt_sample_u64(w, "kdp_health_transitions_total", l, 2,
                               kdp__count_get(&v[i].stats->health_to[0]));
        l[1].value = "unhealthy";
        kdp__expfmt_sample_u64(w, "kdp_health_transitions_total", l, 2,
                               kdp__count_get(&v[i].stats->health_to[1]));
    }
}

/* One counter or gauge of the health checks, for the plugins that have a
 * probe op. */
static void probe_family(kdp__expfmt *w, const kdp__pview *v, size_t n, const char *name,
                         const char *type, const char *help, getter get)
{
    bool any = false;
    for (size_t i = 0; i < n && !any; i++) {
        any = v[i].probe != NULL;
    }
    if (!any) {
        return;
    }
    kdp__expfmt_family(w, name, type, help);
    for (size_t i = 0; i < n; i++) {
        if (v[i].probe) {
            kdp__label l = {"resource", v[i].resource};
            kdp__expfmt_sample_u64(w, name, &l, 1, get(&v[i]));
        }
    }
}

static uint64_t get_probes(const kdp__pview *v)
{
    return kdp__probe_stat(&v->probe->probes);
}

static uint64_t get_probe_failures(const kdp__pview *v)
{
    return kdp__probe_stat(&v->probe->failures);
}

static uint64_t get_probe_down_answers(const kdp__pview *v)
{
    return kdp__probe_stat(&v->probe->down_answers);
}

static uint64_t get_probe_skipped(const kdp__pview *v)
{
    return kdp__probe_stat(&v->probe->skipped_rounds);
}

static uint64_t get_probe_held(const kdp__pview *v)
{
    return v->st.probe_unhealthy;
}

static uint64_t get_probe_down(const kdp__pview *v)
{
    return v->st.probe_down ? 1 : 0;
}

static void probes(kdp__expfmt *w, const kdp__pview *v, size_t n)
{
    probe_family(w, v, n, "kdp_probes_total", "counter",
                 "Health probes run (answered or past their deadline).", get_probes);
    probe_family(w, v, n, "kdp_probe_failures_total", "counter",
                 "Health probes that failed (deadline overruns included).", get_probe_failures);
    probe_family(w, v, n, "kdp_probe_down_answers_total", "counter",
                 "Health probes that said the health subsystem is down.", get_probe_down_answers);
    probe_family(w, v, n, "kdp_probe_rounds_skipped_total", "counter",
                 "Rounds of health probes skipped: callbacks stuck past their deadline.",
                 get_probe_skipped);
    probe_family(w, v, n, "kdp_probe_unhealthy_devices", "gauge",
                 "Devices the health probes hold Unhealthy.", get_probe_held);
    probe_family(w, v, n, "kdp_probe_down", "gauge",
                 "1 while the health subsystem is down (the last probe said so).", get_probe_down);
}

/* The extensions' families: each table once, the samples of every plugin
 * that has it under its header. */
static void ext_families(kdp__expfmt *w, const kdp__pview *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const kdp__ext_metrics *e = &v[i].ext_metrics;
        bool first = e->write != NULL;
        for (size_t j = 0; first && j < i; j++) {
            first = !v[j].ext_metrics.write || v[j].ext_metrics.families != e->families;
        }
        for (size_t f = 0; first && f < e->n_families; f++) {
            kdp__expfmt_family(w, e->families[f].name, e->families[f].type, e->families[f].help);
            for (size_t j = i; j < n; j++) {
                const kdp__ext_metrics *o = &v[j].ext_metrics;
                if (o->write && o->families == e->families) {
                    o->write(o->ud, f, v[j].resource, w);
                }
            }
        }
    }
}

void kdp__builtins_render(const kdp__pview *v, size_t n, kdp__expfmt *w)
{
    kdp__expfmt_family(w, "kdp_build_info", "gauge", "kdp's version; always 1.");
    kdp__label version = {"version", kdp_version()};
    kdp__expfmt_sample_u64(w, "kdp_build_info", &version, 1, 1);
    per_plugin(w, v, n, "kdp_plugin_up", "gauge",
               "1 while the plugin serves and is registered with the kubelet (as /healthz).",
               get_up);
    devices(w, v, n);
    allocations(w, v, n);
    callbacks(w, v, n);
    per_plugin(w, v, n, "kdp_callback_threads_abandoned_total", "counter",
               "Worker threads left in a callback past its deadline.", get_abandoned);
    per_plugin(w, v, n, "kdp_callback_threads_stuck", "gauge",
               "Callbacks past their deadline that have not returned yet.", get_stuck);
    per_plugin(w, v, n, "kdp_registrations_total", "counter", "Registrations the kubelet accepted.",
               get_registrations);
    per_plugin(w, v, n, "kdp_registration_failures_total", "counter",
               "Registrations refused by the kubelet or that could not be made.", get_reg_failures);
    per_plugin(w, v, n, "kdp_kubelet_restarts_total", "counter",
               "Restarts of the plugin's registration (kubelet restarts, socket deleted, stream "
               "ended).",
               get_restarts);
    per_plugin(w, v, n, "kdp_listandwatch_streams", "gauge", "Open ListAndWatch streams.",
               get_streams);
    per_plugin(w, v, n, "kdp_listandwatch_messages_total", "counter",
               "Device lists queued on ListAndWatch streams.", get_lw_messages);
    per_plugin(w, v, n, "kdp_listandwatch_last_message_bytes", "gauge",
               "Size of the device list message the kubelet is served.", get_last_bytes);
    per_plugin(w, v, n, "kdp_listandwatch_message_limit_bytes", "gauge",
               "The kubelet's limit on a ListAndWatch message (4 MiB).", get_limit);
    health(w, v, n);
    probes(w, v, n);
    ext_families(w, v, n);
}
