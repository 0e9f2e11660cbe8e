/* SPDX-License-Identifier: MIT */
/* api_discover: kdp__api_discover (api.h), on the client's public calls:
 * GET /apis/<group> and the first wanted version the server serves, or a
 * line naming what it serves and the Kubernetes release needed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/api.h"

#define WHY_MAX 1024

struct discover {
    kdp__api *a;
    kdp__api_discover_cb done;
    void *ud;
    char group[128];
    char wanted[8][32];
    size_t n;
};

static void discover_done(int err, long code, json_t *obj, const char *why, void *ud)
{
    struct discover *d = ud;
    char line[WHY_MAX];
    if (err == -ENOENT) {
        snprintf(line, sizeof(line),
                 "the API server at %s does not serve %s (GET /apis/%s: 404): DRA needs "
                 "Kubernetes 1.32 or later with the %s API enabled (1.34+: on by default)",
                 kdp__api_server(d->a), d->group, d->group, d->group);
        d->done(-ENOTSUP, NULL, line, d->ud);
        return;
    }
    if (err < 0) {
        d->done(err, NULL, why, d->ud);
        return;
    }
    (void)code;
    json_t *versions = json_object_get(obj, "versions");
    char served[256] = "";
    for (size_t w = 0; w < d->n; w++) {
        size_t i;
        json_t *v;
        json_array_foreach(versions, i, v)
        {
            const char *name = json_string_value(json_object_get(v, "version"));
            if (name && strcmp(name, d->wanted[w]) == 0) {
                d->done(0, name, NULL, d->ud);
                return;
            }
        }
    }
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "version"));
        size_t used = strlen(served);
        if (name && used < sizeof(served)) {
            snprintf(served + used, sizeof(served) - used, "%s%s", used ? ", " : "", name);
        }
    }
    char want[300] = "";
    for (size_t w = 0; w < d->n; w++) {
        size_t used = strlen(want);
        snprintf(want + used, sizeof(want) - used, "%s%s", w ? ", " : "", d->wanted[w]);
    }
    snprintf(line, sizeof(line),
             "the API server at %s serves %s in version(s) %s only; kdp needs one of %s "
             "(resource.k8s.io/v1beta1: Kubernetes 1.32+, v1beta2: 1.33+, v1: 1.34+): "
             "upgrade the cluster or enable the version (--runtime-config)",
             kdp__api_server(d->a), d->group, *served ? served : "(none)", want);
    d->done(-ENOTSUP, NULL, line, d->ud);
}

int kdp__api_discover(kdp__api *a, const char *group, const char *const *wanted,
                      kdp__api_discover_cb done, void *ud, kdp__api_req **ret)
{
    if (!a || !group || !*group || strlen(group) >= 128 || strchr(group, '/') || !wanted ||
        !wanted[0] || !done) {
        return -EINVAL;
    }
    struct discover *d = calloc(1, sizeof(*d));
    if (!d) {
        return -ENOMEM;
    }
    d->a = a;
    d->done = done;
    d->ud = ud;
    snprintf(d->group, sizeof(d->group), "%s", group);
    for (; d->n < 8 && wanted[d->n]; d->n++) {
        snprintf(d->wanted[d->n], sizeof(d->wanted[0]), "%s", wanted[d->n]);
    }
    char path[160];
    snprintf(path, sizeof(path), "/apis/%s", group);
    kdp__api_req *c = NULL;
    int r =
        kdp__api_call_bounded(a, "GET", path, NULL, KDP__API_BOUND_DISCOVER, discover_done, d, &c);
    if (r < 0) {
        free(d);
        return r;
    }
    kdp__api_req_own(c, d); /* freed with the call; done runs later, never in here */
    if (ret) {
        *ret = c;
    }
    return 0;
}
