/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

/* The claims waiting for their binding conditions, as the watch shows
 * them: the bind op once per pending allocation (none for one met or
 * failed already, again for a new allocation), the scheduler's PreBind
 * check (shareID aside, other drivers' and pools' entries not counted),
 * the author's statuses kept beside the claim's own, a failed bind op's
 * failure conditions, claims gone dropped (a delete, a relist). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/binds.h"
#include "dra/recfile.h"
#include "k8s/claimbind.h"
#include "k8s/claims.h"

#define DRV  "gpu.example.com"
#define POOL "node-a"

typedef struct seen {
    int unbound;
    char last_unbound[64];
    int refuse; /* start answers -EAGAIN this many times */
    uint64_t last_seq;
    int started;
    char last_uid[64];
    size_t last_devs;
    int writes;
    kdp__dra_rec *written;
} seen;

static int start(void *ud, kdp__dra_rec *rec, uint64_t seq, bool unbind)
{
    seen *s = ud;
    if (unbind) {
        s->unbound++;
        snprintf(s->last_unbound, sizeof(s->last_unbound), "%s", rec->uid);
        kdp__dra_rec_free(rec);
        return 0;
    }
    if (s->refuse > 0) {
        s->refuse--;
        kdp__dra_rec_free(rec);
        return -EAGAIN;
    }
    s->started++;
    s->last_seq = seq;
    snprintf(s->last_uid, sizeof(s->last_uid), "%s", rec->uid);
    s->last_devs = rec->n_devs;
    kdp__dra_rec_free(rec);
    return 0;
}

static void write_rec(void *ud, kdp__dra_rec *rec)
{
    seen *s = ud;
    s->writes++;
    kdp__dra_rec_free(s->written);
    s->written = rec;
}

/* A claim allocated gpu-0 (binding "a/attached", failure "a/failed") and
 * gpu-1 (none) of DRV/POOL, with status.devices `status` (JSON or NULL). */
static json_t *claim(const char *uid, const char *dev0, const char *status)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"%s\"},"
             "\"status\":{\"allocation\":{\"devices\":{\"results\":["
             "{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"" POOL "\",\"device\":\"%s\","
             "\"bindingConditions\":[\"a/attached\"],\"bindingFailureConditions\":[\"a/failed\"]},"
             "{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"" POOL
             "\",\"device\":\"gpu-1\"}]}}"
             "%s%s}}",
             uid, dev0, status ? ",\"devices\":" : "", status ? status : "");
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    if (!o) {
        fail_msg("bad test JSON: %s: %s", err.text, text);
    }
    return o;
}

#define COND(type, st)                                                                             \
    "{\"type\":\"" type "\",\"status\":\"" st "\",\"reason\":\"R\",\"lastTransitionTime\":"        \
    "\"2026-01-01T00:00:00Z\"}"

