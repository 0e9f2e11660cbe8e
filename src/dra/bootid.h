/* SPDX-License-Identifier: MIT */
/*
 * bootid: which boot of the node this is, for the checkpoint's records: a
 * claim prepared in an earlier boot is prepared again (what its prepare set
 * up on the host, a partition, a VFIO binding, a daemon, did not survive
 * the reboot). The kernel's random boot ID, /proc/sys/kernel/random/boot_id
 * ($KDP_BOOT_ID_FILE instead, for tests), and the boot time, btime of
 * /proc/stat (to date checkpoints written before records carried a boot ID).
 *
 * Pure but for the reads; any thread.
 */
#ifndef KDP_DRA_BOOTID_H
#define KDP_DRA_BOOTID_H

#include <stdint.h>

#include "dra/claimrec.h"

#define KDP__BOOT_ID_ENV "KDP_BOOT_ID_FILE"

/* The boot ID into out ("" when it cannot be read: logged once). Returns 0
 * or -errno. */
int kdp__bootid_read(char out[KDP__DRA_BOOT_ID_LEN]);
/* The boot time, seconds since the epoch (0 when unknown). */
int64_t kdp__bootid_btime(void);

#endif
