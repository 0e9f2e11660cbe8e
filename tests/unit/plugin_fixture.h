/* SPDX-License-Identifier: MIT */
/* A plugin without a kubelet for the plugin layer's unit tests
 * (test_plugin.c, test_plugin_calls.c, test_posts.c): its device-plugin
 * directory, a plugin made there, the loop dispatched for a while, log lines
 * kept, and the group run with a 60 s bound. Include once per test
 * executable, after cmocka.h. */
#ifndef KDP_TEST_PLUGIN_FIXTURE_H
#define KDP_TEST_PLUGIN_FIXTURE_H

#include <kdp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static inline void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline kdp_plugin *new_plugin(kdp_ctx *ctx, const char *res, const char *sock,
                                     const kdp_ops *ops)
{
    kdp_config cfg = {.resource_name = res,
                      .socket_name = sock,
                      .device_plugin_dir = dir,
                      .callback_timeout_ms = 100};
    kdp_plugin *p = NULL;
    assert_int_equal(kdp_plugin_new(ctx, &cfg, ops, NULL, &p), 0);
    return p;
}

static inline void dispatch_for(kdp_ctx *ctx, int ms)
{
    for (int i = 0; i < ms / 5; i++) {
        assert_true(kdp_ctx_dispatch(ctx) >= 0);
        sleep_ms(5);
    }
}

/* Log lines, kept for the assertions (the sink runs under kdp's log lock:
 * one line at a time). */
static char logged[8192];
static pthread_mutex_t logged_mu = PTHREAD_MUTEX_INITIALIZER;

static inline void keep_line(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)ud;
    pthread_mutex_lock(&logged_mu);
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
    pthread_mutex_unlock(&logged_mu);
}

static inline void logged_clear(void)
{
    pthread_mutex_lock(&logged_mu);
    logged[0] = '\0';
    pthread_mutex_unlock(&logged_mu);
}

static inline bool logged_has(const char *needle)
{
    pthread_mutex_lock(&logged_mu);
    bool has = strstr(logged, needle) != NULL;
    pthread_mutex_unlock(&logged_mu);
    return has;
}

/* The tests in a fresh directory, errors only logged, a 60 s bound. */
static inline int run_in_dir(const struct CMUnitTest *tests, size_t n)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    snprintf(dir, sizeof(dir), "/tmp/kdp-unit-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    alarm(60);
    int r = _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)!system(cmd);
    return r;
}

#endif
