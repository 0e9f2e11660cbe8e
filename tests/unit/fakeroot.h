/* SPDX-License-Identifier: MIT */
/* A fake host root for the discovery tests: T/dev with regular files for
 * nodes, T/sys with attributes as files and relative links the way sysfs
 * makes them, created per test (setup) and removed after (teardown).
 * Static functions: include once per test executable, after cmocka.h. */
#ifndef KDP_TEST_FAKEROOT_H
#define KDP_TEST_FAKEROOT_H

#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every test that could block forever on a bug is killed by SIGALRM. */
#define WATCHDOG_S 20

static char T[64]; /* the test's root: T/dev, T/sys */
static char SYS[96];

/* snprintf into a PATH_MAX buffer; a cut path fails the test. */
static void pathf(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pathf(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    assert_true(w > 0 && w < PATH_MAX);
}

static void mkdirs(const char *rel)
{
    char p[PATH_MAX];
    pathf(p, "%s/%s", T, rel);
    for (char *s = p + strlen(T) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            (void)mkdir(p, 0755);
            *s = '/';
        }
    }
    (void)mkdir(p, 0755);
}

/* T/rel with content (parents created). */
static void put(const char *rel, const char *content)
{
    char dir[PATH_MAX];
    pathf(dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        mkdirs(dir);
    }
    char p[PATH_MAX];
    pathf(p, "%s/%s", T, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static void link_at(const char *target, const char *rel)
{
    char dir[PATH_MAX];
    pathf(dir, "%s", rel);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    char p[PATH_MAX];
    pathf(p, "%s/%s", T, rel);
    assert_int_equal(symlink(target, p), 0);
}

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
    snprintf(T, sizeof(T), "/tmp/kdp-fake-XXXXXX");
    assert_non_null(mkdtemp(T));
    snprintf(SYS, sizeof(SYS), "%s/sys", T);
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

static void put_sys(const char *rel, const char *content)
{
    char p[PATH_MAX];
    pathf(p, "sys/%s", rel);
    put(p, content);
}

/* T/sys/<link> -> <target> (both relative to T/sys), as a relative link
 * the way sysfs makes them. */
static void sys_link(const char *target, const char *link)
{
    char rel[PATH_MAX] = "";
    for (const char *c = link; *c; c++) {
        if (*c == '/') {
            strcat(rel, "../");
        }
    }
    strcat(rel, target);
    char p[PATH_MAX];
    pathf(p, "sys/%s", link);
    link_at(rel, p);
}

static void assert_strv(char **v, const char *const *want, size_t n)
{
    assert_non_null(v);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(v[i]);
        assert_string_equal(v[i], want[i]);
    }
    assert_null(v[n]);
}

#endif
