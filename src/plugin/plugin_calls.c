/* SPDX-License-Identifier: MIT */
/* plugin_calls: the public calls on a made plugin (kdp.h) that hand over to
 * its parts: the device setters and readers (the table's shared half, any
 * thread), rescan, stop, the callback's error text, the status, the pods,
 * the fixed attributes. Part of the plugin module (plugin_int.h); plugin.c
 * makes, wires and frees the parts. */
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "base/log.h"
#include "plugin/plugin_int.h"

KDP_EXPORT int kdp_plugin_query_pods(kdp_plugin *p, kdp_pods_fn done, void *ud)
{
    if (!p || !done) {
        return -EINVAL;
    }
    kdp__podres_req req = {.kind = KDP__PODRES_LIST,
                           .socket = p->podres_socket,
                           .resource = p->resource,
                           .replicas = p->replicas};
    return kdp__podres_queue_add(p->podres, &req, done, ud);
}

KDP_EXPORT int kdp_plugin_get_pods(kdp_plugin *p, unsigned timeout_ms, kdp_pods **ret)
{
    if (!p || !ret) {
        return -EINVAL;
    }
    if (atomic_load(&p->ctx->owner) == (int)gettid()) {
        log_error("%s: kdp_plugin_get_pods() from the thread running the context would block "
                  "its loop: use kdp_plugin_query_pods() there",
                  p->resource);
        return -EDEADLK;
    }
    kdp__podres_req req = {.kind = KDP__PODRES_LIST,
                           .socket = p->podres_socket,
                           .resource = p->resource,
                           .replicas = p->replicas,
                           .timeout_ms = timeout_ms};
    return kdp__podres_run(&req, ret);
}

KDP_EXPORT int kdp_plugin_run(kdp_plugin *p)
{
    return p ? kdp_ctx_run(p->ctx) : -EINVAL;
}

KDP_EXPORT int kdp_plugin_set_devices(kdp_plugin *p, const kdp_device *devs, size_t n)
{
    if (!p || (!devs && n)) {
        return -EINVAL;
    }
    return kdp__tabshared_set(&p->table.shared, devs, n);
}

KDP_EXPORT int kdp_plugin_set_device(kdp_plugin *p, const kdp_device *d)
{
    if (!p || !d) {
        return -EINVAL;
    }
    return kdp__tabshared_put(&p->table.shared, d);
}

KDP_EXPORT int kdp_plugin_remove_device(kdp_plugin *p, const char *id)
{
    if (!p || !id) {
        return -EINVAL;
    }
    return kdp__tabshared_remove(&p->table.shared, id);
}

KDP_EXPORT int kdp_plugin_set_health(kdp_plugin *p, const char *id, kdp_health health)
{
    if (!p || !id || (health != KDP_HEALTHY && health != KDP_UNHEALTHY)) {
        return -EINVAL;
    }
    return kdp__tabshared_set_health(&p->table.shared, id, health);
}

KDP_EXPORT int kdp_plugin_get_health(kdp_plugin *p, const char *id, kdp_health *ret)
{
    if (!p || !id || !ret) {
        return -EINVAL;
    }
    return kdp__tabshared_get_health(&p->table.shared, id, ret);
}

KDP_EXPORT int kdp_plugin_get_device_data(kdp_plugin *p, const char *id, void **ret)
{
    if (!p || !id || !ret) {
        return -EINVAL;
    }
    return kdp__tabshared_get_data(&p->table.shared, id, ret);
}

KDP_EXPORT int kdp_plugin_get_devices(kdp_plugin *p, kdp_device **ret, size_t *ret_n)
{
    if (!p || !ret || !ret_n) {
        return -EINVAL;
    }
    return kdp__tabshared_get_devices(&p->table.shared, ret, ret_n);
}

KDP_EXPORT int kdp_plugin_rescan(kdp_plugin *p)
{
    if (!p) {
        return -EINVAL;
    }
    kdp__table_rescan(&p->table);
    return 0;
}

KDP_EXPORT int kdp_plugin_stop(kdp_plugin *p)
{
    if (!p) {
        return -EINVAL;
    }
    if (p->own_ctx) {
        return kdp_ctx_stop(p->ctx); /* also ends kdp_plugin_run() */
    }
    atomic_store(&p->stop_wanted, true);
    kdp__wakeup_signal(p->stop_wake);
    return 0;
}

KDP_EXPORT void kdp_plugin_set_error(kdp_plugin *p, const char *fmt, ...)
{
    kdp__job *cur = kdp__worker_current();
    if (!p || !fmt || !cur) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    kdp__job_set_error(cur, fmt, ap);
    va_end(ap);
}

KDP_EXPORT int kdp_plugin_get_status(kdp_plugin *p, kdp_plugin_status *ret)
{
    if (!p || !ret) {
        return -EINVAL;
    }
    static const kdp_plugin_state states[] = {
        [KDP__LC_IDLE] = KDP_PLUGIN_IDLE,
        [KDP__LC_STARTING] = KDP_PLUGIN_STARTING,
        [KDP__LC_WAITING] = KDP_PLUGIN_WAITING,
        [KDP__LC_REGISTERING] = KDP_PLUGIN_REGISTERING,
        [KDP__LC_REGISTERED] = KDP_PLUGIN_REGISTERED,
        [KDP__LC_STOPPING] = KDP_PLUGIN_STOPPING,
        [KDP__LC_STOPPED] = KDP_PLUGIN_STOPPED,
    };
    kdp_plugin_status st = *kdp__status_lock(&p->status);
    kdp__status_unlock(&p->status);
    st.state = states[kdp__lifecycle_state(&p->lc)];
    st.stuck_callbacks = kdp__jobs_stuck(&p->jobs);
    st.probe_unhealthy =
        (unsigned)atomic_load_explicit(&p->prober.stats.held_unhealthy, memory_order_relaxed);
    st.probe_down = atomic_load_explicit(&p->prober.stats.down, memory_order_relaxed);
    *ret = st;
    return 0;
}

KDP_EXPORT const char *kdp_plugin_resource(const kdp_plugin *p)
{
    return p ? p->resource : NULL;
}

KDP_EXPORT void *kdp_plugin_userdata(const kdp_plugin *p)
{
    return p ? p->ud : NULL;
}

KDP_EXPORT kdp_ctx *kdp_plugin_get_ctx(kdp_plugin *p)
{
    return p ? p->ctx : NULL;
}
