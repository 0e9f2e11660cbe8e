/* SPDX-License-Identifier: MIT */
/*
 * handover: socket names per instance, instance IDs checked, and the marker
 * through which the newest instance of a plugin makes the older ones stop
 * (a higher generation first, a live socket required).
 */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kdp.h"
#include "plugin/handover.h"

static char dir[64];

static void test_names(void **state)
{
    (void)state;
    char *s = kdp__handover_socket_name("gopher.sock", "1234-abcd");
    assert_string_equal(s, "gopher-1234-abcd.sock");
    free(s);
    s = kdp__handover_socket_name("gopher", "x");
    assert_string_equal(s, "gopher-x.sock");
    free(s);
    s = kdp__handover_socket_name("gopher.sock", NULL);
    assert_string_equal(s, "gopher.sock");
    free(s);
    const char *why = NULL;
    assert_int_equal(kdp__handover_check_instance("6f1c2a9e-0b7d-4c1e-9f55-1a2b3c4d5e6f", &why), 0);
    const char *bad[] = {"", ".x", "a/b", "a b", "a\\nb", NULL};
    for (size_t i = 0; bad[i]; i++) {
        assert_int_equal(kdp__handover_check_instance(bad[i], &why), -EINVAL);
        assert_non_null(why);
    }
    char long_id[70];
    memset(long_id, 'y', 65);
    long_id[65] = '\0';
    assert_int_equal(kdp__handover_check_instance(long_id, &why), -EINVAL);
}

/* A listening socket named name in dir (an instance that is alive). */
static int listen_on(const char *name)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s", dir, name);
    unlink(a.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

static void test_marker(void **state)
{
    (void)state;
    kdp__handover old;
    kdp__handover new;
    kdp__handover off;
    assert_int_equal(
        kdp__handover_init(&old, "example.com/g", dir, "g-old.sock", "g.sock", "old", 1), 0);
    assert_int_equal(
        kdp__handover_init(&new, "example.com/g", dir, "g-new.sock", "g.sock", "new", 1), 0);
    assert_int_equal(kdp__handover_init(&off, "example.com/g", dir, "g.sock", "g.sock", NULL, 0),
                     0);
    assert_false(off.on);
    assert_true(kdp__handover_is_marker(&old, ".g.newest"));
    assert_false(kdp__handover_is_marker(&off, ".g.newest"));
    char who[256];
    int fd_old = listen_on("g-old.sock");
    /* the old one registers first: the marker is its */
    assert_int_equal(kdp__handover_registered(&old, who, sizeof(who)), 0);
    assert_int_equal(kdp__handover_changed(&old, who, sizeof(who)), 0); /* its own */
    /* the new one registers: the marker is the new one's; the old one, told,
     * yields once the new socket answers */
    assert_int_equal(kdp__handover_registered(&new, who, sizeof(who)), 0);
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL); /* "nothing answers" is a warning */
    assert_int_equal(kdp__handover_changed(&old, who, sizeof(who)), 0); /* not listening yet */
    int fd_new = listen_on("g-new.sock");
    assert_int_equal(kdp__handover_changed(&old, who, sizeof(who)), 1);
    assert_non_null(strstr(who, "instance new (generation 1, socket g-new.sock)"));
    assert_int_equal(kdp__handover_changed(&new, who, sizeof(who)), 0);
    /* an older generation that registers later does not win: before
     * registering it is outranked; a marker it wrote anyway is taken back */
    kdp__handover stale;
    assert_int_equal(
        kdp__handover_init(&stale, "example.com/g", dir, "g-stale.sock", "g.sock", "stale", 0), 0);
    assert_int_equal(kdp__handover_outranked(&stale, who, sizeof(who)), 1);
    assert_int_equal(kdp__handover_registered(&stale, who, sizeof(who)), 1);
    kdp__handover forced = stale;
    forced.generation = 5; /* pretend, to write a marker in its name */
    assert_int_equal(kdp__handover_registered(&forced, who, sizeof(who)), 0);
    forced.generation = 0;
    /* the marker now names generation 5... which new (1) must yield to,
     * but stale's socket is not alive: new stays */
    assert_int_equal(kdp__handover_changed(&new, who, sizeof(who)), 0);
    /* a marker of another resource is not ours */
    kdp__handover other;
    assert_int_equal(kdp__handover_init(&other, "example.com/h", dir, "g-o.sock", "g.sock", "o", 9),
                     0);
    assert_int_equal(kdp__handover_registered(&other, who, sizeof(who)), 0);
    assert_int_equal(kdp__handover_changed(&new, who, sizeof(who)), 0);
    assert_int_equal(kdp__handover_outranked(&new, who, sizeof(who)), 0);
    close(fd_old);
    close(fd_new);
    kdp__handover_done(&old);
    kdp__handover_done(&new);
    kdp__handover_done(&off);
    kdp__handover_done(&stale);
    kdp__handover_done(&other);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    snprintf(dir, sizeof(dir), "/tmp/kdp-unit-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_marker),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    (void)!system(cmd);
    return r;
}
