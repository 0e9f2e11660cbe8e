/* SPDX-License-Identifier: MIT */
/* sliceplan through the reconciler (k8s/slicerec): how devices that consume
 * counters and counter sets are split into slices, quantities compared by
 * value, fields the API server dropped, resourceVersions compared. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "k8s/slicectr.h"
#include "slicerec_fake.h"

/* Devices that consume counters (64 to a slice) and counter sets (8 to a
 * slice of their own): 100 devices and 10 sets take 2 + 2 slices. */
static void set_partitions(fake *f, size_t n, size_t nsets, const char *mem)
{
    kdp_dra_quantity c[] = {{"memory", mem}};
    kdp_dra_consumption k = {.counter_set = "set-0", .counters = c, .n_counters = 1};
    kdp__slice_dev *d = calloc(n, sizeof(*d));
    char(*names)[16] = calloc(n, sizeof(*names));
    kdp_dra_counter_set *sets = calloc(nsets, sizeof(*sets));
    char(*snames)[16] = calloc(nsets, sizeof(*snames));
    for (size_t i = 0; i < nsets; i++) {
        snprintf(snames[i], sizeof(snames[i]), "set-%zu", i);
        sets[i] = (kdp_dra_counter_set){snames[i], c, 1};
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "part-%04zu", i);
        d[i] = (kdp__slice_dev){.name = names[i], .consumes = &k, .n_consumes = 1};
    }
    json_t **cs = NULL;
    assert_int_equal(kdp__slicectr_sets(sets, nsets, &cs), (int)nsets);
    json_t **out = NULL;
    assert_int_equal(kdp__slicebuild_devices(d, n, cs, nsets, &out), (int)n);
    assert_true(kdp__sr_set_devices(&f->sr, out, n, cs, nsets) >= 0);
    free(d);
    free(names);
    free(sets);
    free(snames);
}

static void test_counter_sets(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_partitions(&f, 100, 10, "10Gi");
    converge(&f);
    assert_int_equal(f.sr.st.slices, 4);
    assert_int_equal(f.sr.st.devices, 100);
    assert_int_equal(f.sr.st.counter_sets, 10);
    size_t with_devs = 0;
    size_t with_sets = 0;
    for (size_t i = 0; i < live(&f); i++) {
        json_t *spec = json_object_get(live_obj(&f, i), "spec");
        json_t *devs = json_object_get(spec, "devices");
        json_t *sets = json_object_get(spec, "sharedCounters");
        assert_true(!devs || !sets); /* one or the other */
        assert_true(json_array_size(devs) <= 64 && json_array_size(sets) <= 8);
        with_devs += json_array_size(devs);
        with_sets += json_array_size(sets);
    }
    assert_int_equal(with_devs, 100);
    assert_int_equal(with_sets, 10);
    /* the server writes a quantity back in its canonical form: the same */
    json_t *o = json_deep_copy(live_obj(&f, 0));
    json_t *spec = json_object_get(o, "spec");
    json_t *sets = json_object_get(spec, "sharedCounters");
    json_t *devs = json_object_get(spec, "devices");
    json_t *first = json_array_get(sets ? sets : devs, 0);
    json_t *ctr =
        sets ? json_object_get(first, "counters")
             : json_object_get(json_array_get(json_object_get(first, "consumesCounters"), 0),
                               "counters");
    json_object_set_new(json_object_get(ctr, "memory"), "value", json_string("10240Mi"));
    json_object_set_new(json_object_get(o, "metadata"), "resourceVersion",
                        json_string(rv_text(++f.rv)));
    event(&f, "MODIFIED", o);
    json_decref(o);
    assert_int_equal(next(&f).kind, KDP__SR_NONE);
    assert_true(f.sr.st.published);
    /* fewer sets: one slice of sets goes */
    set_partitions(&f, 100, 3, "10Gi");
    converge(&f);
    assert_int_equal(f.sr.st.slices, 3);
    assert_int_equal(live(&f), 3);
    kdp__sr_done(&f.sr);
}

/* The API server drops the fields of a gate that is off: the write's
 * answer lacks them. A failure, retried with backoff, never a loop. */