static void test_prebind_check(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {NULL, "0"},
        {"[{\"driver\":\"" DRV "\",\"pool\":\"" POOL
         "\",\"device\":\"gpu-0\",\"conditions\":[" COND("a/attached", "False") "]}]",
         "0"},
        {"[{\"driver\":\"" DRV "\",\"pool\":\"" POOL "\",\"device\":\"gpu-0\",\"shareID\":"
         "\"0b0e2e8a-8d7d-4b8e-9c3e-2f7a1c0d9e11\",\"conditions\":[" COND("a/attached",
                                                                          "True") "]}]",
         "1"}, /* shareID aside */
        {"[{\"driver\":\"other.example.com\",\"pool\":\"" POOL
         "\",\"device\":\"gpu-0\",\"conditions\":[" COND("a/attached", "True") "]}]",
         "0"},
        {"[{\"driver\":\"" DRV "\",\"pool\":\"node-b\",\"device\":\"gpu-0\",\"conditions\":[" COND(
             "a/attached", "True") "]}]",
         "0"},
        {"[{\"driver\":\"" DRV "\",\"pool\":\"" POOL
         "\",\"device\":\"gpu-0\",\"conditions\":[" COND("a/attached",
                                                         "True") "," COND("a/failed", "True") "]}]",
         "-1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *o = claim("u1", "gpu-0", cases[i][0]);
        kdp__claim *c = NULL;
        char why[300];
        assert_int_equal(kdp__claim_parse(o, DRV, POOL, NULL, &c, why, sizeof(why)), 0);
        assert_int_equal(c->devs[0].n_bind, 1);
        assert_int_equal(c->devs[0].n_bind_fail, 1);
        assert_string_equal(c->devs[0].bind[1], "a/failed");
        const kdp__claim_dev *d0 = &c->devs[0];
        assert_int_equal(kdp__claim_binding_state(o, DRV, POOL, d0->device, d0->bind, d0->n_bind,
                                                  d0->n_bind_fail),
                         atoi(cases[i][1]));
        assert_int_equal(kdp__claim_binding_state(o, DRV, POOL, "gpu-1", NULL, 0, 0), 1);
        if (i == 0) { /* the lists through the checkpoint's JSON */
            kdp__dra_rec *r = NULL;
            assert_int_equal(kdp__dra_rec_from_claim(c, &r), 0);
            assert_int_equal(kdp__dra_rec_set(&r->devs[0].status, "{\"data\":{}}"), 0);
            json_t *j = kdp__recfile_to_json(r);
            kdp__dra_rec *back = NULL;
            assert_int_equal(kdp__recfile_from_json(j, 3, &back, why, sizeof(why)), 0);
            assert_int_equal(back->devs[0].n_bind, 1);
            assert_int_equal(back->devs[0].n_bind_fail, 1);
            assert_string_equal(back->devs[0].bind[0], "a/attached");
            assert_string_equal(back->devs[0].bind[1], "a/failed");
            assert_int_equal(back->devs[1].n_bind, 0);
            /* prepared again from the record: what it wrote is the claim's */
            kdp__dra_rec *again = kdp__dra_rec_dup(back, false);
            assert_null(again->devs[0].status);
            assert_string_equal(again->devs[0].api_status, "{\"data\":{}}");
            kdp__dra_rec_free(again);
            kdp__dra_rec_free(back);
            kdp__dra_rec_free(r);
            json_decref(j);
        }
        kdp__claim_free(c);
        json_decref(o);
    }
    /* the API server's rules on a result's lists */
    json_t *o = claim("u1", "gpu-0", NULL);
    json_t *r0 = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(o, "status"), "allocation"), "devices"),
            "results"),
        0);
    json_object_set_new(r0, "bindingFailureConditions", json_pack("[s]", "a/attached"));
    kdp__claim *c = NULL;
    char why[300];
    assert_int_equal(kdp__claim_parse(o, DRV, POOL, NULL, &c, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "results[0].bindingFailureConditions"));
    json_decref(o);
}

