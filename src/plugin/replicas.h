/* SPDX-License-Identifier: MIT */
/*
 * replicas: shared devices (kdp_config.replicas). The device table holds
 * physical devices; the kubelet sees each as `replicas` IDs "<id>-<k>",
 * k = 0 ... replicas-1 in decimal without leading zeros. This module owns
 * that scheme: formatting, parsing (the LAST '-' starts the suffix, so a
 * physical ID may itself contain '-'), and resolving an ID the kubelet sent
 * to its physical device. With replicas 0 or 1 every call is the identity.
 */
#ifndef KDP_REPLICAS_H
#define KDP_REPLICAS_H

#include <stdbool.h>
#include <stddef.h>

#include "kdp.h"
#include "plugin/devices.h"

/* The longest device ID the kubelet may be sent (kdp's rule for IDs). */
#define KDP__REPLICA_ID_MAX 255U

/* Sharing is on: more than one ID per device. */
static inline bool kdp__replicas_on(unsigned replicas)
{
    return replicas > 1;
}

/* Bytes of the longest suffix ("-<replicas-1>"), 0 without sharing. */
size_t kdp__replica_suffix_max(unsigned replicas);

/* Writes "<id>-<k>" (with sharing) or id into buf (size bytes). Returns its
 * length, or -ENAMETOOLONG if it does not fit (buf then holds "").
 */
int kdp__replica_format(char *buf, size_t size, const char *id, size_t id_len, unsigned k,
                        unsigned replicas);

/* Splits a replica ID: *ret_len = the physical ID's length (a prefix of
 * rid), *ret_k = the replica. Returns 0, or -EINVAL (no '-', an empty
 * physical ID, a suffix that is not a canonical decimal below replicas).
 * Without sharing, the whole ID is the physical one (k 0). */
int kdp__replica_parse(const char *rid, unsigned replicas, size_t *ret_len, unsigned *ret_k);

/* The physical device of an ID the kubelet sent (a replica ID with
 * sharing), or NULL (malformed, out of range, or unknown). */
const kdp__dev *kdp__replica_find(const kdp__devtab *t, unsigned replicas, const char *rid);

/* For the public lookups (kdp_plugin_get_health ...): a physical ID first,
 * else a replica ID resolved. NULL if neither. */
const kdp__dev *kdp__replica_find_any(const kdp__devtab *t, unsigned replicas, const char *id);

/* Checks that every device's replica IDs fit in KDP__REPLICA_ID_MAX bytes.
 * Returns 0, or -EINVAL with *ret_id the first offending physical ID (any
 * one; borrowed from t). */
int kdp__replica_check_ids(const kdp__devtab *t, unsigned replicas, const char **ret_id);

#endif