static void test_dropped_fields(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_partitions(&f, 2, 1, "10Gi");
    for (int round = 0; round < 3; round++) {
        kdp__sr_action a = next(&f);
        assert_int_equal(a.kind, round == 0 ? KDP__SR_CREATE : KDP__SR_UPDATE);
        json_t *shared = server_object(&f, &a);
        json_t *o = json_deep_copy(shared); /* its devices are the wanted ones */
        json_decref(shared);
        json_t *spec = json_object_get(o, "spec");
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(spec, "devices"), i, d)
        {
            json_object_del(d, "consumesCounters");
        }
        if (json_object_get(spec, "sharedCounters")) {
            json_object_set_new(spec, "sharedCounters", json_array());
        }
        kdp__sr_written(&f.sr, 0, o, NULL, f.now);
        json_decref(o);
        assert_false(f.sr.st.published);
        assert_non_null(strstr(f.sr.st.error, "consumesCounters"));
        assert_non_null(strstr(f.sr.st.error, "DRAPartitionableDevices"));
        a = next(&f);
        assert_int_equal(a.kind, KDP__SR_NONE); /* backing off */
        assert_true(a.at_us >= f.now + 50 * MS);
        f.now = a.at_us;
    }
    kdp__sr_done(&f.sr);
}

/* Binding conditions: a change is written (the slice held no longer
 * matches), and a server that drops them (DRADeviceBindingConditions
 * off) is told apart. */
static void test_binding_conditions(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    const char *c[] = {"example.com/attached"};
    const char *c2[] = {"example.com/ready"};
    const char *fl[] = {"example.com/failed"};
    kdp__slice_dev d = {.name = "nic-0",
                        .bind_conds = c,
                        .n_bind_conds = 1,
                        .bind_fails = fl,
                        .n_bind_fails = 1,
                        .binds_to_node = true};
    json_t **out = NULL;
    assert_int_equal(kdp__slicebuild_devices(&d, 1, NULL, 0, &out), 1);
    assert_true(kdp__sr_set_devices(&f.sr, out, 1, NULL, 0) >= 0);
    converge(&f);
    assert_true(f.sr.st.published);
    json_t *dev =
        json_array_get(json_object_get(json_object_get(live_obj(&f, 0), "spec"), "devices"), 0);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(dev, "bindingConditions"), 0)),
        "example.com/attached");
    /* another condition: written again */
    d.bind_conds = c2;
    assert_int_equal(kdp__slicebuild_devices(&d, 1, NULL, 0, &out), 1);
    assert_true(kdp__sr_set_devices(&f.sr, out, 1, NULL, 0) >= 0);
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_UPDATE);
    /* the server's answer lacks them: the gate is off */
    json_t *shared = server_object(&f, &a);
    json_t *o = json_deep_copy(shared);
    json_decref(shared);
    json_t *d0 = json_array_get(json_object_get(json_object_get(o, "spec"), "devices"), 0);
    json_object_del(d0, "bindingConditions");
    json_object_del(d0, "bindingFailureConditions");
    json_object_del(d0, "bindsToNode");
    kdp__sr_written(&f.sr, 0, o, NULL, f.now);
    json_decref(o);
    assert_false(f.sr.st.published);
    assert_non_null(strstr(f.sr.st.error, "bindingConditions"));
    assert_non_null(strstr(f.sr.st.error, "DRADeviceBindingConditions"));
    kdp__sr_done(&f.sr);
}

static void test_rv(void **state)
{
    (void)state;
    assert_int_equal(kdp__sr_rv("12345"), 12345);
    assert_int_equal(kdp__sr_rv(""), 0);
    assert_int_equal(kdp__sr_rv(NULL), 0);
    assert_int_equal(kdp__sr_rv("12a"), 0);
    assert_int_equal(kdp__sr_rv("99999999999999999999"), 0); /* too long */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_sets),
        cmocka_unit_test(test_dropped_fields),
        cmocka_unit_test(test_binding_conditions),
        cmocka_unit_test(test_rv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
