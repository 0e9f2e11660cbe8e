/* SPDX-License-Identifier: MIT */
/*
 * quantity: a Kubernetes resource.Quantity ("80Gi", "7", "500m", "1.5e3")
 * as a number kdp can compare and count with, for the rules the API
 * server applies to counters and capacity request policies (a default
 * within its range, a step that divides it, valid values in order). The
 * value is kept in nano units (10^-9) in a signed 128-bit integer: exact
 * for every quantity the suffixes n .. Ei and exponents up to 10^27 write;
 * digits past the nano are rounded up, as the API does. Pure.
 */
#ifndef KDP_BASE_QUANTITY_H
#define KDP_BASE_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>

typedef __int128 kdp__qty; /* nano units */

/* One unit ("1") in nano units. */
#define KDP__QTY_ONE ((kdp__qty)1000000000)

/* Parses s (kdp__k8snames_quantity's syntax, also "n" and "u"). Returns
 * 0, or -EINVAL (not a quantity) / -ERANGE (beyond +-10^27) with a static
 * phrase in *why (when why is not NULL). */
int kdp__qty_parse(const char *s, kdp__qty *ret, const char **why);
/* -1, 0 or 1. */
int kdp__qty_cmp(kdp__qty a, kdp__qty b);
/* The value written as a plain decimal with the fewest digits ("1.5",
 * "85899345920", "0.001"), for messages. Returns out. len >= 48. */
char *kdp__qty_format(kdp__qty v, char *out, size_t len);

#endif
