/* SPDX-License-Identifier: MIT */
/*
 * kdp-example-simple: the simple mode. One function lists the devices; kdp
 * does the rest (serve, register, stream, allocate, restarts, SIGTERM).
 *
 *   kdp-example-simple [--count N] [--resource NAME]
 *       [--device-plugin-dir DIR | --kubelet-root ROOT] [--registration MODE]
 */
#include <kdp.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static int list_devices(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)p;
    int count = *(int *)ud;
    for (int i = 0; i < count; i++) {
        char id[32];
        snprintf(id, sizeof(id), "dev-%d", i);
        kdp_device d = {.id = id, .health = KDP_HEALTHY};
        int r = kdp_device_list_add(out, &d);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int count = 4;
    const char *resource = "example.com/simple";
    for (int i = 1; i < argc; i++) {
        const char *v;
        if ((v = flag_value(argc, argv, &i, "--count"))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || n < 0 || n > 100000) {
                fprintf(stderr, "--count: %s is not a number from 0 to 100000\n", v);
                return 2;
            }
            count = (int)n;
        } else if ((v = flag_value(argc, argv, &i, "--resource"))) {
            resource = v;
        } else if ((v = flag_value(argc, argv, &i, "--metrics-address"))) {
            setenv(KDP_METRICS_ADDRESS_ENV, v, 1); /* kdp_run_simple() takes no config */
        } else if ((v = flag_value(argc, argv, &i, "--device-plugin-dir"))) {
            setenv(KDP_DEVICE_PLUGIN_DIR_ENV, v, 1); /* kdp_run_simple() takes no config */
        } else if ((v = flag_value(argc, argv, &i, "--kubelet-root"))) {
            setenv(KDP_KUBELET_ROOT_ENV, v, 1);
        } else if ((v = flag_value(argc, argv, &i, "--registration"))) {
            kdp_registration mode;
            if (kdp_registration_parse(v, &mode) < 0) {
                fprintf(stderr, "--registration: kubelet, watcher or auto, not \"%s\"\n", v);
                return 2;
            }
            setenv(KDP_REGISTRATION_ENV, v, 1); /* kdp_run_simple() takes no config */
        } else {
            fprintf(stderr,
                    "usage: %s [--count N] [--resource NAME] "
                    "[--device-plugin-dir DIR | --kubelet-root ROOT] [--registration MODE] "
                    "[--metrics-address ADDR]\n",
                    argv[0]);
            return 2;
        }
    }
    kdp_log_set(KDP_LOG_INFO, NULL, NULL);
    return kdp_run_simple(resource, "simple.sock", list_devices, &count) == 0 ? 0 : 1;
}
