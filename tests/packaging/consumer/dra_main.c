/* SPDX-License-Identifier: MIT */
/* A DRA driver's build against an installed kdp: kdp_dra.h and libkdp-dra
 * (pkg-config kdp-dra). Checks a name and exits. */
#include <kdp_dra.h>
#include <stdio.h>

int main(void)
{
    const char *why = NULL;
    if (kdp_dra_validate_driver_name("gpu.example.com", &why) != 0 ||
        kdp_dra_validate_driver_name("Not_Valid", &why) == 0) {
        fprintf(stderr, "dra consumer: the validator disagrees\n");
        return 1;
    }
    printf("dra consumer: kdp %s, driver names checked\n", kdp_version());
    return 0;
}
