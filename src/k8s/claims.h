/* SPDX-License-Identifier: MIT */
/*
 * claims: a ResourceClaim read at prepare (resource.k8s.io v1, v1beta2 or
 * v1beta1: status.allocation has one shape in all three). The allocation's
 * results are filtered to this driver and pool; each keeps this driver's
 * opaque configuration that applies to its request.
 *
 * Threading: loop thread (kdp__claim_get); kdp__claim_parse is pure.
 */
#ifndef KDP_K8S_CLAIMS_H
#define KDP_K8S_CLAIMS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "k8s/api.h"
#include "kdp_dra.h"

/* The most results and configs read from one claim (the API allows 32
 * requests and 32 configs per claim; kdp bounds what it copies). */
#define KDP__CLAIM_MAX_DEVICES 256
#define KDP__CLAIM_MAX_CONFIGS 64
/* The longest claim UID taken (the DRA side takes the same: its UIDs name
 * files). */
#define KDP__CLAIM_UID_MAX 128
/* consumedCapacity holds a device's capacities: at most 32 (the API's
 * bound on attributes and capacities). */
#define KDP__CLAIM_MAX_CONSUMED 32

/* Set by the ResourceClaim controller on a claim it made from a template. */
#define KDP__CLAIM_POD_CLAIM_ANNOTATION "resource.kubernetes.io/pod-claim-name"

/* One device allocated to the claim from this driver's pool. */
typedef struct kdp__claim_dev {
    char *request;  /* "gpu", or "gpu/small" for a subrequest */
    char *pool;     /* the pool (this node's) */
    char *device;   /* the device's name in the slice */
    char *share_id; /* NULL unless shared (v1, 1.35+): a lower-case UUID */
    /* consumedCapacity (a shared device's): qualified names, quantities */
    kdp_dra_quantity *consumed;
    size_t n_consumed;
    bool admin_access;
    /* This driver's opaque parameters (JSON text) that apply to request:
     * the DeviceClass's (source FromClass) first, then the claim's
     * (FromClaim), each in list order. */
    char **configs;
    size_t n_configs;
    /* The result's bindingConditions (n_bind of them) then its
     * bindingFailureConditions (n_bind_fail; KEP-5007), as the scheduler
     * copied them from the slice: checked with k8s/bindcheck's rules. */
    char **bind;
    size_t n_bind;
    size_t n_bind_fail;
    /* This driver's entry for the device (and share) in the claim's
     * status.devices: its own fields (conditions, data, networkData) as
     * JSON text, NULL if none. */
    char *status;
} kdp__claim_dev;

typedef struct kdp__claim {
    char *ns;
    char *name;
    char *uid;
    /* The pod's name for a claim made from a template (the annotation
     * KDP__CLAIM_POD_CLAIM_ANNOTATION: pod.spec.resourceClaims[].name, a
     * DNS label: not checked here), NULL for a claim made by itself. */
    char *pod_claim;
    kdp__claim_dev *devs;
    size_t n_devs;
} kdp__claim;

/* Reads a ResourceClaim object: metadata (namespace, name, uid, the
 * pod-claim-name annotation) and
 * status.allocation.devices (results for driver, and for pool unless pool
 * is NULL; config). When uid is not NULL, the claim's must equal it.
 * Returns 0 with *ret (kdp__claim_free it), or -errno with a line in why:
 * -ESTALE (another UID: a newer claim of the same name), -ENODATA (not
 * allocated), -EINVAL (malformed: why names the field), -ENOMEM. A claim
 * with no result for this driver is not an error (n_devs 0). */
int kdp__claim_parse(json_t *obj, const char *driver, const char *pool, const char *uid,
                     kdp__claim **ret, char *why, size_t why_len);
void kdp__claim_free(kdp__claim *c);
/* A deep copy (NULL on -ENOMEM). */
kdp__claim *kdp__claim_dup(const kdp__claim *c);

/* done(0, claim, NULL, ud) or done(-errno, NULL, why, ud); the claim is
 * valid during done only (kdp__claim_dup to keep it). */
typedef void (*kdp__claim_done_cb)(int err, const kdp__claim *c, const char *why, void *ud);

/* GET /apis/resource.k8s.io/<version>/namespaces/<ns>/resourceclaims/<name>
 * and parse it. done's err: those of kdp__claim_parse, -ENOENT (the claim is
 * gone), and the API's (api.h: -EACCES, -EAGAIN, transport ...). Returns
 * 0, -EINVAL (a bad version, namespace or name: not DNS names) or the
 * api's errors; *ret cancels it (kdp__api_cancel). */
int kdp__claim_get(kdp__api *a, const char *version, const char *driver, const char *pool,
                   const char *ns, const char *name, const char *uid, kdp__claim_done_cb done,
                   void *ud, kdp__api_req **ret);

#endif
