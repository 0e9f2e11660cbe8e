/* SPDX-License-Identifier: MIT */
/*
 * kdp_dra: a kdp plugin served as a DRA driver too (Dynamic Resource
 * Allocation, resource.k8s.io; GA in Kubernetes 1.34).
 *
 * One device table, two APIs. The devices a plugin lists (kdp.h: the list
 * op, kdp_plugin_set_devices and the rest) and their health (the author's
 * and the health checks') are what the DRA driver publishes and serves:
 *   - to the API server: the node's ResourceSlices (one pool named after the
 *     node, at most 128 devices per slice), re-published when the table
 *     changes and when someone else edits or deletes them;
 *   - to the kubelet: a registration socket in <kubelet root>/plugins_registry/
 *     (GetInfo type "DRAPlugin"), the DRAPlugin service (v1 and v1beta1:
 *     NodePrepareResources, NodeUnprepareResources) and the health stream
 *     (DRAResourceHealth/NodeWatchResources, v1 and v1alpha1) on the
 *     driver's own socket, <kubelet root>/plugins/<driver>/.
 *
 * At prepare, kdp reads the claim from the API server (UID checked, the
 * allocation filtered to this driver and this node's pool, this driver's
 * opaque configuration), calls the prepare op on the plugin's worker, writes
 * a CDI spec for the claim and records the claim in a checkpoint (atomic
 * write, fsync) before answering. Prepare and unprepare are idempotent; an
 * unprepare works after the claim was deleted and after a restart (from the
 * checkpoint); a prepare repeated after a reboot wiped the CDI directory
 * writes the spec again.
 *
 * A driver that is only a DRA driver is made with kdp_dra_driver_new (no
 * device-plugin name or socket); kdp_plugin_enable_dra makes a plugin a DRA
 * driver too. A device-plugin and a DRA driver on one node must not hand
 * out the same devices: by default a plugin with DRA on no longer registers
 * with the device-plugin API (kdp_dra_config.device_plugin_too). KEP-5004
 * (DeviceClass.spec.extendedResourceName) lets pods that ask for
 * `example.com/gpu: 1` be served by the driver. See docs/dra.md.
 *
 * Conventions are kdp.h's: >= 0 or -errno, strings copied, callbacks off the
 * loop thread, bounded by the callback deadline (a callback's own running
 * time). describe runs on the plugin's worker, one at a time with the
 * device-plugin callbacks; prepare and unprepare on the DRA side's own
 * worker threads (kdp_dra_ops).
 */
#ifndef KDP_DRA_H
#define KDP_DRA_H

#include "kdp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most devices one ResourceSlice holds (the API's limit). A pool with
 * more is published as several slices. */
#define KDP_DRA_MAX_DEVICES_PER_SLICE 128U
/* The most attributes plus capacities one device has (the API's limit). */
#define KDP_DRA_MAX_DEVICE_FIELDS 32U

/* $NODE_NAME: the node (from the downward API, spec.nodeName). */
#define KDP_DRA_NODE_NAME_ENV "NODE_NAME"
/* $KDP_CDI_DIR: the CDI directory when kdp_dra_config.cdi_dir is NULL (a
 * driver tried on a laptop, where /var/run/cdi is root's). */
#define KDP_DRA_CDI_DIR_ENV "KDP_CDI_DIR"
/* $POD_UID: the instance of a rolling update (downward API,
 * metadata.uid). */
#define KDP_DRA_POD_UID_ENV "POD_UID"

/* Checks a DRA driver name with the API's rule: a DNS subdomain of at most
 * 63 characters (lower-case letters, digits, '-' and '.'; e.g.
 * "gpu.example.com"). Returns 0, or -EINVAL and, if why is not NULL, a
 * static string saying what is wrong. Thread-safe. */
KDP_EXPORT int kdp_dra_validate_driver_name(const char *name, const char **why);
/* Checks a device name: a DNS label (at most 63 characters, lower-case
 * letters, digits and '-', a letter or digit at both ends). Same returns. */
KDP_EXPORT int kdp_dra_validate_device_name(const char *name, const char **why);

/* ------------------------------------------------------------------------
 * Describing a device for its ResourceSlice
 * ------------------------------------------------------------------------ */

typedef enum kdp_dra_attr_type {
    KDP_DRA_ATTR_INT = 1,
    KDP_DRA_ATTR_BOOL,
    KDP_DRA_ATTR_STRING,  /* at most 64 characters */
    KDP_DRA_ATTR_VERSION, /* a semantic version, "1.2.3" */
} kdp_dra_attr_type;

/* One attribute of a device, which CEL selectors of a DeviceClass or a
 * claim match on (device.attributes["gpu.example.com"].model). */
