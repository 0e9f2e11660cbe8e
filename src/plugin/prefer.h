/* SPDX-License-Identifier: MIT */
/*
 * prefer: kdp's own answers to GetPreferredAllocation, for a plugin without
 * a preferred op that chose a strategy (kdp_config.preferred). Pure: runs on
 * the loop thread, no allocation but the answer's.
 */
#ifndef KDP_PREFER_H
#define KDP_PREFER_H

#include "kdp.h"
#include "plugin/devices.h"

/* Fills out with req->size IDs (fewer if fewer are available): every
 * must-include ID first (in ID order, each once), then the available IDs the
 * strategy prefers, with their devices and NUMA nodes taken from t (IDs are
 * replica IDs when replicas > 1; an ID not in t is a device of its own
 * with no node). KDP_PREFERRED_NONE answers the must-include IDs then the
 * rest by device and replica. Returns 0, -EINVAL (an ID that is not a valid
 * device ID) or -ENOMEM. */
int kdp__prefer(kdp_preferred_strategy s, const kdp__devtab *t, unsigned replicas,
                const kdp_preferred_request *req, kdp_id_list *out);

#endif
