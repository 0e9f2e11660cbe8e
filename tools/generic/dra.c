/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic as a DRA driver: a resource with a dra: section is its
 * plugin served through kdp_dra.h. Each device is described with its name
 * (its ID as a DNS label), the attributes discovery knows (the standard
 * resource.kubernetes.io/pciBusID, pcieRoot and numaNode; the PCI IDs,
 * class and bound driver) and its entry's attributes and capacity. A claim
 * is prepared with each device's nodes, the resource's sharedNodes and env,
 * which kdp writes as the claim's CDI spec.
 */
#include "dra.h"

#include <errno.h>
#include <kdp_dra.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonstr.h"
#include "util.h"

#define NAME_MAX_LEN 63

/* ---- a device's name and fields ---- */

/* The ID as a DNS label: lower case, every other character '-', no '-' at
 * either end ("pci-0000:00:06.0" -> "pci-0000-00-06-0"). */
static void dra_name(const char *id, char out[NAME_MAX_LEN + 2])
{
    size_t o = 0;
    for (const char *s = id; *s && o <= NAME_MAX_LEN; s++) {
        int ch = (unsigned char)*s;
        ch += ch >= 'A' && ch <= 'Z' ? 'a' - 'A' : 0;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (ok || (o > 0 && out[o - 1] != '-')) {
            out[o++] = (char)(ok ? ch : '-');
        }
    }
    while (o > 0 && out[o - 1] == '-') {
        o--;
    }
    out[o] = '\0'; /* over 63: kdp refuses it, with a log line */
}

/* What a device publishes: attributes, then capacities. */
typedef int (*field_fn)(void *ud, const kdp_dra_attr *a, const char *cap, const char *quantity);

static int str_attr(field_fn fn, void *ud, const char *name, const char *v)
{
    kdp_dra_attr a = {.name = name, .type = KDP_DRA_ATTR_STRING, .string_value = v};
    return v ? fn(ud, &a, NULL, NULL) : 0;
}

/* A pci entry's device as kdp_dra_device_add_pci_attrs takes it. */
static kdp_pci_device pci_view(const gen_dev *d)
{
    return (kdp_pci_device){.address = d->pci.address,
                            .pcie_root = d->pci.pcie_root,
                            .numa_node = d->n_numa == 1 ? (int)d->numa[0] : -1};
}

/* The device's fields; std: with the standard PCI attributes (the
 * describe op has kdp_dra_device_add_pci_attrs add those). */
static int each_field(const gen_resource *r, const gen_dev *d, bool std, field_fn fn, void *ud)
{
    int rc = 0;
    char buf[3][16];
    kdp_pci_device pci = pci_view(d);
    if (d->pci.address && std) {
        rc = str_attr(fn, ud, "resource.kubernetes.io/pciBusID", pci.address);
        rc = rc ? rc : str_attr(fn, ud, "resource.kubernetes.io/pcieRoot", pci.pcie_root);
    }
    if (rc == 0 && d->n_numa == 1 && (std || !d->pci.address)) {
        kdp_dra_attr a = {.name = "resource.kubernetes.io/numaNode",
                          .type = KDP_DRA_ATTR_INT,
                          .int_value = d->numa[0]};
        rc = fn(ud, &a, NULL, NULL);
    }
    if (rc == 0 && d->pci.address) {
        snprintf(buf[0], sizeof(buf[0]), "%04x", d->pci.vendor);
        snprintf(buf[1], sizeof(buf[1]), "%04x", d->pci.device);
        snprintf(buf[2], sizeof(buf[2]), "%06x", (unsigned)d->pci.class_code);
        rc = str_attr(fn, ud, "pciVendorID", buf[0]);
        rc = rc ? rc : str_attr(fn, ud, "pciDeviceID", buf[1]);
        rc = rc ? rc : str_attr(fn, ud, "pciClass", buf[2]);
        rc = rc ? rc : str_attr(fn, ud, "kernelDriver", d->pci.driver);
    }
    const gen_entry *e = d->entry < r->n_entries ? &r->entries[d->entry] : NULL;
    for (size_t i = 0; rc == 0 && e && i < e->n_attrs; i++) {
        const gen_attr *g = &e->attrs[i];
        kdp_dra_attr a = {.name = g->name,
                          .type = (kdp_dra_attr_type)g->type,
                          .int_value = g->int_value,
                          .bool_value = g->bool_value,
                          .string_value = g->string_value};
        rc = fn(ud, &a, NULL, NULL);
    }
    for (size_t i = 0; rc == 0 && e && i < e->n_caps; i++) {
        rc = fn(ud, NULL, e->caps[i].name, e->caps[i].quantity);
    }
    return rc;
}

/* ---- describe (the plugin's worker) ---- */

static int add_field(void *ud, const kdp_dra_attr *a, const char *cap, const char *quantity)
{
    kdp_dra_device *out = ud;
    return a ? kdp_dra_device_add_attr(out, a) : kdp_dra_device_add_capacity(out, cap, quantity);
}

