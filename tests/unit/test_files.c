/* SPDX-License-Identifier: MIT */
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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"

static char root[64];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/kdp-files-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static char *at(const char *rel)
{
    static char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s/%s", root, rel);
    return buf;
}

/* Entries of dir, dot files included (but . and ..). */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

static void test_mkdir_p(void **state)
{
    (void)state;
    struct stat st;
    assert_int_equal(kdp__mkdir_p(at("a/b/c"), 0750), 0);
    assert_int_equal(stat(at("a/b/c"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777 & ~0750, 0);
    assert_int_equal(kdp__mkdir_p(at("a/b/c"), 0750), 0); /* again: nothing to do */
    assert_int_equal(kdp__mkdir_p(at("a/b/c/"), 0750), 0);
    /* a file in the way */
    FILE *f = fopen(at("a/file"), "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(kdp__mkdir_p(at("a/file/d"), 0750), -ENOTDIR);
    char longp[PATH_MAX + 10];
    memset(longp, 'x', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    assert_int_equal(kdp__mkdir_p(longp, 0750), -ENAMETOOLONG);
}

static void test_replace_file(void **state)
{
    (void)state;
    const char *p = at("spec.json");
    assert_int_equal(kdp__replace_file(p, "one", 3, 0600), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 3);
    assert_int_equal(st.st_mode & 0777, 0600);
    ino_t first = st.st_ino;
    assert_int_equal(kdp__replace_file(p, "second", 6, 0644), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 6);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_true(st.st_ino != first); /* a new file renamed over: readers never see half */
    char buf[16] = {0};
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof(buf), f), 6);
    fclose(f);
    assert_string_equal(buf, "second");
    assert_int_equal(entries(root), 1); /* no temporary file left */
    /* an empty file too */
    assert_int_equal(kdp__replace_file(p, "", 0, 0644), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 0);
}

static void test_replace_file_fails_cleanly(void **state)
{
    (void)state;
    assert_int_equal(kdp__replace_file(at("missing/x.json"), "x", 1, 0644), -ENOENT);
    /* a directory where the file should go: rename fails, the temp goes */
    assert_int_equal(kdp__mkdir_p(at("d/x.json"), 0755), 0);
    assert_int_equal(kdp__replace_file(at("d/x.json"), "x", 1, 0644), -EISDIR);
    assert_int_equal(entries(at("d")), 1);
    assert_int_equal(kdp__sync_dir(at("missing")), -ENOENT);
}

/* A directory others can write to is not trusted; sticky is. */
static void test_dir_trusted(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(kdp__dir_trusted(root, &why), 0);
    assert_int_equal(mkdir(at("open"), 0755), 0);
    assert_int_equal(chmod(at("open"), 0777), 0);
    assert_int_equal(kdp__dir_trusted(at("open"), &why), -KDP__EUNTRUSTED);
    assert_non_null(strstr(why, "writable by every user (mode 0777)"));
    assert_int_equal(chmod(at("open"), 0775), 0);
    assert_int_equal(kdp__dir_trusted(at("open"), &why), -KDP__EUNTRUSTED);
    assert_non_null(strstr(why, "writable by its group"));
    assert_int_equal(chmod(at("open"), 01777), 0); /* as /tmp */
    assert_int_equal(kdp__dir_trusted(at("open"), &why), 0);
    assert_int_equal(kdp__dir_trusted(at("none"), &why), -ENOENT);
    FILE *f = fopen(at("file"), "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(kdp__dir_trusted(at("file"), &why), -ENOTDIR);
    if (geteuid() == 0) {
        /* someone else's directory (not root's) */
        assert_int_equal(mkdir(at("theirs"), 0755), 0);
        assert_int_equal(chown(at("theirs"), 65534, 65534), 0);
        assert_int_equal(kdp__dir_trusted(at("theirs"), &why), -KDP__EUNTRUSTED);
        assert_non_null(strstr(why, "belongs to user 65534"));
    }
}

static void test_relative_path(void **state)
{
    (void)state;
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(root), 0);
    int r = kdp__replace_file("rel.txt", "r", 1, 0644);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(r, 0);
    struct stat st;
    assert_int_equal(stat(at("rel.txt"), &st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mkdir_p, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_file_fails_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dir_trusted, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
