/* SPDX-License-Identifier: MIT */
/* bindcheck: the rules of a device's binding conditions (see bindcheck.h). */
#include "k8s/bindcheck.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/k8snames.h"

#define CONDS "bindingConditions"
#define FAILS "bindingFailureConditions"

/* e->field: list, or list[index] (index >= 0); the caller writes e->why. */
static int at(kdp__bind_err *e, const char *list, long index)
{
    if (index >= 0) {
        snprintf(e->field, sizeof(e->field), "%s[%ld]", list, index);
    } else {
        snprintf(e->field, sizeof(e->field), "%s", list);
    }
    return -EINVAL;
}

/* One list: its size, each item a label name, none twice. */
static int check_list(const char *list, const char *const *v, size_t n, kdp__bind_err *e)
{
    if (n > KDP__BIND_MAX) {
        snprintf(e->why, sizeof(e->why), "Too many: %zu: must have at most %u items", n,
                 KDP__BIND_MAX);
        return at(e, list, -1);
    }
    for (size_t i = 0; i < n; i++) {
        const char *why = NULL;
        if (!v[i] || kdp__k8snames_label_name(v[i], &why) < 0) {
            snprintf(e->why, sizeof(e->why), "Invalid value: \"%.80s\": a condition type %s",
                     v[i] ? v[i] : "", why ? why : "is missing");
            return at(e, list, (long)i);
        }
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (strcmp(v[i], v[j]) == 0) {
                snprintf(e->why, sizeof(e->why), "Duplicate value: \"%.80s\"", v[i]);
                return at(e, list, (long)i);
            }
        }
    }
    return 0;
}

int kdp__bindcheck(const char *const *conds, size_t n_conds, const char *const *fails,
                   size_t n_fails, kdp__bind_err *e)
{
    if (n_conds > KDP__BIND_MAX) {
        return check_list(CONDS, conds, n_conds, e);
    }
    if (n_fails > KDP__BIND_MAX) {
        return check_list(FAILS, fails, n_fails, e);
    }
    int r = check_list(CONDS, conds, n_conds, e);
    if (r == 0) {
        r = check_list(FAILS, fails, n_fails, e);
    }
    for (size_t i = 0; r == 0 && i < n_fails; i++) {
        for (size_t j = 0; r == 0 && j < n_conds; j++) {
            if (strcmp(fails[i], conds[j]) == 0) {
                snprintf(e->why, sizeof(e->why),
                         "Invalid value: \"%.80s\": bindingFailureConditions must not overlap "
                         "with bindingConditions",
                         fails[i]);
                r = at(e, FAILS, (long)i);
            }
        }
    }
    if (r == 0 && n_conds == 0 && n_fails > 0) {
        snprintf(e->why, sizeof(e->why),
                 "Invalid value: []: bindingConditions are required to use "
                 "bindingFailureConditions");
        r = at(e, CONDS, -1);
    }
    if (r == 0 && n_fails == 0 && n_conds > 0) {
        snprintf(e->why, sizeof(e->why),
                 "Invalid value: []: bindingFailureConditions are required to use "
                 "bindingConditions");
        r = at(e, FAILS, -1);
    }
    return r;
}
