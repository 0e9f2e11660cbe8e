/* SPDX-License-Identifier: MIT */
#include "base/secret.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "base/log.h"

void kdp__secret_free(void *p, size_t len)
{
    if (!p) {
        return;
    }
    explicit_bzero(p, len);
    free(p);
}

void kdp__secret_free_str(char *s)
{
    kdp__secret_free(s, s ? strlen(s) : 0);
}

void kdp__secret_held(void)
{
    static atomic_bool done;
    if (atomic_exchange(&done, true)) {
        return;
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        log_warn("cannot make the process non-dumpable: a core file could hold its credentials");
    } else {
        log_debug("holding credentials: the process is not dumpable");
    }
}
