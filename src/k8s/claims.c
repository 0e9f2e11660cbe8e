/* SPDX-License-Identifier: MIT */
/* claims: a ResourceClaim read at prepare (see claims.h). */
#include "k8s/claims.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "k8s/claimbind.h"
#include "k8s/sharecheck.h"

static int say(char *why, size_t n, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int say(char *why, size_t n, int err, const char *fmt, ...)
{
    if (why && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return err;
}

static void dev_clear(kdp__claim_dev *d)
{
    free(d->request);
    free(d->pool);
    free(d->device);
    free(d->share_id);
    kdp__share_quantities_free(d->consumed, d->n_consumed);
    for (size_t i = 0; i < d->n_configs; i++) {
        free(d->configs[i]);
    }
    free(d->configs);
    for (size_t i = 0; i < d->n_bind + d->n_bind_fail; i++) {
        free(d->bind[i]);
    }
    free(d->bind);
    free(d->status);
}

void kdp__claim_free(kdp__claim *c)
{
    if (!c) {
        return;
    }
    for (size_t i = 0; i < c->n_devs; i++) {
        dev_clear(&c->devs[i]);
    }
    free(c->devs);
    free(c->ns);
    free(c->name);
    free(c->uid);
    free(c->pod_claim);
    free(c);
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (!s) {
        return NULL;
    }
    char *d = strdup(s);
    *oom |= !d;
    return d;
}

/* A deep copy of device s into t (zeroed); *oom set on a failure (what t
 * holds then is freed with it). */
static void dev_copy(kdp__claim_dev *t, const kdp__claim_dev *s, bool *oom)
{
    t->request = dup_or_null(s->request, oom);
    t->pool = dup_or_null(s->pool, oom);
    t->device = dup_or_null(s->device, oom);
    t->share_id = dup_or_null(s->share_id, oom);
    t->admin_access = s->admin_access;
    if (s->n_consumed) {
        t->consumed = kdp__share_quantities_dup(s->consumed, s->n_consumed);
        t->n_consumed = t->consumed ? s->n_consumed : 0;
        *oom |= !t->consumed;
    }
    t->configs = s->n_configs ? calloc(s->n_configs, sizeof(char *)) : NULL;
    *oom |= s->n_configs && !t->configs;
    for (size_t j = 0; !*oom && j < s->n_configs; j++) {
        t->configs[j] = dup_or_null(s->configs[j], oom);
        t->n_configs++;
    }
    size_t nb = s->n_bind + s->n_bind_fail;
    t->bind = nb ? calloc(nb, sizeof(char *)) : NULL;
    *oom |= nb && !t->bind;
    for (size_t j = 0; !*oom && j < nb; j++) {
        t->bind[j] = dup_or_null(s->bind[j], oom);
    }
    t->n_bind = t->bind ? s->n_bind : 0;
    t->n_bind_fail = t->bind ? s->n_bind_fail : 0;
    t->status = dup_or_null(s->status, oom);
}

kdp__claim *kdp__claim_dup(const kdp__claim *c)
{
    if (!c) {
        return NULL;
    }
    kdp__claim *d = calloc(1, sizeof(*d));
    if (!d) {
        return NULL;
    }
    bool oom = false;
    d->ns = dup_or_null(c->ns, &oom);
    d->name = dup_or_null(c->name, &oom);
    d->uid = dup_or_null(c->uid, &oom);
    d->pod_claim = dup_or_null(c->pod_claim, &oom);
    d->devs = c->n_devs ? calloc(c->n_devs, sizeof(*d->devs)) : NULL;
    oom |= c->n_devs && !d->devs;
    for (size_t i = 0; !oom && i < c->n_devs; i++) {
        d->n_devs++;
        dev_copy(&d->devs[i], &c->devs[i], &oom);
    }
    if (oom) {
        kdp__claim_free(d);
        return NULL;
    }
    return d;
}

/* A string member: required ones must be non-empty strings. */
static int get_str(json_t *o, const char *key, bool required, const char **ret)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *ret = NULL;
        return required ? -EINVAL : 0;
    }
    if (!json_is_string(v) || (required && json_string_length(v) == 0)) {
        return -EINVAL;
    }
    *ret = json_string_value(v);
    return 0;
}

