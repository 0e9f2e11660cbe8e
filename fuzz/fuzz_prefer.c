/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for kdp's own preferred allocation (src/plugin/prefer.c),
 * which answers whatever a client sends to the plugin's socket: a device
 * table with NUMA nodes, then available and must-include lists (duplicates,
 * IDs not in the table, empty, long) and a size. Oracle, abort()s on any
 * breach: every must-include ID comes first, once each, in ID order; then
 * only available IDs that are not must-include ones, each once; exactly
 * min(size left, candidates) of them, for every strategy, with and without
 * replicas. Spread with replicas also keeps its round robin: a device with
 * a replica left over never has two fewer in the answer than a device that
 * got one. (Which devices packed picks is the unit test's:
 * tests/unit/test_prefer.c.)
 *
 * Input bytes: [n_dev][for each: id byte, node byte], then [n_avail]
 * [id bytes], [n_must][id bytes], [size], [replicas]. IDs are "d<byte>" (so
 * some are unknown to the table); node byte 0xff = no node. With replicas
 * (the last byte % 5, when 2 or more) an ID byte b is "d<b/4>-<b%4>" (so
 * some replicas are out of range).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/prefer.h"
#include "plugin/response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "fuzz_prefer: check failed: %s (line %d)\n", #x, __LINE__);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define MAX_N 64

typedef struct input {
    const uint8_t *p;
    size_t left;
} input;

static bool byte(input *in, uint8_t *b)
{
    if (in->left == 0) {
        return false;
    }
    *b = *in->p++;
    in->left--;
    return true;
}

static char ids[256][8];
static char rids[256][12];
static bool in_tab[256];

static bool in_list(const char *const *v, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i], id) == 0) {
            return true;
        }
    }
    return false;
}

static size_t distinct(const char *const *v, size_t n, const char *const *skip, size_t n_skip)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        count += !in_list(v, i, v[i]) && !in_list(skip, n_skip, v[i]);
    }
    return count;
}

static void check_answer(const kdp_preferred_request *req, const kdp_id_list *out)
{
    size_t m = distinct(req->must_include, req->n_must_include, NULL, 0);
    size_t cands =
        distinct(req->available, req->n_available, req->must_include, req->n_must_include);
    size_t want = m + (req->size > m ? (req->size - m < cands ? req->size - m : cands) : 0);
    CHECK(out->n == want);
    for (size_t i = 0; i < out->n; i++) {
        const char *id = out->ids[i];
        CHECK(!in_list((const char *const *)out->ids, i, id)); /* once each */
        if (i < m) {
            CHECK(in_list(req->must_include, req->n_must_include, id));
            CHECK(i == 0 || strcmp(out->ids[i - 1], id) < 0);
        } else {
            CHECK(in_list(req->available, req->n_available, id));
            CHECK(!in_list(req->must_include, req->n_must_include, id));
        }
    }
}

/* The device of replica ID byte b, or -1 if kdp must not know it. */
static int dev_of(uint8_t b, unsigned replicas)
{
    return in_tab[b / 4] && (unsigned)(b % 4) < replicas ? b / 4 : -1;
}

static bool in_bytes(const uint8_t *v, size_t n, uint8_t b)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i] == b) {
            return true;
        }
    }
    return false;
}

/* Spread's round robin (see the top), over the IDs' bytes. */
static void check_spread(const kdp_id_list *out, const uint8_t *avail_b, size_t na,
                         const uint8_t *must_b, size_t nm, unsigned replicas)
{
    unsigned total[64] = {0};
    bool picked[64] = {false};
    bool left[64] = {false};
    for (size_t i = 0; i < nm; i++) {
        int d = dev_of(must_b[i], replicas);
        if (d >= 0 && !in_bytes(must_b, i, must_b[i])) {
            total[d]++;
        }
    }
    for (size_t i = 0; i < na; i++) {
        uint8_t b = avail_b[i];
        int d = dev_of(b, replicas);
        if (d < 0 || in_bytes(must_b, nm, b) || in_bytes(avail_b, i, b)) {
            continue;
        }
        if (in_list((const char *const *)out->ids, out->n, rids[b])) {
            total[d]++;
            picked[d] = true;
        } else {
            left[d] = true;
        }
    }
    for (int a = 0; a < 64; a++) {
        for (int b = 0; picked[a] && b < 64; b++) {
            CHECK(!left[b] || total[b] + 1 >= total[a]);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool init;
    if (!init) {
        for (int i = 0; i < 256; i++) {
            snprintf(ids[i], sizeof(ids[i]), "d%d", i);
            snprintf(rids[i], sizeof(rids[i]), "d%d-%d", i / 4, i % 4);
        }
        kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
        init = true;
    }
    input in = {data, size};
    uint8_t n_dev = 0;
    (void)byte(&in, &n_dev);
    kdp_device devs[MAX_N];
    int64_t nodes[MAX_N];
    size_t n = 0;
    for (size_t i = 0; i < n_dev % MAX_N; i++) {
        uint8_t id;
        uint8_t node;
        if (!byte(&in, &id) || !byte(&in, &node)) {
            break;
        }
        nodes[n] = node == 0xff ? -1 : node % 70; /* past 63 too */
        devs[n] = (kdp_device){.id = ids[id], .numa_nodes = &nodes[n], .n_numa_nodes = 1};
        n++;
    }
    kdp__devtab t;
    kdp__devtab_init(&t);
    /* duplicate IDs: refused, empty */
    bool ok = kdp__devtab_from_array(&t, devs, n, NULL) == 0;
    memset(in_tab, 0, sizeof(in_tab));
    for (size_t i = 0; ok && i < n; i++) {
        in_tab[devs[i].id[1] ? atoi(devs[i].id + 1) : 0] = true;
    }
    const char *avail[MAX_N];
    const char *must[MAX_N];
    uint8_t avail_b[MAX_N];
    uint8_t must_b[MAX_N];
    uint8_t n_avail = 0;
    uint8_t n_must = 0;
    uint8_t want = 0;
    (void)byte(&in, &n_avail);
    size_t na = 0;
    for (uint8_t b; na < n_avail % MAX_N && byte(&in, &b);) {
        avail_b[na] = b;
        avail[na++] = ids[b];
    }
    (void)byte(&in, &n_must);
    size_t nm = 0;
    for (uint8_t b; nm < n_must % 8 && byte(&in, &b);) {
        must_b[nm] = b;
        must[nm++] = ids[b];
    }
    (void)byte(&in, &want);
    uint8_t rep_b = 0;
    (void)byte(&in, &rep_b);
    unsigned replicas = rep_b % 5;
    if (replicas > 1) {
        for (size_t i = 0; i < na; i++) {
            avail[i] = rids[avail_b[i]];
        }
        for (size_t i = 0; i < nm; i++) {
            must[i] = rids[must_b[i]];
        }
    }
    kdp_preferred_request req = {.available = avail,
                                 .n_available = na,
                                 .must_include = must,
                                 .n_must_include = nm,
                                 .size = want % 80};
    for (int s = KDP_PREFERRED_NONE; s <= KDP_PREFERRED_SPREAD; s++) {
        kdp_id_list out;
        kdp__id_list_init(&out);
        CHECK(kdp__prefer((kdp_preferred_strategy)s, &t, replicas, &req, &out) == 0);
        check_answer(&req, &out);
        if (s == KDP_PREFERRED_SPREAD && replicas > 1 && ok) {
            check_spread(&out, avail_b, na, must_b, nm, replicas);
        }
        kdp__id_list_done(&out);
    }
    kdp__devtab_clear(&t);
    return 0;
}
