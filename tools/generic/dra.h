/* SPDX-License-Identifier: MIT */
/* kdp-generic's resources with a dra: section served as DRA drivers (the
 * build with libkdp-dra): each device described with the attributes
 * discovery knows and the entry's own, each claim prepared with the
 * device's nodes and the shared ones through CDI. */
#ifndef KDP_GENERIC_DRA_H
#define KDP_GENERIC_DRA_H

#include <errno.h>
#include <kdp.h>
#include <stdio.h>

#include "config.h"
#include "plugins.h"
#include "scan.h"

#ifdef KDP_GENERIC_DRA
/* Serves g's plugin p as the DRA driver of its resource (before the
 * context runs). Returns 0 or -errno (kdp logged why). */
int gen_dra_enable(kdp_plugin *p, gres *g);
/* --list: `, "dra": {"name", "attributes", "capacity"}` for device d of
 * r, as its ResourceSlice would hold it. */
void gen_dra_print(FILE *f, const gen_resource *r, const gen_dev *d);
#else
static inline int gen_dra_enable(kdp_plugin *p, gres *g)
{
    (void)p;
    (void)g;
    return -ENOTSUP; /* the configuration refuses dra: first */
}
static inline void gen_dra_print(FILE *f, const gen_resource *r, const gen_dev *d)
{
    (void)f;
    (void)r;
    (void)d;
}
#endif

#endif
