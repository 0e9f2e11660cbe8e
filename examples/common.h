/* SPDX-License-Identifier: MIT */
/* Flag parsing shared by the examples (not part of kdp). */
#ifndef KDP_EXAMPLE_COMMON_H
#define KDP_EXAMPLE_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Matches "--name VALUE" or "--name=VALUE"; advances *i past what it used. */
static inline const char *flag_value(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *arg = *i < argc ? argv[*i] : NULL;
    if (!arg || strncmp(arg, name, n) != 0) {
        return NULL;
    }
    if (arg[n] == '=') {
        return arg + n + 1;
    }
    if (arg[n] == '\0' && *i + 1 < argc) {
        return argv[++*i];
    }
    return NULL;
}

#endif