typedef struct kdp_dra_attr {
    /* A C identifier of at most 32 characters ("model"), which the API
     * qualifies with the driver name, or "domain/identifier"
     * ("resource.kubernetes.io/pcieRoot"). */
    const char *name;
    kdp_dra_attr_type type;
    int64_t int_value;        /* KDP_DRA_ATTR_INT */
    bool bool_value;          /* KDP_DRA_ATTR_BOOL */
    const char *string_value; /* KDP_DRA_ATTR_STRING and _VERSION */
} kdp_dra_attr;

/* A device being described (the describe op's out). */
typedef struct kdp_dra_device kdp_dra_device;

/* The device's name in the slice: a DNS label, unique in the pool. Without
 * this call, the name is the device's kdp ID lower-cased, every character
 * that a DNS label cannot hold as '-' (an ID that gives no valid or a
 * duplicate name is left out of the slices, with a log line naming it).
 * Returns 0 or -EINVAL (the name is logged with what is wrong). */
KDP_EXPORT int kdp_dra_device_set_name(kdp_dra_device *d, const char *name);
/* Adds an attribute (copied). Returns 0, -EINVAL (bad name or value,
 * logged), -EEXIST (the name twice), -E2BIG (past
 * KDP_DRA_MAX_DEVICE_FIELDS with the capacities) or -ENOMEM. */
KDP_EXPORT int kdp_dra_device_add_attr(kdp_dra_device *d, const kdp_dra_attr *a);
/* Adds a capacity: a name as for attributes, a Kubernetes quantity
 * ("80Gi", "4", "500m"). Same returns. */
KDP_EXPORT int kdp_dra_device_add_capacity(kdp_dra_device *d, const char *name,
                                           const char *quantity);

/* The standard attributes Kubernetes defines for a PCI device (the Go
 * helpers of k8s.io/dynamic-resource-allocation/deviceattribute compute the
 * same), from a device kdp_pci_list or kdp_pci_device_of found:
 * "resource.kubernetes.io/pciBusID" (its bus address, "0000:41:00.0"),
 * "resource.kubernetes.io/pcieRoot" (its root complex, "pci0000:40"; left
 * out if it has none) and "resource.kubernetes.io/numaNode" (an int; left
 * out when numa_node is -1). A claim's matchAttribute on pcieRoot then puts
 * a GPU and a NIC of different drivers under one root. All or none: returns
 * 0, -EINVAL (d or pci NULL, no address), -EEXIST (one of them set already),
 * -E2BIG (no room for them within KDP_DRA_MAX_DEVICE_FIELDS), -ENOMEM. */
KDP_EXPORT int kdp_dra_device_add_pci_attrs(kdp_dra_device *d, const kdp_pci_device *pci);

/* ------------------------------------------------------------------------
 * Sharing: partitionable devices and consumable capacity
 * ------------------------------------------------------------------------ */

/* A name and a Kubernetes quantity: a counter ("memory", "80Gi"), an
 * amount of one a device consumes, or a capacity a share consumed. */
typedef struct kdp_dra_quantity {
    const char *name;
    const char *value;
} kdp_dra_quantity;

/* The most of each, the API's limits (resource.k8s.io/v1, Kubernetes
 * 1.35+): counters in a counter set or in one consumption, counter sets
 * per ResourceSlice (kdp splits the pool's sets over as many slices as
 * they need), consumptions per device, compatibility groups per
 * consumption, valid values of a request policy. */
#define KDP_DRA_MAX_COUNTERS       32U
#define KDP_DRA_MAX_SETS_PER_SLICE 8U
#define KDP_DRA_MAX_CONSUMPTIONS   2U
#define KDP_DRA_MAX_COMPAT_GROUPS  2U
#define KDP_DRA_MAX_VALID_VALUES   10U
/* A slice holds at most 64 devices when one of them has taints or
 * consumes counters (128 otherwise): kdp splits accordingly. */
#define KDP_DRA_MAX_DEVICES_PER_SLICE_ADVANCED 64U

/* A counter set of the pool (partitionable devices, KEP-4815, on by
 * default since Kubernetes 1.36): what a physical device has to share
 * among the logical devices that consume it, e.g. a card's "memory" 80Gi
 * and "slices" 7. The scheduler keeps the books: it allocates a logical
 * device only while the counters it consumes are left, so overlapping
 * partitions of one card (whole, halves, sevenths) can all be published. */
typedef struct kdp_dra_counter_set {
    const char *name; /* a DNS label, unique in the pool: "card-0" */
    /* 1 to KDP_DRA_MAX_COUNTERS: each name a DNS label, unique in the
     * set; each value a quantity >= 0. */
    const kdp_dra_quantity *counters;
    size_t n_counters;
} kdp_dra_counter_set;

