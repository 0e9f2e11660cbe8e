/* SPDX-License-Identifier: MIT */
/* kdp's packed preferred allocation: the fewest NUMA nodes, best fit. */
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

#include "plugin/prefer.h"
#include "plugin/response.h"

static int64_t n0[] = {0};
static int64_t n1[] = {1};
static int64_t n01[] = {0, 1};

/* a0 a1 on node 0, b0 b1 b2 on node 1, z with no node, m on both. */
static void make_tab(kdp__devtab *t)
{
    kdp_device devs[] = {
        {.id = "a0", .numa_nodes = n0, .n_numa_nodes = 1},
        {.id = "a1", .numa_nodes = n0, .n_numa_nodes = 1},
        {.id = "b0", .numa_nodes = n1, .n_numa_nodes = 1},
        {.id = "b1", .numa_nodes = n1, .n_numa_nodes = 1},
        {.id = "b2", .numa_nodes = n1, .n_numa_nodes = 1},
        {.id = "z"},
        {.id = "m", .numa_nodes = n01, .n_numa_nodes = 2},
    };
    kdp__devtab_init(t);
    assert_int_equal(kdp__devtab_from_array(t, devs, sizeof(devs) / sizeof(devs[0]), NULL), 0);
}

/* The answer of strategy s with replicas for available/must/size, as
 * "id,id,...". */
static void check_s(kdp_preferred_strategy s, unsigned replicas, const kdp__devtab *t,
                    const char *const *avail, size_t n_avail, const char *const *must,
                    size_t n_must, size_t size, const char *want)
{
    kdp_preferred_request req = {.available = avail,
                                 .n_available = n_avail,
                                 .must_include = must,
                                 .n_must_include = n_must,
                                 .size = size};
    kdp_id_list out;
    kdp__id_list_init(&out);
    assert_int_equal(kdp__prefer(s, t, replicas, &req, &out), 0);
    char *got = kdp_ids_join((const char *const *)out.ids, out.n, ",");
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
    kdp__id_list_done(&out);
}

/* The answer for available/must/size, as "id,id,...". */
static void check(const kdp__devtab *t, const char *const *avail, size_t n_avail,
                  const char *const *must, size_t n_must, size_t size, const char *want)
{
    kdp_preferred_request req = {.available = avail,
                                 .n_available = n_avail,
                                 .must_include = must,
                                 .n_must_include = n_must,
                                 .size = size};
    kdp_id_list out;
    kdp__id_list_init(&out);
    assert_int_equal(kdp__prefer(KDP_PREFERRED_PACKED, t, 0, &req, &out), 0);
    char *got = kdp_ids_join((const char *const *)out.ids, out.n, ",");
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
    kdp__id_list_done(&out);
}

static const char *const ALL[] = {"b2", "a1", "z", "b0", "a0", "b1"}; /* no m */

static void test_best_fit(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    check(&t, ALL, 6, NULL, 0, 2, "a0,a1");      /* node 0 fits 2 most tightly */
    check(&t, ALL, 6, NULL, 0, 3, "b0,b1,b2");   /* node 1 fits 3 exactly */
    check(&t, ALL, 6, NULL, 0, 1, "a0");         /* the smaller node for one */
    check(&t, ALL, 6, NULL, 0, 4, "b0,b1,b2,z"); /* no node fits 4: the largest, then z */
    check(&t, ALL, 6, NULL, 0, 6, "b0,b1,b2,z,a0,a1");
    check(&t, ALL, 6, NULL, 0, 9, "b0,b1,b2,z,a0,a1"); /* no more than there is */
    kdp__devtab_clear(&t);
}

static void test_must_include(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *must_b1[] = {"b1"};
    check(&t, ALL, 6, must_b1, 1, 2, "b1,b0");      /* the rest on b1's node */
    check(&t, ALL, 6, must_b1, 1, 4, "b1,b0,b2,z"); /* then no node before a new one */
    const char *must_a1_twice[] = {"a1", "a1"};
    check(&t, ALL, 6, must_a1_twice, 2, 3, "a1,a0,z");
    check(&t, ALL, 6, must_b1, 1, 0, "b1"); /* the must-include IDs, whatever the size */
    const char *dup_avail[] = {"a0", "a0", "b0"};
    check(&t, dup_avail, 3, NULL, 0, 2, "a0,b0");
    kdp__devtab_clear(&t);
}

static void test_spanning_and_unknown(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *avail[] = {"m", "x-unknown", "a0"};
    const char *must_a0[] = {"a0"};
    /* x-unknown has no node: before m, which opens node 1 */
    check(&t, avail, 3, must_a0, 1, 3, "a0,x-unknown,m");
    const char *only_m[] = {"m", "b0"};
    check(&t, only_m, 2, NULL, 0, 1, "b0"); /* one node rather than two */
    check(&t, only_m, 2, NULL, 0, 2, "b0,m");
    kdp__devtab_clear(&t);
}

/* g0 g1 on node 0, h0 on node 1, each shared as 3 replicas. */
static void make_shared(kdp__devtab *t)
{
    kdp_device devs[] = {
        {.id = "g0", .numa_nodes = n0, .n_numa_nodes = 1},
        {.id = "g1", .numa_nodes = n0, .n_numa_nodes = 1},
        {.id = "h0", .numa_nodes = n1, .n_numa_nodes = 1},
    };
    kdp__devtab_init(t);
    assert_int_equal(kdp__devtab_from_array(t, devs, 3, NULL), 0);
}

