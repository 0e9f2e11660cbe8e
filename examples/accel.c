/* SPDX-License-Identifier: MIT */
/*
 * kdp-example-accel: a DRA driver for accelerator cards that are shared,
 * as Kubernetes 1.36+ lets a driver declare it (no device plugin can):
 *
 *   - partitions (KEP-4815): each of the --cards cards has a counter set
 *     "card-N" (memory 80Gi, slices 7) and is offered whole and as 14
 *     overlapping partitions, MIG-style: 4g (4 slices, 40Gi), two halves
 *     (3, 40Gi), three 2g (2, 20Gi), seven sevenths (1, 10Gi), one 1g20
 *     (1, 20Gi). Each partition consumes its slices and memory of its
 *     card: the scheduler hands out only what is left.
 *   - consumable capacity (KEP-5075): each of the --shared cards "sharedN"
 *     is handed to many claims at once, each taking part of its memory
 *     (1Gi steps, 8Gi by default) and of its compute (10, 25, 50 or 100).
 *
 * A prepared claim gives the container ACCEL_<n>=<device> for its n-th
 * device, and for a share ACCEL_<n>_SHARE, ACCEL_<n>_MEMORY and
 * ACCEL_<n>_COMPUTE; each prepare and unprepare prints what each device or
 * share got.
 *
 *   kdp-example-accel [--cards N] [--shared N] [--driver NAME]
 *       [--kubelet-root DIR] [--kubeconfig FILE] [--node NAME]
 *       [--cdi-dir DIR] [--state-dir DIR] [--metrics-address ADDR]
 */
#include <kdp.h>
#include <kdp_dra.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const struct profile {
    const char *name;
    int slices, memory_gi, count;
} profiles[] = {{"whole", 7, 80, 1}, {"4g", 4, 40, 1},      {"half", 3, 40, 2},
                {"2g", 2, 20, 3},    {"seventh", 1, 10, 7}, {"1g20", 1, 20, 1}};
#define N_PROFILES (sizeof(profiles) / sizeof(profiles[0]))

static int cards = 2;
static int shared = 1;

/* Which card and profile a device ID names ("card3-half-1", "card3",
 * "shared0"): NULL for a shared card. */
static const struct profile *profile_of(const char *id, int *card)
{
    *card = (int)strtol(id + strcspn(id, "0123456789"), NULL, 10);
    const char *p = strchr(id, '-');
    for (size_t i = 0; p && i < N_PROFILES; i++) {
        size_t n = strlen(profiles[i].name);
        if (strncmp(p + 1, profiles[i].name, n) == 0 && p[1 + n] == '-') {
            return &profiles[i];
        }
    }
    return strncmp(id, "card", 4) == 0 ? &profiles[0] : NULL;
}

/* The table: every partition of every card, and the shared cards; the
 * cards' counter sets with it. */
static int list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    (void)ud;
    kdp_dra_quantity counters[] = {{"memory", "80Gi"}, {"slices", "7"}};
    kdp_dra_counter_set *sets = calloc((size_t)cards + 1, sizeof(*sets));
    char(*names)[16] = calloc((size_t)cards + 1, sizeof(*names));
    int r = sets && names ? 0 : -ENOMEM;
    for (int c = 0; r == 0 && c < cards; c++) {
        snprintf(names[c], sizeof(names[c]), "card-%d", c);
        sets[c] = (kdp_dra_counter_set){names[c], counters, 2};
        for (size_t i = 0; r == 0 && i < N_PROFILES; i++) {
            for (int k = 0; r == 0 && k < profiles[i].count; k++) {
                char id[32];
                snprintf(id, sizeof(id), i == 0 ? "card%d" : "card%d-%s-%d", c, profiles[i].name,
                         k);
                r = kdp_device_list_add(out, &(kdp_device){.id = id, .health = KDP_HEALTHY});
            }
        }
    }
    for (int s = 0; r == 0 && s < shared; s++) {
        char id[32];
        snprintf(id, sizeof(id), "shared%d", s);
        r = kdp_device_list_add(out, &(kdp_device){.id = id, .health = KDP_HEALTHY});
    }
    if (r == 0) {
        r = kdp_plugin_set_dra_counter_sets(p, sets, (size_t)cards);
    }
    free(sets);
    free(names);
    return r;
}

static int describe_shared(kdp_dra_device *out)
{
    static const char *const compute[] = {"10", "25", "50", "100"};
    kdp_dra_request_policy mem = {.default_value = "8Gi", .min = "1Gi", .step = "1Gi"};
    kdp_dra_request_policy cpu = {
        .default_value = "10", .valid_values = compute, .n_valid_values = 4};
    int r = kdp_dra_device_allow_multiple_allocations(out);
    r = r < 0 ? r : kdp_dra_device_add_capacity(out, "memory", "80Gi");
    r = r < 0 ? r : kdp_dra_device_add_capacity(out, "compute", "100");
    r = r < 0 ? r : kdp_dra_device_set_request_policy(out, "memory", &mem);
    return r < 0 ? r : kdp_dra_device_set_request_policy(out, "compute", &cpu);
}

static int describe(kdp_plugin *p, const kdp_device *d, kdp_dra_device *out, void *ud)
{
    (void)p;
    (void)ud;
    int card;
    const struct profile *pf = profile_of(d->id, &card);
    kdp_dra_attr a[] = {
        {.name = "profile", .type = KDP_DRA_ATTR_STRING, .string_value = pf ? pf->name : "shared"},
        {.name = "card", .type = KDP_DRA_ATTR_INT, .int_value = card},
    };
    int r = kdp_dra_device_add_attr(out, &a[0]);
    if (r < 0 || !pf) {
        return r < 0 ? r : describe_shared(out);
    }
    r = kdp_dra_device_add_attr(out, &a[1]);
    char set[16];
    char mem[16];
    char slices[8];
    snprintf(set, sizeof(set), "card-%d", card);
    snprintf(mem, sizeof(mem), "%dGi", pf->memory_gi);
    snprintf(slices, sizeof(slices), "%d", pf->slices);
    kdp_dra_quantity used[] = {{"memory", mem}, {"slices", slices}};
    kdp_dra_consumption c = {.counter_set = set, .counters = used, .n_counters = 2};
    r = r < 0 ? r : kdp_dra_device_add_capacity(out, "memory", mem);
    return r < 0 ? r : kdp_dra_device_add_consumption(out, &c);
}

