/* SPDX-License-Identifier: MIT */
/*
 * ext: the seam a second API served from a plugin's device table plugs into
 * (plugin.h, kdp__plugin_ext; the DRA driver in src/dra): a service without
 * methods that tells the extension when serving begins and ends, and the
 * registration strategy "none" (no device-plugin registration: the
 * extension reports where its own registration stands).
 */
#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "plugin/plugin_int.h"

#define OF_SVC(s) KDP__CONTAINER_OF(s, kdp_plugin, ext_svc)
#define OF_REG(r) KDP__CONTAINER_OF(r, kdp_plugin, reg_none)

/* ---- the service: no methods, the serving hook ---- */

static size_t ext_methods(kdp__svc *s, kdp__method *out, size_t cap)
{
    (void)s;
    (void)out;
    (void)cap;
    return 0;
}

static void ext_serving(kdp__svc *s, bool on)
{
    kdp_plugin *p = OF_SVC(s);
    if (p->ext.serving) {
        p->ext.serving(p->ext.ud, on);
    }
}

static void ext_expect_peer(kdp__svc *s, bool on)
{
    (void)s;
    (void)on;
}

static const kdp__svc_ops ext_svc_ops = {
    .name = "extension",
    .methods = ext_methods,
    .serving = ext_serving,
    .expect_peer = ext_expect_peer,
};

/* ---- the strategy "none" ---- */

static void none_start(kdp__reg *r)
{
    kdp_plugin *p = OF_REG(r);
    p->reg_none_active = true;
    if (!p->alone) { /* a plugin that could have served it: said */
        log_info("%s: no device-plugin registration (DRA only)", p->resource);
    }
    r->up.state(r->up.ud, KDP__REG_WAITING, "waiting for the extension's registration");
    if (p->ext_reg_state != KDP__REG_WAITING) {
        r->up.state(r->up.ud, p->ext_reg_state, "the extension's registration");
    }
}

static void none_stop(kdp__reg *r)
{
    OF_REG(r)->reg_none_active = false;
}

static void none_dir_event(kdp__reg *r, int what, const char *name)
{
    (void)r;
    (void)what;
    (void)name;
}

static bool none_same_peer(kdp__reg *r)
{
    (void)r;
    return true;
}

static const kdp__reg_ops none_ops = {
    .name = "none",
    .start = none_start,
    .stop = none_stop,
    .dir_event = none_dir_event,
    .same_peer = none_same_peer,
    .peer_gone = NULL,
};

/* ---- plugin.h ---- */

int kdp__plugin_set_ext(kdp_plugin *p, const kdp__plugin_ext *ext, bool device_plugin)
{
    if (!p || !ext) {
        return -EINVAL;
    }
    if (p->has_ext) {
        return -EALREADY;
    }
    if (p->alone && device_plugin) {
        return -EINVAL; /* made without it */
    }
    if (kdp__lifecycle_state(&p->lc) != KDP__LC_IDLE) {
        return -EBUSY;
    }
    p->ext_svc.ops = &ext_svc_ops;
    p->ext_svc.up = kdp__lifecycle_svc_up(&p->lc);
    int r = kdp__lifecycle_set_ext(&p->lc, &p->ext_svc);
    if (r == 0 && !device_plugin) {
        p->reg_none.ops = &none_ops;
        p->reg_none.up = kdp__lifecycle_reg_up(&p->lc);
        r = kdp__lifecycle_set_reg(&p->lc, &p->reg_none, true);
    }
    if (r < 0) {
        return r;
    }
    p->ext = *ext;
    p->has_ext = true;
    p->ext_device_plugin = device_plugin;
    return 0;
}

void *kdp__plugin_ext_ud(const kdp_plugin *p)
{
    return p && p->has_ext ? p->ext.ud : NULL;
}

void kdp__plugin_report_registration(kdp_plugin *p, kdp__reg_state st, const char *why)
{
    p->ext_reg_state = st; /* for the strategy's next start */
    if (p->reg_none_active && p->lc.cfg.reg == &p->reg_none) {
        p->reg_none.up.state(p->reg_none.up.ud, st, why);
    }
}

const kdp__devtab *kdp__plugin_devices(const kdp_plugin *p)
{
    return kdp__table_told(&p->table);
}

kdp__jobs *kdp__plugin_jobs(kdp_plugin *p)
{
    return &p->jobs;
}

const char *kdp__plugin_kubelet_root(const kdp_plugin *p)
{
    return p->kubelet_root;
}

const char *kdp__plugin_instance(const kdp_plugin *p)
{
    return p->instance;
}
