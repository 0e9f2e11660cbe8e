/* SPDX-License-Identifier: MIT */
#include "dra/describe.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/k8snames.h"
#include "base/log.h"

void kdp__dra_device_init(kdp_dra_device *d, const char *id)
{
    memset(d, 0, sizeof(*d));
    d->id = id;
}

void kdp__dra_device_done(kdp_dra_device *d)
{
    if (!d) {
        return;
    }
    free(d->name);
    for (size_t i = 0; i < d->n_attrs; i++) {
        free((char *)d->attrs[i].name);
        free((char *)d->attrs[i].string_value);
    }
    free(d->attrs);
    kdp__dra_device_share_done(d);
    kdp__dra_device_bind_done(d);
    for (size_t i = 0; i < d->n_caps; i++) {
        free(d->caps[i].name);
        free(d->caps[i].quantity);
    }
    free(d->caps);
    memset(d, 0, sizeof(*d));
}

int kdp__dra_default_name(const char *id, char out[64])
{
    char buf[64];
    size_t n = 0;
    static const char lower[] = "abcdefghijklmnopqrstuvwxyz";
    for (const char *s = id; *s && n < sizeof(buf) - 1; s++) {
        char c = *s;
        if (c >= 'A' && c <= 'Z') {
            c = lower[c - 'A'];
        }
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!ok) {
            c = '-';
        }
        buf[n++] = c;
    }
    while (n > 0 && buf[n - 1] == '-') {
        n--;
    }
    buf[n] = '\0';
    const char *start = buf;
    while (*start == '-') {
        start++;
    }
    if (!*start || kdp__k8snames_dns_label(start, NULL) < 0) {
        return -EINVAL;
    }
    memmove(out, start, strlen(start) + 1);
    return 0;
}

KDP_EXPORT int kdp_dra_device_set_name(kdp_dra_device *d, const char *name)
{
    const char *why = NULL;
    if (!d) {
        return -EINVAL;
    }
    if (kdp_dra_validate_device_name(name, &why) < 0) {
        log_error("device %s: invalid name \"%.80s\" for the slices: %s", d->id ? d->id : "?",
                  name ? name : "(null)", why);
        return -EINVAL;
    }
    char *copy = strdup(name);
    if (!copy) {
        return -ENOMEM;
    }
    free(d->name);
    d->name = copy;
    return 0;
}

/* A name may be used once among the attributes and once among the
 * capacities (the API keeps them in two maps). */
static int check_field(kdp_dra_device *d, const char *name, bool cap)
{
    const char *why = NULL;
    if (!name || kdp__k8snames_qualified_name(name, &why) < 0) {
        log_error("device %s: invalid %s name \"%.80s\": %s", d->id ? d->id : "?",
                  cap ? "capacity" : "attribute", name ? name : "(null)", why ? why : "missing");
        return -EINVAL;
    }
    for (size_t i = 0; !cap && i < d->n_attrs; i++) {
        if (strcmp(d->attrs[i].name, name) == 0) {
            return -EEXIST;
        }
    }
    for (size_t i = 0; cap && i < d->n_caps; i++) {
        if (strcmp(d->caps[i].name, name) == 0) {
            return -EEXIST;
        }
    }
    if (d->n_attrs + d->n_caps >= KDP_DRA_MAX_DEVICE_FIELDS) {
        log_error("device %s: more than %u attributes and capacities", d->id ? d->id : "?",
                  KDP_DRA_MAX_DEVICE_FIELDS);
        return -E2BIG;
    }
    return 0;
}

static int check_value(const kdp_dra_device *d, const kdp_dra_attr *a)
{
    const char *why = NULL;
    switch (a->type) {
    case KDP_DRA_ATTR_INT:
    case KDP_DRA_ATTR_BOOL:
        return 0;
    case KDP_DRA_ATTR_STRING:
        if (a->string_value && strlen(a->string_value) <= KDP__K8S_ATTR_STRING_MAX) {
            return 0;
        }
        why = a->string_value ? "longer than 64 characters" : "string_value is NULL";
        break;
    case KDP_DRA_ATTR_VERSION:
        if (a->string_value && kdp__k8snames_semver(a->string_value, &why) == 0) {
            return 0;
        }
        why = a->string_value ? why : "string_value is NULL";
        break;
    default:
        why = "unknown type (KDP_DRA_ATTR_INT, _BOOL, _STRING or _VERSION)";
        break;
    }
    log_error("device %s: invalid value of attribute %s: %s", d->id ? d->id : "?", a->name, why);
    return -EINVAL;
}

