/* SPDX-License-Identifier: MIT */
/* kdp-generic's running resources: one kdp plugin per resource of the
 * configuration, its callbacks (kdp's worker thread), and starting,
 * stopping and matching a new configuration (the loop thread). */
#ifndef KDP_GENERIC_PLUGINS_H
#define KDP_GENERIC_PLUGINS_H

#include <kdp.h>

#include "config.h"
#include "scan.h"

typedef struct gres gres; /* a running resource */

/* For the DRA callbacks (dra.c), any thread: the resource's configuration
 * (fixed while it runs), and copies, under its lock, of a device of its
 * latest scan and of the shared nodes found then. Return 0, -ENOENT (no
 * such device), -ENOMEM. */
const gen_resource *gen_res_config(const gres *g);
int gen_res_copy_dev(gres *g, const char *id, gen_dev *out);
/* *out: the shared nodes, NULL-terminated (free with kdp_strv_free). */
int gen_res_copy_shared(gres *g, char ***out);

/* The running set, and what each of its plugins starts with: set by the
 * caller before gen_plugins_apply(), borrowed. */
typedef struct gen_plugins {
    kdp_ctx *ctx;                  /* the context the plugins run on */
    const char *dp_dir;            /* --device-plugin-dir, $KDP_DEVICE_PLUGIN_DIR or the root's */
    const char *root;              /* --kubelet-root; NULL = $KDP_KUBELET_ROOT, else the default */
    kdp_registration registration; /* --registration; 0 = $KDP_REGISTRATION, else kubelet.sock */
    gres *running;                 /* NULL when none runs */
} gen_plugins;

/* Makes the running set match c: unchanged resources stay, the others are
 * stopped first (their sockets may be reused; a CDI spec goes unless the
 * successor writes it), then the new ones start (by the context's next
 * dispatch); one that cannot start is logged and left out. c's resources
 * are taken: c is still freed by the caller. */
void gen_plugins_apply(gen_plugins *ps, gen_config *c);
/* Stops and frees every running plugin (their CDI specs stay). */
void gen_plugins_free(gen_plugins *ps);

#endif
