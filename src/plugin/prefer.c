/* SPDX-License-Identifier: MIT */
/*
 * prefer: kdp's strategies. Every available ID is resolved to its physical
 * device (with replicas, plugin/replicas.h; an ID not in the table is a
 * device of its own with no node), and the candidates are grouped by
 * device, in device-ID order, each device's replicas in replica order.
 *
 * Packed. Nodes as a 64-bit mask (node 63 and above share the last bit).
 * With M the must-include IDs and k IDs left to pick:
 *   1. the available devices all of whose nodes are already in use (M's, or
 *      the ones opened below); then those with no NUMA node (no affinity:
 *      they open none), once some node is in use. Among them, the replicas
 *      of devices in use first (M's, or taken before), then the device whose
 *      replicas fit the rest most tightly (the fewest that still cover k; if
 *      none does, the one with the most), and so on: the fewest devices.
 *      Without replicas every device has one ID: that is ID order;
 *   2. still short: open one more node, the one whose IDs fit the rest
 *      most tightly (best fit: the fewest IDs that still cover k; if no node
 *      covers k, the node with the most), lowest node on a tie, and go back
 *      to 1; a device spanning several unused nodes comes in only when
 *      nothing else is left, fewest new nodes first.
 * The answer thus spans as few NUMA nodes as the devices allow, then as few
 * devices, and leaves the larger nodes and devices whole for larger
 * requests.
 *
 * Spread: rounds; round L gives one more replica to each device that has L
 * of its replicas in the answer (M's included), devices with none of M's
 * first, then those with the most replicas available, then by ID. Every
 * device gets one before any gets two: as many distinct devices as can be.
 */
#include "plugin/prefer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/replicas.h"
#include "plugin/response.h"

typedef struct cand {
    const char *id;  /* as the kubelet sent it */
    const char *dev; /* its device's ID in the table, or id if unknown */
    bool known;
    unsigned k; /* the replica */
    uint64_t nodes;
    bool taken;
    size_t group;
} cand;

/* One device's candidates: c[first .. first + n). */
typedef struct group {
    size_t first;
    size_t n;
    size_t left; /* not taken yet */
    size_t used; /* replicas of it in the answer (M's and taken ones) */
    uint64_t nodes;
} group;

typedef struct prefer {
    const kdp__devtab *t;
    unsigned replicas;
    cand *c;
    size_t n;
    group *g;
    size_t ng;
    uint64_t used; /* the nodes in use */
    size_t k;      /* IDs still to pick */
    kdp_id_list *out;
} prefer;

static uint64_t nodes_of(const kdp__dev *d)
{
    uint64_t m = 0;
    for (size_t i = 0; d && i < d->n_numa; i++) {
        m |= 1ULL << (d->numa[i] < 63 ? d->numa[i] : 63);
    }
    return m;
}

