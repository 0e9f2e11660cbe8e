/* SPDX-License-Identifier: MIT */
/* CDI specs (src/discovery/cdi.c): content, names, versions, checks, and atomicity
 * (no partial file is ever visible under the final name). Public API only. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <kdp.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCHDOG_S 60

static char T[64];
static char SPEC[128]; /* T/example.com-serial.json */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    snprintf(T, sizeof(T), "/tmp/kdp-cdi-XXXXXX");
    assert_non_null(mkdtemp(T));
    snprintf(SPEC, sizeof(SPEC), "%s/example.com-serial.json", T);
    alarm(WATCHDOG_S);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    alarm(0);
    nftw(T, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* The whole file, NUL-terminated (NULL if absent). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0;
    size_t n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        size_t r = fread(buf + n, 1, 4096, f);
        n += r;
        if (r == 0) {
            break;
        }
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static size_t dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

static const kdp_cdi_node USB0[] = {{.path = "/dev/ttyUSB0", .permissions = "rw"}};
static const kdp_cdi_node GROUP[] = {{.path = "/dev/kvm"},
                                     {.path = "/dev/net/tun", .permissions = "rwm"}};

static void test_write_spec(void **state)
{
    (void)state;
    kdp_cdi_device devs[] = {{.name = "ttyUSB0", .nodes = USB0, .n_nodes = 1},
                             {.name = "vm", .nodes = GROUP, .n_nodes = 2}};
    char **names = NULL;
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", devs, 2, &names), 1);
    assert_string_equal(names[0], "example.com/serial=ttyUSB0");
    assert_string_equal(names[1], "example.com/serial=vm");
    assert_null(names[2]);
    kdp_strv_free(names);
    char *got = slurp(SPEC);
    assert_non_null(got);
    assert_string_equal(got, "{\n"
                             "  \"cdiVersion\": \"0.3.0\",\n"
                             "  \"kind\": \"example.com/serial\",\n"
                             "  \"devices\": [\n"
                             "    {\n"
                             "      \"name\": \"ttyUSB0\",\n"
                             "      \"containerEdits\": {\n"
                             "        \"deviceNodes\": [\n"
                             "          {\"path\": \"/dev/ttyUSB0\", \"permissions\": \"rw\"}\n"
                             "        ]\n"
                             "      }\n"
                             "    },\n"
                             "    {\n"
                             "      \"name\": \"vm\",\n"
                             "      \"containerEdits\": {\n"
                             "        \"deviceNodes\": [\n"
                             "          {\"path\": \"/dev/kvm\"},\n"
                             "          {\"path\": \"/dev/net/tun\", \"permissions\": \"rwm\"}\n"
                             "        ]\n"
                             "      }\n"
                             "    }\n"
                             "  ]\n"
                             "}\n");
    free(got);
    struct stat st;
    assert_int_equal(stat(SPEC, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(dir_entries(T), 1); /* no temporary file left */
}

static void test_unchanged_is_left_alone(void **state)
{
    (void)state;
    kdp_cdi_device dev = {.name = "ttyUSB0", .nodes = USB0, .n_nodes = 1};
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 1);
    struct stat a;
    struct stat b;
    assert_int_equal(stat(SPEC, &a), 0);
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 0);
    assert_int_equal(stat(SPEC, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino); /* the same file: not rewritten */
    kdp_cdi_node other = {.path = "/dev/ttyUSB1"};
    dev.nodes = &other;
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 1);
    assert_int_equal(stat(SPEC, &b), 0);
    assert_int_not_equal(a.st_ino, b.st_ino); /* replaced by a rename */
}

static void test_versions_and_escaping(void **state)
{
    (void)state;
    kdp_cdi_node moved = {.path = "/dev/ttyUSB0", .host_path = "/dev/serial/by-id/a\"b\\c"};
    kdp_cdi_device dev = {.name = "a:b.c-d_e", .nodes = &moved, .n_nodes = 1};
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 1);
    char *got = slurp(SPEC);
    assert_non_null(strstr(got, "\"cdiVersion\": \"0.5.0\"")); /* hostPath */
    assert_non_null(strstr(got, "\"hostPath\": \"/dev/serial/by-id/a\\\"b\\\\c\""));
    assert_non_null(strstr(got, "\"name\": \"a:b.c-d_e\""));
    free(got);
    /* a path that is not UTF-8 (a device node's name is bytes): still JSON */
    kdp_cdi_node odd = {.path = "/dev/tty\xff", .host_path = "/dev/by-id/\xc3"};
    dev.nodes = &odd;
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 1);
    got = slurp(SPEC);
    assert_non_null(strstr(got, "\"path\": \"/dev/tty\\ufffd\""));
    assert_non_null(strstr(got, "\"hostPath\": \"/dev/by-id/\\ufffd\""));
    free(got);
    /* a host_path equal to path is left out */
    kdp_cdi_node same = {.path = "/dev/x", .host_path = "/dev/x"};
    dev.nodes = &same;
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 1);
    got = slurp(SPEC);
    assert_non_null(strstr(got, "\"cdiVersion\": \"0.3.0\""));
    assert_null(strstr(got, "hostPath"));
    free(got);
    /* a '.' in the class needs 0.6.0 */
    char path[128];
    snprintf(path, sizeof(path), "%s/example.com-serial.v2.json", T);
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial.v2", &dev, 1, NULL), 1);
    got = slurp(path);
    assert_non_null(got);
    assert_non_null(strstr(got, "\"cdiVersion\": \"0.6.0\""));
    free(got);
}

