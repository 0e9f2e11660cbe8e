/* SPDX-License-Identifier: MIT */
/*
 * dra_check: the checks of `kdpctl dra apiserver` on what a request
 * stores, as the API server makes them: names, ResourceSlices and a
 * slice's immutable fields. Each returns what it found; dra_rest.c
 * answers it (422 Invalid).
 */
#ifndef KDPCTL_DRA_CHECK_H
#define KDPCTL_DRA_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* s is a lowercase RFC 1123 subdomain: dot-separated labels of [a-z0-9-],
 * none starting or ending with '-', at most 253 characters. */
bool kd_dns_subdomain(const char *s);
/* A ResourceSlice's checks on o: NULL, or the path of the field at fault
 * (a constant, or field, cap bytes, written) with *detail set to what is
 * wrong ("Required value", "Duplicate value"...). */
const char *kd_check_slice(const json_t *o, char *field, size_t cap, const char **detail);
/* The binding conditions of o (a slice's device or a claim's allocation
 * result, at path: "spec.devices[0]"): bindsToNode a boolean, the two
 * lists by k8s/bindcheck's rules; the same returns (*detail valid until
 * the next check). */
const char *kd_check_binding(const json_t *o, const char *path, char *field, size_t cap,
                             const char **detail);
/* What sharing adds (dra_check_share.c): spec.sharedCounters of a slice,
 * and device i's consumesCounters and request policies; the same returns
 * (*detail valid until the next check). */
const char *kd_check_shared_counters(const json_t *spec, char *field, size_t cap,
                                     const char **detail);
const char *kd_check_device_sharing(const json_t *d, size_t i, char *field, size_t cap,
                                    const char **detail);
/* A ResourceClaim's status.devices (dra_check_status.c): the same returns
 * (*detail valid until the next check). */
const char *kd_check_claim_status(const json_t *claim, char *field, size_t cap,
                                  const char **detail);
/* A DeviceClass (dra_check_class.c): spec.selectors (CEL expressions, not
 * evaluated), spec.config, spec.extendedResourceName; the same returns. */
const char *kd_check_class(const json_t *o, char *field, size_t cap, const char **detail);
/* A changed immutable field of a slice (spec.driver, spec.pool.name,
 * spec.nodeName) from old to new, or NULL. */
const char *kd_slice_immutable(const json_t *old, const json_t *new);

#endif
