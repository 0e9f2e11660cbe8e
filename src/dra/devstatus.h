/* SPDX-License-Identifier: MIT */
/*
 * devstatus: a prepared device's status (kdp_dra_device_status) checked as
 * the API server checks a ResourceClaim's status.devices entry
 * (validateDeviceStatus, ValidateConditions) and made into the entry's own
 * fields as JSON text: {"conditions": [...], "data": {...},
 * "networkData": {...}}, each condition's lastTransitionTime the time
 * given. Pure.
 */
#ifndef KDP_DRA_DEVSTATUS_H
#define KDP_DRA_DEVSTATUS_H

#include <stddef.h>
#include <stdint.h>

#include "kdp_dra.h"

#define KDP__DRA_STATUS_MAX_CONDITIONS 8
#define KDP__DRA_STATUS_MAX_DATA       10240
#define KDP__DRA_STATUS_MAX_IPS        16

/* Returns 0 with *ret (malloc'd text), -EINVAL (why names the field and
 * the rule), -ENOMEM. now: Unix seconds. */
int kdp__dra_devstatus_json(const kdp_dra_device_status *st, int64_t now, char **ret, char *why,
                            size_t cap);

#endif