/* Does a config's requests list apply to request r? */
static bool applies(json_t *requests, const char *r)
{
    if (json_array_size(requests) == 0) {
        return true;
    }
    size_t rlen = strcspn(r, "/");
    size_t i;
    json_t *v;
    json_array_foreach(requests, i, v)
    {
        const char *s = json_string_value(v);
        if (!s) {
            continue;
        }
        if (strcmp(s, r) == 0 || (!strchr(s, '/') && strlen(s) == rlen && !strncmp(s, r, rlen))) {
            return true;
        }
    }
    return false;
}

/* One config entry: checked; *mine when it is this driver's opaque one,
 * *from_class when the DeviceClass gave it. */
static int check_config(json_t *c, size_t i, const char *driver, bool *mine, bool *from_class,
                        char *why, size_t why_len)
{
    const char *source = NULL;
    const char *d = NULL;
    json_t *opaque = json_object_get(c, "opaque");
    json_t *reqs = json_object_get(c, "requests");
    if (!json_is_object(c) || get_str(c, "source", false, &source) < 0 ||
        (reqs && !json_is_null(reqs) && !json_is_array(reqs))) {
        return say(why, why_len, -EINVAL,
                   "status.allocation.devices.config[%zu] is malformed (source, requests)", i);
    }
    *mine = false;
    if (!opaque || json_is_null(opaque)) {
        return 0; /* another kind of configuration */
    }
    if (!json_is_object(opaque) || get_str(opaque, "driver", true, &d) < 0 ||
        !json_object_get(opaque, "parameters")) {
        return say(why, why_len, -EINVAL,
                   "status.allocation.devices.config[%zu].opaque needs driver and parameters", i);
    }
    *mine = strcmp(d, driver) == 0;
    *from_class = source && strcmp(source, "FromClass") == 0;
    return 0;
}

/* This driver's opaque configs, checked, in the order they apply: class
 * ones, then claim ones. */
static int check_configs(json_t *configs, const char *driver, json_t **ordered, size_t *n,
                         char *why, size_t why_len)
{
    if (configs && !json_is_null(configs) && !json_is_array(configs)) {
        return say(why, why_len, -EINVAL, "status.allocation.devices.config is not a list");
    }
    if (json_array_size(configs) > KDP__CLAIM_MAX_CONFIGS) {
        return say(why, why_len, -EINVAL,
                   "status.allocation.devices.config has more than %d entries",
                   KDP__CLAIM_MAX_CONFIGS);
    }
    *n = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        json_t *c;
        json_array_foreach(configs, i, c)
        {
            bool mine = false;
            bool from_class = false;
            int r = check_config(c, i, driver, &mine, &from_class, why, why_len);
            if (r < 0) {
                return r;
            }
            if (mine && from_class == (pass == 0)) {
                ordered[(*n)++] = c;
            }
        }
    }
    return 0;
}

