/* SPDX-License-Identifier: MIT */
/*
 * bindcheck: the API server's rules (resource.k8s.io/v1, KEP-5007,
 * validateDeviceBindingParameters in pkg/apis/resource/validation) for a
 * device's binding conditions, in a ResourceSlice and in a claim's
 * allocation results: at most KDP__BIND_MAX in each list, each a condition
 * type (a label name: an optional DNS-subdomain prefix and '/', then at
 * most 63 of [A-Za-z0-9-_.] with an alphanumeric at both ends), none twice
 * in a list, none in both, and the two lists set together (bindsToNode
 * has no rule). One set of rules for kdp_dra_device_set_binding_conditions
 * (refused at the call), the slices kdp builds (left out, logged) and
 * `kdpctl dra apiserver` (a 422 naming the field).
 *
 * A device with binding conditions does not lower the 128 devices a slice
 * holds: only taints and consumesCounters do (haveDeviceTaints,
 * haveConsumesCounters in the same file). Pure.
 */
#ifndef KDP_K8S_BINDCHECK_H
#define KDP_K8S_BINDCHECK_H

#include <stddef.h>

/* The most of each list (BindingConditionsMaxSize,
 * BindingFailureConditionsMaxSize). */
#define KDP__BIND_MAX 4U

typedef struct kdp__bind_err {
    char field[64]; /* "bindingConditions[1]", "bindingFailureConditions" */
    char why[240];  /* the API server's words: "Duplicate value: \"a\"" */
} kdp__bind_err;

/* The two lists (n_conds and n_fails items; a NULL item is refused). 0,
 * or -EINVAL with e filled for the first rule broken, in the API server's
 * order: the sizes, each item, duplicates, overlap, the pairing. */
int kdp__bindcheck(const char *const *conds, size_t n_conds, const char *const *fails,
                   size_t n_fails, kdp__bind_err *e);

#endif
