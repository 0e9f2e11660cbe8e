/* SPDX-License-Identifier: MIT */
/* Files kdp opens in directories a pod may share (a hostPath): what an
 * attacker plants there (a FIFO, a hard link to a file that is not kdp's, a
 * forged handover marker) neither blocks a thread nor gets written through
 * nor stops the plugin. Each case is a finding of the security review; a
 * hang is caught by the alarm. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <fcntl.h>
#include <kdp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "k8s/kfile.h"
#include "plugin/handover.h"
#include "plugin/lockfile.h"

#define WATCHDOG_S 20

static char dir[64];

static void pathf(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void read_file(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static int listen_on(const char *name)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s", dir, name);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    return fd;
}

/* A hard link planted at the lock file: the file it links to is not
 * truncated or written; a FIFO there does not block. Both are replaced. */
static void test_lockfile_planted(void **state)
{
    (void)state;
    char victim[128];
    char lock[128];
    pathf(victim, sizeof(victim), "victim");
    pathf(lock, sizeof(lock), "p.sock.lock");
    write_file(victim, "precious\n");
    assert_int_equal(link(victim, lock), 0);
    kdp__lockfile lf;
    assert_int_equal(kdp__lockfile_init(&lf, dir, "p.sock", "p.sock", "example.com/p"), 0);
    assert_int_equal(kdp__lockfile_ensure(&lf), 0);
    char buf[64];
    read_file(victim, buf, sizeof(buf));
    assert_string_equal(buf, "precious\n");
    struct stat st;
    assert_int_equal(stat(lock, &st), 0);
    assert_int_equal(st.st_nlink, 1); /* a file of its own now */
    kdp__lockfile_release(&lf);
    kdp__lockfile_done(&lf);
    assert_int_equal(mkfifo(lock, 0600), 0);
    assert_int_equal(kdp__lockfile_init(&lf, dir, "p.sock", "p.sock", "example.com/p"), 0);
    assert_int_equal(kdp__lockfile_ensure(&lf), 0);
    assert_int_equal(lstat(lock, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    kdp__lockfile_release(&lf);
    kdp__lockfile_done(&lf);
}

/* A marker forged to name kubelet.sock (alive, with a higher generation)
 * does not stop the plugin; nor does a FIFO there block it; a hard link at
 * its temporary file is not written through. */
static void test_handover_forged(void **state)
{
    (void)state;
    kdp__handover h;
    assert_int_equal(kdp__handover_init(&h, "example.com/g", dir, "g-me.sock", "g.sock", "me", 1),
                     0);
    int kubelet = listen_on("kubelet.sock");
    char marker[128];
    pathf(marker, sizeof(marker), ".g.newest");
    write_file(marker, "kdp-handover 1\nresource example.com/g\ninstance x\ngeneration 99\nsocket "
                       "kubelet.sock\n");
    char who[256];
    assert_int_equal(kdp__handover_outranked(&h, who, sizeof(who)), 0);
    assert_int_equal(kdp__handover_changed(&h, who, sizeof(who)), 0);
    /* the same, naming the instance's own socket name: that one is honoured */
    int other = listen_on("g-x.sock");
    write_file(marker, "kdp-handover 1\nresource example.com/g\ninstance x\ngeneration 99\nsocket "
                       "g-x.sock\n");
    assert_int_equal(kdp__handover_outranked(&h, who, sizeof(who)), 1);
    /* a hard link to it (two names): not read */
    char twin[128];
    pathf(twin, sizeof(twin), "twin");
    assert_int_equal(link(marker, twin), 0);
    assert_int_equal(kdp__handover_outranked(&h, who, sizeof(who)), 0);
    unlink(twin);
    unlink(marker);
    /* a FIFO: never blocks */
    assert_int_equal(mkfifo(marker, 0600), 0);
    assert_int_equal(kdp__handover_outranked(&h, who, sizeof(who)), 0);
    unlink(marker);
    /* the temporary file is a hard link to a victim: not written through */
    char victim[128];
    char tmp[160];
    pathf(victim, sizeof(victim), "victim2");
    snprintf(tmp, sizeof(tmp), "%s.me.tmp", marker);
    write_file(victim, "precious\n");
    assert_int_equal(link(victim, tmp), 0);
    assert_int_equal(kdp__handover_registered(&h, who, sizeof(who)), 0);
    char buf[64];
    read_file(victim, buf, sizeof(buf));
    assert_string_equal(buf, "precious\n");
    read_file(marker, buf, sizeof(buf));
    assert_non_null(strstr(buf, "kdp-handover 1"));
    close(kubelet);
    close(other);
    kdp__handover_done(&h);
}

/* A FIFO where a kubeconfig, a token or a CDI spec is read: no hang. */
static void test_fifo_reads(void **state)
{
    (void)state;
    char fifo[128];
    pathf(fifo, sizeof(fifo), "token");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(kdp__kfile_read(fifo, &text, &len), -EINVAL);
    char cdi[128];
    pathf(cdi, sizeof(cdi), "cdi");
    assert_int_equal(mkdir(cdi, 0755), 0);
    char spec[192];
    snprintf(spec, sizeof(spec), "%s/vendor.example-gpu.json", cdi);
    assert_int_equal(mkfifo(spec, 0600), 0);
    kdp_cdi_node node = {.path = "/dev/null"};
    kdp_cdi_device dev = {.name = "a", .nodes = &node, .n_nodes = 1};
    assert_int_equal(kdp_cdi_write_spec(cdi, "vendor.example/gpu", &dev, 1, NULL), 1);
    struct stat st;
    assert_int_equal(lstat(spec, &st), 0);
    assert_true(S_ISREG(st.st_mode)); /* replaced by the rename */
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/kdp-shared-XXXXXX");
    assert_non_null(mkdtemp(dir));
    alarm(WATCHDOG_S);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lockfile_planted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handover_forged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_reads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