/* consumedCapacity {name: quantity} into d, checked. */
static int add_consumed(kdp__claim_dev *d, json_t *cc, size_t idx, char *why, size_t why_len)
{
    if (!cc || json_is_null(cc)) {
        return 0;
    }
    if (!json_is_object(cc) || json_object_size(cc) > KDP__CLAIM_MAX_CONSUMED) {
        return say(why, why_len, -EINVAL,
                   "status.allocation.devices.results[%zu].consumedCapacity must be an object "
                   "of at most %d quantities",
                   idx, KDP__CLAIM_MAX_CONSUMED);
    }
    d->consumed = calloc(json_object_size(cc) + 1, sizeof(*d->consumed));
    if (!d->consumed) {
        return say(why, why_len, -ENOMEM, "out of memory reading the claim");
    }
    const char *name;
    json_t *v;
    json_object_foreach(cc, name, v)
    {
        const char *q = json_string_value(v);
        if (kdp__k8snames_qualified_name(name, NULL) < 0 || !q ||
            kdp__k8snames_quantity(q, NULL) < 0) {
            return say(why, why_len, -EINVAL,
                       "status.allocation.devices.results[%zu].consumedCapacity[%.80s] is not a "
                       "capacity name and a quantity",
                       idx, name);
        }
        kdp_dra_quantity *e = &d->consumed[d->n_consumed++];
        e->name = strdup(name);
        e->value = strdup(q);
        if (!e->name || !e->value) {
            return say(why, why_len, -ENOMEM, "out of memory reading the claim");
        }
    }
    return 0;
}

static int add_dev(kdp__claim *cl, json_t *r, size_t idx, json_t **configs, size_t n_configs,
                   char *why, size_t why_len)
{
    const char *request = NULL;
    const char *pool = NULL;
    const char *device = NULL;
    const char *share = NULL;
    const char *driver = NULL;
    json_t *admin = json_object_get(r, "adminAccess");
    if (get_str(r, "request", true, &request) < 0 || get_str(r, "driver", true, &driver) < 0 ||
        get_str(r, "pool", true, &pool) < 0 || get_str(r, "device", true, &device) < 0 ||
        get_str(r, "shareID", false, &share) < 0 ||
        (admin && !json_is_null(admin) && !json_is_boolean(admin))) {
        return say(why, why_len, -EINVAL,
                   "status.allocation.devices.results[%zu]: request, driver, pool and device "
                   "must be strings, adminAccess a boolean",
                   idx);
    }
    if (share && kdp__k8snames_uuid(share, NULL) < 0) {
        return say(why, why_len, -EINVAL,
                   "status.allocation.devices.results[%zu].shareID \"%.40s\" is not a "
                   "lower-case UUID",
                   idx, share);
    }
    if (!cl->devs) {
        return -EINVAL; /* sized for every result: not reached */
    }
    kdp__claim_dev *d = &cl->devs[cl->n_devs++];
    bool oom = false;
    d->request = dup_or_null(request, &oom);
    d->pool = dup_or_null(pool, &oom);
    d->device = dup_or_null(device, &oom);
    d->share_id = dup_or_null(share, &oom);
    d->admin_access = json_is_true(admin);
    int rc = add_consumed(d, json_object_get(r, "consumedCapacity"), idx, why, why_len);
    if (rc == 0) {
        rc = kdp__claim_read_binding(r, idx, &d->bind, &d->n_bind, &d->n_bind_fail, why, why_len);
    }
    if (rc < 0) {
        return rc; /* d is freed with the claim */
    }
    d->configs = n_configs ? calloc(n_configs, sizeof(char *)) : NULL;
    oom |= n_configs && !d->configs;
    for (size_t i = 0; !oom && i < n_configs; i++) {
        if (!applies(json_object_get(configs[i], "requests"), request)) {
            continue;
        }
        json_t *params = json_object_get(json_object_get(configs[i], "opaque"), "parameters");
        char *text = json_dumps(params, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) {
            oom = true;
            break;
        }
        d->configs[d->n_configs++] = text;
    }
    return oom ? say(why, why_len, -ENOMEM, "out of memory reading the claim") : 0;
}

