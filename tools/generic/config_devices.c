/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's devices: list (docs/generic.md), the entries of a resource:
 * path (a glob), paths (a group, with its id), usb (VENDOR[:PRODUCT], or
 * vendor, product and serial) and pci (VENDOR[:DEVICE], or vendor, device,
 * class, subsystem IDs and driver), each key with its check; fingerprinted
 * and freed here too.
 */
#include "config_devices.h"

#include <stdlib.h>
#include <string.h>

#include "config_dra.h"

static bool parse_usb_id(const char *s, size_t len, uint16_t *out)
{
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        len -= 2;
    }
    if (len == 0 || len > 4) {
        return false;
    }
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) {
            return false;
        }
        v = v * 16 + (unsigned)d;
    }
    *out = (uint16_t)v;
    return true;
}

/* "A" or "A:B", each ID as parse_usb_id reads it (usb: VENDOR[:PRODUCT],
 * pci: VENDOR[:DEVICE]). */
static bool parse_id_pair(const char *s, uint16_t *a, uint16_t *b, bool *has_b)
{
    const char *colon = strchr(s, ':');
    size_t al = colon ? (size_t)(colon - s) : strlen(s);
    *has_b = colon != NULL;
    return parse_usb_id(s, al, a) && (!colon || parse_usb_id(colon + 1, strlen(colon + 1), b));
}

static int get_usb_id(yw_ctx *c, const yaml_node_t *n, const char *key, uint16_t *out)
{
    const char *s = yw_text(c, n, key, 16, true);
    if (!s) {
        return -1;
    }
    if (!parse_usb_id(s, strlen(s), out)) {
        return yw_fail(c, n, key, "must be a hexadecimal USB ID of 4 digits at most (e.g. 0403)");
    }
    return 0;
}

/* ---- usb ---- */

static int f_usb_vendor(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return get_usb_id(c, v, key, &((gen_usb *)obj)->vendor);
}

static int f_usb_product(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    ((gen_usb *)obj)->has_product = true;
    return get_usb_id(c, v, key, &((gen_usb *)obj)->product);
}

static int f_usb_serial(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_dup_text(c, v, key, 255, &((gen_usb *)obj)->serial);
}

enum { USB_VENDOR, USB_PRODUCT, USB_SERIAL, USB_FIELDS };
static const yw_field usb_fields[USB_FIELDS] = {
    [USB_VENDOR] = {"vendor", f_usb_vendor},
    [USB_PRODUCT] = {"product", f_usb_product},
    [USB_SERIAL] = {"serial", f_usb_serial},
};

/* usb: VENDOR[:PRODUCT], or {vendor, product, serial}. */
static int parse_usb(yw_ctx *c, yaml_node_t *n, const char *key, gen_usb *u)
{
    u->set = true;
    if (n->type == YAML_SCALAR_NODE) {
        const char *s = yw_text(c, n, key, 16, false);
        if (!s) {
            return -1;
        }
        if (!parse_id_pair(s, &u->vendor, &u->product, &u->has_product)) {
            return yw_fail(c, n, key,
                           "must be VENDOR or VENDOR:PRODUCT in hexadecimal (e.g. 0403:6001), or "
                           "a mapping with vendor, product and serial");
        }
        return 0;
    }
    unsigned seen;
    if (yw_parse_map(c, n, key, usb_fields, USB_FIELDS, u, &seen) < 0) {
        return -1;
    }
    return seen & YW_BIT(USB_VENDOR) ? 0 : yw_fail(c, n, key, "vendor is required");
}

/* ---- pci ---- */

static int get_pci_id(yw_ctx *c, const yaml_node_t *n, const char *key, int32_t *out)
{
    uint16_t v = 0;
    int r = get_usb_id(c, n, key, &v); /* the same 4 hexadecimal digits */
    *out = v;
    return r;
}

static int f_pci_vendor(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return get_pci_id(c, v, key, &((gen_pci *)obj)->vendor);
}

static int f_pci_device(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return get_pci_id(c, v, key, &((gen_pci *)obj)->device);
}

static int f_pci_sub_vendor(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return get_pci_id(c, v, key, &((gen_pci *)obj)->subsystem_vendor);
}

static int f_pci_sub_device(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return get_pci_id(c, v, key, &((gen_pci *)obj)->subsystem_device);
}

/* class: 2, 4 or 6 hexadecimal digits (base class, + subclass, + prog-if),
 * 'x' for any digit: "03" (display), "0302" (3D controller), "0302xx",
 * "030000"; "0x" before it is fine. */