KDP_EXPORT int kdp_dra_device_add_attr(kdp_dra_device *d, const kdp_dra_attr *a)
{
    if (!d || !a) {
        return -EINVAL;
    }
    int r = check_field(d, a->name, false);
    if (r == 0) {
        r = check_value(d, a);
    }
    if (r < 0) {
        return r;
    }
    kdp_dra_attr *na = realloc(d->attrs, (d->n_attrs + 1) * sizeof(*na));
    if (!na) {
        return -ENOMEM;
    }
    d->attrs = na;
    kdp_dra_attr c = *a;
    c.name = strdup(a->name);
    c.string_value = NULL;
    bool str = a->type == KDP_DRA_ATTR_STRING || a->type == KDP_DRA_ATTR_VERSION;
    if (str) {
        c.string_value = strdup(a->string_value);
    }
    if (!c.name || (str && !c.string_value)) {
        free((char *)c.name);
        free((char *)c.string_value);
        return -ENOMEM;
    }
    d->attrs[d->n_attrs++] = c;
    return 0;
}

KDP_EXPORT int kdp_dra_device_add_capacity(kdp_dra_device *d, const char *name,
                                           const char *quantity)
{
    if (!d) {
        return -EINVAL;
    }
    int r = check_field(d, name, true);
    const char *why = NULL;
    if (r == 0 && (!quantity || kdp__k8snames_quantity(quantity, &why) < 0)) {
        log_error("device %s: invalid quantity \"%.80s\" of capacity %s: %s", d->id ? d->id : "?",
                  quantity ? quantity : "(null)", name, why ? why : "missing");
        r = -EINVAL;
    }
    if (r < 0) {
        return r;
    }
    kdp__dra_cap *nc = realloc(d->caps, (d->n_caps + 1) * sizeof(*nc));
    if (!nc) {
        return -ENOMEM;
    }
    d->caps = nc;
    kdp__dra_cap c = {strdup(name), strdup(quantity), NULL};
    if (!c.name || !c.quantity) {
        free(c.name);
        free(c.quantity);
        return -ENOMEM;
    }
    d->caps[d->n_caps++] = c;
    return 0;
}

#define STD_PREFIX "resource.kubernetes.io/"

/* Drops the attributes from index `from` on (a failed group). */
static void drop_attrs_from(kdp_dra_device *d, size_t from)
{
    while (d->n_attrs > from) {
        d->n_attrs--;
        free((char *)d->attrs[d->n_attrs].name);
        free((char *)d->attrs[d->n_attrs].string_value);
    }
}

KDP_EXPORT int kdp_dra_device_add_pci_attrs(kdp_dra_device *d, const kdp_pci_device *pci)
{
    if (!d || !pci || !pci->address) {
        return -EINVAL;
    }
    const kdp_dra_attr attrs[] = {
        {.name = STD_PREFIX "pciBusID", .type = KDP_DRA_ATTR_STRING, .string_value = pci->address},
        {.name = STD_PREFIX "pcieRoot",
         .type = KDP_DRA_ATTR_STRING,
         .string_value = pci->pcie_root},
        {.name = STD_PREFIX "numaNode", .type = KDP_DRA_ATTR_INT, .int_value = pci->numa_node},
    };
    bool want[] = {true, pci->pcie_root != NULL, pci->numa_node >= 0};
    size_t n = (size_t)want[0] + want[1] + want[2];
    if (d->n_attrs + d->n_caps + n > KDP_DRA_MAX_DEVICE_FIELDS) {
        log_error("device %s: no room for the PCI attributes (%u attributes and capacities at "
                  "most)",
                  d->id ? d->id : "?", KDP_DRA_MAX_DEVICE_FIELDS);
        return -E2BIG;
    }
    size_t from = d->n_attrs;
    int r = 0;
    for (size_t i = 0; r == 0 && i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        r = want[i] ? kdp_dra_device_add_attr(d, &attrs[i]) : 0;
    }
    if (r < 0) {
        drop_attrs_from(d, from);
    }
    return r;
}
