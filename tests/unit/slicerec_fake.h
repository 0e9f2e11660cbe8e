/* SPDX-License-Identifier: MIT */
/* A tiny API server for the slice reconciler's tests (k8s/slicerec): what
 * the reconciler writes, kept with resourceVersions, each answer and watch
 * event a call, the time a number.
 * Static functions: include once per test executable, after cmocka.h. */
#ifndef KDP_TEST_SLICEREC_FAKE_H
#define KDP_TEST_SLICEREC_FAKE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/slicebuild.h"
#include "k8s/slicerec.h"

#define DRV  "gpu.example.com"
#define NODE "node-a"
#define UID  "uid-n"
#define MS   1000ULL

typedef struct fake {
    kdp__sr sr;
    uint64_t now;
    uint64_t rv; /* the last resourceVersion handed out */
    unsigned names;
} fake;

static char *rv_text(uint64_t rv)
{
    static char buf[4][24];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%llu", (unsigned long long)rv);
    return buf[k];
}

/* The slice the server keeps for action a (CREATE/UPDATE), at a new rv. */
static json_t *server_object(fake *f, const kdp__sr_action *a)
{
    kdp__sr_chunkv c;
    kdp__sr_chunk(&f->sr, a->chunk, &c);
    char name[64];
    if (a->kind == KDP__SR_CREATE) {
        snprintf(name, sizeof(name), "node-a-gpu-example-com-%05u", ++f->names);
    } else {
        snprintf(name, sizeof(name), "%s", a->name);
    }
    json_t *o = kdp__slicebuild_object("v1", DRV, NODE, UID, a->generation, a->count, c.sets,
                                       c.items, c.n, name, rv_text(++f->rv));
    assert_non_null(o);
    return o;
}

static void setup_fake(fake *f, const char *list_rv)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(kdp__sr_init(&f->sr, DRV, NODE, UID, 60000, 7), 0);
    f->now = 1000 * MS;
    kdp__sr_action a = kdp__sr_next(&f->sr, f->now);
    assert_int_equal(a.kind, KDP__SR_DISCOVER);
    kdp__sr_discovered(&f->sr, 0, "v1", NULL, f->now);
    a = kdp__sr_next(&f->sr, f->now);
    assert_int_equal(a.kind, KDP__SR_LIST);
    json_t *list = json_pack("{s:{s:s}, s:[]}", "metadata", "resourceVersion", list_rv, "items");
    kdp__sr_listed(&f->sr, 0, list, NULL, f->now);
    json_decref(list);
    f->rv = kdp__sr_rv(list_rv);
    a = kdp__sr_next(&f->sr, f->now);
    assert_int_equal(a.kind, KDP__SR_WATCH);
    assert_string_equal(a.rv, list_rv);
    a = kdp__sr_next(&f->sr, f->now);
    assert_int_equal(a.kind, KDP__SR_NONE); /* no devices set yet */
}

static void event(fake *f, const char *type, json_t *obj)
{
    kdp__sr_watch_event(&f->sr, type, obj, f->now);
}

static kdp__sr_action next(fake *f)
{
    return kdp__sr_next(&f->sr, f->now);
}

/* The server takes the write a. */
static void answer(fake *f, const kdp__sr_action *a)
{
    if (a->kind == KDP__SR_DELETE) {
        kdp__sr_written(&f->sr, 0, NULL, NULL, f->now);
        return;
    }
    json_t *o = server_object(f, a);
    kdp__sr_written(&f->sr, 0, o, NULL, f->now);
    json_decref(o);
}

/* Answers every write at once (the watch echoing each) until published. */
static void converge(fake *f)
{
    for (int i = 0; i < 64; i++) {
        kdp__sr_action a = next(f);
        if (a.kind == KDP__SR_NONE && f->sr.st.published) {
            return;
        }
        if (a.kind == KDP__SR_NONE) {
            assert_true(a.at_us > f->now);
            f->now = a.at_us;
            continue;
        }
        if (a.kind == KDP__SR_LIST) {
            /* the fake keeps nothing of its own: the reconciler's view is the list */
            json_t *items = json_array();
            for (size_t k = 0; k < f->sr.nknown; k++) {
                if (!f->sr.known[k].gone) {
                    json_array_append(items, f->sr.known[k].obj);
                }
            }
            json_t *list = json_pack("{s:{s:s}, s:o}", "metadata", "resourceVersion",
                                     rv_text(++f->rv), "items", items);
            kdp__sr_listed(&f->sr, 0, list, NULL, f->now);
            json_decref(list);
            continue;
        }
        if (a.kind == KDP__SR_WATCH) {
            continue;
        }
        answer(f, &a);
    }
    fail_msg("did not converge");
}

static size_t live(const fake *f)
{
    size_t n = 0;
    for (size_t i = 0; i < f->sr.nknown; i++) {
        n += !f->sr.known[i].gone;
    }
    return n;
}

/* The i-th slice the server has, as the reconciler knows it. */
static json_t *live_obj(const fake *f, size_t i)
{
    for (size_t k = 0; k < f->sr.nknown; k++) {
        if (!f->sr.known[k].gone && i-- == 0) {
            return f->sr.known[k].obj;
        }
    }
    fail_msg("no slice %zu", i);
    return NULL;
}

#endif
