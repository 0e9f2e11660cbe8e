/* SPDX-License-Identifier: MIT */
/*
 * claimrec: a claim as kdp keeps it, one JSON object (jansson) from the
 * API server's answer to the checkpoint:
 *   {"namespace", "name", "uid", "devices": [{"request", "device",
 *    "device_id", "share_id"?, "admin_access", "configs": [JSON text],
 *    "default_node"?: {"path", "host_path", "permissions"},
 *    after the prepare: "nodes": [{"path", "host_path"?, "permissions"?}],
 *    "env": ["K=V"], "cdi_ids": [...]}]}
 * The prepare op sees it as a kdp_dra_claim (a view borrowing its strings),
 * its answer is merged in, and the claim's CDI spec is written from it: the
 * same spec again after a reboot wiped the CDI directory.
 */
#ifndef KDP_DRA_CLAIMREC_H
#define KDP_DRA_CLAIMREC_H

#include <jansson.h>
#include <stdbool.h>

#include "kdp_dra.h"

/* A kdp_dra_claim over a record (valid while the record is). */
typedef struct kdp__dra_claimview {
    kdp_dra_claim claim;
    kdp_dra_alloc *allocs;
    const char **configs; /* every device's, one array */
} kdp__dra_claimview;

/* Returns 0, -EINVAL (not a record), -ENOMEM. */
int kdp__dra_claimview_init(kdp__dra_claimview *v, const json_t *rec);
void kdp__dra_claimview_done(kdp__dra_claimview *v);

/* Merges the prepare op's answer (pr: kdp_dra_prepared, one entry per
 * device) into rec: nodes, env and the CDI IDs (kind=<uid>-<device> first
 * when the device has nodes or variables, <uid>-<device>_<index> for a
 * device named again in the claim, kept as "cdi_name"; a device with none
 * of the three gets its default node). Returns 0 or -ENOMEM. */
int kdp__dra_rec_merge(json_t *rec, const kdp_dra_prepared *pr, const char *kind);
/* Writes rec's CDI spec as <dir>/<file> (removed when no device has edits).
 * Returns what kdp__cdi_write_file returns. */
int kdp__dra_rec_write_cdi(const json_t *rec, const char *dir, const char *file, const char *kind);
/* Whether some device of rec has edits in kdp's spec. */
bool kdp__dra_rec_has_cdi(const json_t *rec);

#endif
