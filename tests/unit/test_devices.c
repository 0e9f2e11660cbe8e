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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "kdp.h"
#include "plugin/devices.h"

static int log_lines;

static void count_log(kdp_log_level level, const char *msg, void *ud)
{
    (void)level;
    (void)msg;
    (void)ud;
    log_lines++;
}

static int setup(void **state)
{
    (void)state;
    log_lines = 0;
    kdp_log_set(KDP_LOG_WARNING, count_log, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kdp_log_set(KDP_LOG_WARNING, NULL, NULL);
    return 0;
}

#include "failmalloc.h"

static kdp_device dev(const char *id)
{
    kdp_device d = {.id = id, .health = KDP_HEALTHY};
    return d;
}

/* t holds exactly these IDs (given sorted), each found through the index. */
static void assert_ids(const kdp__devtab *t, const char *const *ids, size_t n)
{
    assert_int_equal(t->n, n);
    const kdp__dev **sorted = NULL;
    assert_int_equal(kdp__devtab_sorted(t, &sorted), 0);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(sorted[i]->id, ids[i]);
        assert_ptr_equal(kdp__devtab_find(t, ids[i]), sorted[i]);
    }
    free(sorted);
}

static void test_index(void **state)
{
    (void)state;
    kdp__devtab t;
    kdp__devtab_init(&t);
    const char *order[] = {"c", "a", "b", "aa", "B", "z", "0"};
    for (size_t i = 0; i < 7; i++) {
        kdp_device d = dev(order[i]);
        assert_int_equal(kdp__devtab_add(&t, &d, NULL), 0);
    }
    const char *want[] = {"0", "B", "a", "aa", "b", "c", "z"};
    assert_ids(&t, want, 7);
    assert_null(kdp__devtab_find(&t, "ab"));
    assert_null(kdp__devtab_find(&t, "zz"));
    assert_null(kdp__devtab_find(&t, ""));
    assert_null(kdp__devtab_find(&t, NULL));

    char id[16];
    for (int i = 999; i >= 0; i--) {
        snprintf(id, sizeof(id), "n%03d", i);
        kdp_device d = dev(id);
        assert_int_equal(kdp__devtab_add(&t, &d, NULL), 0);
    }
    assert_int_equal(t.n, 1007);
    const kdp__dev **sorted = NULL;
    assert_int_equal(kdp__devtab_sorted(&t, &sorted), 0);
    for (size_t i = 1; i < t.n; i++) {
        assert_true(strcmp(sorted[i - 1]->id, sorted[i]->id) < 0);
    }
    free(sorted);
    kdp__devtab_clear(&t);
    assert_int_equal(t.n, 0);
    assert_null(t.devs);
    /* Reusable after clear. */
    kdp_device d = dev("x");
    assert_int_equal(kdp__devtab_add(&t, &d, NULL), 0);
    kdp__devtab_clear(&t);
    kdp__devtab_clear(NULL);
}

/* Random adds, replacements and removals against a plain array of flags:
 * after every step each ID is found exactly when it should be, with its
 * last health, and every device in the array is where the index says. */
static void test_churn(void **state)
{
    (void)state;
    enum { N = 2000, STEPS = 40000 };
    static signed char want[N]; /* -1 absent, else the health */
    memset(want, -1, sizeof(want));
    kdp__devtab t;
    kdp__devtab_init(&t);
    uint64_t x = 88172645463325252ULL;
    size_t present = 0;
    char id[16];
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t k = (size_t)(x % N);
        snprintf(id, sizeof(id), "d%zu", k);
        unsigned what = (unsigned)(x >> 32) % 3;
        if (what < 2) {
            kdp_device d = dev(id);
            d.health = what ? KDP_UNHEALTHY : KDP_HEALTHY;
            kdp__dev nd;
            kdp__dev old;
            assert_int_equal(kdp__dev_from_public(&nd, &d, NULL), 0);
            int r = kdp__devtab_put(&t, &nd, &old);
            assert_int_equal(r, want[k] >= 0 ? 1 : 0);
            assert_true(r == 0 || old.health == (kdp_health)want[k]);
            kdp__dev_free(&old);
            present += want[k] < 0;
            want[k] = (signed char)d.health;
        } else {
            int r = kdp__devtab_remove(&t, id);
            assert_int_equal(r, want[k] >= 0 ? 0 : -ENOENT);
            present -= want[k] >= 0;
            want[k] = -1;
        }
        assert_int_equal(t.n, present);
        if (step % 997 == 0 || step == STEPS - 1) {
            for (size_t i = 0; i < N; i++) {
                snprintf(id, sizeof(id), "d%zu", i);
                const kdp__dev *f = kdp__devtab_find(&t, id);
                assert_true((f != NULL) == (want[i] >= 0));
                assert_true(!f || f->health == (kdp_health)want[i]);
            }
            for (size_t i = 0; i < t.n; i++) {
                assert_ptr_equal(kdp__devtab_find(&t, t.devs[i].id), &t.devs[i]);
            }
        }
    }
    kdp__dev gone;
    assert_int_equal(kdp__devtab_take(&t, "nope", &gone), -ENOENT);
    assert_int_equal(kdp__devtab_take(&t, NULL, &gone), -ENOENT);
    kdp__devtab_clear(&t);
}

