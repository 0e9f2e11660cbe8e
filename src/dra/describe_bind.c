/* SPDX-License-Identifier: MIT */
/* describe_bind: a device's binding conditions (see describe.h): checked
 * at the call with the API server's rules (k8s/bindcheck), so a bad set is
 * refused here, naming the field and the rule, never by the API server
 * later. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "dra/describe.h"
#include "k8s/bindcheck.h"

void kdp__dra_device_bind_done(kdp_dra_device *d)
{
    kdp__dra_strv_free(d->bind_conds, d->n_bind_conds);
    kdp__dra_strv_free(d->bind_fails, d->n_bind_fails);
    d->bind_conds = NULL;
    d->bind_fails = NULL;
    d->n_bind_conds = 0;
    d->n_bind_fails = 0;
    d->binds_to_node = false;
}

KDP_EXPORT int
kdp_dra_device_set_binding_conditions(kdp_dra_device *d, const char *const *conditions,
                                      size_t n_conditions, const char *const *failure_conditions,
                                      size_t n_failure_conditions, bool binds_to_node)
{
    if (!d) {
        return -EINVAL;
    }
    const char *id = d->id ? d->id : "?";
    bool bad_c = n_conditions && !conditions;
    if (bad_c || (n_failure_conditions && !failure_conditions)) {
        log_error("device %s: kdp_dra_device_set_binding_conditions: %s is NULL with a count of "
                  "%zu",
                  id, bad_c ? "conditions" : "failure_conditions",
                  bad_c ? n_conditions : n_failure_conditions);
        return -EINVAL;
    }
    kdp__bind_err e;
    if (kdp__bindcheck(conditions, n_conditions, failure_conditions, n_failure_conditions, &e) <
        0) {
        log_error("device %s: %s: %s", id, e.field, e.why);
        return -EINVAL;
    }
    bool oom = false;
    const char **c = kdp__dra_strv_dup(conditions, n_conditions, &oom);
    const char **f = kdp__dra_strv_dup(failure_conditions, n_failure_conditions, &oom);
    if (oom) {
        kdp__dra_strv_free(c, n_conditions);
        kdp__dra_strv_free(f, n_failure_conditions);
        return -ENOMEM;
    }
    kdp__dra_device_bind_done(d);
    d->bind_conds = c;
    d->n_bind_conds = n_conditions;
    d->bind_fails = f;
    d->n_bind_fails = n_failure_conditions;
    d->binds_to_node = binds_to_node;
    return 0;
}
