/* SPDX-License-Identifier: MIT */
/*
 * A tiny program outside kdp's tree, built against an installed kdp by
 * tests/packaging/test_install.py (pkg-config, pkg-config --static,
 * find_package with kdp::kdp and with kdp::kdp_static):
 *
 *   consumer DIR
 *
 * Checks that the header and the library agree on the version, then serves
 * one plugin in DIR (no kubelet: it serves, then waits for kubelet.sock) from
 * its own poll loop until its socket appears, and stops it. Exit 0 and one
 * line on stdout on success.
 */
#include <errno.h>
#include <kdp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fail(const char *what, int r)
{
    fprintf(stderr, "consumer: %s: %d (%s)\n", what, r, r < 0 ? strerror(-r) : "");
    return 1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Dispatches ctx until done() or timeout_ms; returns the last dispatch result. */
static int pump(kdp_ctx *ctx, const char *sock, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    int r = 0;
    while (now_ms() < end) {
        struct pollfd pfd = {.fd = kdp_ctx_get_fd(ctx), .events = POLLIN};
        (void)poll(&pfd, 1, 50);
        r = kdp_ctx_dispatch(ctx);
        if (r != 0 || (sock && access(sock, F_OK) == 0)) {
            break;
        }
    }
    return r;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    if (strcmp(kdp_version(), KDP_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: library %s, header %s\n", kdp_version(), KDP_VERSION_STRING);
        return 1;
    }
    const char *why = NULL;
    int r = kdp_validate_resource_name("example.com/consumer", &why);
    if (r != 0) {
        return fail("validate a good name", r);
    }
    if (kdp_validate_resource_name("no-domain", &why) != -EINVAL || !why) {
        return fail("validate a bad name", 0);
    }

    kdp_ctx *ctx = NULL;
    if ((r = kdp_ctx_new(&ctx)) < 0) {
        return fail("kdp_ctx_new", r);
    }
    kdp_config cfg = {.resource_name = "example.com/consumer",
                      .socket_name = "consumer.sock",
                      .device_plugin_dir = argv[1]};
    kdp_plugin *p = NULL;
    if ((r = kdp_plugin_new(ctx, &cfg, NULL, NULL, &p)) < 0) {
        kdp_ctx_free(ctx);
        return fail("kdp_plugin_new", r);
    }
    kdp_device dev = {.id = "c0", .health = KDP_HEALTHY};
    if ((r = kdp_plugin_set_devices(p, &dev, 1)) < 0) {
        kdp_ctx_free(ctx);
        return fail("kdp_plugin_set_devices", r);
    }
    char sock[4096];
    snprintf(sock, sizeof(sock), "%s/consumer.sock", argv[1]);
    r = pump(ctx, sock, 5000);
    int served = access(sock, F_OK) == 0;
    kdp_ctx_stop(ctx);
    int stopped = pump(ctx, NULL, 5000);
    kdp_ctx_free(ctx);
    if (r < 0 || !served) {
        return fail("serving", r);
    }
    if (stopped != 1) {
        return fail("stopping", stopped);
    }
    if (access(sock, F_OK) == 0) {
        return fail("socket left behind", 0);
    }
    printf("consumer: kdp %s (header %s, KDP_VERSION %d): served and stopped %s\n", kdp_version(),
           KDP_VERSION_STRING, KDP_VERSION, sock);
    return 0;
}