static void test_duplicates_and_invalid(void **state)
{
    (void)state;
    kdp__devtab t;
    kdp__devtab_init(&t);
    kdp_device d = dev("gpu0");
    assert_int_equal(kdp__devtab_add(&t, &d, NULL), 0);
    const char *why = NULL;
    assert_int_equal(kdp__devtab_add(&t, &d, &why), -EEXIST);
    assert_non_null(why);
    assert_non_null(strstr(why, "duplicate"));

    int64_t numa[] = {0};
    kdp_device bad[] = {
        {.id = NULL},
        {.id = ""},
        {.id = "a/b"},
        {.id = "a,b"},
        {.id = "a b"},
        {.id = "ok", .health = (kdp_health)7},
        {.id = "ok", .numa_nodes = NULL, .n_numa_nodes = 1},
        {.id = "ok", .host_path = "dev/ttyUSB0"},
        {.id = "ok", .host_path = "/dev/ttyUSB0", .container_path = "ttyUSB0"},
        {.id = "ok", .host_path = "/dev/ttyUSB0", .permissions = "rwx"},
        {.id = "ok", .host_path = "/dev/ttyUSB0", .permissions = ""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        assert_int_equal(kdp__devtab_add(&t, &bad[i], &why), -EINVAL);
        assert_non_null(why);
    }
    assert_int_equal(kdp__devtab_add(&t, NULL, NULL), -EINVAL);
    assert_int_equal(kdp__devtab_add(NULL, &d, NULL), -EINVAL);
    assert_int_equal(t.n, 1);

    kdp_device good = {.id = "ok",
                       .health = KDP_UNHEALTHY,
                       .numa_nodes = numa,
                       .n_numa_nodes = 1,
                       .host_path = "/dev/ttyUSB0",
                       .container_path = "/dev/tty0",
                       .permissions = "rwm"};
    assert_int_equal(kdp__devtab_add(&t, &good, NULL), 0);
    const kdp__dev *f = kdp__devtab_find(&t, "ok");
    assert_non_null(f);
    assert_ptr_not_equal(f->id, good.id); /* copied */
    assert_int_equal(f->health, KDP_UNHEALTHY);
    assert_string_equal(f->host_path, "/dev/ttyUSB0");
    assert_string_equal(f->container_path, "/dev/tty0");
    assert_string_equal(f->permissions, "rwm");
    assert_null(kdp__devtab_find(&t, "gpu0")->host_path);
    kdp__devtab_clear(&t);
}

static void test_public_list_add(void **state)
{
    (void)state;
    kdp_device_list list;
    kdp__devtab_init(&list.tab);
    kdp_device d = dev("b");
    assert_int_equal(kdp_device_list_add(&list, &d), 0);
    d.id = "a";
    assert_int_equal(kdp_device_list_add(&list, &d), 0);
    assert_int_equal(log_lines, 0);
    assert_int_equal(kdp_device_list_add(&list, &d), -EEXIST);
    d.id = "bad id";
    assert_int_equal(kdp_device_list_add(&list, &d), -EINVAL);
    assert_int_equal(log_lines, 2); /* each refusal says why */
    assert_int_equal(kdp_device_list_add(NULL, &d), -EINVAL);
    assert_int_equal(kdp_device_list_add(&list, NULL), -EINVAL);
    const char *want[] = {"a", "b"};
    assert_ids(&list.tab, want, 2);
    kdp__devtab_clear(&list.tab);
}

/* The author's data goes with the device through every path: the list op's
 * table, an array, a copy, the export; it never makes a change the
 * kubelet sees. */
static void test_author_data(void **state)
{
    (void)state;
    int x = 1;
    int y = 2;
    kdp_device_list list;
    kdp__devtab_init(&list.tab);
    kdp_device d = dev("b");
    d.data = &y;
    assert_int_equal(kdp_device_list_add(&list, &d), 0);
    d.id = "a";
    d.data = &x;
    assert_int_equal(kdp_device_list_add(&list, &d), 0);
    assert_ptr_equal(kdp__devtab_find(&list.tab, "a")->data, &x);
    assert_ptr_equal(kdp__devtab_find(&list.tab, "b")->data, &y);
    kdp__devtab copy;
    kdp__devtab_init(&copy);
    assert_int_equal(kdp__devtab_copy(&copy, &list.tab), 0);
    assert_ptr_equal(kdp__devtab_find(&copy, "b")->data, &y);
    kdp_device *out;
    size_t n;
    assert_int_equal(kdp__devtab_export(&copy, &out, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(out[0].id, "a");
    assert_ptr_equal(out[0].data, &x);
    assert_ptr_equal(out[1].data, &y);
    /* the same devices with other data: nothing for the kubelet */
    out[0].data = NULL;
    kdp__devtab other;
    kdp__devtab_init(&other);
    assert_int_equal(kdp__devtab_from_array(&other, out, n, NULL), 0);
    assert_null(kdp__devtab_find(&other, "a")->data);
    assert_true(kdp__devtab_same_for_kubelet(&other, &copy));
    free(out);
    kdp__devtab_clear(&other);
    kdp__devtab_clear(&copy);
    kdp__devtab_clear(&list.tab);
}

static void test_from_array(void **state)
{
    (void)state;
    kdp__devtab t;
    kdp__devtab_init(&t);
    kdp_device old = dev("old");
    assert_int_equal(kdp__devtab_add(&t, &old, NULL), 0);

    kdp_device devs[] = {dev("c"), dev("a"), dev("b")};
    const char *why = NULL;
    /* A bad device anywhere: nothing changes. */
    devs[2].permissions = "q";
    assert_int_equal(kdp__devtab_from_array(&t, devs, 3, &why), -EINVAL);
    assert_non_null(why);
    const char *just_old[] = {"old"};
    assert_ids(&t, just_old, 1);
    devs[2].permissions = NULL;
    /* A duplicate anywhere: nothing changes. */
    devs[2].id = "c";
    why = NULL;
    assert_int_equal(kdp__devtab_from_array(&t, devs, 3, &why), -EEXIST);
    assert_non_null(why);
    assert_ids(&t, just_old, 1);
    devs[2].id = "b";
    assert_int_equal(kdp__devtab_from_array(&t, NULL, 3, NULL), -EINVAL);
    assert_ids(&t, just_old, 1);

    assert_int_equal(kdp__devtab_from_array(&t, devs, 3, NULL), 0);
    const char *want[] = {"a", "b", "c"};
    assert_ids(&t, want, 3);
    assert_int_equal(kdp__devtab_from_array(&t, NULL, 0, NULL), 0);
    assert_int_equal(t.n, 0);
    kdp__devtab_clear(&t);
}

static void test_same_for_kubelet(void **state)
{
    (void)state;
    int64_t n0[] = {0};
    int64_t n01[] = {1, 0, -1};
    int64_t n10[] = {0, 1, 1};
    kdp_device a[] = {dev("x"), dev("y"), dev("z")};
    kdp_device b[] = {dev("z"), dev("x"), dev("y")};
    a[0].numa_nodes = n01;
    a[0].n_numa_nodes = 3;
    b[1].numa_nodes = n10;
    b[1].n_numa_nodes = 3;
    b[1].host_path = "/dev/x"; /* host paths do not matter to the kubelet */
    kdp__devtab ta;
    kdp__devtab tb;
    kdp__devtab_init(&ta);
    kdp__devtab_init(&tb);
    assert_int_equal(kdp__devtab_from_array(&ta, a, 3, NULL), 0);
    assert_int_equal(kdp__devtab_from_array(&tb, b, 3, NULL), 0);
    assert_true(kdp__devtab_same_for_kubelet(&ta, &tb));
    assert_true(kdp__devtab_same_for_kubelet(&tb, &ta));

    assert_int_equal(kdp__devtab_set_health(&tb, "y", KDP_UNHEALTHY), 1);
    assert_false(kdp__devtab_same_for_kubelet(&ta, &tb));
    assert_int_equal(kdp__devtab_set_health(&tb, "y", KDP_HEALTHY), 1);
    assert_true(kdp__devtab_same_for_kubelet(&ta, &tb));

    b[1].numa_nodes = n0;
    b[1].n_numa_nodes = 1;
    assert_int_equal(kdp__devtab_from_array(&tb, b, 3, NULL), 0);
    assert_false(kdp__devtab_same_for_kubelet(&ta, &tb));

    assert_int_equal(kdp__devtab_from_array(&tb, a, 2, NULL), 0);
    assert_false(kdp__devtab_same_for_kubelet(&ta, &tb));
    assert_int_equal(kdp__devtab_from_array(&tb, a, 3, NULL), 0);
    assert_true(kdp__devtab_same_for_kubelet(&ta, &tb));
    a[2].id = "w";
    assert_int_equal(kdp__devtab_from_array(&tb, a, 3, NULL), 0);
    assert_false(kdp__devtab_same_for_kubelet(&ta, &tb));

    kdp__devtab empty1;
    kdp__devtab empty2;
    kdp__devtab_init(&empty1);
    kdp__devtab_init(&empty2);
    assert_true(kdp__devtab_same_for_kubelet(&empty1, &empty2));
    assert_false(kdp__devtab_same_for_kubelet(&empty1, &ta));
    kdp__devtab_clear(&ta);
    kdp__devtab_clear(&tb);
}

static void test_health(void **state)
{
    (void)state;
    kdp_device devs[] = {dev("a"), dev("b"), dev("c")};
    devs[1].health = KDP_UNHEALTHY;
    kdp__devtab t;
    kdp__devtab_init(&t);
    assert_int_equal(kdp__devtab_from_array(&t, devs, 3, NULL), 0);
    assert_int_equal(kdp__devtab_count_healthy(&t), 2);
    assert_int_equal(kdp__devtab_find(&t, "b")->health, KDP_UNHEALTHY);

    assert_int_equal(kdp__devtab_set_health(&t, "a", KDP_UNHEALTHY), 1);
    assert_int_equal(kdp__devtab_set_health(&t, "a", KDP_UNHEALTHY), 0);
    assert_int_equal(kdp__devtab_count_healthy(&t), 1);
    /* and back: health is never one-way */
    assert_int_equal(kdp__devtab_set_health(&t, "a", KDP_HEALTHY), 1);
    assert_int_equal(kdp__devtab_set_health(&t, "b", KDP_HEALTHY), 1);
    assert_int_equal(kdp__devtab_set_health(&t, "b", KDP_HEALTHY), 0);
    assert_int_equal(kdp__devtab_count_healthy(&t), 3);

    assert_int_equal(kdp__devtab_set_health(&t, "nope", KDP_HEALTHY), -ENOENT);
    assert_int_equal(kdp__devtab_set_health(&t, "", KDP_HEALTHY), -ENOENT);
    assert_int_equal(kdp__devtab_set_health(&t, NULL, KDP_HEALTHY), -EINVAL);
    assert_int_equal(kdp__devtab_set_health(&t, "a", (kdp_health)2), -EINVAL);
    assert_int_equal(kdp__devtab_count_healthy(NULL), 0);
    kdp__devtab_clear(&t);
}

static void test_numa_normalisation(void **state)
{
    (void)state;
    int64_t messy[] = {3, -1, 1, 3, 0, -5, 1, 3};
    int64_t none[] = {-1};
    int64_t one[] = {7, 7};
    kdp_device devs[] = {dev("a"), dev("b"), dev("c"), dev("d")};
    devs[0].numa_nodes = messy;
    devs[0].n_numa_nodes = sizeof(messy) / sizeof(messy[0]);
    devs[1].numa_nodes = none;
    devs[1].n_numa_nodes = 1;
    devs[2].numa_nodes = one;
    devs[2].n_numa_nodes = 2;
    devs[3].numa_nodes = messy; /* ignored: n is 0 */
    kdp__devtab t;
    kdp__devtab_init(&t);
    assert_int_equal(kdp__devtab_from_array(&t, devs, 4, NULL), 0);
    const kdp__dev *a = kdp__devtab_find(&t, "a");
    assert_int_equal(a->n_numa, 3);
    assert_int_equal(a->numa[0], 0);
    assert_int_equal(a->numa[1], 1);
    assert_int_equal(a->numa[2], 3);
    assert_int_equal(kdp__devtab_find(&t, "b")->n_numa, 0);
    assert_null(kdp__devtab_find(&t, "b")->numa);
    assert_int_equal(kdp__devtab_find(&t, "c")->n_numa, 1);
    assert_int_equal(kdp__devtab_find(&t, "c")->numa[0], 7);
    assert_int_equal(kdp__devtab_find(&t, "d")->n_numa, 0);
    kdp__devtab_clear(&t);
}

static void test_copy_move(void **state)
{
    (void)state;
    int64_t numa[] = {1, 2};
    kdp_device devs[] = {dev("a"), dev("b")};
    devs[0].numa_nodes = numa;
    devs[0].n_numa_nodes = 2;
    devs[1].host_path = "/dev/b";
    devs[1].container_path = "/dev/bb";
    devs[1].permissions = "r";
    devs[1].health = KDP_UNHEALTHY;
    kdp__devtab src;
    kdp__devtab dst;
    kdp__devtab_init(&src);
    kdp__devtab_init(&dst);
    assert_int_equal(kdp__devtab_from_array(&src, devs, 2, NULL), 0);
    kdp_device other = dev("other");
    assert_int_equal(kdp__devtab_add(&dst, &other, NULL), 0); /* freed by the copy */

    assert_int_equal(kdp__devtab_copy(&dst, &src), 0);
    assert_int_equal(dst.n, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_ptr_not_equal(dst.devs[i].id, src.devs[i].id);
        assert_string_equal(dst.devs[i].id, src.devs[i].id);
        assert_int_equal(dst.devs[i].health, src.devs[i].health);
        assert_int_equal(dst.devs[i].n_numa, src.devs[i].n_numa);
    }
    assert_ptr_not_equal(dst.devs[0].numa, src.devs[0].numa);
    assert_int_equal(dst.devs[0].numa[1], 2);
    assert_string_equal(dst.devs[1].host_path, "/dev/b");
    assert_string_equal(dst.devs[1].container_path, "/dev/bb");
    assert_string_equal(dst.devs[1].permissions, "r");
    assert_null(dst.devs[0].host_path);
    assert_true(kdp__devtab_same_for_kubelet(&dst, &src));
    /* Independent: changing one leaves the other. */
    assert_int_equal(kdp__devtab_set_health(&dst, "a", KDP_UNHEALTHY), 1);
    assert_int_equal(kdp__devtab_find(&src, "a")->health, KDP_HEALTHY);

    kdp__devtab moved;
    kdp__devtab_init(&moved);
    assert_int_equal(kdp__devtab_add(&moved, &other, NULL), 0); /* freed by the move */
    kdp__devtab_move(&moved, &src);
    assert_int_equal(src.n, 0);
    assert_null(src.devs);
    assert_int_equal(moved.n, 2);
    assert_string_equal(moved.devs[1].host_path, "/dev/b");
    kdp__devtab_move(&moved, &moved);
    assert_int_equal(moved.n, 2);

    /* Copying an empty table empties the destination. */
    assert_int_equal(kdp__devtab_copy(&dst, &src), 0);
    assert_int_equal(dst.n, 0);
    kdp__devtab_clear(&src);
    kdp__devtab_clear(&dst);
    kdp__devtab_clear(&moved);
}

/* --- diff --- */

typedef struct diff_log {
    char lines[16][32];
    size_t n;
} diff_log;

static void record_diff(const kdp__dev *o, const kdp__dev *n, void *ud)
{
    diff_log *log = ud;
    assert_true(log->n < 16);
    assert_true(o || n);
    if (o && n) {
        assert_string_equal(o->id, n->id);
        snprintf(log->lines[log->n++], 32, "~%s", o->id);
    } else if (o) {
        snprintf(log->lines[log->n++], 32, "-%s", o->id);
    } else {
        snprintf(log->lines[log->n++], 32, "+%s", n->id);
    }
}

static void expect_diff(const kdp__devtab *a, const kdp__devtab *b, const char *const *want,
                        size_t n)
{
    diff_log log = {.n = 0};
    kdp__devtab_diff(a, b, record_diff, &log);
    assert_int_equal(log.n, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(log.lines[i], want[i]);
    }
}

static void test_diff(void **state)
{
    (void)state;
    int64_t n0[] = {0};
    int64_t n1[] = {1};
    kdp_device old_devs[] = {dev("a"), dev("b"), dev("c"), dev("d"), dev("f")};
    kdp_device new_devs[] = {dev("e"), dev("d"), dev("c"), dev("b"), dev("f")};
    old_devs[2].numa_nodes = n0;
    old_devs[2].n_numa_nodes = 1;
    new_devs[2].numa_nodes = n1;
    new_devs[2].n_numa_nodes = 1;
    new_devs[3].health = KDP_UNHEALTHY;
    new_devs[4].host_path = "/dev/f"; /* not a kubelet-visible change */
    kdp__devtab a;
    kdp__devtab b;
    kdp__devtab empty;
    kdp__devtab_init(&a);
    kdp__devtab_init(&b);
    kdp__devtab_init(&empty);
    assert_int_equal(kdp__devtab_from_array(&a, old_devs, 5, NULL), 0);
    assert_int_equal(kdp__devtab_from_array(&b, new_devs, 5, NULL), 0);

    const char *ab[] = {"-a", "~b", "~c", "+e"};
    expect_diff(&a, &b, ab, 4);
    const char *ba[] = {"+a", "~b", "~c", "-e"};
    expect_diff(&b, &a, ba, 4);
    expect_diff(&a, &a, NULL, 0);
    const char *added[] = {"+a", "+b", "+c", "+d", "+f"};
    expect_diff(&empty, &a, added, 5);
    const char *removed[] = {"-a", "-b", "-c", "-d", "-f"};
    expect_diff(&a, &empty, removed, 5);
    expect_diff(NULL, &a, added, 5);
    kdp__devtab_diff(&a, &b, NULL, NULL); /* no callback: nothing to do */

    kdp__devtab_clear(&a);
    kdp__devtab_clear(&b);
}

/* --- encoding --- */

static V1beta1__ListAndWatchResponse *encode_decode(const kdp__devtab *t)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(kdp__devtab_encode(t, &buf, &len), 0);
    assert_non_null(buf);
    V1beta1__ListAndWatchResponse *m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
    assert_non_null(m);
    free(buf);
    return m;
}

/* The device with this ID in m (once; the order of a message is the
 * table's, which is no particular one). */
static const V1beta1__Device *msg_dev(const V1beta1__ListAndWatchResponse *m, const char *id)
{
    const V1beta1__Device *found = NULL;
    for (size_t i = 0; i < m->n_devices; i++) {
        if (strcmp(m->devices[i]->id, id) == 0) {
            assert_null(found);
            found = m->devices[i];
        }
    }
    assert_non_null(found);
    return found;
}

static void test_encode_decode(void **state)
{
    (void)state;
    int64_t numa[] = {3, -1, 1, 1};
    kdp_device devs[] = {dev("gpu1"), dev("gpu0"), dev("gpu2")};
    devs[0].health = KDP_UNHEALTHY;
    devs[1].numa_nodes = numa;
    devs[1].n_numa_nodes = 4;
    devs[1].host_path = "/dev/gpu0";
    devs[2].numa_nodes = numa + 1; /* only -1: no topology at all */
    devs[2].n_numa_nodes = 1;
    kdp__devtab t;
    kdp__devtab_init(&t);
    assert_int_equal(kdp__devtab_from_array(&t, devs, 3, NULL), 0);

    V1beta1__ListAndWatchResponse *m = encode_decode(&t);
    assert_int_equal(m->n_devices, 3);
    const V1beta1__Device *g0 = msg_dev(m, "gpu0");
    assert_string_equal(g0->health, "Healthy");
    assert_non_null(g0->topology);
    assert_int_equal(g0->topology->n_nodes, 2);
    assert_int_equal(g0->topology->nodes[0]->id, 1);
    assert_int_equal(g0->topology->nodes[1]->id, 3);
    assert_string_equal(msg_dev(m, "gpu1")->health, "Unhealthy");
    assert_null(msg_dev(m, "gpu1")->topology);
    assert_string_equal(msg_dev(m, "gpu2")->health, "Healthy");
    assert_null(msg_dev(m, "gpu2")->topology);
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);

    /* Health both ways reaches the wire. */
    assert_int_equal(kdp__devtab_set_health(&t, "gpu1", KDP_HEALTHY), 1);
    assert_int_equal(kdp__devtab_set_health(&t, "gpu0", KDP_UNHEALTHY), 1);
    m = encode_decode(&t);
    assert_string_equal(msg_dev(m, "gpu0")->health, "Unhealthy");
    assert_string_equal(msg_dev(m, "gpu1")->health, "Healthy");
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    kdp__devtab_clear(&t);

    /* An empty table is an empty message (the kubelet: no devices). */
    uint8_t *buf = NULL;
    size_t len = 99;
    assert_int_equal(kdp__devtab_encode(&t, &buf, &len), 0);
    assert_non_null(buf);
    assert_int_equal(len, 0);
    free(buf);
    m = encode_decode(&t);
    assert_int_equal(m->n_devices, 0);
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    assert_int_equal(kdp__devtab_encode(NULL, &buf, &len), -EINVAL);
}

#define BIG_N 100000

static void test_encode_100k(void **state)
{
    (void)state;
    kdp_device *devs = calloc(BIG_N, sizeof(*devs));
    char(*ids)[16] = calloc(BIG_N, sizeof(*ids));
    assert_non_null(devs);
    assert_non_null(ids);
    int64_t numa[] = {0, 1};
    /* Given in descending order: the message keeps the table's order. */
    for (size_t i = 0; i < BIG_N; i++) {
        snprintf(ids[i], sizeof(ids[i]), "dev-%06zu", BIG_N - 1 - i);
        devs[i].id = ids[i];
        devs[i].health = i % 7 == 0 ? KDP_UNHEALTHY : KDP_HEALTHY;
        devs[i].numa_nodes = numa + (i % 2);
        devs[i].n_numa_nodes = i % 3 == 0 ? 0 : 2 - (i % 2);
    }
    kdp__devtab t;
    kdp__devtab_init(&t);
    assert_int_equal(kdp__devtab_from_array(&t, devs, BIG_N, NULL), 0);
    V1beta1__ListAndWatchResponse *m = encode_decode(&t);
    assert_int_equal(m->n_devices, BIG_N);
    for (size_t k = 0; k < BIG_N; k++) {
        size_t i = k; /* nothing removed: the table's order is the input's */
        const V1beta1__Device *d = m->devices[k];
        assert_string_equal(d->id, ids[i]);
        assert_string_equal(d->health, devs[i].health == KDP_HEALTHY ? "Healthy" : "Unhealthy");
        if (devs[i].n_numa_nodes == 0) {
            assert_null(d->topology);
        } else {
            assert_non_null(d->topology);
            assert_int_equal(d->topology->n_nodes, devs[i].n_numa_nodes);
            assert_int_equal(d->topology->nodes[0]->id, devs[i].numa_nodes[0]);
        }
    }
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    kdp__devtab_clear(&t);
    free(devs);
    free(ids);
}

/* kdp__devtab_encoded_size() against protobuf-c's own packing, on tables of
 * every shape: IDs of 1 to 255 bytes (the length varint's one- and two-byte
 * forms), both healths, no NUMA node, node 0 (left out by proto3), large
 * node numbers (multi-byte varints), several nodes. */
static void test_encoded_size(void **state)
{
    (void)state;
    uint32_t seed = 12345;
    char ids[64][256];
    int64_t numa[64][4];
    kdp_device devs[64];
    for (int round = 0; round < 200; round++) {
        size_t n = (size_t)(round % 64);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245U + 12345U;
            size_t len = 1 + (seed >> 8) % 255;
            snprintf(ids[i], sizeof(ids[i]), "%zu-", i);
            size_t k = strlen(ids[i]);
            if (len > k) {
                memset(ids[i] + k, 'a' + (char)(seed % 26), len - k);
                ids[i][len] = '\0';
            }
            size_t n_numa = (seed >> 4) % 5;
            for (size_t j = 0; j < n_numa && j < 4; j++) {
                static const int64_t nodes[] = {0, 1, 127, 128, 300000, 0x7fffffffffffLL, -1};
                numa[i][j] = nodes[(seed >> (j * 3)) % 7];
            }
            devs[i] = (kdp_device){.id = ids[i],
                                   .health = seed % 3 == 0 ? KDP_UNHEALTHY : KDP_HEALTHY,
                                   .numa_nodes = numa[i],
                                   .n_numa_nodes = n_numa > 4 ? 4 : n_numa};
        }
        kdp__devtab t;
        kdp__devtab_init(&t);
        assert_int_equal(kdp__devtab_from_array(&t, devs, n, NULL), 0);
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(kdp__devtab_encode(&t, &buf, &len), 0);
        assert_int_equal(kdp__devtab_encoded_size(&t), len);
        free(buf);
        /* Replicas: every device as that many "<id>-<k>" entries, k of one
         * to four digits (the ID's length varint changes form too). */
        static const unsigned reps[] = {0, 1, 2, 10, 11, 101, 1024};
        unsigned rep = reps[(unsigned)round % 7];
        if (n * rep <= 8192) {
            assert_int_equal(kdp__devtab_encode_replicas(&t, rep, &buf, &len), 0);
            assert_int_equal(kdp__devtab_encoded_size_replicas(&t, rep), len);
            free(buf);
        }
        kdp__devtab_clear(&t);
    }
}