/* Sets the pool's counter sets, replacing those set before (n = 0: none).
 * Each set is checked now with the API server's rules (logged, naming the
 * field and the rule); kdp publishes them in slices of their own
 * (KDP_DRA_MAX_SETS_PER_SLICE each) at the pool's next generation, beside
 * the devices' slices. A device whose consumption names a set or a counter
 * that is not here is left out of the slices (logged) until it is. Any
 * thread, callbacks included (the list op is a good place: it finds the
 * cards); copies what it needs. Returns 0, -EINVAL (p NULL, a bad set:
 * nothing changes), -E2BIG (more than 1024 sets), -ENOENT (DRA not on),
 * -ENOMEM. */
KDP_EXPORT int kdp_plugin_set_dra_counter_sets(kdp_plugin *p, const kdp_dra_counter_set *sets,
                                               size_t n);

/* What a logical device consumes of one counter set while it is
 * allocated. */
typedef struct kdp_dra_consumption {
    const char *counter_set; /* a set of kdp_plugin_set_dra_counter_sets */
    /* 1 to KDP_DRA_MAX_COUNTERS, names of the set's counters, each once;
     * values quantities >= 0. */
    const kdp_dra_quantity *counters;
    size_t n_counters;
    /* Compatibility groups (Kubernetes 1.37, alpha: the API server keeps
     * them only with the DRADeviceCompatibilityGroups feature gate on):
     * devices consuming the same set are allocated together only if they
     * share a group (a device with none only with devices with none): at
     * most KDP_DRA_MAX_COMPAT_GROUPS DNS labels ("mig", "vgpu"), unique. */
    const char *const *compatibility_groups;
    size_t n_compatibility_groups;
} kdp_dra_consumption;

/* Adds a consumption to the device being described (consumesCounters: at
 * most KDP_DRA_MAX_CONSUMPTIONS, each of another set). Copied. Returns 0,
 * -EINVAL (a bad field: logged with the rule), -EEXIST (that set already),
 * -E2BIG (a third), -ENOMEM. */
KDP_EXPORT int kdp_dra_device_add_consumption(kdp_dra_device *d, const kdp_dra_consumption *c);

/* The device may be allocated to several claims at once (consumable
 * capacity, KEP-5075, on by default since Kubernetes 1.36): each
 * allocation is a share with its own share ID, and takes part of the
 * device's capacities (kdp_dra_alloc.consumed): the scheduler never hands
 * out more than a capacity's value in all. Returns 0 or -EINVAL (d NULL). */
KDP_EXPORT int kdp_dra_device_allow_multiple_allocations(kdp_dra_device *d);

/* The most binding conditions, and the most binding failure conditions,
 * of a device (the API's BindingConditionsMaxSize). */
#define KDP_DRA_MAX_BINDING_CONDITIONS 4U

/* The device must be made ready after it is allocated and before the pod
 * binds (binding conditions, KEP-5007, beta and on by default since
 * Kubernetes 1.36: feature gate DRADeviceBindingConditions), e.g. a device
 * a fabric attaches to the node. The scheduler allocates such a device,
 * then holds the pod before binding it until the claim's status.devices
 * entry for the device has a condition of each type of `conditions` with
 * status "True"; one of `failure_conditions` "True" fails the binding (the
 * scheduler frees the allocation and tries again), and so does its
 * bindingTimeout (600 s by default). binds_to_node (bindsToNode) pins the
 * allocation to the node the scheduler chose. The driver sets the
 * conditions with kdp_plugin_set_dra_device_status, told by the
 * kdp_dra_ops.bind callback that such a claim is allocated.
 *
 * Each list: at most KDP_DRA_MAX_BINDING_CONDITIONS condition types (label
 * names: "example.com/attached" or "Attached"), none twice, none in both;
 * the two are set together. Checked now with the API's rules (logged,
 * naming the field and the rule) and copied; replaces what an earlier call
 * set; n_conditions 0, n_failure_conditions 0 and binds_to_node false
 * clear it. Returns 0, -EINVAL (d NULL, a rule broken: nothing changes) or
 * -ENOMEM. */
KDP_EXPORT int
kdp_dra_device_set_binding_conditions(kdp_dra_device *d, const char *const *conditions,
                                      size_t n_conditions, const char *const *failure_conditions,
                                      size_t n_failure_conditions, bool binds_to_node);

/* How much of a capacity one share may take (the capacity's
 * requestPolicy). A claim asks for an amount
 * (spec.devices.requests[].exactly.capacity.requests); the scheduler rounds
 * it up to the policy (to the next valid value, or to min + k * step) and
 * gives the default to a claim that names none. Either valid_values or a
 * range (min, and optionally max and step), not both; or neither (then any
 * amount, the default if one is set). */