/* A hexadecimal digit's value, 16 for 'x' (any), -1 otherwise. */
static int class_digit(char ch)
{
    if (ch == 'x' || ch == 'X') {
        return 16;
    }
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

static int f_pci_class(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_pci *p = obj;
    const char *s = yw_text(c, v, key, 16, true);
    if (!s) {
        return -1;
    }
    const char *d = strncmp(s, "0x", 2) == 0 || strncmp(s, "0X", 2) == 0 ? s + 2 : s;
    size_t len = strlen(d);
    bool ok = len == 2 || len == 4 || len == 6;
    p->class_value = 0;
    p->class_mask = 0;
    for (size_t i = 0; ok && i < 6; i++) {
        int digit = i < len ? class_digit(d[i]) : 16; /* missing digits: any */
        ok = digit >= 0;
        p->class_value = p->class_value << 4 | (digit >= 0 && digit < 16 ? (unsigned)digit : 0);
        p->class_mask = p->class_mask << 4 | (digit >= 0 && digit < 16 ? 0xfU : 0);
    }
    return ok ? 0
              : yw_fail(c, v, key,
                        "must be 2, 4 or 6 hexadecimal digits, x for any (e.g. 03, 0302, "
                        "0302xx), not \"%s\"",
                        s);
}

static int f_pci_driver(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_pci *p = obj;
    if (yw_dup_text(c, v, key, 63, &p->driver) < 0) {
        return -1;
    }
    return strchr(p->driver, '/') || p->driver[0] == '.'
               ? yw_fail(c, v, key, "must be a driver's name (e.g. nvidia, vfio-pci)")
               : 0;
}

enum { PCI_VENDOR, PCI_DEVICE, PCI_CLASS, PCI_SUB_VENDOR, PCI_SUB_DEVICE, PCI_DRIVER, PCI_FIELDS };
static const yw_field pci_fields[PCI_FIELDS] = {
    [PCI_VENDOR] = {"vendor", f_pci_vendor},
    [PCI_DEVICE] = {"device", f_pci_device},
    [PCI_CLASS] = {"class", f_pci_class},
    [PCI_SUB_VENDOR] = {"subsystemVendor", f_pci_sub_vendor},
    [PCI_SUB_DEVICE] = {"subsystemDevice", f_pci_sub_device},
    [PCI_DRIVER] = {"driver", f_pci_driver},
};

/* pci: VENDOR[:DEVICE], or {vendor, device, class, subsystemVendor,
 * subsystemDevice, driver}. */
static int parse_pci(yw_ctx *c, yaml_node_t *n, const char *key, gen_pci *p)
{
    *p = (gen_pci){
        .set = true, .vendor = -1, .device = -1, .subsystem_vendor = -1, .subsystem_device = -1};
    if (n->type == YAML_SCALAR_NODE) {
        const char *s = yw_text(c, n, key, 16, false);
        if (!s) {
            return -1;
        }
        uint16_t vendor = 0;
        uint16_t device = 0;
        bool has_device = false;
        if (!parse_id_pair(s, &vendor, &device, &has_device)) {
            return yw_fail(c, n, key,
                           "must be VENDOR or VENDOR:DEVICE in hexadecimal (e.g. 10de:2335), or "
                           "a mapping with vendor, device, class, subsystemVendor, "
                           "subsystemDevice and driver");
        }
        p->vendor = vendor;
        p->device = has_device ? device : -1;
        return 0;
    }
    unsigned seen;
    if (yw_parse_map(c, n, key, pci_fields, PCI_FIELDS, p, &seen) < 0) {
        return -1;
    }
    return seen & (YW_BIT(PCI_VENDOR) | YW_BIT(PCI_CLASS) | YW_BIT(PCI_DRIVER))
               ? 0
               : yw_fail(c, n, key, "needs vendor, class or driver");
}

/* ---- devices ---- */

static bool id_char_ok(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.' || ch == ':';
}

static bool is_alnum_ch(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

static int f_entry_path(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_entry *e = obj;
    if (e->paths) {
        return yw_fail(c, v, key, "path and paths cannot be used together (paths: is a group)");
    }
    e->paths = calloc(1, sizeof(*e->paths));
    if (!e->paths) {
        return yw_oom(c, v, key);
    }
    e->n_paths = 1;
    return yw_get_path(c, v, key, GEN_MAX_STRING, &e->paths[0]);
}

static int f_entry_paths(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_entry *e = obj;
    if (e->paths) {
        return yw_fail(c, v, key, "path and paths cannot be used together (paths: is a group)");
    }
    if (yw_check_list(c, v, key, 1, GEN_MAX_GROUP) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    e->paths = calloc(n, sizeof(*e->paths));
    if (!e->paths) {
        return yw_oom(c, v, key);
    }
    e->n_paths = n;
    e->group = true;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        if (yw_get_path(c, yw_node_at(c, v->data.sequence.items.start[i]), sub, GEN_MAX_STRING,
                        &e->paths[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

static int f_entry_id(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_entry *e = obj;
    if (yw_dup_text(c, v, key, 200, &e->id) < 0) {
        return -1;
    }
    size_t len = strlen(e->id);
    bool ok = is_alnum_ch(e->id[0]) && is_alnum_ch(e->id[len - 1]);
    for (size_t i = 0; ok && i < len; i++) {
        ok = id_char_ok(e->id[i]);
    }
    return ok ? 0
              : yw_fail(c, v, key,
                        "must be letters, digits, '_', '-', '.' or ':', with a letter or digit at "
                        "both ends");
}

static int f_entry_usb(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return parse_usb(c, v, key, &((gen_entry *)obj)->usb);
}

static int f_entry_pci(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return parse_pci(c, v, key, &((gen_entry *)obj)->pci);
}

static int f_entry_attrs(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return gen_attrs_parse(c, v, key, obj);
}

static int f_entry_caps(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return gen_caps_parse(c, v, key, obj);
}

enum {
    ENTRY_PATH,
    ENTRY_PATHS,
    ENTRY_ID,
    ENTRY_USB,
    ENTRY_PCI,
    ENTRY_ATTRS,
    ENTRY_CAPS,
    ENTRY_FIELDS
};
static const yw_field entry_fields[ENTRY_FIELDS] = {
    [ENTRY_PATH] = {"path", f_entry_path},     [ENTRY_PATHS] = {"paths", f_entry_paths},
    [ENTRY_ID] = {"id", f_entry_id},           [ENTRY_USB] = {"usb", f_entry_usb},
    [ENTRY_PCI] = {"pci", f_entry_pci},        [ENTRY_ATTRS] = {"attributes", f_entry_attrs},
    [ENTRY_CAPS] = {"capacity", f_entry_caps},
};

static int parse_entry(yw_ctx *c, yaml_node_t *n, const char *key, gen_entry *e)
{
    if (n->type == YAML_SCALAR_NODE) { /* "- /dev/kvm" is short for "- path: /dev/kvm" */
        return f_entry_path(c, n, key, e);
    }
    unsigned seen;
    if (yw_parse_map(c, n, key, entry_fields, ENTRY_FIELDS, e, &seen) < 0) {
        return -1;
    }
    unsigned own = YW_BIT(ENTRY_USB) | YW_BIT(ENTRY_PCI);
    if (!(seen & (YW_BIT(ENTRY_PATH) | YW_BIT(ENTRY_PATHS) | own))) {
        return yw_fail(c, n, key, "needs path (a glob), paths (a group), usb or pci");
    }
    if ((seen & own) == own) {
        return yw_fail(c, n, key, "usb and pci cannot be used together");
    }
    if ((seen & YW_BIT(ENTRY_ID)) && !(seen & YW_BIT(ENTRY_PATHS))) {
        return yw_fail(c, n, key, "id is only for a group (paths:)");
    }
    return 0;
}

int gen_devices_parse(yw_ctx *c, yaml_node_t *v, const char *key, gen_resource *r)
{
    if (yw_check_list(c, v, key, 1, GEN_MAX_ENTRIES) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    r->entries = calloc(n, sizeof(*r->entries));
    if (!r->entries) {
        return yw_oom(c, v, key);
    }
    r->n_entries = n;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        if (parse_entry(c, yw_node_at(c, v->data.sequence.items.start[i]), sub, &r->entries[i]) <
            0) {
            return -1;
        }
    }
    return 0;
}

/* A string of the fingerprint (followed by \x1f): NULL as \x1e, as config.c
 * writes the resource's. */
static const char *fp_str(const char *s)
{
    return s ? s : "\x1e";
}

void gen_entry_fingerprint(FILE *f, const gen_entry *e)
{
    fprintf(f, "entry\x1f%d\x1f%zu\x1f", e->group, e->n_paths);
    for (size_t i = 0; i < e->n_paths; i++) {
        fprintf(f, "%s\x1f", fp_str(e->paths[i]));
    }
    fprintf(f, "%s\x1f%d\x1f%d\x1f%04x\x1f%04x\x1f%s\x1f", fp_str(e->id), e->usb.set,
            e->usb.has_product, e->usb.vendor, e->usb.product, fp_str(e->usb.serial));
    fprintf(f, "pci\x1f%d\x1f%d\x1f%d\x1f%d\x1f%d\x1f%06x\x1f%06x\x1f%s\x1f", e->pci.set,
            e->pci.vendor, e->pci.device, e->pci.subsystem_vendor, e->pci.subsystem_device,
            e->pci.class_value, e->pci.class_mask, fp_str(e->pci.driver));
    gen_attrs_fingerprint(f, e);
}

void gen_entry_clear(gen_entry *e)
{
    for (size_t i = 0; i < e->n_paths; i++) {
        free(e->paths[i]);
    }
    free(e->paths);
    free(e->id);
    free(e->usb.serial);
    free(e->pci.driver);
    gen_attrs_clear(e);
}
