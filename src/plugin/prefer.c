/* SPDX-License-Identifier: MIT */
/*
 * prefer: the packed strategy. Nodes as a 64-bit mask (node 63 and above
 * share the last bit). With M the must-include IDs and k IDs left to pick:
 *   1. the available devices all of whose nodes are already in use (M's, or
 *      the ones opened below), in ID order; then those with no NUMA node
 *      (no affinity: they open none), once some node is in use;
 *   2. still short: open one more node, the one whose devices fit the rest
 *      most tightly (best fit: the fewest devices that still cover k; if
 *      no node covers k, the node with the most), lowest node on a tie, and
 *      go back to 1; a device spanning several unused nodes comes in only
 *      when nothing else is left, fewest new nodes first.
 * The answer thus spans as few NUMA nodes as the devices allow, and leaves
 * the larger nodes whole for larger requests.
 */
#include "plugin/prefer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/response.h"

typedef struct cand {
    const char *id;
    uint64_t nodes;
    bool taken;
} cand;

static uint64_t nodes_of(const kdp__devtab *t, const char *id)
{
    const kdp__dev *d = kdp__devtab_find(t, id);
    uint64_t m = 0;
    for (size_t i = 0; d && i < d->n_numa; i++) {
        m |= 1ULL << (d->numa[i] < 63 ? d->numa[i] : 63);
    }
    return m;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_cand(const void *a, const void *b)
{
    return strcmp(((const cand *)a)->id, ((const cand *)b)->id);
}

/* Takes, in order, the untaken candidates for which fits() holds. */
static int take_fitting(cand *c, size_t n, uint64_t used, bool no_node, size_t *k, kdp_id_list *out)
{
    for (size_t i = 0; i<n && * k> 0; i++) {
        bool fits = no_node ? c[i].nodes == 0 : c[i].nodes && !(c[i].nodes & ~used);
        if (c[i].taken || !fits) {
            continue;
        }
        int r = kdp_id_list_add(out, c[i].id);
        if (r < 0) {
            return r;
        }
        c[i].taken = true;
        (*k)--;
    }
    return 0;
}

/* The next node to open (see the top), or 0 if no single node adds any.
 * O(n): each untaken device that needs exactly one more node counts for it. */
static uint64_t next_node(const cand *c, size_t n, uint64_t used, size_t k)
{
    size_t count[64] = {0};
    for (size_t i = 0; i < n; i++) {
        uint64_t extra = c[i].nodes & ~used;
        if (!c[i].taken && extra && !(extra & (extra - 1))) {
            count[__builtin_ctzll(extra)]++;
        }
    }
    int best = -1;
    for (int b = 0; b < 64; b++) {
        if (count[b] == 0) {
            continue;
        }
        bool covers = count[b] >= k;
        bool best_covers = best >= 0 && count[best] >= k;
        if (best < 0 || (covers && !best_covers) ||
            (covers && best_covers && count[b] < count[best]) ||
            (!covers && !best_covers && count[b] > count[best])) {
            best = b;
        }
    }
    return best < 0 ? 0 : 1ULL << best;
}

/* Nothing fits one more node: the device adding the fewest new ones. */
static uint64_t fewest_new_nodes(const cand *c, size_t n, uint64_t used)
{
    int best_pop = 65;
    uint64_t best = 0;
    for (size_t i = 0; i < n; i++) {
        int pop = __builtin_popcountll(c[i].nodes & ~used);
        if (!c[i].taken && pop < best_pop) {
            best_pop = pop;
            best = c[i].nodes;
        }
    }
    return best;
}

static int packed(cand *c, size_t n, uint64_t used, size_t k, kdp_id_list *out)
{
    while (k > 0) {
        int r = take_fitting(c, n, used, false, &k, out);
        if (r < 0) {
            return r;
        }
        uint64_t more = k > 0 ? next_node(c, n, used, k) : 0;
        /* No node in use yet: open one before taking devices of no node,
         * which then only fill what the nodes in use cannot. */
        if (k > 0 && (used || !more)) {
            r = take_fitting(c, n, used, true, &k, out);
            if (r < 0) {
                return r;
            }
            more = k > 0 ? next_node(c, n, used, k) : 0;
        }
        if (k == 0) {
            break;
        }
        if (!more) {
            more = fewest_new_nodes(c, n, used);
        }
        if (!more) {
            break; /* nothing left */
        }
        used |= more;
    }
    return 0;
}

/* The must-include IDs (sorted in must[0..m), duplicates skipped) go first;
 * their nodes are the ones in use. Counts them off *k. */
static int take_must(const kdp__devtab *t, const char **must, size_t m, size_t *k, uint64_t *used,
                     kdp_id_list *out)
{
    if (m > 1) {
        qsort(must, m, sizeof(*must), cmp_str);
    }
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && strcmp(must[i], must[i - 1]) == 0) {
            continue; /* twice in the request */
        }
        int r = kdp_id_list_add(out, must[i]);
        if (r < 0) {
            return r;
        }
        *used |= nodes_of(t, must[i]);
        *k = *k > 0 ? *k - 1 : 0;
    }
    return 0;
}

/* The available IDs not in must, sorted, each once, with their nodes. */
static size_t gather(const kdp__devtab *t, const kdp_preferred_request *req, const char **must,
                     size_t m, cand *c)
{
    size_t n = 0;
    for (size_t i = 0; i < req->n_available; i++) {
        const char *id = req->available[i];
        if (!m || !bsearch(&id, must, m, sizeof(*must), cmp_str)) {
            c[n++] = (cand){.id = id, .nodes = nodes_of(t, id)};
        }
    }
    qsort(c, n, sizeof(*c), cmp_cand);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w == 0 || strcmp(c[i].id, c[w - 1].id) != 0) {
            c[w++] = c[i];
        }
    }
    return w;
}

int kdp__prefer(kdp_preferred_strategy s, const kdp__devtab *t, const kdp_preferred_request *req,
                kdp_id_list *out)
{
    size_t m = req->n_must_include;
    const char **must = calloc(m ? m : 1, sizeof(*must));
    cand *c = calloc(req->n_available ? req->n_available : 1, sizeof(*c));
    uint64_t used = 0;
    size_t k = req->size;
    int r = must && c ? 0 : -ENOMEM;
    if (r == 0) {
        for (size_t i = 0; i < m; i++) {
            must[i] = req->must_include[i];
        }
        r = take_must(t, must, m, &k, &used, out);
    }
    if (r == 0) {
        size_t n = gather(t, req, must, m, c);
        if (s == KDP_PREFERRED_PACKED) {
            r = packed(c, n, used, k, out);
        }
        for (size_t i = 0; s != KDP_PREFERRED_PACKED && i < n && k > 0 && r == 0; i++, k--) {
            r = kdp_id_list_add(out, c[i].id);
        }
    }
    free(must);
    free(c);
    return r;
}