static cand resolve(const prefer *p, const char *id)
{
    const kdp__dev *d = kdp__replica_find(p->t, p->replicas, id);
    cand c = {.id = id, .dev = d ? d->id : id, .known = d != NULL, .nodes = nodes_of(d)};
    size_t len;
    if (d && kdp__replica_parse(id, p->replicas, &len, &c.k) < 0) {
        c.k = 0;
    }
    return c;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Device ID, then known before unknown, then replica, then ID. */
static int cmp_dev(const char *dev_a, bool known_a, const char *dev_b, bool known_b)
{
    int r = strcmp(dev_a, dev_b);
    return r ? r : (int)known_b - (int)known_a;
}

static int cmp_cand(const void *a, const void *b)
{
    const cand *x = a;
    const cand *y = b;
    int r = cmp_dev(x->dev, x->known, y->dev, y->known);
    if (r == 0) {
        r = (x->k > y->k) - (x->k < y->k);
    }
    return r ? r : strcmp(x->id, y->id);
}

static int take(prefer *p, cand *c)
{
    int r = kdp_id_list_add(p->out, c->id);
    if (r < 0) {
        return r;
    }
    c->taken = true;
    p->g[c->group].left--;
    p->g[c->group].used++;
    p->k--;
    return 0;
}

/* Takes up to p->k untaken replicas of group gi, in replica order. */
static int take_group(prefer *p, size_t gi)
{
    const group *g = &p->g[gi];
    for (size_t i = g->first; i < g->first + g->n && p->k > 0; i++) {
        if (!p->c[i].taken) {
            int r = take(p, &p->c[i]);
            if (r < 0) {
                return r;
            }
        }
    }
    return 0;
}

static bool fits(const prefer *p, const group *g, bool no_node)
{
    return g->left > 0 && (no_node ? g->nodes == 0 : g->nodes && !(g->nodes & ~p->used));
}

/* Most left first, then group order. */
static int cmp_left(const void *a, const void *b, void *ud)
{
    const group *g = ud;
    size_t x = *(const size_t *)a;
    size_t y = *(const size_t *)b;
    if (g[x].left != g[y].left) {
        return g[x].left > g[y].left ? -1 : 1;
    }
    return (x > y) - (x < y);
}

/* order[i..m) (most left first) where order[i] covers p->k: the tightest
 * fit, the last that covers k, the first of its size. */
static size_t tightest(const prefer *p, const size_t *order, size_t i, size_t m)
{
    size_t j = i;
    while (j + 1 < m && p->g[order[j + 1]].left >= p->k) {
        j++;
    }
    size_t pick = j;
    while (pick > i && p->g[order[pick - 1]].left == p->g[order[j]].left) {
        pick--;
    }
    return pick;
}

/* Step 1 (see the top): the fitting devices, in use ones first, then by
 * best fit. order is scratch room for ng indices. */
static int take_fitting(prefer *p, bool no_node, size_t *order)
{
    size_t m = 0;
    for (size_t gi = 0; gi < p->ng && p->k > 0; gi++) {
        if (!fits(p, &p->g[gi], no_node)) {
            continue;
        }
        if (p->g[gi].used > 0) {
            int r = take_group(p, gi);
            if (r < 0) {
                return r;
            }
        } else {
            order[m++] = gi;
        }
    }
    if (m > 1) {
        qsort_r(order, m, sizeof(*order), cmp_left, p->g);
    }
    for (size_t i = 0; i < m && p->k > 0;) {
        size_t pick = p->g[order[i]].left >= p->k ? tightest(p, order, i, m) : i;
        int r = take_group(p, order[pick]);
        if (r < 0) {
            return r;
        }
        if (pick == i) {
            i++;
        }
    }
    return 0;
}

/* The next node to open (see the top), or 0 if no single node adds any.
 * O(n): each untaken ID that needs exactly one more node counts for it. */
static uint64_t next_node(const prefer *p)
{
    size_t count[64] = {0};
    for (size_t i = 0; i < p->n; i++) {
        uint64_t extra = p->c[i].nodes & ~p->used;
        if (!p->c[i].taken && extra && !(extra & (extra - 1))) {
            count[__builtin_ctzll(extra)]++;
        }
    }
    int best = -1;
    size_t k = p->k;
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
static uint64_t fewest_new_nodes(const prefer *p)
{
    int best_pop = 65;
    uint64_t best = 0;
    for (size_t i = 0; i < p->n; i++) {
        int pop = __builtin_popcountll(p->c[i].nodes & ~p->used);
        if (!p->c[i].taken && pop < best_pop) {
            best_pop = pop;
            best = p->c[i].nodes;
        }
    }
    return best;
}

static int packed(prefer *p)
{
    size_t *order = malloc((p->ng ? p->ng : 1) * sizeof(*order));
    int r = order ? 0 : -ENOMEM;
    while (r == 0 && p->k > 0) {
        r = take_fitting(p, false, order);
        if (r < 0) {
            break;
        }
        uint64_t more = p->k > 0 ? next_node(p) : 0;
        /* No node in use yet: open one before taking devices of no node,
         * which then only fill what the nodes in use cannot. */
        if (p->k > 0 && (p->used || !more)) {
            r = take_fitting(p, true, order);
            if (r < 0) {
                break;
            }
            more = p->k > 0 ? next_node(p) : 0;
        }
        if (p->k == 0) {
            break;
        }
        if (!more) {
            more = fewest_new_nodes(p);
        }
        if (!more) {
            break; /* nothing left */
        }
        p->used |= more;
    }
    free(order);
    return r;
}

/* Fewest of M's first, then the most available, then group order. */
static int cmp_spread(const void *a, const void *b, void *ud)
{
    const group *g = ud;
    size_t x = *(const size_t *)a;
    size_t y = *(const size_t *)b;
    if (g[x].used != g[y].used) {
        return g[x].used < g[y].used ? -1 : 1;
    }
    if (g[x].n != g[y].n) {
        return g[x].n > g[y].n ? -1 : 1;
    }
    return (x > y) - (x < y);
}

static int spread(prefer *p)
{
    size_t *order = malloc((p->ng ? p->ng : 1) * sizeof(*order));
    if (!order) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < p->ng; i++) {
        order[i] = i;
    }
    if (p->ng > 1) {
        qsort_r(order, p->ng, sizeof(*order), cmp_spread, p->g);
    }
    /* round L: the devices with L replicas in the answer get one more; a
     * device with more of M's waits for its round */
    int r = 0;
    for (size_t level = 0; r == 0 && p->k > 0; level++) {
        bool any_left = false;
        for (size_t i = 0; r == 0 && i < p->ng && p->k > 0; i++) {
            group *g = &p->g[order[i]];
            any_left = any_left || g->left > 0;
            for (size_t j = g->first; g->used == level && j < g->first + g->n; j++) {
                if (!p->c[j].taken) {
                    r = take(p, &p->c[j]); /* used becomes level + 1: one per round */
                }
            }
        }
        if (!any_left) {
            break;
        }
    }
    free(order);
    return r;
}

/* The must-include IDs (must[0..m), sorted; duplicates skipped) go first;
 * their nodes are the ones in use, their devices count as used. */
static int take_must(prefer *p, const char **must, size_t m)
{
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && strcmp(must[i], must[i - 1]) == 0) {
            continue; /* twice in the request */
        }
        int r = kdp_id_list_add(p->out, must[i]);
        if (r < 0) {
            return r;
        }
        cand c = resolve(p, must[i]);
        p->used |= c.nodes;
        p->k = p->k > 0 ? p->k - 1 : 0;
        /* its device's group, if any candidate shares it */
        size_t lo = 0;
        size_t hi = p->ng;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            const cand *f = &p->c[p->g[mid].first];
            int cmp = cmp_dev(f->dev, f->known, c.dev, c.known);
            if (cmp == 0) {
                p->g[mid].used++;
                break;
            }
            if (cmp < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
    }
    return 0;
}

