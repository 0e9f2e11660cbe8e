/* SPDX-License-Identifier: MIT */
/* version: the version of the library actually linked (kdp_version). */
#include "kdp.h"

KDP_EXPORT const char *kdp_version(void)
{
    return KDP_VERSION_STRING;
}
