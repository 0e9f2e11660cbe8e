/* SPDX-License-Identifier: MIT */
/* names: the public validators of kdp_dra.h, on base/k8snames. */
#include <errno.h>

#include "base/k8snames.h"
#include "kdp_dra.h"

KDP_EXPORT int kdp_dra_validate_driver_name(const char *name, const char **why)
{
    const char *w = "the driver name is missing (NULL)";
    int r = name ? kdp__k8snames_driver_name(name, &w) : -EINVAL;
    if (r < 0 && why) {
        *why = w;
    }
    return r < 0 ? -EINVAL : 0;
}

KDP_EXPORT int kdp_dra_validate_device_name(const char *name, const char **why)
{
    const char *w = "the device name is missing (NULL)";
    int r = name ? kdp__k8snames_dns_label(name, &w) : -EINVAL;
    if (r < 0 && why) {
        *why = w;
    }
    return r < 0 ? -EINVAL : 0;
}
