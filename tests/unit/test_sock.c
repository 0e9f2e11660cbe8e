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
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/sock.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/kdp-sock-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))) {
            char p[PATH_MAX];
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    if (d) {
        closedir(d);
    }
    return rmdir(dir);
}

/* The names in dir, "a b " (sorted by the caller's expectations: one). */
static size_t entries(char *names, size_t cap)
{
    names[0] = '\0';
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            strncat(names, e->d_name, cap - strlen(names) - 2);
            strcat(names, " ");
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The file appears listening: its name comes by a rename (IN_MOVED_TO),
 * never by a bind (IN_CREATE) that a watcher could see before listen();
 * owner-only, the inode reported, nothing else left in the directory. */
static void test_appears_listening(void **state)
{
    (void)state;
    int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    assert_true(in >= 0);
    assert_true(inotify_add_watch(in, dir, IN_CREATE | IN_MOVED_TO) >= 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/drv-reg.sock", dir);
    int fd = -1;
    ino_t ino = 0;
    assert_int_equal(kdp__sock_listen(path, 8, &fd, &ino), 0);
    _Alignas(struct inotify_event) char buf[4096];
    ssize_t len = read(in, buf, sizeof(buf));
    assert_true(len > 0);
    int created = 0;
    int moved = 0;
    for (char *p = buf; p < buf + len;) {
        const struct inotify_event *ev = (const struct inotify_event *)p;
        if (ev->len && strcmp(ev->name, "drv-reg.sock") == 0) {
            created += (ev->mask & IN_CREATE) != 0;
            moved += (ev->mask & IN_MOVED_TO) != 0;
        }
        p += sizeof(*ev) + ev->len;
    }
    assert_int_equal(created, 0);
    assert_int_equal(moved, 1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_ino, ino);
    char names[256];
    assert_int_equal(entries(names, sizeof(names)), 1);
    assert_string_equal(names, "drv-reg.sock ");
    int c = -1;
    assert_int_equal(kdp__sock_connect(path, &c), 0);
    close(c);
    assert_int_equal(kdp__sock_unlink_if_ours(path, ino), 0);
    close(fd);
    close(in);
}

/* A path that exists is refused as a bind there would be, untouched, with
 * no file of ours left behind. */
static void test_existing_path_refused(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/taken.sock", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("someone's", f);
    fclose(f);
    int fd = -1;
    assert_int_equal(kdp__sock_listen(path, 8, &fd, NULL), -EADDRINUSE);
    char names[256];
    assert_int_equal(entries(names, sizeof(names)), 1);
    assert_string_equal(names, "taken.sock ");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 9);
    unlink(path);
}

typedef struct racer {
    const char *path;
    pthread_barrier_t *start;
    int rc, fd;
    ino_t ino;
} racer;

static void *race(void *arg)
{
    racer *x = arg;
    pthread_barrier_wait(x->start);
    x->rc = kdp__sock_listen(x->path, 8, &x->fd, &x->ino);
    return NULL;
}

/* Two threads of one process listening at one path at once: one wins and
 * serves it, the other is refused (the hidden names never collide). */
static void test_two_threads_one_path(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/raced.sock", dir);
    for (int round = 0; round < 200; round++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        racer a = {path, &start, 0, -1, 0};
        racer b = {path, &start, 0, -1, 0};
        pthread_t ta, tb;
        assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
        assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&start);
        assert_true((a.rc == 0) != (b.rc == 0));
        racer *w = a.rc == 0 ? &a : &b;
        assert_int_equal((a.rc == 0 ? b.rc : a.rc), -EADDRINUSE);
        int c = -1;
        assert_int_equal(kdp__sock_connect(path, &c), 0);
        struct pollfd pf = {.fd = w->fd, .events = POLLIN};
        assert_int_equal(poll(&pf, 1, 1000), 1); /* the winner has the connection */
        close(c);
        assert_int_equal(kdp__sock_unlink_if_ours(path, w->ino), 0);
        close(w->fd);
        char names[256];
        assert_int_equal(entries(names, sizeof(names)), 0); /* nothing left behind */
    }
}

/* A path with no room for the hidden name beside it (107 bytes at most)
 * is bound directly, as before. */
static void test_long_path_bound_directly(void **state)
{
    (void)state;
    char path[128];
    int n = snprintf(path, sizeof(path), "%s/", dir);
    memset(path + n, 'x', 106 - (size_t)n);
    path[106] = '\0';
    int fd = -1;
    ino_t ino = 0;
    assert_int_equal(kdp__sock_listen(path, 8, &fd, &ino), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    char names[256];
    assert_int_equal(entries(names, sizeof(names)), 1);
    assert_int_equal(kdp__sock_unlink_if_ours(path, ino), 0);
    close(fd);
    memset(path + 106, 'y', 2); /* 108 bytes: no room for the NUL */
    path[108] = '\0';
    assert_int_equal(kdp__sock_listen(path, 8, &fd, NULL), -ENAMETOOLONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_appears_listening, setup, teardown),
        cmocka_unit_test_setup_teardown(test_existing_path_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_threads_one_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_path_bound_directly, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