/* The claim's results for driver (and pool, unless NULL) into cl. */
static int add_results(kdp__claim *cl, json_t *results, const char *driver, const char *pool,
                       json_t **configs, size_t n_configs, char *why, size_t why_len)
{
    size_t i;
    json_t *res;
    json_array_foreach(results, i, res)
    {
        const char *d = NULL;
        const char *p = NULL;
        if (!json_is_object(res) || get_str(res, "driver", true, &d) < 0 ||
            get_str(res, "pool", true, &p) < 0) {
            return say(why, why_len, -EINVAL,
                       "claim %s/%s: status.allocation.devices.results[%zu] has no driver or "
                       "pool",
                       cl->ns, cl->name, i);
        }
        if (strcmp(d, driver) != 0 || (pool && strcmp(p, pool) != 0)) {
            continue;
        }
        int r = add_dev(cl, res, i, configs, n_configs, why, why_len);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* The claim's metadata, UID checked. */
static int check_meta(json_t *obj, const char *uid, const char **ns, const char **name,
                      const char **cuid, const char **pod_claim, char *why, size_t why_len)
{
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(obj) || !json_is_object(meta) || get_str(meta, "name", true, name) < 0 ||
        get_str(meta, "namespace", true, ns) < 0 || get_str(meta, "uid", true, cuid) < 0) {
        return say(why, why_len, -EINVAL,
                   "the claim has no metadata.name, metadata.namespace or metadata.uid");
    }
    if (uid && strcmp(uid, *cuid) != 0) {
        return say(why, why_len, -ESTALE,
                   "claim %s/%s has UID %s, not %s: the claim was deleted and made again "
                   "(the kubelet asks for the old one)",
                   *ns, *name, *cuid, uid);
    }
    /* kept as it is (the device metadata checks it before it names a
     * directory); a value that is not a string is no annotation */
    json_t *ann = json_object_get(meta, "annotations");
    if (get_str(json_is_object(ann) ? ann : NULL, KDP__CLAIM_POD_CLAIM_ANNOTATION, false,
                pod_claim) < 0) {
        *pod_claim = NULL;
    }
    return 0;
}

int kdp__claim_parse(json_t *obj, const char *driver, const char *pool, const char *uid,
                     kdp__claim **ret, char *why, size_t why_len)
{
    if (!obj || !driver || !ret) {
        return say(why, why_len, -EINVAL, "no claim or no driver");
    }
    const char *ns = NULL;
    const char *name = NULL;
    const char *cuid = NULL;
    const char *pod_claim = NULL;
    int r = check_meta(obj, uid, &ns, &name, &cuid, &pod_claim, why, why_len);
    if (r < 0) {
        return r;
    }
    json_t *alloc = json_object_get(json_object_get(obj, "status"), "allocation");
    if (!alloc || json_is_null(alloc)) {
        return say(why, why_len, -ENODATA, "claim %s/%s is not allocated (no status.allocation)",
                   ns, name);
    }
    json_t *devices = json_object_get(alloc, "devices");
    json_t *results = json_object_get(devices, "results");
    if (!json_is_object(alloc) || (devices && !json_is_object(devices)) ||
        (results && !json_is_null(results) && !json_is_array(results))) {
        return say(why, why_len, -EINVAL,
                   "claim %s/%s: status.allocation.devices.results is not a list", ns, name);
    }
    if (json_array_size(results) > KDP__CLAIM_MAX_DEVICES) {
        return say(why, why_len, -EINVAL,
                   "claim %s/%s: status.allocation.devices.results has more than %d entries", ns,
                   name, KDP__CLAIM_MAX_DEVICES);
    }
    json_t *configs[KDP__CLAIM_MAX_CONFIGS];
    size_t n_configs = 0;
    r = check_configs(json_object_get(devices, "config"), driver, configs, &n_configs, why,
                      why_len);
    if (r < 0) {
        return r;
    }
    kdp__claim *cl = calloc(1, sizeof(*cl));
    if (!cl) {
        return -ENOMEM;
    }
    bool oom = false;
    cl->ns = dup_or_null(ns, &oom);
    cl->name = dup_or_null(name, &oom);
    cl->uid = dup_or_null(cuid, &oom);
    cl->pod_claim = dup_or_null(pod_claim, &oom);
    size_t nres = json_array_size(results);
    cl->devs = nres ? calloc(nres, sizeof(*cl->devs)) : NULL;
    r = oom || (nres && !cl->devs)
            ? -ENOMEM
            : add_results(cl, results, driver, pool, configs, n_configs, why, why_len);
    for (size_t i = 0; r == 0 && i < cl->n_devs; i++) { /* this driver's own entries */
        kdp__claim_dev *d = &cl->devs[i];
        bool nomem = false;
        d->status = kdp__claim_status_fields(obj, driver, d->pool, d->device, d->share_id, &nomem);
        r = nomem ? say(why, why_len, -ENOMEM, "out of memory reading the claim") : 0;
    }
    if (r < 0) {
        kdp__claim_free(cl);
        return r;
    }
    *ret = cl;
    return 0;
}

/* One allocation, freed with its request (kdp__api_req_own): a cancel
 * does not leak it. */
struct get {
    kdp__claim_done_cb done;
    void *ud;
    char driver[KDP__K8S_DRIVER_NAME_MAX + 1];
    char pool[KDP__K8S_DNS_SUBDOMAIN_MAX + 1];
    char uid[KDP__CLAIM_UID_MAX + 1];
    char ns[KDP__K8S_DNS_LABEL_MAX + 1];
    char name[KDP__K8S_DNS_SUBDOMAIN_MAX + 1];
    bool has_pool, has_uid;
};

static void get_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    (void)code;
    struct get *g = ud;
    char line[1024];
    if (err == -ENOENT) {
        say(line, sizeof(line), 0, "claim %s/%s is gone (deleted from the API server)", g->ns,
            g->name);
        g->done(err, NULL, line, g->ud);
    } else if (err < 0) {
        g->done(err, NULL, why, g->ud);
    } else {
        kdp__claim *c = NULL;
        err = kdp__claim_parse(obj, g->driver, g->has_pool ? g->pool : NULL,
                               g->has_uid ? g->uid : NULL, &c, line, sizeof(line));
        g->done(err, err < 0 ? NULL : c, err < 0 ? line : NULL, g->ud);
        kdp__claim_free(c);
    }
}

