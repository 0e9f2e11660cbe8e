/* SPDX-License-Identifier: MIT */
/*
 * plugin_int: the struct behind kdp_plugin: the parts a plugin is made of,
 * each with its own module, wired together by plugin.c (and reached by the
 * public calls of plugin_calls.c). For the plugin module and white-box
 * tests only; other modules use plugin.h.
 */
#ifndef KDP_PLUGIN_INT_H
#define KDP_PLUGIN_INT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/list.h"
#include "kdp.h"
#include "plugin/ctx.h"
#include "plugin/devplugin.h"
#include "plugin/handover.h"
#include "plugin/jobs.h"
#include "plugin/lifecycle.h"
#include "plugin/lockfile.h"
#include "plugin/pdir.h"
#include "plugin/plugin.h"
#include "plugin/podres.h"
#include "plugin/prober.h"
#include "plugin/pstats.h"
#include "plugin/reg_kubelet.h"
#include "plugin/reg_watcher.h"
#include "plugin/status.h"
#include "plugin/table.h"

struct kdp_plugin {
    kdp__member member; /* in the context */
    kdp_ctx *ctx;
    bool own_ctx;
    kdp_ops ops;
    void *ud;

    char *resource;
    char *socket_name;
    char *dir;
    char *socket_path;
    char *env_name;
    char *podres_socket; /* the kubelet root's PodResources socket */
    unsigned replicas;
    kdp__podres_queue *podres; /* kdp_plugin_query_pods() */

    kdp__status status;
    kdp__pstats pstats; /* the /metrics counters */
    kdp__jobs jobs;
    kdp__table table;
    kdp__prober prober;
    kdp__lockfile lock;
    kdp__pdir pdir;
    kdp__devplugin devplugin;
    kdp_registration regmode; /* KDP_REGISTRATION_KUBELET or _WATCHER */
    kdp__reg_kubelet reg;     /* the one of the two regmode says */
    kdp__reg_watcher watcher;
    kdp__handover handover;
    kdp__lifecycle lc;
    /* An extension (plugin.h: the DRA driver): its hooks, the service that
     * tells it of serving, and the strategy "none" when it asked for no
     * device-plugin registration (ext.c). */
    kdp__plugin_ext ext;
    kdp__svc ext_svc;
    kdp__reg reg_none;
    char *kubelet_root;
    char *instance;
    kdp__reg_state ext_reg_state; /* the extension's last report */
    int made;                     /* how far construction went (plugin.c: MADE_*) */
    bool has_ext;
    bool alone;             /* made without the device-plugin API (kdp__plugin_new_alone) */
    bool ext_device_plugin; /* with it, the device-plugin side is served too */
    bool reg_none_active;   /* between the strategy's start and stop */

    atomic_bool stop_wanted; /* kdp_plugin_stop, any thread */
    kdp__wakeup *stop_wake;
    kdp__link attached;    /* kdp__attachment: freed with the plugin */
    kdp_plugin *left_next; /* plugins kept for a callback left running */
};

#endif