static void test_invalid(void **state)
{
    (void)state;
    kdp_cdi_device dev = {.name = "ttyUSB0", .nodes = USB0, .n_nodes = 1};
    const char *bad_kinds[] = {"",
                               "serial",
                               "example.com/",
                               "/serial",
                               "example.com/serial=x",
                               "example.com/a/b",
                               "1example.com/serial",
                               "example.com/-x"};
    for (size_t i = 0; i < sizeof(bad_kinds) / sizeof(bad_kinds[0]); i++) {
        assert_int_equal(kdp_cdi_write_spec(T, bad_kinds[i], &dev, 1, NULL), -EINVAL);
        const char *why = NULL;
        assert_int_equal(kdp_validate_cdi_kind(bad_kinds[i], &why), -EINVAL);
        assert_non_null(why);
    }
    assert_int_equal(kdp_validate_cdi_kind("example.com/serial", NULL), 0);
    assert_int_equal(kdp_validate_cdi_kind(NULL, NULL), -EINVAL);
    assert_int_equal(kdp_cdi_write_spec("rel", "example.com/serial", &dev, 1, NULL), -EINVAL);
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", NULL, 1, NULL), -EINVAL);
    const char *bad_names[] = {"", "-a", "a-", "a/b", "a b", "a=b"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        kdp_cdi_device d = {.name = bad_names[i], .nodes = USB0, .n_nodes = 1};
        assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &d, 1, NULL), -EINVAL);
    }
    kdp_cdi_device none = {.name = "x", .nodes = USB0, .n_nodes = 0};
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &none, 1, NULL), -EINVAL);
    kdp_cdi_node rel = {.path = "dev/x"};
    kdp_cdi_node perm = {.path = "/dev/x", .permissions = "rx"};
    kdp_cdi_node hrel = {.path = "/dev/x", .host_path = "x"};
    const kdp_cdi_node *bad_nodes[] = {&rel, &perm, &hrel};
    for (size_t i = 0; i < 3; i++) {
        kdp_cdi_device d = {.name = "x", .nodes = bad_nodes[i], .n_nodes = 1};
        assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &d, 1, NULL), -EINVAL);
    }
    kdp_cdi_device twice[] = {dev, dev};
    char **names = (char **)0x1;
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", twice, 2, &names), -EEXIST);
    assert_ptr_equal(names, (char **)0x1);
    assert_int_equal(dir_entries(T), 0); /* nothing written */
}

static void test_empty_removes(void **state)
{
    (void)state;
    kdp_cdi_device dev = {.name = "ttyUSB0", .nodes = USB0, .n_nodes = 1};
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 1);
    char **names = NULL;
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", NULL, 0, &names), 1);
    assert_null(names[0]);
    kdp_strv_free(names);
    assert_int_equal(access(SPEC, F_OK), -1);
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", NULL, 0, NULL), 0);
    assert_int_equal(kdp_cdi_write_spec(T, "example.com/serial", &dev, 1, NULL), 1);
    assert_int_equal(kdp_cdi_remove_spec(T, "example.com/serial"), 1);
    assert_int_equal(kdp_cdi_remove_spec(T, "example.com/serial"), 0);
    assert_int_equal(kdp_cdi_remove_spec(T, "bad"), -EINVAL);
}