/* The available IDs not in must, sorted, each once, resolved and grouped. */
static void gather(prefer *p, const kdp_preferred_request *req, const char **must, size_t m)
{
    size_t n = 0;
    for (size_t i = 0; i < req->n_available; i++) {
        const char *id = req->available[i];
        if (!m || !bsearch(&id, must, m, sizeof(*must), cmp_str)) {
            p->c[n++] = resolve(p, id);
        }
    }
    if (n > 1) {
        qsort(p->c, n, sizeof(*p->c), cmp_cand);
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w == 0 || strcmp(p->c[i].id, p->c[w - 1].id) != 0) {
            p->c[w++] = p->c[i];
        }
    }
    p->n = w;
    p->ng = 0;
    for (size_t i = 0; i < w; i++) {
        cand *c = &p->c[i];
        if (p->ng == 0 || cmp_dev(p->c[p->g[p->ng - 1].first].dev,
                                  p->c[p->g[p->ng - 1].first].known, c->dev, c->known) != 0) {
            p->g[p->ng++] = (group){.first = i, .nodes = c->nodes};
        }
        group *g = &p->g[p->ng - 1];
        g->n++;
        g->left++;
        c->group = p->ng - 1;
    }
}

int kdp__prefer(kdp_preferred_strategy s, const kdp__devtab *t, unsigned replicas,
                const kdp_preferred_request *req, kdp_id_list *out)
{
    size_t m = req->n_must_include;
    size_t na = req->n_available ? req->n_available : 1;
    const char **must = calloc(m ? m : 1, sizeof(*must));
    prefer p = {.t = t,
                .replicas = replicas,
                .c = calloc(na, sizeof(cand)),
                .g = calloc(na, sizeof(group)),
                .k = req->size,
                .out = out};
    int r = must && p.c && p.g ? 0 : -ENOMEM;
    if (r == 0) {
        for (size_t i = 0; i < m; i++) {
            must[i] = req->must_include[i];
        }
        if (m > 1) {
            qsort(must, m, sizeof(*must), cmp_str);
        }
        gather(&p, req, must, m);
        r = take_must(&p, must, m);
    }
    if (r == 0 && s == KDP_PREFERRED_PACKED) {
        r = packed(&p);
    } else if (r == 0 && s == KDP_PREFERRED_SPREAD) {
        r = spread(&p);
    }
    for (size_t i = 0; r == 0 && s == KDP_PREFERRED_NONE && i < p.n && p.k > 0; i++) {
        r = take(&p, &p.c[i]);
    }
    free(must);
    free(p.c);
    free(p.g);
    return r;
}
