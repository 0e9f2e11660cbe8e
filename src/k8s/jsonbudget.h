/* SPDX-License-Identifier: MIT */
/*
 * jsonbudget: what decoding a JSON text with jansson will cost, estimated
 * by one linear pass before decoding it, so that an answer of the API
 * server made of many small values (each a jansson value, an object's
 * each key a table entry: 16 MiB of them cost over 350 MB) is refused
 * instead of decoded. The estimate is the text's bytes plus 64 bytes for
 * every structural token (each '{', '[', ',' and ':' outside strings:
 * about one per value and key), within a factor of 2 of what jansson
 * allocates. Pure.
 */
#ifndef KDP_K8S_JSONBUDGET_H
#define KDP_K8S_JSONBUDGET_H

#include <stddef.h>

/* The bytes that decoding buf[0..len) is estimated to take. */
size_t kdp__json_cost(const char *buf, size_t len);

#endif
