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
 * must-include ID first, then the available IDs the strategy prefers, with
 * NUMA nodes taken from t (an ID not in t has none). KDP_PREFERRED_NONE
 * answers the must-include IDs then the rest in the kubelet's order.
 * Returns 0 or -ENOMEM. */
int kdp__prefer(kdp_preferred_strategy s, const kdp__devtab *t, const kdp_preferred_request *req,
                kdp_id_list *out);

#endif