int kdp__claim_get(kdp__api *a, const char *version, const char *driver, const char *pool,
                   const char *ns, const char *name, const char *uid, kdp__claim_done_cb done,
                   void *ud, kdp__api_req **ret)
{
    if (!a || !version || !driver || !done || kdp__k8snames_dns_label(ns, NULL) < 0 ||
        kdp__k8snames_dns_subdomain(name, NULL) < 0 || kdp__k8snames_dns_label(version, NULL) < 0 ||
        (uid && strpbrk(uid, "/?#"))) {
        return -EINVAL;
    }
    if (strlen(driver) > KDP__K8S_DRIVER_NAME_MAX ||
        (pool && strlen(pool) > KDP__K8S_DNS_SUBDOMAIN_MAX) ||
        (uid && strlen(uid) > KDP__CLAIM_UID_MAX)) {
        return -EINVAL;
    }
    struct get *g = calloc(1, sizeof(*g));
    if (!g) {
        return -ENOMEM;
    }
    g->done = done;
    g->ud = ud;
    snprintf(g->driver, sizeof(g->driver), "%s", driver);
    snprintf(g->pool, sizeof(g->pool), "%s", pool ? pool : "");
    snprintf(g->uid, sizeof(g->uid), "%s", uid ? uid : "");
    g->has_pool = pool != NULL;
    g->has_uid = uid != NULL;
    snprintf(g->ns, sizeof(g->ns), "%s", ns);
    snprintf(g->name, sizeof(g->name), "%s", name);
    char path[512];
    snprintf(path, sizeof(path), "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims/%s",
             version, ns, name);
    kdp__api_req *req = NULL;
    int r = kdp__api_call_bounded(a, "GET", path, NULL, KDP__API_BOUND_OBJECT, get_done, g, &req);
    if (r < 0) {
        free(g);
        return r;
    }
    kdp__api_req_own(req, g);
    if (ret) {
        *ret = req;
    }
    return 0;
}
