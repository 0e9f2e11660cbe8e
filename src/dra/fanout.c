/* SPDX-License-Identifier: MIT */
/* fanout: what the DRA driver tells its parts of the plugin's table (see
 * driver_int.h). Loop thread. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/log.h"
#include "dra/driver_int.h"

/* What the health stream says of a device (docs/dra.md, "Health, taints
 * and the claim's status"): the author's Unhealthy as it is; the health
 * check's verdict with its reason, or Unknown when the check could not tell
 * (no answer in time, the health subsystem down); Unknown too while a
 * Healthy device's health subsystem is down (whatever kdp_config.probe_down
 * keeps for the device-plugin side). */
static void health_of(const kdp__dev *dev, const kdp__dra_desc *x, kdp__dra_hdev *out)
{
    bool unsure = x->note == KDP__NOTE_NO_ANSWER || x->note == KDP__NOTE_DOWN;
    out->message[0] = '\0';
    if (dev->author_health != KDP_HEALTHY) {
        out->health = KDP__DRA_UNHEALTHY;
        snprintf(out->message, sizeof(out->message), "the driver reports the device Unhealthy");
    } else if (dev->probe.bad) {
        out->health = unsure ? KDP__DRA_UNKNOWN : KDP__DRA_UNHEALTHY;
        snprintf(out->message, sizeof(out->message), "%s",
                 x->note == KDP__NOTE_OK ? "held Unhealthy until enough health checks in a row pass"
                                         : x->why);
    } else if (x->note == KDP__NOTE_DOWN) {
        out->health = KDP__DRA_UNKNOWN;
        snprintf(out->message, sizeof(out->message), "%s", x->why);
    } else {
        out->health = KDP__DRA_HEALTHY;
    }
}

/* The pool's devices with their health, to the health stream. */
void kdp__dra_tell_health(kdp__dra *d)
{
    if (d->conf.no_health) {
        return;
    }
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    kdp__dra_hdev *v = calloc(tab->n ? tab->n : 1, sizeof(*v));
    if (!v) {
        log_error("%s: out of memory for the health stream", d->conf.driver);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < tab->n; i++) {
        const char *name = kdp__dra_descs_name_of(&d->descs, tab->devs[i].id);
        if (name) {
            snprintf(v[m].name, sizeof(v[m].name), "%s", name);
            health_of(&tab->devs[i], kdp__dra_descs_find(&d->descs, tab->devs[i].id), &v[m++]);
        }
    }
    if (kdp__dra_health_set(&d->health, v, m) < 0) {
        log_error("%s: out of memory for the health stream", d->conf.driver);
    }
    free(v);
}

/* The published devices to the slices, an Unhealthy one tainted (the
 * scheduler then gives it to no claim that does not tolerate it), the
 * author's taints too: the descriptions as they are, the health as the
 * table has it now. */
void kdp__dra_publish(kdp__dra *d)
{
    enum { PER = KDP_DRA_MAX_TAINTS + 1 };
    const kdp__devtab *tab = kdp__plugin_devices(d->p);
    kdp__dra_descs_view v;
    if (kdp__dra_descs_view_init(&d->descs, &v) < 0) {
        log_error("%s: out of memory publishing the slices", d->conf.driver);
        return;
    }
    kdp__slice_taint *t = calloc(v.n ? v.n * PER : 1, sizeof(*t));
    if (!t) {
        log_error("%s: out of memory publishing the slices", d->conf.driver);
        kdp__dra_descs_view_done(&v);
        return;
    }
    int64_t now = (int64_t)time(NULL);
    const char *effect = kdp__dra_taints_effect(d->conf.unhealthy_taint);
    for (size_t i = 0; i < v.n; i++) {
        const char *id = kdp__dra_descs_id_of(&d->descs, v.devs[i].name);
        const kdp__dev *dev = id ? kdp__devtab_find(tab, id) : NULL;
        bool sick = dev && dev->health != KDP_HEALTHY;
        int64_t since = id ? kdp__dra_descs_health(&d->descs, id, sick, now) : 0;
        kdp__slice_taint *mine = &t[i * PER];
        size_t k = 0;
        if (sick && effect) {
            mine[k++] = (kdp__slice_taint){.key = d->conf.taint_key,
                                           .value = dev->probe.bad ? "health-check-failed"
                                                                   : "reported-unhealthy",
                                           .effect = effect,
                                           .time_added = since};
        }
        k += id ? kdp__dra_taints_get(&d->taints, id, mine + k, PER - k) : 0;
        v.devs[i].taints = k ? mine : NULL;
        v.devs[i].n_taints = k;
    }
    const kdp__dra_setv *sets = kdp__dra_counters_get(&d->counters);
    kdp__dra_api_publish(d->api, v.devs, v.n, sets->v, sets->n);
    free(t);
    kdp__dra_descs_view_done(&v);
}
