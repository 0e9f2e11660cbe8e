/* SPDX-License-Identifier: MIT */
/*
 * plugin: what other modules may know of a kdp_plugin (its struct is
 * plugin_int.h, for plugin.c and white-box tests only): its loop and
 * context, and things attached to it that it frees with itself.
 */
#ifndef KDP_PLUGIN_H
#define KDP_PLUGIN_H

#include <stdbool.h>

#include "base/list.h"
#include "kdp.h"
#include "plugin/devices.h"
#include "plugin/jobs.h"
#include "plugin/probe.h"
#include "plugin/pstats.h"
#include "plugin/reg.h"
#include "runtime/loop.h"

/* Something that lives as long as a plugin at most (a hot-plug watch, a
 * DRA driver): kdp_plugin_free() calls free for each one still attached.
 * free returns true when a callback it ran is still running after its wait
 * (the plugin's memory is then kept for it, as for the plugin's own). */
typedef struct kdp__attachment {
    kdp__link link;
    bool (*free)(struct kdp__attachment *a);
} kdp__attachment;

void kdp__plugin_attach(kdp_plugin *p, kdp__attachment *a);
void kdp__plugin_detach(kdp__attachment *a);
kdp__loop *kdp__plugin_loop(const kdp_plugin *p);
kdp_ctx *kdp__plugin_ctx(const kdp_plugin *p);

/* ---- extensions: a second API served from the plugin's device table (the
 * DRA driver, src/dra), which plugs in here without src/plugin knowing it.
 * Loop thread, every hook. ---- */
typedef struct kdp__plugin_ext {
    /* The plugin's table runs (on: listed, its probes and rescans running)
     * or stops (off: the plugin's stop). The extension stands alone: the
     * device-plugin side's restarts, or its directory or socket that
     * cannot be served yet, never turn it off nor hold it back. */
    void (*serving)(void *ud, bool on);
    /* What kdp__plugin_devices() holds changed (IDs or health: the same
     * changes the kubelet's ListAndWatch is sent). */
    void (*devices_changed)(void *ud);
    /* Whether the extension's side is up, and why into why (for /healthz,
     * the up metric): "registered, ..." or what it waits for. NULL: up. */
    bool (*health)(void *ud, char *why, size_t cap);
    /* What a health check (kdp_ops.probe) said of device id (NULL: every
     * device) and why ("" for OK): see plugin/prober.h. NULL: not told. */
    void (*probe_note)(void *ud, const char *id, kdp__probe_note note, const char *why);
    /* Its families on the /metrics page and their writer (pstats.h); its
     * ud is this ud. Unset: none. */
    kdp__ext_metrics metrics;
    const char *name; /* "DRA", for those lines */
    void *ud;
} kdp__plugin_ext;

/* A plugin that never serves the device-plugin API (kdp_dra_driver_new):
 * cfg as for kdp_plugin_new (NULL: all defaults) without the fields of that
 * API (refused, logged), name in their place (the logs, the metrics'
 * resource label, kdp_plugin_resource). The extension it is made for must
 * then be set with device_plugin false. Returns as kdp_plugin_new. */
int kdp__plugin_new_alone(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops, void *ud,
                          const char *name, kdp_plugin **ret);
/* Hooks ext (copied) to p. With device_plugin false, p runs its table,
 * list op, probes and metrics but neither registers with the device-plugin
 * API nor creates its socket or lock file there (the registration strategy
 * "none": the extension reports the plugin's registration state through
 * kdp__plugin_report_registration). Before the plugin runs, on the thread
 * that made it. Returns 0, -EINVAL, -EALREADY (one extension per plugin),
 * -EBUSY (the plugin has started). */
int kdp__plugin_set_ext(kdp_plugin *p, const kdp__plugin_ext *ext, bool device_plugin);
/* The extension's ud, or NULL if none. Any thread (set before the run). */
void *kdp__plugin_ext_ud(const kdp_plugin *p);
/* With the strategy "none": where the extension's own registration stands
 * (loop thread; kept, and told to the lifecycle while the plugin serves;
 * without effect with the device-plugin registration on). */
void kdp__plugin_report_registration(kdp_plugin *p, kdp__reg_state st, const char *why);
/* The table the kubelet is served (loop thread; valid until the loop runs
 * again). */
const kdp__devtab *kdp__plugin_devices(const kdp_plugin *p);
/* The plugin's worker jobs (callbacks with a deadline, plugin/jobs.h). */
kdp__jobs *kdp__plugin_jobs(kdp_plugin *p);
/* The kubelet root and the instance (NULL: none) the plugin was made with. */
const char *kdp__plugin_kubelet_root(const kdp_plugin *p);
const char *kdp__plugin_instance(const kdp_plugin *p);

#endif
