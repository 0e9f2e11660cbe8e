/* SPDX-License-Identifier: MIT */
/*
 * edits: what a prepare gives a container, as a CDI device's containerEdits
 * (device nodes, "KEY=VALUE" variables, bind mounts), for one device of a
 * claim or for the whole claim: owned copies, their JSON in the checkpoint
 * (dra/recfile.h) and their CDI device (discovery/cdi.h). No checks of the
 * values here: kdp_dra_prepared_add_* check them as the author gives them.
 * Pure; any thread.
 */
#ifndef KDP_DRA_EDITS_H
#define KDP_DRA_EDITS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "discovery/cdi.h"
#include "kdp.h"

/* The most of each kind in one set of edits. */
#define KDP__DRA_EDITS_MAX 64U

typedef struct kdp__dra_edits {
    kdp_cdi_node *nodes; /* strings owned */
    size_t n_nodes;
    char **env; /* "KEY=VALUE" */
    size_t n_env;
    kdp__cdi_mount *mounts; /* strings owned */
    size_t n_mounts;
} kdp__dra_edits;

/* Frees what e holds and zeroes it. */
void kdp__dra_edits_clear(kdp__dra_edits *e);
bool kdp__dra_edits_empty(const kdp__dra_edits *e);
/* A deep copy into to (zeroed first; on failure what it holds is to be
 * cleared). Returns 0 or -ENOMEM. */
int kdp__dra_edits_copy(kdp__dra_edits *to, const kdp__dra_edits *from);
/* The heap it holds, for the checkpoint's bound. */
size_t kdp__dra_edits_bytes(const kdp__dra_edits *e);
/* Appends a copy. Returns 0, -E2BIG (KDP__DRA_EDITS_MAX of that kind
 * already) or -ENOMEM. */
int kdp__dra_edits_add_node(kdp__dra_edits *e, const kdp_cdi_node *n);
int kdp__dra_edits_add_env(kdp__dra_edits *e, const char *kv);
int kdp__dra_edits_add_mount(kdp__dra_edits *e, const char *host_path, const char *container_path,
                             bool read_only);
/* A node's strings freed, n zeroed; a deep copy (to zeroed first; on
 * failure to holds what was made: clear it). Returns 0 or -ENOMEM. */
void kdp__dra_node_clear(kdp_cdi_node *n);
int kdp__dra_node_copy(kdp_cdi_node *to, const kdp_cdi_node *from);
/* A node as JSON: {"path", "host_path"?, "permissions"?} (NULL: -ENOMEM). */
json_t *kdp__dra_node_json(const kdp_cdi_node *n);
/* Reads one back into n (its strings owned); returns 0, -EINVAL (no path),
 * -ENOMEM. */
int kdp__dra_node_from_json(const json_t *o, kdp_cdi_node *n);
/* Sets "nodes", "env" and "mounts" ([{"host_path", "container_path",
 * "read_only"}], left out when none) in o. Returns 0 or -ENOMEM. */
int kdp__dra_edits_to_json(const kdp__dra_edits *e, json_t *o);
/* Reads them from o (each key may be missing) into e (zeroed). Returns 0,
 * -EINVAL (*field names the bad one), -ENOMEM. */
int kdp__dra_edits_from_json(const json_t *o, kdp__dra_edits *e, const char **field);
/* e as the edits of CDI device name (borrowed from both). */
kdp__cdi_dev kdp__dra_edits_cdi(const kdp__dra_edits *e, const char *name);

#endif