static const char *const SHARED[] = {"h0-2", "g1-1", "g0-0", "h0-0", "g1-0",
                                     "g0-2", "h0-1", "g0-1", "g1-2"};

#define PACKED KDP_PREFERRED_PACKED
#define SPREAD KDP_PREFERRED_SPREAD

/* Packed with replicas: the fewest NUMA nodes, then the fewest devices. */
static void test_packed_replicas(void **state)
{
    (void)state;
    kdp__devtab t;
    make_shared(&t);
    check_s(PACKED, 3, &t, SHARED, 9, NULL, 0, 2, "h0-0,h0-1"); /* node 1 fits 2 tightest */
    check_s(PACKED, 3, &t, SHARED, 9, NULL, 0, 3, "h0-0,h0-1,h0-2");
    /* node 0: one whole device, then one more */
    check_s(PACKED, 3, &t, SHARED, 9, NULL, 0, 4, "g0-0,g0-1,g0-2,g1-0");
    const char *must_g1[] = {"g1-2"};
    check_s(PACKED, 3, &t, SHARED, 9, must_g1, 1, 3, "g1-2,g1-0,g1-1"); /* its device first */
    check_s(PACKED, 3, &t, SHARED, 9, must_g1, 1, 5, "g1-2,g1-0,g1-1,g0-0,g0-1");
    /* g0 has one replica free, g1 three: one device rather than two */
    const char *busy[] = {"g0-0", "g1-0", "g1-1", "g1-2"};
    check_s(PACKED, 3, &t, busy, 4, NULL, 0, 2, "g1-0,g1-1");
    check_s(PACKED, 3, &t, busy, 4, NULL, 0, 1, "g0-0"); /* the tightest fit */
    check_s(PACKED, 3, &t, busy, 4, NULL, 0, 4, "g1-0,g1-1,g1-2,g0-0");
    /* replicas in numeric order; unknown and malformed IDs are devices of no node */
    const char *twelve[] = {"g0-10", "g0-2", "x-1", "g0-1", "g0-01"};
    check_s(PACKED, 12, &t, twelve, 5, NULL, 0, 3, "g0-1,g0-2,g0-10");
    check_s(PACKED, 12, &t, twelve, 5, NULL, 0, 5, "g0-1,g0-2,g0-10,g0-01,x-1");
    kdp__devtab_clear(&t);
}

/* Spread: as many devices as possible, the least used first. */
static void test_spread(void **state)
{
    (void)state;
    kdp__devtab t;
    make_shared(&t);
    check_s(SPREAD, 3, &t, SHARED, 9, NULL, 0, 3, "g0-0,g1-0,h0-0");
    check_s(SPREAD, 3, &t, SHARED, 9, NULL, 0, 4, "g0-0,g1-0,h0-0,g0-1");
    check_s(SPREAD, 3, &t, SHARED, 9, NULL, 0, 20, "g0-0,g1-0,h0-0,g0-1,g1-1,h0-1,g0-2,g1-2,h0-2");
    /* a must-include device gets its second replica after the others' first
     * (and after theirs in later rounds too) */
    const char *must_g0[] = {"g0-1", "g0-1"};
    check_s(SPREAD, 3, &t, SHARED, 9, must_g0, 2, 3, "g0-1,g1-0,h0-0");
    check_s(SPREAD, 3, &t, SHARED, 9, must_g0, 2, 5, "g0-1,g1-0,h0-0,g1-1,h0-1");
    const char *must_two[] = {"g0-1", "g0-2"};
    check_s(SPREAD, 3, &t, SHARED, 9, must_two, 2, 5, "g0-1,g0-2,g1-0,h0-0,g1-1");
    check_s(SPREAD, 3, &t, SHARED, 9, must_g0, 1, 0, "g0-1");
    /* the most replicas available (the fewest in use) first */
    const char *uneven[] = {"g0-0", "g1-0", "g1-1", "h0-0", "h0-1", "h0-2"};
    check_s(SPREAD, 3, &t, uneven, 6, NULL, 0, 2, "h0-0,g1-0");
    check_s(SPREAD, 3, &t, uneven, 6, NULL, 0, 5, "h0-0,g1-0,g0-0,h0-1,g1-1");
    /* without replicas: ID order, each once */
    kdp__devtab plain;
    make_tab(&plain);
    check_s(SPREAD, 0, &plain, ALL, 6, NULL, 0, 3, "a0,a1,b0");
    const char *dup_avail[] = {"b0", "a0", "a0"};
    check_s(SPREAD, 1, &plain, dup_avail, 3, NULL, 0, 3, "a0,b0");
    kdp__devtab_clear(&plain);
    kdp__devtab_clear(&t);
}

static void test_invalid_id(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *avail[] = {"a0", "bad id"};
    kdp_preferred_request req = {.available = avail, .n_available = 2, .size = 2};
    kdp_id_list out;
    kdp__id_list_init(&out);
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    assert_int_equal(kdp__prefer(KDP_PREFERRED_PACKED, &t, 0, &req, &out), -EINVAL);
    kdp__id_list_done(&out);
    kdp__devtab_clear(&t);
}

int main(void)
{
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_must_include),
        cmocka_unit_test(test_spanning_and_unknown),
        cmocka_unit_test(test_packed_replicas),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_invalid_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
