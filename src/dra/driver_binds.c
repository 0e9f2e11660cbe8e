/* SPDX-License-Identifier: MIT */
/*
 * driver_binds: the DRA driver's binding side (kdp_dra_ops.bind, KEP-5007):
 * its binds part fed by the API link's watch of the cluster's claims, its
 * bind ops run on the claim slots, its statuses written by statusw.
 */
#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "dra/driver_int.h"

static void inf_begin(void *ud)
{
    kdp__dra *d = ud;
    kdp__dra_binds_sync_begin(&d->binds);
}

static void inf_event(void *ud, const char *type, json_t *obj)
{
    kdp__dra *d = ud;
    kdp__dra_binds_event(&d->binds, type, obj);
}

static void inf_end(void *ud)
{
    kdp__dra *d = ud;
    kdp__dra_binds_sync_end(&d->binds);
}

static void inf_error(void *ud, int err, const char *why)
{
    kdp__dra *d = ud;
    if (err == -EACCES) {
        log_error("%s: cannot watch the cluster's ResourceClaims (for the bind op): %s: grant "
                  "list and watch on resourceclaims.resource.k8s.io",
                  d->conf.driver, why);
    } else {
        log_warn("%s: the watch of the cluster's ResourceClaims: %s", d->conf.driver, why);
    }
}

static void bound(void *ud, const char *uid, uint64_t seq, const char *err)
{
    kdp__dra *d = ud;
    kdp__dra_binds_ended(&d->binds, uid, seq, err);
}

/* The bind op on rec, its devices' kdp IDs found (loop thread: the
 * descriptions are the loop's). */
static int start_bind(void *ud, kdp__dra_rec *rec, uint64_t seq, bool unbind)
{
    kdp__dra *d = ud;
    for (size_t i = 0; i < rec->n_devs; i++) {
        const char *id = kdp__dra_descs_id_of(&d->descs, rec->devs[i].device);
        if (kdp__dra_rec_set(&rec->devs[i].device_id, id) < 0) {
            kdp__dra_rec_free(rec);
            return -ENOMEM;
        }
    }
    return kdp__dra_claims_add_bind(&d->claims, rec, seq, unbind, unbind ? NULL : bound, d);
}

static void write_claim(void *ud, kdp__dra_rec *rec)
{
    kdp__dra *d = ud;
    if (kdp__statusw_post(&d->statusw, rec) < 0) {
        log_error("%s: a claim's status is not written: too many writes wait", d->conf.driver);
    }
}

int kdp__dra_binds_make(kdp__dra *d)
{
    kdp__dra_binds_cfg bc = {.driver = d->conf.driver,
                             .pool = d->conf.node,
                             .start = start_bind,
                             .write = write_claim,
                             .unbind = d->ops.unbind != NULL,
                             .ud = d};
    int r = kdp__dra_binds_init(&d->binds, &bc);
    if (r < 0) {
        return r;
    }
    d->binds_on = true;
    kdp__inf_cbs cbs = {.sync_begin = inf_begin,
                        .event = inf_event,
                        .sync_end = inf_end,
                        .error = inf_error,
                        .ud = d};
    return kdp__dra_api_watch_claims(d->api, &cbs);
}

void kdp__dra_binds_prefill(kdp__dra *d, kdp__dra_rec *rec)
{
    if (d->binds_on) {
        kdp__dra_binds_fill(&d->binds, rec);
    }
}

int kdp__dra_binds_status(kdp__dra *d, const char *uid, const char *device, const char *share_id,
                          const char *json)
{
    if (!d->binds_on) {
        return -ENOENT;
    }
    kdp__dra_rec *rec = NULL;
    int r = kdp__dra_binds_set_status(&d->binds, uid, device, share_id, json, &rec);
    return r < 0 ? r : kdp__statusw_post(&d->statusw, rec);
}
