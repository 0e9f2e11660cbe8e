/* SPDX-License-Identifier: MIT */
#include "runtime/mhdlib.h"

#ifdef KDP_HAVE_MHD
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"

#define MHD_SONAME "libmicrohttpd.so.12"

struct kdp__mhd_fns kdp__mhd;

static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static char mhd_error[256] = "not loaded"; /* "" once loaded */

/* dlsym into a function pointer (POSIX guarantees the conversion works). */
static bool sym(void *lib, const char *name, void *fn_ptr)
{
    void *p = dlsym(lib, name);
    if (p) {
        memcpy(fn_ptr, &p, sizeof(p));
    }
    return p != NULL;
}

static void mhd_load(void)
{
    void *lib = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(mhd_error, sizeof(mhd_error), "%s", e ? e : "dlopen failed");
        return;
    }
    bool ok = sym(lib, "MHD_start_daemon", &kdp__mhd.start_daemon) &&
              sym(lib, "MHD_stop_daemon", &kdp__mhd.stop_daemon) &&
              sym(lib, "MHD_run", &kdp__mhd.run) &&
              sym(lib, "MHD_get_timeout", &kdp__mhd.get_timeout) &&
              sym(lib, "MHD_get_daemon_info", &kdp__mhd.get_daemon_info) &&
              sym(lib, "MHD_add_connection", &kdp__mhd.add_connection) &&
              sym(lib, "MHD_create_response_from_buffer", &kdp__mhd.create_response_from_buffer) &&
              sym(lib, "MHD_add_response_header", &kdp__mhd.add_response_header) &&
              sym(lib, "MHD_queue_response", &kdp__mhd.queue_response) &&
              sym(lib, "MHD_destroy_response", &kdp__mhd.destroy_response) &&
              sym(lib, "MHD_lookup_connection_value", &kdp__mhd.lookup_connection_value) &&
              sym(lib, "MHD_get_connection_info", &kdp__mhd.get_connection_info);
    if (!ok) {
        snprintf(mhd_error, sizeof(mhd_error), "%s lacks a function kdp uses", MHD_SONAME);
        dlclose(lib);
        return;
    }
    mhd_error[0] = '\0'; /* loaded; kept for the process's lifetime */
}

/* 0, or -ENOTSUP after a log line naming what to install. Any thread. */
int kdp__mhd_ready(void)
{
    (void)pthread_once(&mhd_once, mhd_load);
    if (mhd_error[0]) {
        log_error("metrics: cannot load %s (on Debian: apt-get install libmicrohttpd12): %s",
                  MHD_SONAME, mhd_error);
        return -ENOTSUP;
    }
    return 0;
}
#endif