typedef struct kdp_dra_request_policy {
    const char *default_value; /* required with valid_values or a range */
    /* ascending, unique, each at most the capacity: at most
     * KDP_DRA_MAX_VALID_VALUES; default_value one of them */
    const char *const *valid_values;
    size_t n_valid_values;
    /* a range: min <= default <= max <= the capacity, step > 0, default
     * and max whole steps above min, min + step <= the capacity; values
     * >= 0 with at most 3 decimals */
    const char *min;
    const char *max;  /* NULL: the capacity */
    const char *step; /* NULL: any amount in the range */
} kdp_dra_request_policy;

/* Sets the request policy of the device's capacity `capacity` (added
 * before with kdp_dra_device_add_capacity, on a device that allows
 * multiple allocations: the API's rule). Checked now as the API server
 * checks it; copied. Returns 0, -EINVAL (logged, naming the rule), -ENOENT
 * (no such capacity), -ENOMEM. */
KDP_EXPORT int kdp_dra_device_set_request_policy(kdp_dra_device *d, const char *capacity,
                                                 const kdp_dra_request_policy *policy);

/* ------------------------------------------------------------------------
 * Claims
 * ------------------------------------------------------------------------ */

/* What the kubelet names a claim by. */
typedef struct kdp_dra_claim_ref {
    const char *ns;
    const char *name;
    const char *uid;
} kdp_dra_claim_ref;

/* One device allocated to the claim from this driver's pool on this node. */
typedef struct kdp_dra_alloc {
    /* The claim's request ("gpu", or "gpu/small" for a subrequest). */
    const char *request;
    /* The device's name in the slice, and its kdp ID in the table (NULL if
     * the device is no longer in the table: prepare refuses the claim
     * before calling you; unprepare may see it). */
    const char *device;
    const char *device_id;
    /* The share's ID (a lower-case UUID) when the device allows multiple
     * allocations (kdp_dra_device_allow_multiple_allocations; Kubernetes
     * 1.35+), else NULL. */
    const char *share_id;
    /* What the share consumed of each of the device's capacities
     * (status.allocation.devices.results[].consumedCapacity: every
     * capacity, as the scheduler rounded it to its request policy); none
     * unless shared. */
    const kdp_dra_quantity *consumed;
    size_t n_consumed;
    bool admin_access;
    /* This driver's opaque parameters that apply to this request (the
     * claim's status.allocation.devices.config[].opaque.parameters, JSON
     * text), the DeviceClass's first, then the claim's: a later one wins
     * where they disagree. */
    const char *const *configs;
    size_t n_configs;
    /* The device's binding conditions and binding failure conditions
     * (kdp_dra_device_set_binding_conditions), as the scheduler copied them
     * into the allocation: the condition types the bind op sets. As the
     * claim was read: none in an unprepare, or in a prepare answered from
     * the checkpoint. */
    const char *const *binding_conditions;
    size_t n_binding_conditions;
    const char *const *binding_failure_conditions;
    size_t n_binding_failure_conditions;
} kdp_dra_alloc;

typedef struct kdp_dra_claim {
    kdp_dra_claim_ref ref;
    const kdp_dra_alloc *devices;
    size_t n_devices;
} kdp_dra_claim;

/* The answer to a prepare (the prepare op's out): what each device of the
 * claim gives the container. kdp writes the nodes, variables and mounts
 * added here as one CDI spec for the claim (kind "k8s.<driver>/claim", device
 * "<claim UID>-<device>", "..._<result index>" for a device the claim
 * names again) in kdp_dra_config.cdi_dir and hands the kubelet
 * their CDI IDs; IDs added with kdp_dra_prepared_add_cdi_id (a spec of
 * yours) are handed over as they are. A device given none of these gets its host
 * device node (kdp_device.host_path, at its container_path) if it has one.
 * `device` is the index into kdp_dra_claim.devices (or KDP_DRA_CLAIM,
 * below). Each returns 0, -EINVAL (bad index or value, logged), -E2BIG (more
 * than 64 of a kind per device) or -ENOMEM. */
typedef struct kdp_dra_prepared kdp_dra_prepared;
KDP_EXPORT int kdp_dra_prepared_add_node(kdp_dra_prepared *r, size_t device,
                                         const kdp_cdi_node *node);
KDP_EXPORT int kdp_dra_prepared_add_env(kdp_dra_prepared *r, size_t device, const char *key,
                                        const char *value);
/* A bind mount of host_path at container_path (both absolute), read-only
 * or not (CDI options "nosuid", "nodev", "bind", with "ro"). */
KDP_EXPORT int kdp_dra_prepared_add_mount(kdp_dra_prepared *r, size_t device,
                                          const char *container_path, const char *host_path,
                                          bool read_only);