static void test_lifecycle(void **state)
{
    (void)state;
    seen s = {0};
    kdp__dra_binds b;
    kdp__dra_binds_cfg cfg = {
        .driver = DRV, .pool = POOL, .start = start, .write = write_rec, .unbind = true, .ud = &s};
    assert_int_equal(kdp__dra_binds_init(&b, &cfg), 0);
    /* pending: the bind op once, on the device with binding conditions */
    json_t *o = claim("u1", "gpu-0", NULL);
    kdp__dra_binds_event(&b, "ADDED", o);
    kdp__dra_binds_event(&b, "MODIFIED", o);
    assert_int_equal(s.started, 1);
    assert_string_equal(s.last_uid, "u1");
    assert_int_equal(s.last_devs, 1);
    assert_int_equal(kdp__dra_binds_count(&b), 1);
    json_decref(o);
    /* the author's status: written with the claim's devices */
    kdp__dra_rec *rec = NULL;
    assert_int_equal(kdp__dra_binds_set_status(&b, "u1", "gpu-0", NULL, "{\"data\":{}}", &rec), 0);
    assert_non_null(rec);
    assert_int_equal(rec->n_devs, 2);
    assert_string_equal(rec->devs[0].status, "{\"data\":{}}");
    kdp__dra_rec_free(rec);
    rec = NULL;
    assert_int_equal(kdp__dra_binds_set_status(&b, "u1", "gpu-9", NULL, "{}", &rec), -ENODEV);
    assert_int_equal(kdp__dra_binds_set_status(&b, "u9", "gpu-0", NULL, "{}", &rec), -ENOENT);
    /* the bind op failed: the first failure condition True, written */
    kdp__dra_binds_ended(&b, "u1", 1, "no fabric port");
    assert_int_equal(s.writes, 1);
    assert_non_null(strstr(s.written->devs[0].status, "\"type\":\"a/failed\""));
    assert_non_null(strstr(s.written->devs[0].status, "\"reason\":\"BindFailed\""));
    assert_non_null(strstr(s.written->devs[0].status, "no fabric port"));
    assert_null(s.written->devs[1].status);
    /* allocated anew (another device): the bind op again; the first op's
     * late failure does not touch the new allocation */
    uint64_t first = s.last_seq;
    o = claim("u1", "gpu-2", NULL);
    kdp__dra_binds_event(&b, "MODIFIED", o);
    assert_int_equal(s.started, 2);
    assert_true(s.last_seq != first);
    assert_int_equal(s.unbound, 1); /* the first allocation ended */
    assert_string_equal(s.last_unbound, "u1");
    kdp__dra_binds_ended(&b, "u1", first, "late");
    assert_int_equal(s.writes, 1);
    json_decref(o);
    /* the author's status, set while it waited, is its prepare's */
    assert_int_equal(
        kdp__dra_binds_set_status(&b, "u1", "gpu-2", NULL, "{\"data\":{\"x\":1}}", &rec), 0);
    kdp__dra_rec_free(rec);
    kdp__dra_rec *prep = kdp__dra_rec_new("ns", "c", "u1");
    kdp__dra_rdev *pd = NULL;
    assert_int_equal(kdp__dra_rec_add_dev(prep, "r", "gpu-2", NULL, false, &pd), 0);
    kdp__dra_binds_fill(&b, prep);
    assert_string_equal(prep->devs[0].api_status, "{\"data\":{\"x\":1}}");
    kdp__dra_rec_free(prep);
    /* a bind op that cannot start yet (too many operations) starts when
     * one ends */
    s.refuse = 2; /* at the event, and its retry at the end of it */
    o = claim("u4", "gpu-3", NULL);
    kdp__dra_binds_event(&b, "ADDED", o);
    json_decref(o);
    assert_int_equal(s.started, 2);
    kdp__dra_binds_ended(&b, "u1", s.last_seq, NULL);
    assert_int_equal(s.started, 3);
    assert_string_equal(s.last_uid, "u4");
    /* deleted: dropped */
    o = claim("u1", "gpu-2", NULL);
    kdp__dra_binds_event(&b, "DELETED", o);
    assert_int_equal(s.unbound, 2);
    assert_int_equal(kdp__dra_binds_count(&b), 1); /* u4 */
    kdp__dra_binds_sync_begin(&b);
    kdp__dra_binds_sync_end(&b);
    assert_int_equal(kdp__dra_binds_count(&b), 0);
    assert_int_equal(s.unbound, 3); /* u4, gone while the watch was down */
    json_decref(o);
    /* a bind op that never started: no unbind op */
    s.refuse = 100;
    o = claim("u5", "gpu-0", NULL);
    kdp__dra_binds_event(&b, "ADDED", o);
    kdp__dra_binds_event(&b, "DELETED", o);
    assert_int_equal(s.unbound, 3);
    s.refuse = 0;
    json_decref(o);
    /* met on first sight: tracked, no bind op; a relist that misses it
     * drops it */
    o = claim("u2", "gpu-0",
              "[{\"driver\":\"" DRV "\",\"pool\":\"" POOL
              "\",\"device\":\"gpu-0\",\"conditions\":[" COND("a/attached", "True") "]}]");
    kdp__dra_binds_event(&b, "ADDED", o);
    assert_int_equal(s.started, 3); /* none more */
    assert_int_equal(kdp__dra_binds_count(&b), 1);
    /* its own entry is kept beside a new one */
    assert_int_equal(kdp__dra_binds_set_status(&b, "u2", "gpu-1", NULL, "{\"data\":{}}", &rec), 0);
    assert_non_null(strstr(rec->devs[0].status, "a/attached"));
    kdp__dra_rec_free(rec);
    json_decref(o);
    kdp__dra_binds_sync_begin(&b);
    kdp__dra_binds_sync_end(&b);
    assert_int_equal(kdp__dra_binds_count(&b), 0);
    assert_int_equal(s.unbound, 4); /* met on first sight: may be attached */
    /* not allocated, another driver's only: nothing */
    o = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "name", "c", "namespace", "ns", "uid", "u3");
    kdp__dra_binds_event(&b, "ADDED", o);
    json_decref(o);
    assert_int_equal(kdp__dra_binds_count(&b), 0);
    kdp__dra_rec_free(s.written);
    kdp__dra_binds_done(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prebind_check),
        cmocka_unit_test(test_lifecycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
