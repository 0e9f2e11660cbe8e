/* SPDX-License-Identifier: MIT */
/* drametrics: the DRA driver's families on /metrics (see driver_int.h). */
#include <stdio.h>

#include "dra/driver_int.h"
#include "k8s/api.h"

enum {
    F_REGISTERED,
    F_CLAIMS,
    F_DURATION,
    F_PREPARED,
    F_SHARES,
    F_PUBLISHED,
    F_GENERATION,
    F_SLICES,
    F_DEVICES,
    F_WRITES,
    F_FAILURES,
    F_API,
    F_N
};

const kdp__ext_family kdp__dra_families[F_N] = {
    [F_REGISTERED] = {"kdp_dra_registered", "gauge",
                      "1 while the kubelet has the DRA driver's registration."},
    [F_CLAIMS] = {"kdp_dra_claims_total", "counter",
                  "Claims of the kubelet's NodePrepareResources and NodeUnprepareResources calls "
                  "answered, by op and result (ok, error)."},
    [F_DURATION] = {"kdp_dra_call_duration_seconds", "histogram",
                    "Time from a NodePrepareResources or NodeUnprepareResources call to its "
                    "answer, by op."},
    [F_PREPARED] = {"kdp_dra_prepared_claims", "gauge",
                    "Claims prepared on the node (the checkpoint's records)."},
    [F_SHARES] = {"kdp_dra_prepared_shares", "gauge",
                  "Shares of devices (consumable capacity) the prepared claims hold."},
    [F_PUBLISHED] = {"kdp_dra_slices_published", "gauge",
                     "1 when the API server has the devices last set (all of the pool's slices "
                     "written)."},
    [F_GENERATION] = {"kdp_dra_pool_generation", "gauge", "The pool's generation."},
    [F_SLICES] = {"kdp_dra_slices", "gauge", "ResourceSlices of the pool."},
    [F_DEVICES] = {"kdp_dra_slice_devices", "gauge", "Devices in the pool's slices."},
    [F_WRITES] = {"kdp_dra_slice_writes_total", "counter",
                  "Creates, updates and deletes of the pool's slices that the API server took."},
    [F_FAILURES] = {"kdp_dra_slice_failures_total", "counter",
                    "Failures publishing the slices, by reason (discovery, node, list, write, "
                    "conflict, watch, start)."},
    [F_API] = {"kdp_dra_api_requests_total", "counter",
               "Requests to the API server, by verb (WATCH for a watch) and HTTP status (0: no "
               "answer)."},
};
const size_t kdp__dra_n_families = F_N;

static const char *const ops[2] = {"prepare", "unprepare"};

static void one(kdp__expfmt *w, const char *name, const kdp__label *l, uint64_t v)
{
    kdp__expfmt_sample_u64(w, name, l, 2, v);
}

static void calls(kdp__dra *d, size_t f, kdp__label *l, kdp__expfmt *w)
{
    const kdp__dra_svc_stats *st = &d->claimsvc.stats;
    const char *name = kdp__dra_families[f].name;
    for (int op = 0; op < 2; op++) {
        l[2] = (kdp__label){"op", ops[op]};
        if (f == F_DURATION) {
            kdp__expfmt_histogram(w, name, l, 3, kdp__dra_svc_bounds, st->buckets[op],
                                  KDP__DRA_SVC_BOUNDS, st->seconds[op]);
            continue;
        }
        l[3] = (kdp__label){"result", "ok"};
        kdp__expfmt_sample_u64(w, name, l, 4, st->claims_ok[op]);
        l[3] = (kdp__label){"result", "error"};
        kdp__expfmt_sample_u64(w, name, l, 4, st->claims_failed[op]);
    }
}

static void api_requests(kdp__dra *d, const kdp__label *base, kdp__expfmt *w)
{
    kdp__api_stats st;
    if (!kdp__dra_api_get_stats(d->api, NULL, &st)) {
        return;
    }
    for (size_t i = 0; i < st.requests.n; i++) {
        char code[8];
        snprintf(code, sizeof(code), "%d", st.requests.v[i].code);
        kdp__label l[4] = {base[0], base[1], {"verb", st.requests.v[i].verb}, {"code", code}};
        kdp__expfmt_sample_u64(w, kdp__dra_families[F_API].name, l, 4, st.requests.v[i].n);
    }
}

void kdp__dra_metrics(void *ud, size_t f, const char *resource, kdp__expfmt *w)
{
    kdp__dra *d = ud;
    kdp__label l[4] = {{"resource", resource}, {"driver", d->conf.driver}};
    const char *name = kdp__dra_families[f].name;
    kdp__slices_status sl;
    bool api = f >= F_PUBLISHED && f <= F_FAILURES && kdp__dra_api_get_stats(d->api, &sl, NULL);
    switch (f) {
    case F_REGISTERED:
        pthread_mutex_lock(&d->mu);
        one(w, name, l, d->st.registered);
        pthread_mutex_unlock(&d->mu);
        break;
    case F_CLAIMS:
    case F_DURATION:
        calls(d, f, l, w);
        break;
    case F_PREPARED:
        one(w, name, l, kdp__ckpt_count(d->ckpt));
        break;
    case F_SHARES:
        one(w, name, l, kdp__ckpt_count_shares(d->ckpt));
        break;
    case F_API:
        api_requests(d, l, w);
        break;
    default:
        break;
    }
    if (!api) {
        return; /* no API server: no slice series */
    }
    if (f == F_PUBLISHED || f == F_GENERATION || f == F_SLICES || f == F_DEVICES || f == F_WRITES) {
        uint64_t v[] = {[F_PUBLISHED] = sl.published,
                        [F_GENERATION] = sl.generation,
                        [F_SLICES] = sl.slices,
                        [F_DEVICES] = sl.devices,
                        [F_WRITES] = sl.writes};
        one(w, name, l, v[f]);
    }
    for (size_t i = 0; f == F_FAILURES && i < KDP__SR_NFAIL; i++) {
        l[2] = (kdp__label){"reason", kdp__sr_fail_names[i]};
        kdp__expfmt_sample_u64(w, name, l, 3, sl.failures[i]);
    }
}
