/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the ResourceClaim reader (src/k8s/claims.c), which
 * reads whatever the API server answers at prepare. The input is JSON text
 * (jansson decodes it; non-JSON inputs stop there). Oracle, abort()s on any
 * breach: a success has every device of the driver "d.example.com" (and of
 * pool "p" on the second pass), with non-empty request and device, and
 * configs that are JSON again, a share ID a UUID and what a share
 * consumed quantities, binding lists that pass the API's rules (k8s/
 * bindcheck), a status entry that is a JSON object; the PreBind check is
 * -1, 0 or 1 and 1 for a device without binding conditions; a failure has
 * a why line; a deep copy equals the original; -ESTALE only when the UID
 * was given.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "k8s/bindcheck.h"
#include "k8s/claimbind.h"
#include "k8s/claims.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "fuzz_claim: check failed: %s (line %d)\n", #x, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_binding(json_t *obj, const kdp__claim_dev *d)
{
    kdp__bind_err e;
    CHECK(d->n_bind <= KDP__BIND_MAX && d->n_bind_fail <= KDP__BIND_MAX);
    CHECK(!(d->n_bind + d->n_bind_fail) ||
          kdp__bindcheck((const char *const *)d->bind, d->n_bind,
                         (const char *const *)d->bind + d->n_bind, d->n_bind_fail, &e) == 0);
    int st = kdp__claim_binding_state(obj, "d.example.com", d->pool, d->device, d->bind, d->n_bind,
                                      d->n_bind_fail);
    CHECK(st >= -1 && st <= 1);
    CHECK(d->n_bind + d->n_bind_fail || st == 1);
    if (d->status) {
        json_t *back = json_loads(d->status, 0, NULL);
        CHECK(json_is_object(back) && json_object_size(back) > 0);
        CHECK(!json_object_get(back, "driver") && !json_object_get(back, "device"));
        json_decref(back);
    }
}

static void check_claim(json_t *obj, const kdp__claim *c, const char *pool)
{
    CHECK(c->ns && c->name && c->uid);
    for (size_t i = 0; i < c->n_devs; i++) {
        const kdp__claim_dev *d = &c->devs[i];
        CHECK(d->request && *d->request && d->device && *d->device && d->pool);
        CHECK(!pool || strcmp(d->pool, pool) == 0);
        CHECK(!d->share_id || strlen(d->share_id) == 36); /* a UUID: it names CDI devices */
        for (size_t j = 0; j < d->n_consumed; j++) {
            CHECK(d->consumed[j].name && *d->consumed[j].name && d->consumed[j].value);
            CHECK(kdp__k8snames_quantity(d->consumed[j].value, NULL) == 0);
        }
        check_binding(obj, d);
        for (size_t j = 0; j < d->n_configs; j++) {
            json_error_t e;
            json_t *back = json_loads(d->configs[j], JSON_DECODE_ANY, &e);
            CHECK(back != NULL);
            json_decref(back);
        }
    }
    kdp__claim *dup = kdp__claim_dup(c);
    CHECK(dup && dup->n_devs == c->n_devs && strcmp(dup->uid, c->uid) == 0);
    for (size_t i = 0; i < c->n_devs; i++) {
        CHECK(dup->devs[i].n_configs == c->devs[i].n_configs);
        CHECK(strcmp(dup->devs[i].device, c->devs[i].device) == 0);
        CHECK(dup->devs[i].n_consumed == c->devs[i].n_consumed);
        CHECK(dup->devs[i].n_bind == c->devs[i].n_bind);
        CHECK(dup->devs[i].n_bind_fail == c->devs[i].n_bind_fail);
        CHECK(!c->devs[i].status || strcmp(dup->devs[i].status, c->devs[i].status) == 0);
    }
    kdp__claim_free(dup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t e;
    json_t *obj = json_loadb((const char *)data, size, JSON_DECODE_ANY, &e);
    if (!obj) {
        return 0;
    }
    const char *pools[] = {NULL, "p"};
    const char *uids[] = {NULL, "u"};
    for (int k = 0; k < 2; k++) {
        kdp__claim *c = NULL;
        char why[512] = "";
        int r = kdp__claim_parse(obj, "d.example.com", pools[k], uids[k], &c, why, sizeof(why));
        if (r == 0) {
            CHECK(c != NULL);
            check_claim(obj, c, pools[k]);
            kdp__claim_free(c);
        } else {
            CHECK(c == NULL && *why);
            CHECK(r == -EINVAL || r == -ENODATA || r == -ENOMEM || (r == -ESTALE && uids[k]));
        }
    }
    json_decref(obj);
    return 0;
}