KDP_EXPORT int kdp_dra_prepared_add_cdi_id(kdp_dra_prepared *r, size_t device, const char *cdi_id);

/* As the device of kdp_dra_prepared_add_node, _add_env and _add_mount: an
 * edit for the whole claim, which every container that gets any of the
 * claim's devices gets once (a claim-wide variable, a shared directory, a
 * control node). kdp writes them as a device of its own in the claim's CDI
 * spec, named after the claim's UID ("k8s.<driver>/claim=<UID>"), and hands
 * its CDI ID over with each device of the claim (a container given several
 * of them gets the same edits again: CDI applies them once). Kept in the
 * checkpoint as the devices' are. Not for _add_cdi_id or _set_status, which
 * are per device (-EINVAL). */
#define KDP_DRA_CLAIM ((size_t)-1)

/* One condition of a prepared device, as the pod's owner reads it in the
 * claim (metav1.Condition; kdp sets lastTransitionTime). */
typedef struct kdp_dra_condition {
    const char *type;    /* a qualified name: "Ready", "gpu.example.com/Mig" */
    const char *status;  /* "True", "False" or "Unknown" */
    const char *reason;  /* CamelCase, at most 1024: "Configured" */
    const char *message; /* NULL: none; at most 32768 bytes */
} kdp_dra_condition;

/* What a driver tells of a device it prepared, in the claim's
 * status.devices (KEP-4817, GA in Kubernetes 1.37): conditions, opaque
 * data and network data. Every field may be left out. */
typedef struct kdp_dra_device_status {
    const kdp_dra_condition *conditions; /* at most 8, each type once */
    size_t n_conditions;
    const char *data; /* a JSON object (text), at most 10 KiB */
    /* networkData: the interface in the pod, its addresses in canonical
     * CIDR form ("10.9.8.7/24", "2001:db8::1/64"; at most 16), its MAC. */
    const char *interface_name; /* at most 256 bytes */
    const char *const *ips;
    size_t n_ips;
    const char *hardware_address; /* at most 128 bytes */
} kdp_dra_device_status;

/* Device `device` of the claim reports st (copied, checked now as the API
 * server checks it). After the prepare succeeds kdp writes it into the
 * claim's status.devices through the /status subresource (the entries of
 * other drivers and devices kept; retried on conflicts and with backoff;
 * the answer to the kubelet does not wait for it), keeps it in its
 * checkpoint (a prepare asked again after a restart writes it again), and
 * removes this driver's entries at unprepare (but for devices with binding
 * conditions: theirs hold while the claim stays allocated). A device the
 * prepare op gives no status keeps the entry the claim had (one the bind
 * op set, say). Returns 0, -EINVAL (a bad index or field: logged, naming
 * it), -ENOMEM. */
KDP_EXPORT int kdp_dra_prepared_set_status(kdp_dra_prepared *r, size_t device,
                                           const kdp_dra_device_status *st);

/* Replaces the status of a device of a prepared claim after the prepare
 * (a condition changed, an address came), or of a claim waiting for its
 * binding conditions (kdp_dra_ops.bind): the device by its name in the
 * pool (kdp_dra_alloc.device) and share_id (NULL unless shared), the claim
 * by UID. Checked as kdp_dra_prepared_set_status checks it, recorded in the
 * checkpoint for a prepared claim (it syncs: not from a latency-critical
 * path; kept in memory for one not prepared, which its prepare then keeps
 * unless the prepare op sets another), then written into the claim as
 * after a prepare (a status set for a claim while its prepare runs may be
 * overwritten by the prepare's: set it from the prepare op then). Any
 * thread, callbacks included. Returns 0, -EINVAL (p
 * NULL, a bad field: logged), -ENOENT (DRA not on, no such prepared or
 * binding claim, or no such device in it: logged), -EAGAIN (too many
 * writes waiting), -ENOMEM, or the checkpoint's -errno. */
KDP_EXPORT int kdp_plugin_set_dra_device_status(kdp_plugin *p, const char *claim_uid,
                                                const char *device, const char *share_id,
                                                const kdp_dra_device_status *st);

/* ------------------------------------------------------------------------
 * Enabling DRA on a plugin
 * ------------------------------------------------------------------------ */

/* The callbacks. Every member may be NULL. Threads:
 *   - describe runs as kdp_ops callbacks do: the plugin's worker thread,
 *     one at a time with the device-plugin callbacks (list, allocate ...).
 *   - prepare and unprepare run on the DRA side's own worker threads, so
 *     that a slow prepare never holds back Allocate or the health probes:
 *     they may run at the same time as the device-plugin callbacks and
 *     describe. With kdp_dra_config.concurrent_claims 0 or 1 (the default)
 *     they never run at the same time as each other; with N, up to N run
 *     at once, each on a different claim (one claim's operations always
 *     run in order). Guard what they share with the other callbacks.
 *   - each is bounded by kdp_config.callback_timeout_ms of its own running
 *     time (a claim waiting for its turn is not counted).
 * kdp_plugin_set_error() gives the reason, which the kubelet shows in the
 * pod's events. */