/* Replicas on the wire: each device as N entries in replica order, each
 * with the device's health and topology. */
static void test_encode_replicas(void **state)
{
    (void)state;
    int64_t numa[] = {1, 3};
    kdp_device devs[] = {dev("gpu1"), dev("gpu0")};
    devs[0].health = KDP_UNHEALTHY;
    devs[1].numa_nodes = numa;
    devs[1].n_numa_nodes = 2;
    kdp__devtab t;
    kdp__devtab_init(&t);
    assert_int_equal(kdp__devtab_from_array(&t, devs, 2, NULL), 0);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(kdp__devtab_encode_replicas(&t, 12, &buf, &len), 0);
    V1beta1__ListAndWatchResponse *m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
    free(buf);
    assert_non_null(m);
    assert_int_equal(m->n_devices, 24);
    for (size_t i = 0; i < 24; i++) {
        /* a device's replicas are together, in order (the devices in any) */
        const V1beta1__Device *d = m->devices[i];
        bool gpu0 = strncmp(m->devices[i - i % 12]->id, "gpu0", 4) == 0;
        char want[32];
        snprintf(want, sizeof(want), "gpu%d-%zu", gpu0 ? 0 : 1, i % 12);
        assert_string_equal(d->id, want);
        if (gpu0) {
            assert_string_equal(d->health, "Healthy");
            assert_non_null(d->topology);
            assert_int_equal(d->topology->n_nodes, 2);
            assert_int_equal(d->topology->nodes[1]->id, 3);
        } else {
            assert_string_equal(d->health, "Unhealthy");
            assert_null(d->topology);
        }
    }
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    /* 0 and 1: the devices themselves */
    assert_int_equal(kdp__devtab_encode_replicas(&t, 1, &buf, &len), 0);
    m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
    free(buf);
    assert_int_equal(m->n_devices, 2);
    assert_int_equal(strlen(m->devices[0]->id), 4);
    v1beta1__list_and_watch_response__free_unpacked(m, NULL);
    kdp__devtab_clear(&t);
}

