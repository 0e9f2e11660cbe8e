/* SPDX-License-Identifier: MIT */
/*
 * devlist: ListAndWatch messages as kdp device tables (src/plugin/devices.h), and
 * what changed between two of them, as text and as JSON. Shared by
 * `kdpctl list`, `kdpctl watch` and the kubelet emulator.
 */
#ifndef KDPCTL_DEVLIST_H
#define KDPCTL_DEVLIST_H

#include <stddef.h>
#include <stdint.h>

#include "plugin/devices.h"
#include "print.h"

/* Decodes a ListAndWatchResponse into t (initialised; its old content is
 * replaced). Like the kubelet, any health other than "Healthy" counts as
 * Unhealthy; devices kdp's table refuses (a bad or duplicate ID) are
 * skipped. Each such oddity is described on its own line in warn (may be
 * NULL). Returns 0, -EBADMSG (not a ListAndWatchResponse) or -ENOMEM. */
int kc_devtab_decode(const uint8_t *msg, size_t len, kdp__devtab *t, kc_buf *warn);

/* "3 devices: 2 healthy, 1 unhealthy" (or "no devices"). */
void kc_devices_summary(kc_buf *out, const kdp__devtab *t);
/* The table ID / HEALTH / NUMA, with a header line. */
void kc_devices_table(kc_buf *out, const kdp__devtab *t, const char *indent);
/* "devices": [{"id","health","numa":[...]}...], "n", "healthy", "unhealthy". */
void kc_devices_json(kc_json *j, const kdp__devtab *t);

/* One aligned line per change from old to new: "added ID (Healthy)",
 * "removed ID", "health ID Healthy -> Unhealthy", "numa ID 0 -> 1".
 * Returns the number of changes. */
size_t kc_changes_text(kc_buf *out, const kdp__devtab *old_tab, const kdp__devtab *new_tab,
                       const char *indent);
/* "changes": [{"id","change":"added"|"removed"|"changed","health",
 * "old_health","numa","old_numa"}...]. */
void kc_changes_json(kc_json *j, const kdp__devtab *old_tab, const kdp__devtab *new_tab);

/* "Healthy" / "Unhealthy". */
const char *kc_health_name(kdp_health h);

#endif
