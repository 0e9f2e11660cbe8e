/* SPDX-License-Identifier: MIT */
/* slicerec driven through the orders of events that matter, without a loop
 * or an API server: each answer and watch event is a call, the time a
 * number. */
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

#include "slicerec_fake.h"

static json_t *devices(size_t n, const char *model)
{
    kdp__slice_dev *d = calloc(n ? n : 1, sizeof(*d));
    kdp_dra_attr *a = calloc(n ? n : 1, sizeof(*a));
    char(*names)[16] = calloc(n ? n : 1, sizeof(*names));
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "dev-%04zu", i);
        a[i] = (kdp_dra_attr){.name = "model", .type = KDP_DRA_ATTR_STRING, .string_value = model};
        d[i] = (kdp__slice_dev){.name = names[i], .attrs = &a[i], .n_attrs = 1};
    }
    json_t **out = NULL;
    int r = kdp__slicebuild_devices(d, n, NULL, 0, &out);
    assert_int_equal(r, (int)n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, out[i]);
    }
    free(out);
    free(d);
    free(a);
    free(names);
    return arr;
}

static void set_devices(fake *f, size_t n, const char *model)
{
    json_t *arr = devices(n, model);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        v[i] = json_incref(json_array_get(arr, i));
    }
    json_decref(arr);
    assert_true(kdp__sr_set_devices(&f->sr, v, n, NULL, 0) >= 0);
}

/* A DELETED event's object: the last state at the deletion's rv. */
static json_t *deleted(fake *f, json_t *obj)
{
    json_t *d = json_deep_copy(obj);
    json_object_set_new(json_object_get(d, "metadata"), "resourceVersion",
                        json_string(rv_text(++f->rv)));
    return d;
}

/* ---- the tests ---- */

static void test_first_publish(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 300, "x");
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_CREATE);
    assert_int_equal(a.chunk, 0);
    assert_int_equal(a.count, 3);
    assert_int_equal(a.generation, 1);
    /* one call at a time */
    assert_int_equal(next(&f).kind, KDP__SR_NONE);
    json_t *o = server_object(&f, &a);
    kdp__sr_written(&f.sr, 0, o, NULL, f.now);
    json_decref(o);
    converge(&f);
    assert_true(f.sr.st.published);
    assert_int_equal(f.sr.st.slices, 3);
    assert_int_equal(f.sr.st.devices, 300);
    assert_int_equal(f.sr.st.generation, 1);
    assert_int_equal(live(&f), 3);
    /* published and idle: only the resync is due */
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_NONE);
    assert_int_equal(a.at_us, f.sr.resync_at_us);
    f.now = a.at_us;
    assert_int_equal(next(&f).kind, KDP__SR_LIST);
    kdp__sr_done(&f.sr);
}

/* The bug this module was written for: a slice deleted within
 * milliseconds of its creation, its DELETED event before the create's
 * answer (or after it), is created again at once. */
static void lost_deletion(bool answer_first, bool added_event)
{
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 2, "x");
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_CREATE);
    json_t *o = server_object(&f, &a);
    json_t *gone = deleted(&f, o);
    if (answer_first) {
        kdp__sr_written(&f.sr, 0, o, NULL, f.now);
        assert_int_equal(next(&f).kind, KDP__SR_NONE); /* published */
        assert_true(f.sr.st.published);
    }
    if (added_event) {
        event(&f, "ADDED", o);
    }
    event(&f, "DELETED", gone);
    if (!answer_first) {
        kdp__sr_written(&f.sr, 0, o, NULL, f.now); /* after its own deletion */
    }
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_CREATE); /* at once, no re-list needed */
    assert_false(f.sr.st.published);
    json_decref(o);
    json_decref(gone);
    o = server_object(&f, &a);
    kdp__sr_written(&f.sr, 0, o, NULL, f.now);
    event(&f, "ADDED", o);
    /* and the same again a moment later (a kubelet restart wiping it) */
    gone = deleted(&f, o);
    event(&f, "DELETED", gone);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_CREATE);
    assert_int_equal(a.generation, 1); /* nothing else in the pool: still 1 */
    json_decref(o);
    json_decref(gone);
    o = server_object(&f, &a);
    kdp__sr_written(&f.sr, 0, o, NULL, f.now);
    json_decref(o);
    assert_int_equal(next(&f).kind, KDP__SR_NONE);
    assert_true(f.sr.st.published);
    assert_int_equal(f.sr.st.lists, 1);
    kdp__sr_done(&f.sr);
}