typedef struct kdp_dra_ops {
    /* Describes one device of the table for the ResourceSlices (name,
     * attributes, capacities), once per device ID new to the table (a
     * device removed and added again is described again; a health change
     * is not a new description). A negative return leaves the device out
     * (logged). NULL: the name from the ID, no attributes. */
    int (*describe)(kdp_plugin *p, const kdp_device *d, kdp_dra_device *out, void *ud);
    /* Prepares the claim's devices for its pods (called once per claim, not
     * again while it stays prepared; again after an unprepare, and again
     * when the kubelet asks after a node reboot: what a prepare set up on
     * the host does not survive one). Every device is known and healthy:
     * kdp checked before calling. A negative return fails the claim (the
     * kubelet retries); nothing is recorded. */
    int (*prepare)(kdp_plugin *p, const kdp_dra_claim *c, kdp_dra_prepared *out, void *ud);
    /* Undoes a prepare. The claim is kdp's record of the prepare (the claim
     * may be gone from the API server). A negative return fails the
     * unprepare (the kubelet retries); the record is kept. Not called for a
     * claim kdp never prepared (that unprepare succeeds at once). */
    int (*unprepare)(kdp_plugin *p, const kdp_dra_claim *c, void *ud);
    /* A claim was allocated devices of this driver's pool that have binding
     * conditions (kdp_dra_device_set_binding_conditions): the scheduler
     * holds its pod until each such device's binding conditions are "True"
     * in the claim's status. Attach the devices (or start to), then set
     * the conditions with kdp_plugin_set_dra_device_status (here or later,
     * from any thread): {type: a binding condition, status: "True", reason:
     * "Attached"}. c->devices are the claim's devices with binding
     * conditions (kdp_dra_alloc.binding_conditions; device_id set). An
     * allocation is the claim's allocationTimestamp and devices: called once
     * per allocation, not again while its conditions are pending or met
     * (again after a driver restart for a claim still pending; the
     * conditions hold while the claim stays allocated: an unprepare keeps
     * them). A negative return
     * fails the binding: kdp sets each device's first failure condition
     * "True" (reason "BindFailed", message kdp_plugin_set_error's), and the
     * scheduler frees the allocation and tries again. Runs as prepare does
     * (the DRA side's worker threads, in order with the claim's prepare and
     * unprepare, bounded by the callback deadline). With bind set, kdp
     * watches the cluster's ResourceClaims (list and watch of
     * resourceclaims in every namespace: grant them, deploy/dra/README.md).
     * NULL: no watch. */
    int (*bind)(kdp_plugin *p, const kdp_dra_claim *c, void *ud);
    /* That allocation ended: the claim was deallocated, allocated anew or
     * deleted (also while kdp's watch was down): detach what bind attached.
     * c is the allocation as bind saw it. Called once per allocation whose
     * bind op started, and for one kdp first saw already met (after a
     * driver restart: the devices may be attached); not at the driver's
     * end. Runs as bind does, in order with the claim's other operations.
     * A negative return is logged (the allocation is gone: nothing to
     * retry). Setting it alone watches the claims too. NULL: none. */
    int (*unbind)(kdp_plugin *p, const kdp_dra_claim *c, void *ud);
} kdp_dra_ops;

/* How a device that turns Unhealthy is tainted in its ResourceSlice (device
 * taints, KEP-5055, GA in Kubernetes 1.37). The taint's key is
 * "<driver>/" KDP_DRA_UNHEALTHY_TAINT, its value why ("health-check-failed":
 * the probe's verdict, "reported-unhealthy": the author's health), its
 * timeAdded when the device turned Unhealthy; it goes when the device is
 * Healthy again (with the probes' hysteresis). */
typedef enum kdp_dra_taint_effect {
    KDP_DRA_TAINT_NO_SCHEDULE = 0, /* the default: no new claim gets it */
    KDP_DRA_TAINT_NO_EXECUTE,      /* also evicts the pods whose claims have it */
    KDP_DRA_TAINT_NONE,            /* not tainted (prepare still refuses it) */
    /* Tainted with the effect "None": shown (kubectl, DeviceTaintRules'
     * status) without effect on the scheduler or the pods. */
    KDP_DRA_TAINT_INFORMATIONAL,
} kdp_dra_taint_effect;
#define KDP_DRA_UNHEALTHY_TAINT "unhealthy"