static void test_oom(void **state)
{
    (void)state;
    if (!oom_works()) {
        skip();
    }
    int64_t numa[] = {1, 0};
    kdp_device full = {.id = "m",
                       .numa_nodes = numa,
                       .n_numa_nodes = 2,
                       .host_path = "/dev/m",
                       .container_path = "/dev/c",
                       .permissions = "rw"};
    kdp_device base[] = {dev("a"), dev("b"), full};
    base[2].id = "z";
    const char *abz[] = {"a", "b", "z"};
    kdp__devtab t;
    kdp__devtab_init(&t);
    OOM_LOOP(kdp__devtab_from_array(&t, base, 3, NULL), assert_int_equal(t.n, 0));
    assert_ids(&t, abz, 3);
    OOM_LOOP(kdp__devtab_add(&t, &full, NULL), assert_ids(&t, abz, 3));
    assert_int_equal(t.n, 4);
    assert_int_equal(kdp__devtab_find(&t, "m")->n_numa, 2);

    kdp__devtab dst;
    kdp__devtab_init(&dst);
    kdp_device old = dev("old");
    assert_int_equal(kdp__devtab_add(&dst, &old, NULL), 0);
    OOM_LOOP(kdp__devtab_copy(&dst, &t), assert_string_equal(dst.devs[0].id, "old"));
    assert_true(kdp__devtab_same_for_kubelet(&dst, &t));
    OOM_LOOP(kdp__devtab_from_array(&dst, base, 2, NULL), assert_int_equal(dst.n, 4));
    assert_int_equal(dst.n, 2);

    uint8_t sentinel;
    uint8_t *buf = &sentinel;
    size_t len = 77;
    OOM_LOOP(kdp__devtab_encode(&t, &buf, &len),
             (assert_ptr_equal(buf, &sentinel), assert_int_equal(len, 77)));
    assert_ptr_not_equal(buf, &sentinel);
    free(buf);
    buf = &sentinel;
    len = 77;
    OOM_LOOP(kdp__devtab_encode_replicas(&t, 3, &buf, &len),
             (assert_ptr_equal(buf, &sentinel), assert_int_equal(len, 77)));
    assert_ptr_not_equal(buf, &sentinel);
    free(buf);
    kdp__devtab_clear(&t);
    kdp__devtab_clear(&dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_churn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates_and_invalid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_public_list_add, setup, teardown),
        cmocka_unit_test_setup_teardown(test_from_array, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_for_kubelet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_health, setup, teardown),
        cmocka_unit_test_setup_teardown(test_numa_normalisation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_diff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_decode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_100k, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encoded_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_encode_replicas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_author_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oom, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
