/* SPDX-License-Identifier: MIT */
#include "plugin/replicas.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

size_t kdp__replica_suffix_max(unsigned replicas)
{
    return kdp__replicas_on(replicas) ? 1 + kdp__digits(replicas - 1) : 0;
}

int kdp__replica_format(char *buf, size_t size, const char *id, size_t id_len, unsigned k,
                        unsigned replicas)
{
    int n = kdp__replicas_on(replicas) ? snprintf(buf, size, "%.*s-%u", (int)id_len, id, k)
                                       : snprintf(buf, size, "%.*s", (int)id_len, id);
    if (n < 0 || (size_t)n >= size) {
        if (size > 0) {
            buf[0] = '\0';
        }
        return -ENAMETOOLONG;
    }
    return n;
}

int kdp__replica_parse(const char *rid, unsigned replicas, size_t *ret_len, unsigned *ret_k)
{
    if (!rid) {
        return -EINVAL;
    }
    if (!kdp__replicas_on(replicas)) {
        *ret_len = strlen(rid);
        *ret_k = 0;
        return 0;
    }
    const char *dash = strrchr(rid, '-');
    if (!dash || dash == rid) {
        return -EINVAL;
    }
    const char *s = dash + 1;
    /* canonical decimal: no sign, no leading zero, below replicas (at most
     * 1024, so 4 digits: no overflow) */
    size_t n = strlen(s);
    if (n == 0 || n > 4 || (n > 1 && s[0] == '0')) {
        return -EINVAL;
    }
    unsigned k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -EINVAL;
        }
        k = k * 10 + (unsigned)(s[i] - '0');
    }
    if (k >= replicas) {
        return -EINVAL;
    }
    *ret_len = (size_t)(dash - rid);
    *ret_k = k;
    return 0;
}

const kdp__dev *kdp__replica_find(const kdp__devtab *t, unsigned replicas, const char *rid)
{
    if (!kdp__replicas_on(replicas)) {
        return rid ? kdp__devtab_find(t, rid) : NULL;
    }
    size_t len;
    unsigned k;
    char phys[KDP__REPLICA_ID_MAX + 1];
    if (kdp__replica_parse(rid, replicas, &len, &k) < 0 || len > KDP__REPLICA_ID_MAX) {
        return NULL;
    }
    memcpy(phys, rid, len);
    phys[len] = '\0';
    return kdp__devtab_find(t, phys);
}

const kdp__dev *kdp__replica_find_any(const kdp__devtab *t, unsigned replicas, const char *id)
{
    const kdp__dev *d = id ? kdp__devtab_find(t, id) : NULL;
    return d || !kdp__replicas_on(replicas) ? d : kdp__replica_find(t, replicas, id);
}

int kdp__replica_check_ids(const kdp__devtab *t, unsigned replicas, const char **ret_id)
{
    size_t suffix = kdp__replica_suffix_max(replicas);
    if (suffix == 0) {
        return 0;
    }
    for (size_t i = 0; i < t->n; i++) {
        if (strlen(t->devs[i].id) + suffix > KDP__REPLICA_ID_MAX) {
            *ret_id = t->devs[i].id;
            return -EINVAL;
        }
    }
    return 0;
}