static void test_deleted_before_the_answer(void **state)
{
    (void)state;
    lost_deletion(false, true);
    lost_deletion(false, false); /* a watch that began after the create */
}

static void test_deleted_after_the_answer(void **state)
{
    (void)state;
    lost_deletion(true, true);
    lost_deletion(true, false);
}

/* An event older than what is known (or than the last list) changes
 * nothing: a late ADDED after the DELETED does not bring a slice back. */
static void test_stale_events(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 2, "x");
    kdp__sr_action a = next(&f);
    json_t *o = server_object(&f, &a);
    kdp__sr_written(&f.sr, 0, o, NULL, f.now);
    json_t *gone = deleted(&f, o);
    event(&f, "DELETED", gone);
    event(&f, "ADDED", o); /* out of order: older */
    assert_int_equal(live(&f), 0);
    assert_int_equal(next(&f).kind, KDP__SR_CREATE);
    json_decref(o);
    json_decref(gone);
    kdp__sr_done(&f.sr);

    /* events at or below the list's resourceVersion are in the list */
    setup_fake(&f, "10");
    set_devices(&f, 1, "x");
    converge(&f);
    json_t *old = json_deep_copy(live_obj(&f, 0));
    json_object_set_new(json_object_get(old, "metadata"), "resourceVersion", json_string("5"));
    event(&f, "DELETED", old);
    assert_int_equal(live(&f), 1);
    assert_int_equal(next(&f).kind, KDP__SR_NONE);
    json_decref(old);
    kdp__sr_done(&f.sr);
}

/* 409 after 409: a list each time, backing off from 20 ms to at most 5 s,
 * then published once the server takes the write. */
static void test_conflict_storm(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 1, "x");
    converge(&f);
    set_devices(&f, 1, "y");
    uint64_t last_wait = 0;
    for (int i = 0; i < 12; i++) {
        kdp__sr_action a = next(&f);
        if (a.kind == KDP__SR_LIST) {
            json_t *items = json_array();
            json_array_append(items, live_obj(&f, 0));
            json_t *list = json_pack("{s:{s:s}, s:o}", "metadata", "resourceVersion",
                                     rv_text(++f.rv), "items", items);
            kdp__sr_listed(&f.sr, 0, list, NULL, f.now);
            json_decref(list);
            a = next(&f);
        }
        assert_int_equal(a.kind, KDP__SR_UPDATE);
        assert_int_equal(a.generation, 2);
        kdp__sr_written(&f.sr, -ESTALE, NULL, "409 Conflict", f.now);
        assert_true(f.sr.need_list);
        a = next(&f);
        assert_int_equal(a.kind, KDP__SR_NONE);
        uint64_t wait = a.at_us - f.now;
        assert_true(wait >= 16 * MS);   /* 20 ms - jitter */
        assert_true(wait <= 6000 * MS); /* 5 s + jitter */
        assert_true(wait + 2 * MS >= last_wait * 3 / 4 || wait >= 4000 * MS);
        last_wait = wait;
        f.now = a.at_us;
    }
    assert_true(last_wait >= 4000 * MS); /* capped at 5 s (+-20%) */
    assert_int_equal(f.sr.st.conflicts, 12);
    assert_false(f.sr.st.published);
    converge(&f);
    assert_true(f.sr.st.published);
    assert_int_equal(f.sr.st.generation, 2);
    kdp__sr_done(&f.sr);
}

/* The watch fails with 410 while a list is in flight: that list is enough
 * (it has every change), and the watch resumes from it. */
static void test_410_during_a_list(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 1, "x");
    converge(&f);
    f.now = f.sr.resync_at_us;
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_LIST);
    kdp__sr_watch_ended(&f.sr, -EIDRM, "410 Gone", f.now);
    assert_int_equal(next(&f).kind, KDP__SR_NONE); /* the list is in flight */
    json_t *items = json_array();
    json_array_append(items, live_obj(&f, 0));
    json_t *list = json_pack("{s:{s:s}, s:o}", "metadata", "resourceVersion", "40", "items", items);
    kdp__sr_listed(&f.sr, 0, list, NULL, f.now);
    json_decref(list);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_WATCH);
    assert_string_equal(a.rv, "40");
    assert_int_equal(next(&f).kind, KDP__SR_NONE);
    assert_true(f.sr.st.published);

    /* a watch that fails otherwise: a list after a backoff */
    kdp__sr_watch_ended(&f.sr, -ECONNRESET, "reset", f.now);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_NONE);
    assert_true(a.at_us > f.now);
    f.now = a.at_us;
    assert_int_equal(next(&f).kind, KDP__SR_LIST);
    kdp__sr_done(&f.sr);

    /* a watch the server ends normally resumes where it was, no list */
    setup_fake(&f, "10");
    f.now += 60000 * MS;
    kdp__sr_watch_ended(&f.sr, 0, NULL, f.now);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_WATCH);
    assert_string_equal(a.rv, "10");
    kdp__sr_done(&f.sr);
}