/* A taint of the author's own on one device (maintenance, a firmware
 * update): published in the device's ResourceSlice beside kdp's own. */
typedef struct kdp_dra_taint {
    /* A label name, by convention under the driver's domain
     * ("gpu.example.com/maintenance"); not kdp's own key. */
    const char *key;
    const char *value; /* a label value; NULL or "": none */
    /* NO_SCHEDULE, NO_EXECUTE or INFORMATIONAL (not NONE). */
    kdp_dra_taint_effect effect;
} kdp_dra_taint;
#define KDP_DRA_MAX_TAINTS 8

/* Sets the author's taints on the device with kdp ID id (a device of the
 * plugin's table; one not in it yet gets them when it comes), replacing
 * those set before; n = 0 removes them. A taint kept from the last call
 * (same key, value and effect) keeps its timeAdded; a new one gets now.
 * The slices are published again soon after, from the loop. Any thread,
 * callbacks included; copies what it needs. The scheduler then allocates
 * the device only to claims that tolerate the taints; prepare does not
 * refuse it (a claim that tolerates them may use it), and the device-plugin
 * side does not see them (set the health for that). Returns 0, -EINVAL (a
 * bad key, value or effect, kdp's own key, a key and effect twice, more
 * than KDP_DRA_MAX_TAINTS: logged, naming it), -ENOENT (DRA not on),
 * -ENOSPC (taints on 4096 devices already), -ENOMEM. */
KDP_EXPORT int kdp_plugin_set_dra_taints(kdp_plugin *p, const char *id, const kdp_dra_taint *taints,
                                         size_t n);

typedef struct kdp_dra_config {
    /* Required: the driver's name (kdp_dra_validate_driver_name), e.g.
     * "gpu.example.com". */
    const char *driver_name;
    /* NULL = $NODE_NAME. Required one way or the other: the pool, the
     * slices' nodeName and owner. */
    const char *node_name;
    /* The API server: NULL = $KUBECONFIG if set, else the in-cluster
     * configuration ($KUBERNETES_SERVICE_HOST/_PORT, the service account's
     * token, re-read as it rotates, and CA). A kubeconfig file's current
     * context: server, certificate-authority[-data], token, tokenFile,
     * client-certificate[-data] and client-key[-data]. */
    const char *kubeconfig;
    /* Where prepared claims are recorded; NULL = <kubelet root>/plugins/
     * <driver>/ (the kubelet root of kdp_config). Created if missing. */
    const char *state_dir;
    /* NULL = $KDP_CDI_DIR if set, else "/var/run/cdi". */
    const char *cdi_dir;
    /* The mode of the CDI specs kdp writes for claims: 0 = 0644 (readable
     * by every user of the node, as CDI tools expect; the runtime reads
     * them as root), 0600 keeps what a spec holds (the env the prepare op
     * gave, which may carry a claim's parameters) to root. Read and write
     * bits only (at most 0666), the owner's read and write included. */
    unsigned cdi_mode;
    /* The rolling-update instance (sockets <driver>-<instance>-reg.sock and
     * dra-<instance>.sock, so that two instances register at once); NULL =
     * $POD_UID if set, else the plugin's kdp_config.instance, else none. */
    const char *instance;
    /* Also register with the device-plugin API (false: DRA only). Both on
     * one node hand out the same devices twice unless the cluster uses only
     * one of them: see docs/dra.md. */
    bool device_plugin_too;
    /* Serve no health stream (none advertised; a kubelet that asks anyway
     * gets UNIMPLEMENTED). */
    bool no_health;
    /* The health stream is served as v1 (Kubernetes 1.37+) and as v1alpha1
     * (1.34-1.36 kubelets; deprecated, removed in 1.40): true serves v1
     * only. The kubelet picks its own preference among those advertised. */
    bool no_health_v1alpha1;
    /* Re-list the node's slices this often as a backstop to the watch; 0 =
     * 10 minutes. At least 1000. */
    unsigned resync_interval_ms;
    /* How many prepare and unprepare callbacks may run at once, on
     * different claims (one claim's stay in order): 0 or 1 = one at a time
     * (then they never run at the same time as each other), at most 16.
     * Either way they run on the DRA side's own worker threads, at the same
     * time as the device-plugin callbacks and describe, which keep the
     * plugin's worker: see kdp_dra_ops. */
    unsigned concurrent_claims;
    /* How an Unhealthy device is tainted in the slices (the scheduler then
     * gives it to no claim that does not tolerate the taint): see
     * kdp_dra_taint_effect. */
    kdp_dra_taint_effect unhealthy_taint;
    /* Device metadata for the pod (KEP-5304, beta in Kubernetes 1.37): at
     * each prepare, for each request of the claim, a DeviceMetadata
     * document (metadata.resource.k8s.io, v1beta1 then v1alpha1 in one
     * JSON stream) naming the claim and the request's devices with their
     * attributes (as described) and network data (kdp_dra_device_status:
     * a change of it bumps metadata.generation), kept in
     * <state_dir>/dra-device-metadata/<ns>_<claim>_<uid>/ and mounted read-only through the
     * claim's CDI spec at
     * /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/
     * <request>/<driver>-metadata.json (resourceclaimtemplates/<the pod's
     * name for the claim>/... for a claim made from a template), where the
     * Go helper k8s.io/dynamic-resource-allocation/devicemetadata reads it
     * (a container started before a change keeps the file it was given).
     * Removed at unprepare. See docs/dra.md. */
    bool device_metadata;
} kdp_dra_config;

