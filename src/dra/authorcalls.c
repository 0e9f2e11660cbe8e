/* SPDX-License-Identifier: MIT */
/*
 * authorcalls: what an author tells a running DRA driver, from any thread:
 * its own taints, the pool's counter sets, a device to describe again, a
 * prepared device's status. Each hands over to the part that owns it
 * (dra/taints, counters, descs, the checkpoint and statusw).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "dra/devstatus.h"
#include "dra/driver_int.h"
#include "dra/metadata.h"
#include "kdp_dra.h"

/* The plugin's driver, or NULL with a line naming call and why (*err:
 * -EINVAL for no plugin, -ENOENT for DRA not on). */
static kdp__dra *dra_of(kdp_plugin *p, const char *call, int *err)
{
    kdp__dra *d = p ? kdp__plugin_ext_ud(p) : NULL;
    if (!d) {
        log_error("%s: %s", call,
                  p ? "DRA is not on (kdp_plugin_enable_dra)" : "the plugin (p) is NULL");
        *err = p ? -ENOENT : -EINVAL;
    }
    return d;
}

KDP_EXPORT int kdp_plugin_set_dra_taints(kdp_plugin *p, const char *id, const kdp_dra_taint *taints,
                                         size_t n)
{
    int err = 0;
    kdp__dra *d = dra_of(p, "kdp_plugin_set_dra_taints", &err);
    return d ? kdp__dra_taints_set(&d->taints, id, taints, n) : err;
}

KDP_EXPORT int kdp_plugin_set_dra_counter_sets(kdp_plugin *p, const kdp_dra_counter_set *sets,
                                               size_t n)
{
    int err = 0;
    kdp__dra *d = dra_of(p, "kdp_plugin_set_dra_counter_sets", &err);
    return d ? kdp__dra_counters_set(&d->counters, sets, n) : err;
}

KDP_EXPORT int kdp_plugin_redescribe_dra(kdp_plugin *p, const char *id)
{
    int err = 0;
    kdp__dra *d = dra_of(p, "kdp_plugin_redescribe_dra", &err);
    kdp_health h;
    if (d && id && kdp_plugin_get_health(p, id, &h) < 0) {
        log_error("kdp_plugin_redescribe_dra: no device %s in the plugin's table", id);
        return -ENOENT;
    }
    return d ? kdp__dra_descs_redescribe(&d->descs, id) : err;
}

typedef struct status_set {
    const char *device, *share_id;
    char *json;
    const kdp__dra_md *md;
    char why[400];
} status_set;

/* Whether the two statuses' networkData differ (the device metadata's
 * generation then goes up). */
static bool network_changed(const char *a, const char *b)
{
    json_t *ja = a ? json_loads(a, 0, NULL) : NULL;
    json_t *jb = b ? json_loads(b, 0, NULL) : NULL;
    json_t *na = json_object_get(ja, "networkData");
    json_t *nb = json_object_get(jb, "networkData");
    bool changed = (na || nb) && !(na && nb && json_equal(na, nb));
    json_decref(ja);
    json_decref(jb);
    return changed;
}

/* A new status of a device whose claim has device metadata: the files
 * again, one generation up when the network data changed. */
static int status_metadata(status_set *ss, kdp__dra_rec *rec, const char *old, const char *now)
{
    if (rec->md_gen == 0 || !network_changed(old, now)) {
        return 0;
    }
    rec->md_gen++;
    return kdp__dra_md_write(ss->md, rec, ss->why, sizeof(ss->why));
}

/* The record's device gets the status (1: changed; 0: the same). */
static int set_dev_status(kdp__dra_rec *rec, void *ud)
{
    status_set *ss = ud;
    for (size_t i = 0; i < rec->n_devs; i++) {
        kdp__dra_rdev *dv = &rec->devs[i];
        bool share =
            dv->share_id ? ss->share_id && strcmp(dv->share_id, ss->share_id) == 0 : !ss->share_id;
        if (strcmp(dv->device, ss->device) != 0 || !share) {
            continue;
        }
        if (dv->status && strcmp(dv->status, ss->json) == 0) {
            return 0;
        }
        char *old = dv->status;
        dv->status = ss->json;
        ss->json = NULL;
        int r = status_metadata(ss, rec, old, dv->status);
        if (r < 0) {
            ss->json = dv->status; /* the record unchanged */
            dv->status = old;
            rec->md_gen--;
            return r;
        }
        free(old);
        return 1;
    }
    return -ENODEV;
}

/* The status of device/share in claim_uid's record, recorded; a copy of
 * the record into *rec when it changed. Logs what it refuses. */
static int record_status(kdp__dra *d, const char *claim_uid, const char *device,
                         const char *share_id, const kdp_dra_device_status *st, kdp__dra_rec **rec)
{
    char why[300];
    status_set ss = {device, share_id, NULL, &d->env->md, ""};
    int r = kdp__dra_devstatus_json(st, (int64_t)time(NULL), &ss.json, why, sizeof(why));
    if (r == -EINVAL) {
        log_error("kdp_plugin_set_dra_device_status: claim %s, device %s: %s", claim_uid, device,
                  why);
    }
    if (r == 0) {
        r = kdp__ckpt_modify(d->ckpt, claim_uid, set_dev_status, &ss, rec);
    }
    if (r == -ENOENT) { /* not prepared: a claim waiting for its binding conditions? */
        r = kdp__dra_binds_status(d, claim_uid, device, share_id, ss.json);
    }
    free(ss.json);
    if (r == -ENOENT) {
        log_error("kdp_plugin_set_dra_device_status: no prepared claim %s, nor one waiting for "
                  "its binding conditions",
                  claim_uid);
    } else if (r == -ENODEV) {
        log_error("kdp_plugin_set_dra_device_status: no device %s in claim %s", device, claim_uid);
        r = -ENOENT;
    } else if (r < 0 && ss.why[0]) {
        log_error("kdp_plugin_set_dra_device_status: claim %s: %s", claim_uid, ss.why);
    }
    return r;
}

KDP_EXPORT int kdp_plugin_set_dra_device_status(kdp_plugin *p, const char *claim_uid,
                                                const char *device, const char *share_id,
                                                const kdp_dra_device_status *st)
{
    int err = 0;
    kdp__dra *d = dra_of(p, "kdp_plugin_set_dra_device_status", &err);
    if (d && (!claim_uid || !device)) {
        log_error("kdp_plugin_set_dra_device_status: the claim UID or the device is NULL");
        return -EINVAL;
    }
    if (!d) {
        return err;
    }
    kdp__dra_rec *rec = NULL;
    int r = record_status(d, claim_uid, device, share_id, st, &rec);
    return r < 0 || !rec ? r : kdp__statusw_post(&d->statusw, rec);
}