/* The API server goes away in the middle of an update: retried after a
 * backoff, the list first (the write may or may not have happened). */
static void test_server_gone_mid_update(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 200, "x");
    converge(&f);
    set_devices(&f, 200, "y");
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_UPDATE);
    kdp__sr_written(&f.sr, -ECONNREFUSED, NULL, "connection refused", f.now);
    assert_int_equal(f.sr.st.err, -ECONNREFUSED);
    assert_non_null(strstr(f.sr.st.error, "connection refused"));
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_NONE);
    assert_true(a.at_us >= f.now + 80 * MS);
    f.now = a.at_us;
    assert_int_equal(next(&f).kind, KDP__SR_LIST);
    kdp__sr_listed(&f.sr, -ECONNREFUSED, NULL, "connection refused", f.now);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_NONE);
    uint64_t second = a.at_us - f.now;
    assert_true(second >= 160 * MS); /* backing off */
    f.now = a.at_us;
    converge(&f);
    assert_true(f.sr.st.published);
    assert_int_equal(f.sr.st.generation, 2);
    assert_string_equal(f.sr.st.error, "");
    kdp__sr_done(&f.sr);
}

/* A new API server (or one restored from a backup) has none of the slices
 * and resourceVersions below those it answered before: published anew,
 * not taken for a list older than the slices known. */
static void test_server_reset(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 200, "x");
    converge(&f);
    assert_true(f.sr.nknown > 0);
    kdp__sr_watch_ended(&f.sr, -ECONNRESET, "connection reset", f.now);
    kdp__sr_action a = next(&f);
    while (a.kind == KDP__SR_NONE) {
        f.now = a.at_us;
        a = next(&f);
    }
    assert_int_equal(a.kind, KDP__SR_LIST);
    json_t *list = json_pack("{s:{s:s}, s:[]}", "metadata", "resourceVersion", "3", "items");
    kdp__sr_listed(&f.sr, 0, list, NULL, f.now);
    json_decref(list);
    assert_int_equal(f.sr.nknown, 0);
    f.rv = 3;
    a = next(&f);
    if (a.kind == KDP__SR_WATCH) {
        a = next(&f);
    }
    assert_int_equal(a.kind, KDP__SR_CREATE);
    answer(&f, &a);
    converge(&f);
    assert_int_equal(live(&f), f.sr.nchunks);
    kdp__sr_done(&f.sr);
}

/* An outage with nothing to write once it ends: the failure is over all
 * the same (the error cleared, the backoff back at its start), so that the
 * next failure is retried at once and not after the outage's long delay. */
static void test_outage_without_change(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 20, "x");
    converge(&f);
    kdp__sr_watch_ended(&f.sr, -ECONNREFUSED, "connection refused", f.now);
    uint64_t delay = 0;
    unsigned long said0 = f.sr.st.said;
    for (int i = 0; i < 8; i++) { /* down long enough for the backoff to grow */
        kdp__sr_action a = next(&f);
        while (a.kind != KDP__SR_LIST) {
            assert_int_equal(a.kind, KDP__SR_NONE);
            f.now = a.at_us;
            a = next(&f);
        }
        /* libcurl words each try its own way: one failure all the same */
        char why[64];
        snprintf(why, sizeof(why), "Failed to connect after %d ms", i % 2);
        kdp__sr_listed(&f.sr, -ECONNREFUSED, NULL, why, f.now);
        assert_int_equal(f.sr.st.said, said0 + 1);
        a = next(&f);
        delay = a.at_us - f.now;
        f.now = a.at_us;
    }
    assert_true(delay >= 5000 * MS);
    assert_int_equal(f.sr.st.err, -ECONNREFUSED);
    unsigned long said = f.sr.st.said;
    assert_true(said >= 1);
    converge(&f); /* back: the list has the slices as they were */
    assert_int_equal(f.sr.st.generation, 1);
    assert_int_equal(f.sr.st.err, 0);
    assert_string_equal(f.sr.st.error, "");
    kdp__sr_watch_ended(&f.sr, -ECONNREFUSED, "connection refused", f.now);
    kdp__sr_action a = next(&f);
    while (a.kind != KDP__SR_LIST) {
        f.now = a.at_us;
        a = next(&f);
    }
    kdp__sr_listed(&f.sr, -ECONNREFUSED, NULL, "connection refused", f.now);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_NONE);
    assert_true(a.at_us - f.now <= 2 * KDP__SR_MIN_BACKOFF_MS * MS);
    kdp__sr_done(&f.sr);
}