static int describe(kdp_plugin *p, const kdp_device *d, kdp_dra_device *out, void *ud)
{
    gres *g = ud;
    gen_dev dev;
    int r = gen_res_copy_dev(g, d->id, &dev);
    if (r < 0) {
        kdp_plugin_set_error(p, "device %s: %s", d->id,
                             r == -ENOENT ? "no longer present" : strerror(-r));
        return r;
    }
    char name[NAME_MAX_LEN + 2];
    dra_name(dev.id, name);
    r = kdp_dra_device_set_name(out, name);
    kdp_pci_device pci = pci_view(&dev);
    if (r == 0 && dev.pci.address) {
        r = kdp_dra_device_add_pci_attrs(out, &pci);
    }
    if (r == 0) {
        r = each_field(gen_res_config(g), &dev, false, add_field, out);
    }
    gen_dev_clear(&dev);
    return r;
}

/* ---- prepare (the DRA side's workers) ---- */

static bool in(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(v[i], s) == 0) {
            return true;
        }
    }
    return false;
}

/* One device of the claim: its nodes, the shared nodes it lacks, the env. */
static int prepare_device(const gen_resource *cfg, const gen_dev *d, char **shared, size_t i,
                          kdp_dra_prepared *out)
{
    int r = 0;
    for (size_t k = 0; r == 0 && k < d->n_paths; k++) {
        kdp_cdi_node n = {.path = d->paths[k], .permissions = cfg->permissions};
        r = kdp_dra_prepared_add_node(out, i, &n);
    }
    for (char **s = shared; r == 0 && s && *s; s++) {
        kdp_cdi_node n = {.path = *s, .permissions = cfg->permissions};
        r = in(d->paths, d->n_paths, *s) ? 0 : kdp_dra_prepared_add_node(out, i, &n);
    }
    for (size_t k = 0; r == 0 && k < cfg->n_env; k++) {
        r = kdp_dra_prepared_add_env(out, i, cfg->env[k].key, cfg->env[k].value);
    }
    return r;
}

static int prepare(kdp_plugin *p, const kdp_dra_claim *c, kdp_dra_prepared *out, void *ud)
{
    gres *g = ud;
    char **shared = NULL;
    int r = gen_res_copy_shared(g, &shared);
    for (size_t i = 0; r == 0 && i < c->n_devices; i++) {
        gen_dev d;
        r = gen_res_copy_dev(g, c->devices[i].device_id, &d);
        if (r == -ENOENT) {
            kdp_plugin_set_error(p, "device %s is no longer present", c->devices[i].device);
            break;
        }
        if (r == 0) {
            r = prepare_device(gen_res_config(g), &d, shared, i, out);
            gen_dev_clear(&d);
        }
    }
    kdp_strv_free(shared);
    return r;
}

int gen_dra_enable(kdp_plugin *p, gres *g)
{
    const gen_resource *r = gen_res_config(g);
    kdp_dra_config dc = {
        .driver_name = r->dra.driver,
        .kubeconfig = r->kubeconfig,
        .cdi_dir = r->cdi_dir,
        .device_plugin_too = r->dra.device_plugin,
        .unhealthy_taint = (kdp_dra_taint_effect)r->dra.unhealthy_taint,
    };
    kdp_dra_ops ops = {.describe = describe, .prepare = prepare};
    if (r->n_mounts > 0) {
        log_w("%s: mounts are handed out through the device-plugin API only, not to DRA claims",
              r->name);
    }
    return kdp_plugin_enable_dra(p, &dc, &ops);
}

/* ---- --list ---- */

typedef struct printer {
    FILE *f;
    size_t attrs;
    size_t caps;
} printer;

static int print_field(void *ud, const kdp_dra_attr *a, const char *cap, const char *quantity)
{
    printer *pr = ud;
    if (!a) {
        fprintf(pr->f, "%s", pr->caps++ ? ", " : "}, \"capacity\": {");
        kdp__json_string_file(pr->f, cap);
        fprintf(pr->f, ": ");
        kdp__json_string_file(pr->f, quantity);
        return 0;
    }
    fprintf(pr->f, "%s", pr->attrs++ ? ", " : "");
    kdp__json_string_file(pr->f, a->name);
    fprintf(pr->f, ": ");
    switch (a->type) {
    case KDP_DRA_ATTR_INT:
        fprintf(pr->f, "{\"int\": %lld}", (long long)a->int_value);
        break;
    case KDP_DRA_ATTR_BOOL:
        fprintf(pr->f, "{\"bool\": %s}", a->bool_value ? "true" : "false");
        break;
    case KDP_DRA_ATTR_VERSION:
        fprintf(pr->f, "{\"version\": ");
        kdp__json_string_file(pr->f, a->string_value);
        fprintf(pr->f, "}");
        break;
    default:
        fprintf(pr->f, "{\"string\": ");
        kdp__json_string_file(pr->f, a->string_value);
        fprintf(pr->f, "}");
        break;
    }
    return 0;
}

void gen_dra_print(FILE *f, const gen_resource *r, const gen_dev *d)
{
    char name[NAME_MAX_LEN + 2];
    dra_name(d->id, name);
    fprintf(f, ", \"dra\": {\"name\": ");
    kdp__json_string_file(f, name);
    fprintf(f, ", \"attributes\": {");
    printer pr = {.f = f};
    (void)each_field(r, d, true, print_field, &pr);
    fprintf(f, "%s}}", pr.caps ? "" : "}, \"capacity\": {");
}