static const char *consumed(const kdp_dra_alloc *a, const char *name)
{
    for (size_t i = 0; i < a->n_consumed; i++) {
        if (strcmp(a->consumed[i].name, name) == 0) {
            return a->consumed[i].value;
        }
    }
    return "0";
}

static int env(kdp_dra_prepared *out, size_t i, const char *what, const char *value)
{
    char key[48];
    snprintf(key, sizeof(key), "ACCEL_%zu%s%s", i, *what ? "_" : "", what);
    return kdp_dra_prepared_add_env(out, i, key, value);
}

static int prepare(kdp_plugin *p, const kdp_dra_claim *c, kdp_dra_prepared *out, void *ud)
{
    (void)p;
    (void)ud;
    for (size_t i = 0; i < c->n_devices; i++) {
        const kdp_dra_alloc *a = &c->devices[i];
        int r = env(out, i, "", a->device);
        if (r == 0 && a->share_id) {
            printf("accel: prepare %s/%s: %s share %s: memory %s, compute %s\n", c->ref.ns,
                   c->ref.name, a->device, a->share_id, consumed(a, "memory"),
                   consumed(a, "compute"));
            r = env(out, i, "SHARE", a->share_id);
            r = r < 0 ? r : env(out, i, "MEMORY", consumed(a, "memory"));
            r = r < 0 ? r : env(out, i, "COMPUTE", consumed(a, "compute"));
        } else if (r == 0) {
            int card;
            const struct profile *pf = profile_of(a->device_id, &card);
            if (pf) {
                printf("accel: prepare %s/%s: %s: card %d, %s (%d slices, %dGi)\n", c->ref.ns,
                       c->ref.name, a->device, card, pf->name, pf->slices, pf->memory_gi);
            } else { /* a shared card allocated without a share ID: all of it */
                printf("accel: prepare %s/%s: %s: shared card %d, whole\n", c->ref.ns, c->ref.name,
                       a->device, card);
            }
        }
        if (r < 0) {
            return r;
        }
    }
    fflush(stdout);
    return 0;
}

static int unprepare(kdp_plugin *p, const kdp_dra_claim *c, void *ud)
{
    (void)p;
    (void)ud;
    for (size_t i = 0; i < c->n_devices; i++) {
        const kdp_dra_alloc *a = &c->devices[i];
        printf("accel: unprepare %s/%s: %s%s%s\n", c->ref.ns, c->ref.name, a->device,
               a->share_id ? " share " : "", a->share_id ? a->share_id : "");
    }
    fflush(stdout);
    return 0;
}

static int count_flag(const char *name, const char *v, int *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < 0 || n > 1000) {
        fprintf(stderr, "%s: %s is not a number from 0 to 1000\n", name, v);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int main(int argc, char **argv)
{
    kdp_config cfg = {.resource_name = "example.com/accel", .socket_name = "accel.sock"};
    kdp_dra_config dc = {.driver_name = "accel.example.com"};
    const char *metrics = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int bad = 0;
        if ((v = flag_value(argc, argv, &i, "--cards"))) {
            bad = count_flag("--cards", v, &cards);
        } else if ((v = flag_value(argc, argv, &i, "--shared"))) {
            bad = count_flag("--shared", v, &shared);
        } else if ((v = flag_value(argc, argv, &i, "--driver"))) {
            dc.driver_name = v;
        } else if ((v = flag_value(argc, argv, &i, "--kubelet-root"))) {
            cfg.kubelet_root = v;
        } else if ((v = flag_value(argc, argv, &i, "--kubeconfig"))) {
            dc.kubeconfig = v;
        } else if ((v = flag_value(argc, argv, &i, "--node"))) {
            dc.node_name = v;
        } else if ((v = flag_value(argc, argv, &i, "--cdi-dir"))) {
            dc.cdi_dir = v;
        } else if ((v = flag_value(argc, argv, &i, "--state-dir"))) {
            dc.state_dir = v;
        } else if ((v = flag_value(argc, argv, &i, "--metrics-address"))) {
            metrics = v;
        } else {
            fprintf(stderr,
                    "usage: %s [--cards N] [--shared N] [--driver NAME] [--kubelet-root DIR] "
                    "[--kubeconfig FILE] [--node NAME] [--cdi-dir DIR] [--state-dir DIR] "
                    "[--metrics-address ADDR]\n",
                    argv[0]);
            return 2;
        }
        if (bad) {
            return 2;
        }
    }
    kdp_log_set(KDP_LOG_INFO, NULL, NULL);
    kdp_ops ops = {.list = list};
    kdp_dra_ops dops = {.describe = describe, .prepare = prepare, .unprepare = unprepare};
    kdp_plugin *p;
    if (kdp_plugin_new(NULL, &cfg, &ops, NULL, &p) < 0) {
        return 1;
    }
    if (kdp_plugin_enable_dra(p, &dc, &dops) < 0 || serve_metrics(p, metrics) < 0) {
        kdp_plugin_free(p);
        return 1;
    }
    int r = kdp_plugin_run(p);
    kdp_plugin_free(p);
    return r == 0 ? 0 : 1;
}
