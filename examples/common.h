/* SPDX-License-Identifier: MIT */
/* Flag parsing shared by the examples (not part of kdp). */
#ifndef KDP_EXAMPLE_COMMON_H
#define KDP_EXAMPLE_COMMON_H

#include <errno.h>
#include <kdp.h>
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

/* --metrics-address ADDR: /metrics and /healthz on the plugin's context;
 * NULL does nothing. Returns 0, or prints what is wrong with the fix and
 * returns -errno. */
static inline int serve_metrics(kdp_plugin *p, const char *address)
{
    if (!address) {
        return 0;
    }
    int r = kdp_ctx_serve_metrics(kdp_plugin_get_ctx(p), address);
    if (r == -EINVAL) {
        fprintf(stderr,
                "--metrics-address: \"%s\" is not an address: HOST:PORT (\"127.0.0.1:9400\", "
                "\"[::1]:9400\", \":9400\" for every interface, port 0 for any free port) or a "
                "unix socket (unix:/abs/path)\n",
                address);
    } else if (r == -EADDRINUSE) {
        fprintf(stderr, "--metrics-address: %s is in use: choose another port or path\n", address);
    } else if (r < 0) {
        fprintf(stderr, "--metrics-address %s: %s\n", address, strerror(-r));
    }
    return r;
}

#endif
