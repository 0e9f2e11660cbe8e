/* SPDX-License-Identifier: MIT */
/*
 * prepared: the kdp_dra_prepared builder the prepare op fills (kdp_dra.h):
 * per device of the claim (and for the whole claim: KDP_DRA_CLAIM), the
 * device nodes, variables and mounts of kdp's CDI spec for the claim; per
 * device, CDI IDs of the author's own specs and the device's status for the
 * claim (dra/devstatus.h: JSON text).
 */
#ifndef KDP_DRA_PREPARED_H
#define KDP_DRA_PREPARED_H

#include <stddef.h>

#include "dra/edits.h"
#include "kdp_dra.h"

/* The most CDI IDs of the author's per device. */
#define KDP__DRA_PREPARED_MAX 64U

typedef struct kdp__dra_pdev {
    kdp__dra_edits edits; /* its device in kdp's CDI spec for the claim */
    char **cdi_ids;
    size_t n_cdi_ids;
    char *status; /* the status.devices entry's own fields, JSON text; NULL: none */
} kdp__dra_pdev;

struct kdp_dra_prepared {
    kdp__dra_pdev *devs;
    size_t n;
    kdp__dra_edits claim; /* KDP_DRA_CLAIM's: the whole claim's */
};

/* An empty answer for a claim of n devices. Returns 0 or -ENOMEM. */
int kdp__dra_prepared_init(kdp_dra_prepared *r, size_t n);
void kdp__dra_prepared_done(kdp_dra_prepared *r);

#endif