/* Someone else edits a slice (a higher generation, other devices) or
 * deletes one of several: published again above their generation. */
static void test_edited_behind_our_back(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 300, "x");
    converge(&f);
    json_t *edit = json_deep_copy(live_obj(&f, 1));
    json_object_set_new(json_object_get(json_object_get(edit, "spec"), "pool"), "generation",
                        json_integer(9));
    json_object_set_new(json_object_get(edit, "metadata"), "resourceVersion",
                        json_string(rv_text(++f.rv)));
    event(&f, "MODIFIED", edit);
    json_decref(edit);
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_UPDATE);
    assert_int_equal(a.generation, 10);
    answer(&f, &a);
    converge(&f);
    assert_int_equal(f.sr.st.generation, 10);
    assert_int_equal(live(&f), 3);

    json_t *gone = deleted(&f, live_obj(&f, 2));
    event(&f, "DELETED", gone);
    json_decref(gone);
    a = next(&f);
    /* the generation goes up for all three: the remaining two updated, one created */
    assert_int_equal(a.generation, 11);
    answer(&f, &a);
    converge(&f);
    assert_int_equal(live(&f), 3);
    assert_int_equal(f.sr.st.generation, 11);
    kdp__sr_done(&f.sr);
}

/* Fewer devices: the slices no chunk needs are deleted first, then the
 * rest updated; a slice of ours in another pool is deleted. */
static void test_shrink_and_foreign(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 300, "x");
    converge(&f);
    set_devices(&f, 10, "x");
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_DELETE);
    kdp__sr_written(&f.sr, 0, NULL, NULL, f.now);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_DELETE);
    kdp__sr_written(&f.sr, -ENOENT, NULL, "404", f.now); /* gone already: as good */
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_UPDATE);
    assert_int_equal(a.count, 1);
    answer(&f, &a);
    converge(&f);
    assert_int_equal(live(&f), 1);

    json_t *other = json_deep_copy(live_obj(&f, 0));
    json_object_set_new(json_object_get(other, "metadata"), "name", json_string("stray"));
    json_object_set_new(json_object_get(other, "metadata"), "resourceVersion",
                        json_string(rv_text(++f.rv)));
    json_object_set_new(json_object_get(json_object_get(other, "spec"), "pool"), "name",
                        json_string("old-pool"));
    event(&f, "ADDED", other);
    json_decref(other);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_DELETE);
    assert_string_equal(a.name, "stray");
    kdp__sr_done(&f.sr);
}

/* An update whose slice was deleted meanwhile (404): created instead. */
static void test_update_of_a_deleted_slice(void **state)
{
    (void)state;
    fake f;
    setup_fake(&f, "10");
    set_devices(&f, 1, "x");
    converge(&f);
    set_devices(&f, 1, "y");
    kdp__sr_action a = next(&f);
    assert_int_equal(a.kind, KDP__SR_UPDATE);
    kdp__sr_written(&f.sr, -ENOENT, NULL, "404", f.now);
    a = next(&f);
    assert_int_equal(a.kind, KDP__SR_CREATE);
    kdp__sr_done(&f.sr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_publish),
        cmocka_unit_test(test_deleted_before_the_answer),
        cmocka_unit_test(test_deleted_after_the_answer),
        cmocka_unit_test(test_stale_events),
        cmocka_unit_test(test_conflict_storm),
        cmocka_unit_test(test_410_during_a_list),
        cmocka_unit_test(test_server_gone_mid_update),
        cmocka_unit_test(test_server_reset),
        cmocka_unit_test(test_outage_without_change),
        cmocka_unit_test(test_edited_behind_our_back),
        cmocka_unit_test(test_shrink_and_foreign),
        cmocka_unit_test(test_update_of_a_deleted_slice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