static void test_creates_dir(void **state)
{
    (void)state;
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/var/run/cdi", T);
    kdp_cdi_device dev = {.name = "ttyUSB0", .nodes = USB0, .n_nodes = 1};
    assert_int_equal(kdp_cdi_write_spec(dir, "example.com/serial", &dev, 1, NULL), 1);
    char path[192];
    snprintf(path, sizeof(path), "%s/example.com-serial.json", dir);
    assert_int_equal(access(path, R_OK), 0);
    /* a directory that cannot be made */
    char file[128];
    snprintf(file, sizeof(file), "%s/file", T);
    close(open(file, O_CREAT | O_WRONLY, 0600));
    snprintf(dir, sizeof(dir), "%s/file/cdi", T);
    assert_true(kdp_cdi_write_spec(dir, "example.com/serial", &dev, 1, NULL) < 0);
}

/* ---- atomicity ---- */

#define BIG 3000 /* devices: a spec of a few hundred KiB, written in many chunks */

static kdp_cdi_device *big_devs;
static kdp_cdi_node *big_nodes;
static char (*big_names)[16];
static char (*big_paths)[32];
static atomic_bool writing;

static void make_big(void)
{
    big_devs = calloc(BIG, sizeof(*big_devs));
    big_nodes = calloc(BIG, sizeof(*big_nodes));
    big_names = calloc(BIG, sizeof(*big_names));
    big_paths = calloc(BIG, sizeof(*big_paths));
    assert_true(big_devs && big_nodes && big_names && big_paths);
    for (size_t i = 0; i < BIG; i++) {
        snprintf(big_names[i], sizeof(big_names[i]), "d%zu", i);
        snprintf(big_paths[i], sizeof(big_paths[i]), "/dev/device%zu", i);
        big_nodes[i] = (kdp_cdi_node){.path = big_paths[i], .permissions = "rw"};
        big_devs[i] = (kdp_cdi_device){.name = big_names[i], .nodes = &big_nodes[i], .n_nodes = 1};
    }
}

static atomic_int write_errors;

/* Alternates a big spec and a small one. (No cmocka asserts off the main
 * thread: failures are counted.) */
static void *writer(void *arg)
{
    (void)arg;
    for (int i = 0; i < 60; i++) {
        size_t n = i % 2 ? 1 : BIG;
        if (kdp_cdi_write_spec(T, "example.com/serial", big_devs, n, NULL) != 1) {
            atomic_fetch_add(&write_errors, 1);
        }
    }
    atomic_store(&writing, false);
    return NULL;
}

/* The spec of the first n big devices, as written elsewhere. */
static char *reference(size_t n)
{
    char dir[128];
    char path[192];
    snprintf(dir, sizeof(dir), "%s/ref", T);
    assert_int_equal(kdp_cdi_write_spec(dir, "example.com/serial", big_devs, n, NULL), 1);
    snprintf(path, sizeof(path), "%s/example.com-serial.json", dir);
    char *s = slurp(path);
    assert_non_null(s);
    return s;
}

static void test_atomic(void **state)
{
    (void)state;
    make_big();
    char *big = reference(BIG);
    char *small = reference(1);
    assert_true(strlen(big) > 200000);
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    assert_true(in >= 0);
    assert_true(inotify_add_watch(in, T, IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO) >=
                0);
    atomic_store(&writing, true);
    atomic_store(&write_errors, 0);
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, writer, NULL), 0);
    size_t reads = 0;
    size_t bad = 0;
    while (atomic_load(&writing)) { /* a reader that must only see whole specs */
        char *s = slurp(SPEC);
        if (s) {
            bad += strcmp(s, big) != 0 && strcmp(s, small) != 0;
            reads++;
        }
        free(s);
    }
    pthread_join(tid, NULL);
    assert_int_equal(atomic_load(&write_errors), 0);
    assert_int_equal(bad, 0);
    assert_true(reads > 0);
    /* Under the final name, only renames: never created, written to, or
     * closed after writing. */
    _Alignas(struct inotify_event) char buf[65536];
    size_t renames = 0;
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof(*ev) + ev->len;
            if (ev->len && strcmp(ev->name, "example.com-serial.json") == 0) {
                assert_int_equal(ev->mask & (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE), 0);
                renames += (ev->mask & IN_MOVED_TO) != 0;
            }
        }
    }
    close(in);
    assert_int_equal(renames, 60);
    assert_int_equal(dir_entries(T), 2); /* the spec and ref/: no temporary file left */
    free(big);
    free(small);
    free(big_devs);
    free(big_nodes);
    free(big_names);
    free(big_paths);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unchanged_is_left_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_versions_and_escaping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_removes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_creates_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_atomic, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
