/* SPDX-License-Identifier: MIT */
/* kdp-generic's configuration file (docs/generic.md), parsed with libyaml. */
#ifndef KDP_GENERIC_CONFIG_H
#define KDP_GENERIC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Caps on what a file may ask for. */
#define GEN_MAX_FILE_BYTES (1U << 20)
#define GEN_MAX_RESOURCES  64U
#define GEN_MAX_ENTRIES    256U
#define GEN_MAX_GROUP      64U
#define GEN_MAX_MOUNTS     64U
#define GEN_MAX_ENV        256U
#define GEN_MAX_COUNT      1024U
#define GEN_MAX_STRING     4095U
#define GEN_MAX_SHARED     64U
#define GEN_PCI_RESCAN_MS  5000U /* rescanInterval's default with a pci entry */

typedef struct gen_usb {
    bool set;
    bool has_product;
    uint16_t vendor;
    uint16_t product;
    char *serial; /* NULL = any */
} gen_usb;

/* pci: what a PCI device must be; -1 (or a zero mask) = any. */
typedef struct gen_pci {
    bool set;
    int32_t vendor;
    int32_t device;
    int32_t subsystem_vendor;
    int32_t subsystem_device;
    uint32_t class_value; /* compared under class_mask */
    uint32_t class_mask;
    char *driver; /* the bound driver's name; NULL = any */
} gen_pci;

/* An entry's attribute for DRA (attributes:), of kdp_dra_attr's types. */
enum { GEN_ATTR_INT = 1, GEN_ATTR_BOOL, GEN_ATTR_STRING, GEN_ATTR_VERSION };
typedef struct gen_attr {
    char *name;
    int type;
    long long int_value;
    bool bool_value;
    char *string_value; /* STRING and VERSION */
} gen_attr;

/* An entry's capacity for DRA (capacity:): a name and a quantity. */
typedef struct gen_cap {
    char *name;
    char *quantity;
} gen_cap;

#define GEN_MAX_FIELDS 24U /* attributes and capacities of an entry, with kdp's own */

/* One entry of devices: */
typedef struct gen_entry {
    char **paths; /* glob patterns: one for path:, several for paths: */
    size_t n_paths;
    bool group; /* paths: every match of every pattern is one device */
    char *id;   /* groups: the device ID (NULL = from the first path) */
    gen_usb usb;
    gen_pci pci;
    gen_attr *attrs; /* DRA only */
    size_t n_attrs;
    gen_cap *caps; /* DRA only */
    size_t n_caps;
} gen_entry;

typedef struct gen_mount {
    char *host_path;
    char *container_path;
    bool read_only;
} gen_mount;

typedef struct gen_env {
    char *key;
    char *value;
} gen_env;

/* health: a resource's health checks (docs/generic.md), kdp's probe op. */
#define GEN_MAX_ARGV 64U
typedef struct gen_health {
    bool set;                 /* health: is present */
    unsigned interval_ms;     /* interval; 0 = kdp's default (10 s) */
    unsigned unhealthy_after; /* unhealthyAfter; 0 = kdp's default (3) */
    unsigned healthy_after;   /* healthyAfter; 0 = kdp's default (2) */
    int on_down;              /* onProbeDown: a kdp_probe_down_policy */
    bool node_exists;         /* nodeExists (default true) */
    char *file;               /* file: a template ({path}, {name}, {id}); NULL = none */
    char **command;           /* command: argv templates, NULL-terminated; NULL = none */
    size_t n_command;
    unsigned timeout_ms; /* timeout: the command's; 0 = GEN_HEALTH_TIMEOUT_MS */
} gen_health;

/* The command's default deadline, and its bound: below kdp's callback
 * deadline (10 s), so that the command is killed and reaped, and its
 * failure counted, before kdp gives up on the probe. */
#define GEN_HEALTH_TIMEOUT_MS 5000U
/* the probe's deadline is the command's timeout and this */
#define GEN_HEALTH_REAP_MARGIN_MS 500U
#define GEN_HEALTH_MAX_TIMEOUT_MS 9000U

/* dra: the resource served as a DRA driver (docs/generic.md). */
typedef struct gen_dra {
    bool set;
    char *driver;        /* driver: the DRA driver's name */
    bool device_plugin;  /* devicePlugin: register with the device-plugin API too */
    int unhealthy_taint; /* unhealthyTaint: a kdp_dra_taint_effect */
} gen_dra;

typedef struct gen_resource {
    char *name;
    char *socket;
    gen_entry *entries;
    size_t n_entries;
    unsigned count;
    char *permissions;
    gen_mount *mounts;
    size_t n_mounts;
    gen_env *env;
    size_t n_env;
    bool cdi;
    char *cdi_kind;
    bool cdi_device_specs;  /* also hand out the nodes as DeviceSpecs */
    int preferred;          /* preferred: a kdp_preferred_strategy */
    bool one_per_container; /* onePerContainer: kdp_config.replicas_one_per_container */
    gen_health health;
    char **shared; /* sharedNodes: globs, NULL-terminated; NULL = none */
    size_t n_shared;
    /* rescanInterval (ms): 0 = off; 5 s by default with a pci entry */
    unsigned rescan_ms;
    gen_dra dra;
    /* The global settings too */
    char *root;
    char *sysfs;
    char *cdi_dir;
    char *kubeconfig; /* NULL: $KUBECONFIG, else in-cluster */
    /* Everything above, serialised: equal fingerprints = an unchanged resource. */
    char *fingerprint;
} gen_resource;

typedef struct gen_config {
    gen_resource *res;
    size_t n_res;
} gen_config;

/* Loads file. dp_dir is the device-plugin directory the sockets go to
 * (checked: a socket path is 107 bytes at most). Returns 0, or -1 with
 * *err = "FILE:LINE: KEY: what is wrong" (malloc'ed; NULL if out of memory).
 * out is initialised either way; release it with gen_config_free. */
int gen_config_load(const char *file, const char *dp_dir, gen_config *out, char **err);
void gen_config_free(gen_config *c);
/* Frees one resource's content. */
void gen_resource_clear(gen_resource *r);

#endif
