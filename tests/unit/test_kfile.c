/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s/kfile.h"

/* A file comes back whole with its length (NUL bytes included); a
 * directory, a missing file and one over the bound are refused. */
static void test_read(void **state)
{
    (void)state;
    char path[] = "/tmp/kdp-test-kfile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char body[] = "apiVersion: v1\n\0tail";
    assert_int_equal(write(fd, body, sizeof(body) - 1), (ssize_t)(sizeof(body) - 1));
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(kdp__kfile_read(path, &buf, &len), 0);
    assert_int_equal(len, sizeof(body) - 1);
    assert_memory_equal(buf, body, len);
    assert_int_equal(buf[len], '\0');
    free(buf);
    buf = NULL;
    assert_int_equal(kdp__kfile_read(path, &buf, NULL), 0); /* the length is optional */
    assert_string_equal(buf, "apiVersion: v1\n");
    free(buf);

    assert_int_equal(ftruncate(fd, (off_t)KDP__KFILE_MAX + 1), 0);
    buf = path; /* untouched on failure */
    assert_int_equal(kdp__kfile_read(path, &buf, &len), -EFBIG);
    assert_ptr_equal(buf, path);
    assert_int_equal(ftruncate(fd, (off_t)KDP__KFILE_MAX), 0);
    assert_int_equal(kdp__kfile_read(path, &buf, &len), 0);
    assert_int_equal(len, KDP__KFILE_MAX);
    free(buf);
    close(fd);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(kdp__kfile_read(path, &buf, &len), -ENOENT);
    assert_int_equal(kdp__kfile_read("/tmp", &buf, &len), -EISDIR);
}

static void test_base64(void **state)
{
    (void)state;
    struct {
        const char *in, *out;
    } v[] = {{"", ""},
             {"Zg==", "f"},
             {"Zm8=", "fo"},
             {"Zm9v", "foo"},
             {"Zm9vYg==", "foob"},
             {"Zm9vYmE=", "fooba"},
             {"Zm9vYmFy", "foobar"},
             {"Zm9v\nYmFy", "foobar"},
             {"Zg", "f"}};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char *o = NULL;
        size_t n = 0;
        assert_int_equal(kdp__kfile_base64(v[i].in, &o, &n), 0);
        assert_int_equal(n, strlen(v[i].out));
        assert_string_equal(o, v[i].out);
        free(o);
    }
    const char *bad[] = {"Z", "Zm9vY", "Zg==Zg", "Z*==", "Zm9v!"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *o = NULL;
        size_t n = 0;
        assert_int_equal(kdp__kfile_base64(bad[i], &o, &n), -EINVAL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
