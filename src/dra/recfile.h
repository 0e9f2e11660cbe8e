/* SPDX-License-Identifier: MIT */
/*
 * recfile: claim records (dra/claimrec.h) as the checkpoint file holds them,
 * JSON through jansson:
 *   {"namespace", "name", "uid", "boot_id", "prepared",
 *    "configs": [<each opaque config once, as JSON>],
 *    "devices": [{"request", "device", "device_id"?, "share_id"?,
 *                 "admin_access", "configs": [<indices>],
 *                 "default_node"?: {"path", "host_path"?, "permissions"?},
 *                 "nodes": [...], "env": ["K=V"],
 *                 "mounts"?: [{"host_path", "container_path", "read_only"}],
 *                 "cdi_ids": [...], "cdi_name"?}],
 *    "claim"?: {"cdi_name", "nodes", "env", "mounts"?}}
 * Version 1 records (every device with its own copy of each config as JSON
 * text, no boot ID) are read too: dra/checkpoint.h upgrades them.
 *
 * Pure; any thread.
 */
#ifndef KDP_DRA_RECFILE_H
#define KDP_DRA_RECFILE_H

#include <jansson.h>

#include "dra/claimrec.h"

/* r as JSON (a new reference), or NULL on -ENOMEM. */
json_t *kdp__recfile_to_json(const kdp__dra_rec *r);
/* A record from its JSON (version 1 or 2). Returns 0, -EINVAL (not a
 * record: why names the field) or -ENOMEM. */
int kdp__recfile_from_json(const json_t *o, int version, kdp__dra_rec **ret, char *why,
                           size_t why_len);

#endif
