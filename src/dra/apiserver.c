/* SPDX-License-Identifier: MIT */
/*
 * apiserver: the DRA driver's API-server side (claims read at prepare,
 * slices published) through src/k8s. Placeholder until src/k8s's claims
 * and slices modules are in: no API server.
 */
#include <errno.h>
#include <stdlib.h>

#include "dra/dra_int.h"

int kdp__dra_api_new(kdp__dra *d, const char *kubeconfig, kdp__dra_api **ret)
{
    (void)d;
    (void)kubeconfig;
    *ret = NULL;
    return 0;
}

void kdp__dra_api_free(kdp__dra_api *a)
{
    (void)a;
}

void kdp__dra_api_serving(kdp__dra_api *a, bool on)
{
    (void)a;
    (void)on;
}

void *kdp__dra_api_get_claim(kdp__dra_api *a, const kdp_dra_claim_ref *ref,
                             kdp__dra_claim_cb cb, void *ud)
{
    (void)a;
    (void)ref;
    cb(ud, -ENOTCONN, "no API server", NULL);
    return NULL;
}

void kdp__dra_api_cancel(kdp__dra_api *a, void *handle)
{
    (void)a;
    (void)handle;
}

void kdp__dra_api_publish(kdp__dra_api *a)
{
    (void)a;
}
