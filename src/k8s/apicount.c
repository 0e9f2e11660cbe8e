/* SPDX-License-Identifier: MIT */
#include "k8s/apicount.h"

#include <stdio.h>
#include <string.h>

void kdp__api_counts_add(kdp__api_counts *c, const char *verb, long code)
{
    int k = code >= 0 && code < 1000 ? (int)code : 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->v[i].code == k && strcmp(c->v[i].verb, verb) == 0) {
            c->v[i].n++;
            return;
        }
    }
    if (c->n == KDP__API_COUNTS) {
        c->dropped++;
        return;
    }
    kdp__api_count *e = &c->v[c->n++];
    snprintf(e->verb, sizeof(e->verb), "%s", verb);
    e->code = k;
    e->n = 1;
}
