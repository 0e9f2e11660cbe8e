/* SPDX-License-Identifier: MIT */
/*
 * apicount: the API client's requests counted by verb and HTTP status (0:
 * no answer), for the /metrics page. A fixed table: pairs past its size
 * are counted together as dropped. Pure.
 */
#ifndef KDP_K8S_APICOUNT_H
#define KDP_K8S_APICOUNT_H

#include <stddef.h>

#define KDP__API_COUNTS 48

typedef struct kdp__api_count {
    char verb[8]; /* GET, POST, PUT, PATCH, DELETE, WATCH */
    int code;     /* 0: the request got no answer */
    unsigned long n;
} kdp__api_count;

typedef struct kdp__api_counts {
    kdp__api_count v[KDP__API_COUNTS];
    size_t n;
    unsigned long dropped; /* pairs past the table's size */
} kdp__api_counts;

/* One request of verb that ended with code. */
void kdp__api_counts_add(kdp__api_counts *c, const char *verb, long code);

#endif