/* Serves p as a DRA driver too (see the top of this header). Before
 * kdp_plugin_run()/kdp_ctx_run(), on the thread that made the plugin;
 * once per plugin. ops may be NULL (all defaults). Checks the config and
 * loads the API server's configuration here; the API server itself is
 * reached later (and retried with backoff: it may be down at start).
 * Returns 0, -EINVAL (a bad or missing field: logged, naming it), -EALREADY
 * (DRA already on), -EBUSY (the plugin runs), -ENOENT (no kubeconfig and not
 * in a cluster: logged with what to set), -ENOMEM. */
KDP_EXPORT int kdp_plugin_enable_dra(kdp_plugin *p, const kdp_dra_config *cfg,
                                     const kdp_dra_ops *ops);

/* A DRA driver and nothing else: no device-plugin resource name, socket or
 * registration. Its devices come from the same table calls as a plugin's
 * (the list op, kdp_plugin_set_devices, probes; kdp_plugin_* calls take the
 * returned plugin), and it runs with kdp_plugin_run() or in ctx like any
 * plugin (ctx NULL: its own context). cfg may be NULL (all defaults): its
 * device-plugin fields (resource_name, socket_name, device_plugin_dir,
 * env_name, registration, replicas, replicas_one_per_container,
 * preferred) must be unset; the rest (callback_timeout_ms,
 * rescan_interval_ms, kubelet_root, probes, instance ...) mean what they
 * mean for a plugin. The driver's name stands where a plugin's resource
 * name would: its log lines, the resource label of its metrics,
 * kdp_plugin_resource(), /healthz (which then speaks of the registration,
 * the slices and the API server only). dcfg and dops are those of
 * kdp_plugin_enable_dra(), without device_plugin_too (a driver serving both
 * APIs is a kdp_plugin_new() plugin with DRA enabled). Returns 0 and *ret
 * (free it with kdp_plugin_free), or what kdp_plugin_new() and
 * kdp_plugin_enable_dra() return: -EINVAL (a bad or misplaced field:
 * logged, naming it), -ENOENT (no API server configuration), -ENOMEM. */
KDP_EXPORT int kdp_dra_driver_new(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops,
                                  const kdp_dra_config *dcfg, const kdp_dra_ops *dops, void *ud,
                                  kdp_plugin **ret);

/* The description of the device with kdp ID id changed (its firmware was
 * updated, an attribute the describe op reads moved): kdp calls the
 * describe op for it again, soon, on the plugin's worker, and publishes
 * the new description (the pool's generation bumped if it differs). Until
 * then the slices keep the last one; a describe that fails keeps it too
 * (logged). id NULL: every device. Any thread, callbacks included.
 * Returns 0, -EINVAL (p NULL), -ENOENT (DRA not on, or no device id in the
 * plugin's table), -ENOMEM. */
KDP_EXPORT int kdp_plugin_redescribe_dra(kdp_plugin *p, const char *id);

typedef struct kdp_dra_status {
    bool registered; /* the kubelet took the registration */
    /* The version the kubelet chose ("v1.DRAPlugin"), as its calls show
     * it (the registration does not say): "" before the first call. */
    char version[32];
    /* Slices as published: all of the pool's written (the API server has
     * the table's devices), the pool's generation and slice count. */
    bool published;
    uint64_t pool_generation;
    size_t slices;
    size_t devices;  /* devices in the slices */
    size_t prepared; /* claims prepared now (the checkpoint) */
    /* The last API-server failure ("" if the last call worked), for
     * /healthz and kdpctl. */
    char api_error[256];
} kdp_dra_status;

/* Fills *ret. Thread-safe. Returns 0, -EINVAL (NULL), -ENOENT (DRA not
 * on). */
KDP_EXPORT int kdp_plugin_get_dra_status(kdp_plugin *p, kdp_dra_status *ret);

#ifdef __cplusplus
}
#endif

#endif
