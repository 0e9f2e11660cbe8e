/* SPDX-License-Identifier: MIT */
/*
 * kdp: Kubernetes device plugins in C.
 *
 * This header is the whole public API. A plugin serves the kubelet's
 * device-plugin API (v1beta1) on a unix socket in the device-plugin
 * directory, registers with the kubelet, streams its device list, and
 * answers allocations. kdp does every RPC; the author writes callbacks.
 *
 * Two ways to write one:
 *   simple:   kdp_run_simple("example.com/foo", "foo.sock", list_fn, ud);
 *   flexible: kdp_plugin_new() with a kdp_ops table (allocate, preferred
 *             allocation, pre-start, refresh, destroy), then kdp_plugin_run()
 *             or, for several resources on one loop, kdp_ctx_run().
 *
 * Conventions: functions return >= 0 on success and a negative errno on
 * failure. Strings passed in are copied unless said otherwise. Every
 * callback runs on a kdp worker thread, one at a time per plugin, never on
 * the caller's thread. Unless a function says it is thread-safe, call it
 * from the thread that runs the context (or before the context runs).
 */
#ifndef KDP_H
#define KDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KDP_BUILDING)
#define KDP_EXPORT __attribute__((visibility("default")))
#else
#define KDP_EXPORT
#endif

/* The version this header belongs to: the release, and what kdp_version()
 * returns for this header's library. Compatibility rules, and the ABI number
 * in the library's SONAME (libkdp.so.0), are in docs/api.md. */
#define KDP_VERSION_MAJOR 0
#define KDP_VERSION_MINOR 1
#define KDP_VERSION_PATCH 0
/* The same as one comparable number (MINOR and PATCH stay below 100):
 * #if KDP_VERSION >= 200 for "0.2.0 or later". */
#define KDP_VERSION (KDP_VERSION_MAJOR * 10000 + KDP_VERSION_MINOR * 100 + KDP_VERSION_PATCH)
/* The same as a string, "MAJOR.MINOR.PATCH". */
#define KDP_VERSION_STRING                                                                         \
    KDP__VERSION_STR(KDP_VERSION_MAJOR)                                                            \
    "." KDP__VERSION_STR(KDP_VERSION_MINOR) "." KDP__VERSION_STR(KDP_VERSION_PATCH)
#define KDP__VERSION_STR(x)  KDP__VERSION_STR2(x)
#define KDP__VERSION_STR2(x) #x

/* The version of the library actually linked (at run time, which may be
 * newer than the header a program was built with), as "MAJOR.MINOR.PATCH".
 * Static storage; thread-safe. */
KDP_EXPORT const char *kdp_version(void);

/* ------------------------------------------------------------------------
 * The kubelet's device-plugin API: the facts kdp, kdpctl and kdp-generic
 * share (one source for each).
 * ------------------------------------------------------------------------ */

/* The API version a plugin registers with, and the kubelet's socket in the
 * device-plugin directory. */
#define KDP_KUBELET_API_VERSION "v1beta1"
#define KDP_KUBELET_SOCKET      "kubelet.sock"
/* The kubelet's device-plugin directory (kubelet.sock and the plugins'
 * sockets), and the environment variable that sets it (tests, old k3s). It
 * is a constant of the kubelet's API: the kubelet's --root-dir does not move
 * it (microk8s too serves /var/lib/kubelet/device-plugins/kubelet.sock). */
#define KDP_DEVICE_PLUGIN_DIR     "/var/lib/kubelet/device-plugins"
#define KDP_DEVICE_PLUGIN_DIR_ENV "KDP_DEVICE_PLUGIN_DIR"
/* The kubelet's root directory (its --root-dir), and the environment
 * variable that sets it (microk8s: /var/snap/microk8s/common/var/lib/kubelet).
 * The plugin-watcher registration directory and the PodResources socket are
 * below it; see kdp_kubelet_paths_get(). */
#define KDP_KUBELET_ROOT            "/var/lib/kubelet"
#define KDP_KUBELET_ROOT_ENV        "KDP_KUBELET_ROOT"
#define KDP_PLUGINS_REGISTRY_SUBDIR "plugins_registry"
#define KDP_POD_RESOURCES_SUBPATH   "pod-resources/kubelet.sock"
/* The largest ListAndWatch message the kubelet accepts (grpc-go's default
 * receive limit, 4 MiB). A device table whose message would be larger is
 * never sent: see kdp_plugin_set_devices() and kdp_plugin_get_status(). */
#define KDP_MAX_LIST_MESSAGE 4194304U /* 4 MiB */
/* A unix socket's path: at most 107 bytes (sun_path holds 108 with the
 * NUL). A socket's name in the directory: at most 100 bytes. */
#define KDP_SOCKET_PATH_MAX 107
#define KDP_SOCKET_NAME_MAX 100

/* Checks an extended resource name with the kubelet's rule. Returns 0, or
 * -EINVAL and, if why is not NULL, a static string saying what is wrong. */
KDP_EXPORT int kdp_validate_resource_name(const char *name, const char **why);
/* Checks a plugin socket's file name: 1-KDP_SOCKET_NAME_MAX bytes, no '/',
 * no control character, not "." or "..", not KDP_KUBELET_SOCKET. Returns 0,
 * or -EINVAL and, if why is not NULL, a static string saying what is wrong
 * ("must not be ..."). */
KDP_EXPORT int kdp_validate_socket_name(const char *name, const char **why);

/* The kubelet's directories as kdp uses them. */
typedef struct kdp_kubelet_paths {
    char root[4096];                 /* the kubelet's root directory */
    char device_plugin_dir[4096];    /* kubelet.sock and the plugins' sockets */
    char plugins_registry_dir[4096]; /* plugin-watcher registration sockets */
    char pod_resources_socket[4096]; /* the PodResources API */
    /* Where root and device_plugin_dir came from, for a log line (static
     * strings): "kdp_config.kubelet_root", "$KDP_KUBELET_ROOT", "the
     * default"; "kdp_config.device_plugin_dir", "$KDP_DEVICE_PLUGIN_DIR",
     * "the kubelet's constant". */
    const char *root_from;
    const char *device_plugin_dir_from;
} kdp_kubelet_paths;

/* Resolves the kubelet's directories, as kdp_plugin_new() does with its
 * config's two fields (kdpctl and kdp-generic use it too, so all agree):
 * root = kubelet_root, else $KDP_KUBELET_ROOT, else KDP_KUBELET_ROOT, with
 * plugins_registry_dir and pod_resources_socket below it;
 * device_plugin_dir = device_plugin_dir, else $KDP_DEVICE_PLUGIN_DIR, else
 * KDP_DEVICE_PLUGIN_DIR whatever the root (the kubelet's own rule). NULL or
 * "" means "not set". Trailing slashes are dropped. Returns 0, -EINVAL
 * (ret NULL, or a root or directory that is not an absolute path; which one
 * is logged), -ENAMETOOLONG (a path over 4095 bytes). Thread-safe (reads the
 * environment). */
KDP_EXPORT int kdp_kubelet_paths_get(const char *kubelet_root, const char *device_plugin_dir,
                                     kdp_kubelet_paths *ret);

/* ------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------ */

/* Log levels, in the order of klog's severities. */
typedef enum kdp_log_level {
    KDP_LOG_DEBUG = 0,
    KDP_LOG_INFO = 1,
    KDP_LOG_WARNING = 2,
    KDP_LOG_ERROR = 3,
} kdp_log_level;

/* A log sink: gets each line that passes the level filter, without a trailing
 * newline. msg is valid only during the call. Called from kdp's threads
 * (the loop thread and worker threads), one line at a time. */
typedef void (*kdp_log_fn)(kdp_log_level level, const char *msg, void *ud);

/* Sets the minimum level and the sink for the whole process. fn NULL means
 * the default sink: klog-style lines on stderr
 * ("I1122 00:28:46.123456    1234 plugin.c:42] message"). The default level
 * is KDP_LOG_WARNING; KDP_LOG_INFO adds the lifecycle (registered, kubelet
 * restarted, devices changed). Thread-safe. Once it returns, the previous
 * sink is not running and is not called again.
 *
 * The sink is called under kdp's log lock, one line at a time. It may call
 * kdp_log_set itself (the change applies from the next line on) and any
 * other kdp call; a line that such a call logs goes to stderr (the default
 * sink's format), never back into the sink. */
KDP_EXPORT void kdp_log_set(kdp_log_level min_level, kdp_log_fn fn, void *ud);

/* ------------------------------------------------------------------------
 * Plugins
 * ------------------------------------------------------------------------ */

/* A device's health, as the kubelet is told; it can go both ways. */
typedef enum kdp_health {
    KDP_HEALTHY = 0,
    KDP_UNHEALTHY = 1,
} kdp_health;

/* What the callbacks below are handed; each is described with the calls
 * that build or read it (Devices, Allocation). */
typedef struct kdp_device kdp_device;                 /* one device, as the author describes it */
typedef struct kdp_device_list kdp_device_list;       /* a list being built by a kdp_list_fn */
typedef struct kdp_alloc_request kdp_alloc_request;   /* the IDs asked for one container */
typedef struct kdp_alloc_response kdp_alloc_response; /* the answer for one container */
typedef struct kdp_preferred_request kdp_preferred_request; /* a preferred-allocation question */
typedef struct kdp_id_list kdp_id_list; /* its answer: IDs in order of preference */

typedef struct kdp_ctx kdp_ctx;
typedef struct kdp_plugin kdp_plugin;

/* Lists the devices, from scratch, into out. Called at every (re)start, on
 * kdp_plugin_rescan(), and every kdp_config.rescan_interval_ms. The list
 * replaces the device table (a device not listed is gone). Return 0, or
 * -errno to keep the previous table (empty at the first start: the plugin
 * registers, serving no devices): the error is logged and the op is called
 * again with capped backoff (100 ms doubling to 30 s) until it succeeds,
 * whatever the rescan interval (kdp_plugin_status.list_error). A list whose
 * ListAndWatch message would be over KDP_MAX_LIST_MESSAGE is not sent (see
 * kdp_plugin_status.rejected_devices). */
typedef int (*kdp_list_fn)(kdp_plugin *p, kdp_device_list *out, void *ud);

/* Callbacks. Every member may be NULL. They run on the plugin's worker
 * thread, one at a time, each bounded by kdp_config.callback_timeout_ms
 * (and by the kubelet's grpc-timeout if it sent one): past it the kubelet
 * gets DEADLINE_EXCEEDED and the late result is dropped. Return 0 or
 * -errno; call kdp_plugin_set_error() first to give the kubelet a message
 * (-EINVAL becomes INVALID_ARGUMENT, -ENOENT NOT_FOUND, -EEXIST
 * ALREADY_EXISTS, -EPERM/-EACCES PERMISSION_DENIED, -ENOMEM
 * RESOURCE_EXHAUSTED, -ETIMEDOUT DEADLINE_EXCEEDED, -ENOTSUP UNIMPLEMENTED,
 * -EBUSY/-EAGAIN/-ECONNREFUSED UNAVAILABLE, -ECANCELED CANCELLED, any other
 * UNKNOWN). A positive return is a mistake (`return EINVAL;` for
 * `return -EINVAL;`): it is logged and treated as the error -value, never
 * as success. The options sent to the kubelet follow from which ops are set.
 *
 * One at a time: a callback never runs while another of the same plugin
 * does, with one exception: once a callback overruns its deadline, kdp
 * stops waiting for it and the next ones run on a fresh thread while it
 * finishes (its result is then dropped). At most KDP_MAX_STUCK_CALLBACKS
 * such threads are left running per plugin: once the cap is reached and
 * the next callback overruns too, calls are refused at once (UNAVAILABLE,
 * naming the callback that hangs) until one of them returns; see
 * kdp_plugin_get_status().
 *
 * Not from a callback: kdp_plugin_free(), kdp_ctx_free(), kdp_ctx_run(),
 * kdp_plugin_run(), kdp_ctx_dispatch(), kdp_plugin_new(),
 * kdp_plugin_watch_path(), kdp_path_watch_free(). Each refuses (with a log
 * line naming the call to use instead) when called from a callback. */
#define KDP_MAX_STUCK_CALLBACKS 4

/* What a probe op (kdp_ops.probe) says about one device. */
typedef enum kdp_probe_result {
    KDP_PROBE_HEALTHY = 0,
    /* Any other value except KDP_PROBE_DOWN counts as a failure too (e.g.
     * -errno). */
    KDP_PROBE_UNHEALTHY = 1,
    /* The health subsystem itself cannot tell (driver library gone, NVML not
     * answering): see kdp_probe_down_policy. */
    KDP_PROBE_DOWN = 2,
} kdp_probe_result;

/* What kdp does while probes answer KDP_PROBE_DOWN (kdp_config.probe_down). */
typedef enum kdp_probe_down_policy {
    /* The default: every device Unhealthy at once (a node that keeps
     * admitting pods onto broken devices causes admission storms); each
     * comes back after probe_healthy_after successes in a row. */
    KDP_PROBE_DOWN_UNHEALTHY = 0,
    /* Keep every device's last state; DOWN answers count neither way. */
    KDP_PROBE_DOWN_KEEP,
} kdp_probe_down_policy;

typedef struct kdp_ops {
    /* Simple mode's one function (see kdp_list_fn). With list NULL, the
     * table is whatever kdp_plugin_set_devices() last set. */
    kdp_list_fn list;
    /* Fills the response for one container. NULL = kdp_response_add_defaults. */
    int (*allocate)(kdp_plugin *p, const kdp_alloc_request *req, kdp_alloc_response *resp,
                    void *ud);
    /* Set = the kubelet asks for preferred allocations. With replicas
     * (kdp_config.replicas) the IDs are replica IDs, in and out. */
    int (*preferred)(kdp_plugin *p, const kdp_preferred_request *req, kdp_id_list *out, void *ud);
    /* Set = the kubelet calls it before every container start (restarts
     * included) with that container's devices, e.g. to format a disk.
     * With replicas, the replica IDs the kubelet sent (kdp checked them;
     * kdp_plugin_get_device_data() takes them). */
    int (*prestart)(kdp_plugin *p, const char *const *ids, size_t n_ids, void *ud);
    /* Before each (re)start of the server; an error is logged and the start
     * retried with backoff. */
    int (*refresh)(kdp_plugin *p, void *ud);
    /* After each stop of the server (kubelet restart, shutdown). */
    void (*destroy)(kdp_plugin *p, void *ud);
    /* Set = health checks: called for each device of the table (physical
     * devices, not replicas) once per kdp_config.probe_interval_ms while the
     * plugin serves, on the worker like every op and under its own deadline
     * (kdp_config.probe_timeout_ms: 1 s by default), ONE probe at a time
     * (spread over the interval), so a kubelet call waits for one probe at
     * most, never a whole round. d is
     * a copy valid during the call. Return a kdp_probe_result: 0 healthy,
     * KDP_PROBE_DOWN when the health subsystem cannot tell, anything else
     * (KDP_PROBE_UNHEALTHY, -errno) a failure; a probe past its deadline is
     * a failure too. Give the reason with kdp_plugin_set_error() (logged
     * with the transition; a DRA driver's health stream carries it as the
     * device's message, and says Unknown for a DOWN answer or a probe past
     * its deadline: docs/dra.md). Hysteresis: the probe's verdict on a device
     * turns Unhealthy after kdp_config.probe_unhealthy_after consecutive
     * failures and Healthy again after probe_healthy_after consecutive
     * successes (a device new to the table starts Healthy; a removed one
     * drops its state). The health the kubelet sees (and
     * kdp_plugin_get_health() and kdp_plugin_get_devices() return) is
     * Unhealthy when the author's health (the list op, set_devices,
     * set_device, set_health) is Unhealthy OR the probe's verdict is; the
     * author's health is kept as set and applies again once the probe's
     * verdict is Healthy. Transitions are logged (warning to Unhealthy,
     * info back) with the counts and the reason, and counted
     * (kdp_plugin_status.probe_unhealthy). See docs/observability.md. */
    int (*probe)(kdp_plugin *p, const kdp_device *d, void *ud);
} kdp_ops;

/* What kdp answers GetPreferredAllocation with when the plugin has no
 * preferred op (an op, when set, wins). */
typedef enum kdp_preferred_strategy {
    /* No preference: the kubelet is told there is none to ask for. */
    KDP_PREFERRED_NONE = 0,
    /* As few NUMA nodes as the devices allow: the must-include IDs, then
     * devices on the nodes in use, then (once a node is in use) devices
     * with no NUMA node, then one more node, the one that fits the rest
     * most tightly (best fit; the largest if none fits), and so on; IDs in
     * order within each step. With replicas (kdp_config.replicas), then as
     * few physical devices as possible: the replicas of the devices in use
     * (the must-include IDs') first, then the device whose replicas fit the
     * rest most tightly (the one with the most if none fits), each device's
     * replicas in order. Answered on the loop thread, no callback. */
    KDP_PREFERRED_PACKED,
    /* For replicas: as many distinct physical devices as possible. The
     * must-include IDs, then one replica of each physical device in turn
     * (devices not in the must-include IDs first, then those with the most
     * replicas available, i.e. the fewest in use; ties by ID), then a second
     * replica of each, and so on. Without replicas: the must-include IDs,
     * then the rest in ID order. Answered on the loop thread, no callback. */
    KDP_PREFERRED_SPREAD,
} kdp_preferred_strategy;

/* The most IDs one device may be shared as (kdp_config.replicas). */
#define KDP_MAX_REPLICAS 1024U

/* How a plugin registers with the kubelet. */
typedef enum kdp_registration {
    /* $KDP_REGISTRATION ("kubelet", "watcher" or "auto"), else
     * KDP_REGISTRATION_KUBELET. */
    KDP_REGISTRATION_DEFAULT = 0,
    /* Register on <device-plugin dir>/kubelet.sock, the plugin's socket in
     * that directory: every kubelet since 1.8. */
    KDP_REGISTRATION_KUBELET,
    /* The kubelet's plugin watcher: the plugin's socket goes into
     * <kubelet root>/plugins_registry/ and also serves
     * pluginregistration.Registration (GetInfo: type "DevicePlugin", the
     * resource name, this same socket as the endpoint, version "v1beta1");
     * the kubelet finds it there, connects, and reports the outcome
     * (NotifyRegistrationStatus: a refusal is logged with the kubelet's
     * reason, and the socket re-created after a capped backoff so that it
     * asks again). kubelet.sock is never used. A socket name must not start
     * with '.' (the kubelet skips those). */
    KDP_REGISTRATION_WATCHER,
    /* Decided at kdp_plugin_new(), and logged: kubelet.sock if it exists
     * (every kubelet serves it today), else the plugin watcher if
     * plugins_registry/ exists, else kubelet.sock (waited for). */
    KDP_REGISTRATION_AUTO,
} kdp_registration;

#define KDP_REGISTRATION_ENV "KDP_REGISTRATION"
/* kdp_config.instance and .generation from the environment. */
#define KDP_INSTANCE_ENV   "KDP_INSTANCE"
#define KDP_GENERATION_ENV "KDP_GENERATION"

/* "kubelet", "watcher", "auto" (what $KDP_REGISTRATION and the tools'
 * --registration flag take) into *ret. Returns 0 or -EINVAL. */
KDP_EXPORT int kdp_registration_parse(const char *s, kdp_registration *ret);

typedef struct kdp_config {
    /* Required: the extended resource name, e.g. "example.com/gopher",
     * checked with the kubelet's own rule. */
    const char *resource_name;
    /* Required: the socket's file name in the device-plugin directory,
     * e.g. "gopher.sock" (no '/', not "kubelet.sock"). */
    const char *socket_name;
    /* NULL = $KDP_DEVICE_PLUGIN_DIR, else /var/lib/kubelet/device-plugins
     * (KDP_DEVICE_PLUGIN_DIR_ENV, KDP_DEVICE_PLUGIN_DIR). */
    const char *device_plugin_dir;
    /* Bound on each callback; 0 = 10000. */
    unsigned callback_timeout_ms;
    /* Call the list op this often too; 0 = only at (re)start and on
     * kdp_plugin_rescan(). (kdp_run_simple uses 0: use kdp_plugin_new for
     * periodic rescans.) */
    unsigned rescan_interval_ms;
    /* The env var of the default allocation; NULL = "KDP_DEVICES_" + the
     * resource name upper-cased with every other character as '_'
     * ("example.com/gopher" -> "KDP_DEVICES_EXAMPLE_COM_GOPHER"). */
    const char *env_name;
    /* The kubelet's root directory (its --root-dir); NULL =
     * $KDP_KUBELET_ROOT, else /var/lib/kubelet. It places what kdp finds
     * below it (kdp_kubelet_paths_get()); it does not move the device-plugin
     * directory, as it does not for the kubelet. Must be absolute. */
    const char *kubelet_root;
    /* GetPreferredAllocation without a preferred op: see
     * kdp_preferred_strategy (0 = none). */
    kdp_preferred_strategy preferred;
    /* Shared devices (time-slicing): each device of the table is served to
     * the kubelet as `replicas` IDs "<id>-0" ... "<id>-<replicas-1>" (the
     * scheme kdp-generic's `count` uses); 0 or 1 = one ID per device. At
     * most KDP_MAX_REPLICAS (1024). The table (kdp_plugin_set_devices, the
     * list op, kdp_plugin_get_devices) holds the physical devices, and a
     * device's health and NUMA nodes are its replicas'. A device's ID must
     * leave room for the suffix: with it, at most 255 bytes (else the
     * table is refused, -EINVAL). The IDs the kubelet sends are replica IDs
     * (the last '-' starts the suffix, a decimal without leading zeros below
     * replicas); kdp resolves each to its device: kdp_alloc_request.
     * device_ids, kdp_plugin_get_device_data() and kdp_plugin_get_health()
     * take either form. The message to the kubelet grows with the replicas
     * (KDP_MAX_LIST_MESSAGE counts them). */
    unsigned replicas;
    /* With replicas > 1: an Allocate asking more than one ID for one
     * container is refused (INVALID_ARGUMENT naming the rule), as NVIDIA's
     * time-slicing failRequestsGreaterThanOne. Without replicas it has no
     * effect (kdp_plugin_new logs a warning). */
    bool replicas_one_per_container;
    /* How the plugin registers with the kubelet: see kdp_registration
     * (0 = $KDP_REGISTRATION, else kubelet.sock). */
    kdp_registration registration;
    /* Upgrades with no capacity gap (a DaemonSet rolling update with
     * maxSurge: the old and the new instance run at once). NULL =
     * $KDP_INSTANCE if set, else none: the socket is socket_name, and a
     * second instance on it is refused (-EADDRINUSE). With an instance (1-64
     * of [A-Za-z0-9_.-], e.g. the pod's UID from the downward API), the
     * socket is "<socket_name without .sock>-<instance>.sock", each instance
     * its own; the one that registers (and whose ListAndWatch the kubelet
     * opened) says so in ".<stem>.newest" next to the sockets, and an older
     * instance that sees it (and the new socket answering) stops quietly:
     * its socket removed, destroy called, the new one's never touched,
     * kdp_plugin_status.superseded set, and kdp_plugin_run() returns 0.
     * Kubelets that track plugins per socket (kubernetes/kubernetes PR
     * #135437) then keep the capacity throughout; older ones drop the new
     * instance's connection when the old one ends, and it registers again
     * at once (see docs/registration.md). */
    const char *instance;
    /* Which instance is newer: the higher generation (0 =
     * $KDP_GENERATION if set, else 0), then the later registration. Set it
     * from the DaemonSet's pod-template-generation label, so that an old
     * pod's container restarted during the update never takes over. */
    uint64_t generation;
    /* Health checks (kdp_ops.probe; unused without it, but checked by
     * kdp_plugin_new() all the same). One round, every
     * device probed once, this often: 0 = 10000 ms; else at least 100 ms and
     * at most a day. */
    unsigned probe_interval_ms;
    /* Consecutive failures that turn a device Unhealthy: 0 = 3; at most
     * 1000. */
    unsigned probe_unhealthy_after;
    /* Consecutive successes that turn it Healthy again: 0 = 2; at most
     * 1000. */
    unsigned probe_healthy_after;
    /* While probes answer KDP_PROBE_DOWN (0 = every device Unhealthy). */
    kdp_probe_down_policy probe_down;
    /* The deadline of each probe: 0 = the smaller of 1000 ms and the
     * callback deadline (callback_timeout_ms); else at most the callback
     * deadline. A probe past it counts as a failure (its thread is left
     * behind as any late callback's). Keep probes short: a kubelet call
     * (Allocate) that comes while a probe runs waits for it, at most this
     * long. */
    unsigned probe_timeout_ms;
} kdp_config;

/* A context: one event loop that can run several plugins.
 *
 * One thread runs it: the one in kdp_ctx_run() for the duration of the
 * call, or, embedded, the one that calls kdp_ctx_dispatch() from its first
 * call until it returns non-zero. While it runs, the calls that are not
 * thread-safe (kdp_ctx_free, kdp_plugin_new on it, kdp_plugin_free,
 * kdp_plugin_watch_path, kdp_path_watch_free, a second run or dispatch) are
 * refused from any other thread (-EBUSY, or nothing for the void ones)
 * with an error line naming what to do instead, typically kdp_plugin_stop()
 * or kdp_ctx_stop(), which are. Before it runs and after it has returned,
 * any one thread may make them. */
KDP_EXPORT int kdp_ctx_new(kdp_ctx **ret);
/* Stops and frees every plugin still attached, then the context. NULL ok.
 * Not while the context runs on another thread, not from a callback (see
 * above: refused, with a log line). */
KDP_EXPORT void kdp_ctx_free(kdp_ctx *ctx);
/* Starts every plugin of ctx and runs until every plugin has stopped:
 * through kdp_ctx_stop(), kdp_plugin_stop(), or SIGTERM/SIGINT (handled here
 * for the duration of the call: every plugin stops cleanly, its socket is
 * removed, destroy runs, and this returns 0). Returns the first fatal plugin
 * error instead (e.g. -EADDRINUSE: another instance serves the socket),
 * -EBUSY if the context is running already (on any thread), -EPERM from a
 * callback, -EINVAL without plugins, and -ESHUTDOWN if every plugin of ctx
 * has already run and stopped: a stopped plugin does not start again
 * (create a new one). */
KDP_EXPORT int kdp_ctx_run(kdp_ctx *ctx);
/* The most calls waiting in one context's queue (kdp_ctx_post). */
#define KDP_MAX_POSTS 4096U
typedef void (*kdp_post_fn)(kdp_ctx *ctx, void *arg);
/* Runs fn(ctx, arg) on the thread that runs ctx, between two turns of its
 * loop and outside every callback: there fn may make the calls that are not
 * thread-safe (kdp_plugin_new on ctx, kdp_plugin_free, kdp_plugin_watch_path,
 * kdp_path_watch_free ...), as that thread may, but not free, run or
 * dispatch ctx itself (refused, logged). For an author's own thread
 * (a device monitor, an RPC server) and for callbacks, which may not make
 * them. The calls run in the order they were posted; one posted before the
 * context runs runs at its first turn (kdp_ctx_run, kdp_ctx_dispatch); one
 * still waiting when the context is freed runs from kdp_ctx_free, on its
 * thread, so that no arg is lost. fn must not block: the loop waits for it.
 * Thread-safe. Returns 0, -EINVAL (ctx or fn NULL), -EAGAIN (KDP_MAX_POSTS
 * calls waiting: the context's thread is not keeping up; try later),
 * -ESHUTDOWN (the context is being freed), -ENOMEM. */
KDP_EXPORT int kdp_ctx_post(kdp_ctx *ctx, kdp_post_fn fn, void *arg);
/* Embedding in another event loop: poll this fd for readability and call
 * kdp_ctx_dispatch() when it is readable (it never blocks). Signals are not
 * handled in this mode: call kdp_ctx_stop() from your own handler. */
KDP_EXPORT int kdp_ctx_get_fd(kdp_ctx *ctx);
/* Runs what is ready; never blocks. Starts plugins not started yet (also
 * ones added since the last call). Returns 0 while plugins run, 1 once
 * every plugin has stopped cleanly, the first fatal plugin error once they
 * have stopped after one (e.g. -EADDRINUSE), or -errno: -EBUSY when another
 * thread runs or dispatches the context, -EPERM from a callback or from
 * inside kdp's own loop (a log sink). After it has returned non-zero it
 * keeps returning the same (stopped plugins do not start again). */
KDP_EXPORT int kdp_ctx_dispatch(kdp_ctx *ctx);
/* Asks every plugin of ctx to stop and kdp_ctx_run() to return. Thread-safe
 * and async-signal-safe. */
KDP_EXPORT int kdp_ctx_stop(kdp_ctx *ctx);

/* Creates a plugin on ctx (NULL = a private context, used by
 * kdp_plugin_run()). Checks the config (resource name with the kubelet's
 * rule, socket name) and logs what is wrong. ops may be NULL (devices come
 * from kdp_plugin_set_devices()). Returns 0, -EINVAL (a bad or NULL config:
 * logged), -ENAMETOOLONG (the socket's path is over the 107 bytes of a unix
 * socket address: logged), -EADDRINUSE (another plugin of ctx has that
 * socket), -EBUSY (ctx runs on another thread), -EPERM (from a callback),
 * -ENOMEM. */
KDP_EXPORT int kdp_plugin_new(kdp_ctx *ctx, const kdp_config *cfg, const kdp_ops *ops, void *ud,
                              kdp_plugin **ret);
/* Stops the plugin if running (socket removed, destroy called: on the
 * calling thread, if the plugin had not been stopped through its context
 * first) and frees it. NULL ok. Not from a callback, and not while its
 * context runs on another thread: either is refused (nothing happens; an
 * error line says to call kdp_plugin_stop(), which is safe from anywhere,
 * and to free the plugin once its context's run has returned). */
KDP_EXPORT void kdp_plugin_free(kdp_plugin *p);
/* Runs the plugin's context as kdp_ctx_run() does (same returns: 0 after a
 * clean stop, -EADDRINUSE if another instance serves the same socket,
 * -ESHUTDOWN if it has run and stopped already, -EBUSY, -errno). */
KDP_EXPORT int kdp_plugin_run(kdp_plugin *p);
/* Replaces the device table. Thread-safe: copies the devices, returns at
 * once; the change reaches every open ListAndWatch stream within the loop's
 * next turn, and nothing is sent if the set did not really change (order
 * does not matter). Returns 0, -EINVAL (a bad device; nothing changed),
 * -EEXIST (two devices with one ID; nothing changed), -EMSGSIZE (their
 * ListAndWatch message would be over KDP_MAX_LIST_MESSAGE, which the
 * kubelet rejects: nothing changed, the kubelet keeps the current list; an
 * error line says so at most once a minute), -ENOMEM. */
KDP_EXPORT int kdp_plugin_set_devices(kdp_plugin *p, const kdp_device *devs, size_t n);
/* Single changes, for plugins that learn of devices one at a time (hot-plug
 * events, a health check). Thread-safe, from callbacks too; each costs O(1)
 * however large the table (no relist, no copy of the table), returns at
 * once, and the changes made before the loop's next turn reach every open
 * ListAndWatch stream as ONE message. Nothing is sent when what the kubelet
 * sees (IDs, health, NUMA nodes) did not change. With a list op, the next
 * list's result replaces the table, except for the changes made while that
 * list ran, which are newer than what it read: they are applied on top of
 * its result (a removal or health change too when it returned -ENOENT
 * because the table did not have the device yet; up to 4096 changes, past
 * that the list op is called once more).
 *
 * Adds d (copied), or replaces the device with d's ID. Returns 0, -EINVAL
 * (a bad device: logged, naming the field), -EMSGSIZE (the table's
 * ListAndWatch message would be over KDP_MAX_LIST_MESSAGE: nothing changed),
 * -ENOMEM. */
KDP_EXPORT int kdp_plugin_set_device(kdp_plugin *p, const kdp_device *d);
/* Removes the device with this ID (a device's own ID, not a replica ID).
 * Returns 0, -ENOENT (no such ID), -EINVAL, -ENOMEM. */
KDP_EXPORT int kdp_plugin_remove_device(kdp_plugin *p, const char *id);
/* Sets one device's health (a single change, as above). With replicas, id
 * may also be a replica ID: its physical device (so every replica of it)
 * changes. With a probe op (kdp_ops.probe), this is the author's health:
 * the kubelet sees Unhealthy while the probe holds the device so, whatever
 * is set here. Returns 0, -ENOENT (no such ID), -EINVAL, -ENOMEM. */
KDP_EXPORT int kdp_plugin_set_health(kdp_plugin *p, const char *id, kdp_health health);
/* Reading the table back. Both read the plugin's latest table: the one last
 * set through kdp_plugin_set_devices(), the single changes above or the list
 * op, which the kubelet is being sent (not if it is over the message limit:
 * see kdp_plugin_get_status()). Thread-safe, from callbacks too. With
 * replicas (kdp_config.replicas), id is a device's ID or one of its replica
 * IDs (an ID the kubelet sent): either answers for the physical device; a
 * device's own ID wins if an ID is both.
 *
 * One device's health: the one the kubelet sees (with a probe op, Unhealthy
 * also while the probe holds the device so). Returns 0, -ENOENT (no such
 * ID), -EINVAL. */
KDP_EXPORT int kdp_plugin_get_health(kdp_plugin *p, const char *id, kdp_health *ret);
/* The data set with a device (kdp_device.data; NULL if none was). Returns
 * 0, -ENOENT (no such ID), -EINVAL. */
KDP_EXPORT int kdp_plugin_get_device_data(kdp_plugin *p, const char *id, void **ret);
/* A copy of the whole table, sorted by ID, taken at one instant: *ret is
 * ONE allocation holding the devices with their strings and NUMA nodes, so
 * free(*ret) frees it all; NULL with *ret_n 0 when the table is empty.
 * Returns 0, -EINVAL, -ENOMEM. O(n). */
KDP_EXPORT int kdp_plugin_get_devices(kdp_plugin *p, kdp_device **ret, size_t *ret_n);
/* Asks for a fresh call of the list op. Thread-safe. */
KDP_EXPORT int kdp_plugin_rescan(kdp_plugin *p);
/* Stops the plugin (and its private context's run). Thread-safe and
 * async-signal-safe. */
KDP_EXPORT int kdp_plugin_stop(kdp_plugin *p);
/* From inside a callback: the message the kubelet gets with the error
 * status the callback returns. printf-style. */
KDP_EXPORT void kdp_plugin_set_error(kdp_plugin *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The config's resource name and the user data. */
KDP_EXPORT const char *kdp_plugin_resource(const kdp_plugin *p);
KDP_EXPORT void *kdp_plugin_userdata(const kdp_plugin *p);

typedef enum kdp_plugin_state {
    KDP_PLUGIN_IDLE = 0, /* not started yet */
    KDP_PLUGIN_STARTING, /* lock, refresh, first list, socket; or waiting to start again */
    /* serving; kubelet.sock does not exist (yet); with the plugin watcher:
     * the kubelet has not asked GetInfo (yet) */
    KDP_PLUGIN_WAITING,
    /* serving; Register in flight or to be retried; with the plugin watcher:
     * GetInfo answered, the outcome not told yet, or refused (the socket is
     * re-created after a backoff) */
    KDP_PLUGIN_REGISTERING,
    KDP_PLUGIN_REGISTERED, /* serving and registered with the kubelet */
    KDP_PLUGIN_STOPPING,   /* stopping: streams ending, destroy running */
    KDP_PLUGIN_STOPPED,
} kdp_plugin_state;

/* What a plugin is doing, and what keeps it from doing better. */
typedef struct kdp_plugin_status {
    kdp_plugin_state state;
    /* The device list the kubelet is served (devices of the table: with
     * replicas the kubelet sees replicas IDs for each), and the size of its
     * ListAndWatch message. */
    size_t devices;
    size_t message_bytes;
    /* 0, or the newest device table that was NOT sent because its message
     * (rejected_bytes) is over KDP_MAX_LIST_MESSAGE: the kubelet keeps
     * being served the list above (empty if none ever fit), and an error
     * line says so at most once a minute. Fewer devices or shorter IDs, or
     * several resources, fix it. */
    size_t rejected_devices;
    size_t rejected_bytes;
    /* 0, or the -errno of the last call of the list op, which failed or
     * overran its deadline (-ETIMEDOUT): it is called again with capped
     * backoff (100 ms doubling to 30 s) until it succeeds. */
    int list_error;
    /* 0, or why the device-plugin directory cannot be used right now
     * (-ENOENT missing, -ENOTDIR, -EACCES, -EROFS ...): the start is
     * retried until it can. */
    int dir_error;
    /* Callbacks past their deadline that have not returned yet (at most
     * KDP_MAX_STUCK_CALLBACKS; at the cap, calls are refused). */
    unsigned stuck_callbacks;
    /* Restarts so far (kubelet restarts, socket deleted, stream ended). */
    unsigned restarts;
    /* This instance stopped because a newer instance of the plugin
     * registered (kdp_config.instance: a rolling update's handover). */
    bool superseded;
    /* Devices the probe (kdp_ops.probe) holds Unhealthy right now. */
    unsigned probe_unhealthy;
    /* The last probe answered KDP_PROBE_DOWN: the health subsystem is down
     * (kdp_config.probe_down says what the devices' health is meanwhile). */
    bool probe_down;
} kdp_plugin_status;

/* A snapshot of p's status. Thread-safe (not async-signal-safe). Returns 0
 * or -EINVAL. */
KDP_EXPORT int kdp_plugin_get_status(kdp_plugin *p, kdp_plugin_status *ret);

/* Simple mode in one call: a plugin for resource_name on socket_name whose
 * devices come from list, run until SIGTERM/SIGINT. Returns 0 after a clean
 * stop, or -errno. */
KDP_EXPORT int kdp_run_simple(const char *resource_name, const char *socket_name, kdp_list_fn list,
                              void *ud);

/* ------------------------------------------------------------------------
 * Metrics and health endpoint (docs/observability.md)
 * ------------------------------------------------------------------------ */

/* Read at a context's first run or dispatch when kdp_ctx_serve_metrics()
 * was never called on it (kdp_run_simple() included). */
#define KDP_METRICS_ADDRESS_ENV "KDP_METRICS_ADDRESS"

/* Serves GET /metrics (Prometheus text format 0.0.4: kdp's kdp_* metrics
 * for every plugin of ctx, then the author's, see kdp_metric_new) and GET
 * /healthz (200 "ok" while every plugin of ctx serves and is registered,
 * else 503 with one "resource: reason" line per plugin that is not: a
 * liveness or readiness probe) on ctx's own loop: no thread, and no wakeup
 * while no client is connected. Off by default.
 *
 * address: "HOST:PORT" (HOST an IPv4 literal, "[IPv6]", a name resolved
 * once here, or empty for every interface: ":9400"; PORT 0 = any free port,
 * see kdp_ctx_get_metrics_address), or a unix socket: "unix:/abs/path" or
 * "/abs/path" (a stale socket file there is replaced). Binds at once, so
 * errors come back here. Returns 0, -EINVAL (malformed: logged with the
 * accepted forms), -EADDRINUSE, -EACCES, -EADDRNOTAVAIL, -ENOENT (a name
 * that does not resolve), -EALREADY (already serving), -ENOTSUP (a build
 * without libmicrohttpd: the fully static tools), -EBUSY (ctx runs on
 * another thread), -EPERM (from a callback), -ENOMEM. Call it before the
 * context runs or on its thread.
 *
 * When never called, $KDP_METRICS_ADDRESS (if set and not empty) is served
 * from the context's first run or dispatch; a failure then is fatal for the
 * run (returned by it, and logged). The endpoint logs "metrics: serving
 * /metrics and /healthz on ADDR" at info level. The listener closes (a unix
 * socket's file removed) at kdp_ctx_free(). */
KDP_EXPORT int kdp_ctx_serve_metrics(kdp_ctx *ctx, const char *address);
/* The bound address ("127.0.0.1:41234", "[::1]:9400", or the socket's
 * path) into buf, NUL-terminated: for port 0. Thread-safe. Returns its
 * length, -ENOTCONN (not serving), -ENOSPC (buf too small), -EINVAL. */
KDP_EXPORT int kdp_ctx_get_metrics_address(kdp_ctx *ctx, char *buf, size_t len);
/* The context a plugin runs on (its private one when it was created with
 * ctx NULL). Thread-safe. NULL if p is NULL. */
KDP_EXPORT kdp_ctx *kdp_plugin_get_ctx(kdp_plugin *p);

typedef struct kdp_metric kdp_metric;
typedef enum kdp_metric_type { KDP_METRIC_COUNTER = 0, KDP_METRIC_GAUGE = 1 } kdp_metric_type;
#define KDP_METRIC_MAX_LABELS 4
#define KDP_METRIC_MAX_SERIES 1000

/* An author's metric on ctx's /metrics page, after kdp's own. name:
 * Prometheus's rule [a-zA-Z_:][a-zA-Z0-9_:]*, not starting "kdp_" (kdp's
 * own), a counter's ending in "_total"; help: one line (escaped on output);
 * labels: 0..KDP_METRIC_MAX_LABELS names with the label rule
 * [a-zA-Z_][a-zA-Z0-9_]*, not starting "__", not "le", no duplicates
 * (copied). Before the context runs or on its thread, not from a callback
 * (as kdp_plugin_new). Freed with ctx (kdp_ctx_free); *ret stays valid until
 * then. Returns 0, -EINVAL (logged naming what is wrong), -EEXIST (a metric
 * of that name on ctx), -EBUSY, -EPERM, -ENOMEM. */
KDP_EXPORT int kdp_metric_new(kdp_ctx *ctx, kdp_metric_type type, const char *name,
                              const char *help, const char *const *labels, size_t n_labels,
                              kdp_metric **ret);
/* Counter: adds v (finite, >= 0); gauge: adds v (finite, any sign).
 * label_values: the metric's n_labels values in the order of its labels
 * (valid UTF-8, copied; NULL when it has none). A new combination creates
 * its series; at most KDP_METRIC_MAX_SERIES per metric (-ENOSPC past it,
 * logged once). Thread-safe (any thread, callbacks too). Returns 0,
 * -EINVAL, -ENOSPC, -ENOMEM. */
KDP_EXPORT int kdp_metric_add(kdp_metric *m, const char *const *label_values, double v);
/* Gauge only: sets v (-EINVAL on a counter). Same rules as kdp_metric_add. */
KDP_EXPORT int kdp_metric_set(kdp_metric *m, const char *const *label_values, double v);

/* ------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------ */

/* One device as the author describes it. Every pointer is borrowed for the
 * duration of the call that takes the struct (kdp copies what it keeps). */
struct kdp_device {
    /* Required. Unique within the resource; 1-255 bytes, printable ASCII,
     * no spaces, no '/' or ',' (the kubelet uses IDs in paths and lists). */
    const char *id;
    kdp_health health;
    /* NUMA nodes the device is close to. NULL/0 = no affinity. Negative
     * values (sysfs' -1 "no node") are ignored, never sent. */
    const int64_t *numa_nodes;
    size_t n_numa_nodes;
    /* Optional host device node (e.g. "/dev/ttyUSB0"). The default Allocate
     * hands it to the container with container_path (default: the same
     * path) and permissions (default "rw"). */
    const char *host_path;
    const char *container_path;
    const char *permissions;
    /* Yours: kept with the device and handed back by
     * kdp_plugin_get_device_data() (in any callback, or any thread) and in
     * kdp_plugin_get_devices()'s copy. kdp never reads or frees what it
     * points to: keep it valid while the device is in the table and while a
     * callback of yours may still use it (free it after the table that
     * dropped the device was set, outside your callbacks). */
    void *data;
};

/* Adds a copy of d. Returns 0, -EINVAL (bad id, permissions or path),
 * -EEXIST (duplicate id) or -ENOMEM. */
KDP_EXPORT int kdp_device_list_add(kdp_device_list *list, const kdp_device *d);

/* ------------------------------------------------------------------------
 * Allocation
 * ------------------------------------------------------------------------ */

/* What the kubelet asks for one container: the chosen device IDs (all known
 * and healthy: kdp checked them before calling you). */
struct kdp_alloc_request {
    const char *const *ids;
    size_t n_ids;
    /* The device behind each ids[i] (same length): with replicas
     * (kdp_config.replicas) the physical device's ID (two replicas of one
     * device give it twice), else ids itself. Valid during the call. */
    const char *const *device_ids;
};

/* The answer for one container (a kdp_alloc_response) is built with the
 * kdp_response_* calls. Each copies its strings.
 *
 * Sets env var key=value in the container (a later add of the same key
 * replaces the value). Returns 0, -EINVAL (key empty or with '='), -ENOMEM. */
KDP_EXPORT int kdp_response_add_env(kdp_alloc_response *r, const char *key, const char *value);
/* Bind-mounts host_path at container_path. One mount per container path:
 * the same mount again is a no-op. Returns 0, -EINVAL (a path not
 * absolute), -EEXIST (another mount at that container path), -ENOMEM. */
KDP_EXPORT int kdp_response_add_mount(kdp_alloc_response *r, const char *container_path,
                                      const char *host_path, bool read_only);
/* Gives the container a device node. permissions: a non-empty combination
 * of 'r', 'w', 'm' (each at most once); NULL = "rw". One device node per
 * container path: the same node again is a no-op. Returns 0, -EINVAL (a
 * path not absolute, bad permissions), -EEXIST (another node at that
 * container path), -ENOMEM. */
KDP_EXPORT int kdp_response_add_device(kdp_alloc_response *r, const char *container_path,
                                       const char *host_path, const char *permissions);
/* Adds a container annotation. Returns 0, -EINVAL (key empty), -ENOMEM. */
KDP_EXPORT int kdp_response_add_annotation(kdp_alloc_response *r, const char *key,
                                           const char *value);
/* Adds a CDI device by fully qualified name "vendor.com/class=name".
 * Returns 0, -EINVAL (malformed), -ENOMEM. */
KDP_EXPORT int kdp_response_add_cdi_device(kdp_alloc_response *r, const char *name);
/* Sets env var key to this container's device IDs joined by sep (NULL =
 * ","), e.g. GPUS=gpu0,gpu3. Same returns as kdp_response_add_env(). */
KDP_EXPORT int kdp_response_add_env_ids(kdp_alloc_response *r, const char *key, const char *sep);
/* ids[0..n) joined by sep (NULL = ","): a string to free(), "" for n = 0;
 * NULL when out of memory or an ID is NULL. */
KDP_EXPORT char *kdp_ids_join(const char *const *ids, size_t n, const char *sep);
/* What kdp answers when there is no allocate op: a device node for each
 * requested device that has a host_path (with replicas: each physical
 * device's node once, however many of its replicas were asked), and the env
 * var named by kdp_config.env_name listing the IDs the kubelet asked
 * (replica IDs with replicas), comma-separated. Returns 0,
 * -EEXIST (a node conflicts with one added before), -ENOMEM. */
KDP_EXPORT int kdp_response_add_defaults(kdp_alloc_response *r);

/* GetPreferredAllocation input (only called when the kubelet has a choice). */
struct kdp_preferred_request {
    const char *const *available; /* healthy candidates */
    size_t n_available;
    const char *const *must_include; /* already chosen (init containers) */
    size_t n_must_include;
    size_t size; /* how many to return */
};

/* Adds an ID to the answer being built (kdp_id_list: IDs in order of
 * preference). Returns 0, -EINVAL (not a valid device ID), -ENOMEM. */
KDP_EXPORT int kdp_id_list_add(kdp_id_list *l, const char *id);

/* ------------------------------------------------------------------------
 * Discovery: device nodes on the host, their USB or PCI identity and NUMA
 * node, hot-plug, and CDI specs, for plugins that hand out existing device
 * nodes (tools/generic/ is built on these).
 *
 * Roots: root is where the host's "/" is seen (NULL = "/"; e.g. "/host" in
 * a container that mounts the host there, a fake tree) and sysfs
 * where the host's sysfs is (NULL = "/sys"). Paths passed in and handed
 * back are host paths ("/dev/ttyUSB0"), never prefixed with root: they are
 * what the kubelet and the container runtime see. These calls do blocking
 * file I/O and keep no state: call them from a callback (the worker thread)
 * or before the context runs. Thread-safe.
 * ------------------------------------------------------------------------ */

/* Frees a NULL-terminated string array handed out by a discovery call.
 * NULL ok. */
KDP_EXPORT void kdp_strv_free(char **v);

/* Expands pattern, an absolute host path with glob(7) wildcards ('*', '?',
 * "[...]") in any component: "/dev/ttyUSB*", "/dev/serial/by-id/usb-FTDI*",
 * "/dev/snd/pcmC[0-9]D0p". No braces, no '~'; '*' does not match
 * a leading '.'. A pattern without wildcards matches itself if it exists.
 * Entries are matched by name: a symlink is returned as the link (the
 * stable /dev/serial/by-id names stay what they are). *ret_paths gets the
 * matches as host paths, sorted (strcmp), NULL-terminated (free with
 * kdp_strv_free), also when there is none. Returns the number of matches,
 * -EINVAL (pattern or root not absolute, a ".." component, over 4095
 * bytes), -E2BIG (over 4096 matches), -ENOMEM. Unreadable directories
 * are skipped. */
KDP_EXPORT int kdp_glob_devices(const char *root, const char *pattern, char ***ret_paths);

/* A USB device as sysfs describes it (every string owned by the struct). */
typedef struct kdp_usb_device {
    char *name;       /* its name in <sysfs>/bus/usb/devices, e.g. "1-1.2" */
    uint16_t vendor;  /* idVendor */
    uint16_t product; /* idProduct */
    char *serial;     /* the serial attribute; NULL if the device has none */
    int busnum;       /* -1 if unknown */
    int devnum;       /* -1 if unknown */
    /* Host paths of the device's own node and its interfaces' nodes
     * ("/dev/bus/usb/001/004", "/dev/ttyUSB0", "/dev/hidraw2"), from the
     * DEVNAME of each uevent below it (child USB devices excluded, at most
     * 64): sorted, NULL-terminated, not checked to exist under any root. */
    char **nodes;
} kdp_usb_device;

/* Lists the USB devices of <sysfs>/bus/usb/devices (devices, not their
 * interfaces; root hubs included), sorted by name, at most 1024. Entries
 * without a readable idVendor and idProduct are skipped. *ret (an array of
 * *ret_n, possibly NULL when empty) is freed with kdp_usb_list_free.
 * Returns the count, -ENOENT (no such directory: no USB), -ENOMEM, -errno. */
KDP_EXPORT int kdp_usb_list(const char *sysfs, kdp_usb_device **ret, size_t *ret_n);
/* Frees what kdp_usb_list handed out. NULL ok. */
KDP_EXPORT void kdp_usb_list_free(kdp_usb_device *devs, size_t n);

/* The USB device that the device node at host path `path` (under root)
 * belongs to: its sysfs entry is found through <sysfs>/dev/{char,block}/
 * MAJOR:MINOR for a real node, else (regular files and fifos standing for
 * nodes, or no such entry) through <sysfs>/class/{any}/<basename>, else, for
 * /dev/bus/usb/BBB/DDD, through busnum and devnum; from there the nearest
 * ancestor with idVendor and idProduct is the USB device. A symlink (e.g.
 * in /dev/serial/by-id) is followed inside root first. Fills *ret (release
 * with kdp_usb_device_clear) and returns 0, or -ENOENT (no such node, no
 * sysfs entry, or not on USB), -EINVAL, -ENOMEM; *ret untouched then. */
KDP_EXPORT int kdp_usb_device_of(const char *root, const char *sysfs, const char *path,
                                 kdp_usb_device *ret);
/* Frees the strings of one device and zeroes it. NULL ok. */
KDP_EXPORT void kdp_usb_device_clear(kdp_usb_device *d);

/* The NUMA node of the device behind the node at host path `path` (its
 * sysfs entry found as kdp_usb_device_of does): the numa_node attribute
 * of the nearest ancestor that has one (a PCI device, e.g. the USB
 * controller of a serial adapter), else that of its PCI device as
 * kdp_pci_device_of finds it (/dev/nvidiaN, /dev/vfio/N). *ret_node = that
 * node, or -1 when the device has no NUMA affinity (sysfs says -1, no
 * ancestor has the attribute, or the node has no sysfs entry): hand -1 to
 * kdp_device's numa_nodes and it is left out, as the kubelet wants. Returns 0, -ENOENT
 * (no such node), -EINVAL. */
KDP_EXPORT int kdp_numa_node_of(const char *root, const char *sysfs, const char *path,
                                int *ret_node);

/* A PCI device as sysfs describes it (every string owned by the struct). */
typedef struct kdp_pci_device {
    /* Its bus address, its name in <sysfs>/bus/pci/devices: "0000:00:06.0"
     * (domain:bus:device.function). Stable across reboots while the card
     * stays in its slot: the ID to use. Also the value of the DRA standard
     * attribute resource.kubernetes.io/pciBusID. */
    char *address;
    uint16_t vendor;           /* vendor: 0x10de */
    uint16_t device;           /* device: 0x2335 */
    uint32_t class_code;       /* class, 24 bits: 0x030200 (3D controller) */
    uint16_t subsystem_vendor; /* subsystem_vendor */
    uint16_t subsystem_device; /* subsystem_device */
    char *driver;              /* the bound driver ("nvidia", "vfio-pci"); NULL: none */
    int numa_node;             /* numa_node; -1: no affinity */
    /* The PCIe root complex it hangs under, "pci<domain>:<bus>" ("pci0000:00"):
     * the first component of its path below <sysfs>/devices. The value of
     * resource.kubernetes.io/pcieRoot. NULL if it is not under one. */
    char *pcie_root;
    int iommu_group; /* -1: none (no IOMMU, or not in a group) */
    /* Host paths of the nodes its driver publishes for it, sorted,
     * NULL-terminated, at most 64, not checked to exist under root:
     * - the DEVNAME of every class device below its sysfs directory (child
     *   PCI and USB devices excluded): DRM "/dev/dri/card1" and
     *   "/dev/dri/renderD128", "/dev/accel/accel0", an NVMe's "/dev/nvme0",
     *   VFIO's per-device "/dev/vfio/devices/vfio0";
     * - bound to nvidia: "/dev/nvidiaN", N the "Device Minor" of
     *   <root>/proc/driver/nvidia/gpus/<address>/information (/proc's when
     *   root has no proc/driver/nvidia: /proc/driver is the host's in a
     *   container too);
     * - bound to vfio-pci, in an IOMMU group: "/dev/vfio/<group>" and
     *   "/dev/vfio/vfio".
     * Nodes every container of a kind needs (/dev/nvidiactl,
     * /dev/nvidia-uvm) belong to no device: add them yourself. */
    char **nodes;
} kdp_pci_device;

/* Lists the PCI devices of <sysfs>/bus/pci/devices (bridges included),
 * sorted by address, at most 1024; root is used for the NVIDIA minor
 * mapping only. Entries without a readable vendor, device and class are
 * skipped. *ret (an array of *ret_n, NULL when empty) is freed with
 * kdp_pci_list_free. Returns the count, -ENOENT (no such directory: no
 * PCI), -EINVAL, -ENOMEM, -errno. */
KDP_EXPORT int kdp_pci_list(const char *root, const char *sysfs, kdp_pci_device **ret,
                            size_t *ret_n);
/* Frees what kdp_pci_list handed out. NULL ok. */
KDP_EXPORT void kdp_pci_list_free(kdp_pci_device *devs, size_t n);

/* The PCI device that the node at host path `path` (under root) belongs
 * to: the nearest PCI device above its sysfs entry (found as
 * kdp_usb_device_of finds it: "/dev/dri/card1", "/dev/ttyUSB0" through its
 * USB controller); for "/dev/nvidiaN", which has no sysfs parent, the GPU
 * whose NVIDIA "Device Minor" is N; for "/dev/vfio/<group>", the first
 * device of that IOMMU group. Fills *ret (release with
 * kdp_pci_device_clear) and returns 0, or -ENOENT (no such node, or not on
 * a PCI device), -EINVAL, -ENOMEM; *ret untouched then. */
KDP_EXPORT int kdp_pci_device_of(const char *root, const char *sysfs, const char *path,
                                 kdp_pci_device *ret);
/* Frees the strings of one device and zeroes it. NULL ok. */
KDP_EXPORT void kdp_pci_device_clear(kdp_pci_device *d);

/* Hot-plug: a watch that calls kdp_plugin_rescan(p) when an entry is
 * created, deleted or moved in or out of dir, or of its subdirectories
 * down to depth levels (0 = dir only; at most 4), so that a device that
 * appears or disappears reaches the kubelet at once. inotify on p's
 * context loop: no thread, no polling. dir (a real path: prefix it with
 * your root) need not exist: its nearest existing ancestor is watched
 * until it appears, and the watch falls back there if dir is removed
 * (each such change also rescans). Loop thread only (or before the
 * context runs). The watch belongs to p: kdp_plugin_free() frees it if you
 * have not; *ret (may be NULL) gets a handle for kdp_path_watch_free().
 * Returns 0, -EINVAL (dir not absolute, depth over 4), -EBUSY (another
 * thread runs the context), -EPERM (from a callback), -ENOMEM, or inotify's
 * -errno (-ENOSPC: the watch limit, fs.inotify.max_user_watches). */
typedef struct kdp_path_watch kdp_path_watch;
KDP_EXPORT int kdp_plugin_watch_path(kdp_plugin *p, const char *dir, unsigned depth,
                                     kdp_path_watch **ret);
/* Removes the watch before its plugin goes. Loop thread only (refused
 * otherwise, with a log line). NULL ok. */
KDP_EXPORT void kdp_path_watch_free(kdp_path_watch *w);

/* CDI (Container Device Interface): a spec file that container runtimes
 * read from /etc/cdi or /var/run/cdi, naming devices the kubelet passes on
 * as "vendor/class=name" (kdp_response_add_cdi_device). */
typedef struct kdp_cdi_node {
    const char *path;        /* required: the node in the container */
    const char *host_path;   /* NULL = path */
    const char *permissions; /* NULL = the runtime's default ("rwm") */
} kdp_cdi_node;

typedef struct kdp_cdi_device {
    /* Letters, digits, '_', '-', '.', ':'; a letter or digit at both ends. */
    const char *name;
    const kdp_cdi_node *nodes; /* at least one */
    size_t n_nodes;
} kdp_cdi_device;

/* Checks a CDI kind "vendor.com/class" (the CDI parser's rules). Returns 0,
 * or -EINVAL and, if why is not NULL, a static string saying what is wrong. */
KDP_EXPORT int kdp_validate_cdi_kind(const char *kind, const char **why);

/* Writes the CDI spec of kind ("vendor.com/class") with these devices (each
 * with its device nodes; borrowed for the call) as JSON to
 * <dir>/<vendor>-<class>.json; dir NULL = "/var/run/cdi", created if
 * missing. Atomic: the content goes to a temporary file in dir (a name
 * that CDI readers ignore), fsync, then rename over the final name, so a
 * reader never sees a partial spec. The file is left alone when its content
 * would not change. n == 0 removes the spec instead (CDI wants at least one
 * device). cdiVersion is the lowest one that has what the spec uses (0.3.0;
 * 0.5.0 with a host_path; 0.6.0 with a '.' in the class). If ret_names is
 * not NULL it gets the fully qualified names "vendor.com/class=name", in
 * order, NULL-terminated (free with kdp_strv_free). Returns 1 (written or
 * removed), 0 (unchanged), -EINVAL (bad kind, name, path or permissions;
 * a device without nodes), -EEXIST (two devices with one name), -ENOMEM,
 * -errno from the file system. */
KDP_EXPORT int kdp_cdi_write_spec(const char *dir, const char *kind, const kdp_cdi_device *devs,
                                  size_t n, char ***ret_names);
/* Removes the spec kdp_cdi_write_spec wrote for kind (dir NULL =
 * "/var/run/cdi"). Returns 1 (removed), 0 (there was none), -EINVAL, -errno. */
KDP_EXPORT int kdp_cdi_remove_spec(const char *dir, const char *kind);

/* ------------------------------------------------------------------------
 * Pod identity: the kubelet's PodResources API v1 (List, Get,
 * GetAllocatableResources) on <kubelet-root>/pod-resources/kubelet.sock
 * (KDP_POD_RESOURCES_SUBPATH): which pod, namespace and container hold a
 * device, and the reverse. In a DaemonSet, mount the directory
 * /var/lib/kubelet/pod-resources (not the socket: the kubelet re-creates it
 * at each restart). List and GetAllocatableResources are GA since
 * Kubernetes 1.28, Get is beta (on by default) in 1.34.
 *
 * Each call makes one connection, has a deadline, and accepts an answer of
 * at most KDP_PODS_MAX_MESSAGE bytes holding at most KDP_PODS_MAX_DEVICES
 * devices. Errors (each also logged, naming the socket): -ENOENT (no socket:
 * is the kubelet's pod-resources directory mounted?), -ECONNREFUSED (nobody
 * listens: the kubelet is down or restarting), -ETIMEDOUT (no answer before
 * the deadline), -EOPNOTSUPP (the kubelet does not serve the method: for
 * Get, its KubeletPodResourcesGet feature gate is off), -EMSGSIZE (an
 * answer over KDP_PODS_MAX_MESSAGE), -E2BIG (more than KDP_PODS_MAX_DEVICES
 * devices), -EPROTO (a gRPC error status, or an answer that is not a valid
 * message of the API: an empty pod, container, resource or device name;
 * the status's message or what is wrong is logged), -ENOMEM.
 * ------------------------------------------------------------------------ */

#define KDP_PODS_MAX_MESSAGE 16777216U /* 16 MiB */
#define KDP_PODS_MAX_DEVICES 262144U
#define KDP_PODS_TIMEOUT_MS  5000U /* timeout_ms 0 */
#define KDP_PODS_MAX_QUERIES 64U   /* kdp_plugin_query_pods() per plugin */

/* One device held by one container (a snapshot's entry), or, in the answer
 * of kdp_allocatable_get(), one device the kubelet can allocate (the three
 * pod fields then ""). Every string is non-NULL and lives as long as the
 * snapshot. */
typedef struct kdp_pod_device {
    const char *pod_namespace, *pod_name, *container_name;
    const char *resource_name;
    const char *device_id; /* as the kubelet holds it (a replica ID with replicas) */
    /* With a plugin query (kdp_plugin_query_pods, kdp_plugin_get_pods) and
     * kdp_config.replicas > 1: the device's own ID (the replica ID's suffix
     * dropped); else device_id. */
    const char *physical_id;
    /* The NUMA nodes the kubelet reports for the device's group (the
     * ContainerDevices' topology), n_numa_nodes of them (NULL if none). */
    const int64_t *numa_nodes;
    size_t n_numa_nodes;
    /* A device of a DRA claim the container references (the kubelet's
     * DynamicResources: Kubernetes 1.34+, KubeletPodResourcesDynamicResources
     * on): the claim's namespace and name, resource_name the DRA driver's
     * name, device_id and physical_id the device's name in pool_name,
     * share_id its share (consumable capacity; "" if none). A query for a
     * resource keeps the claims' devices of the driver of that name (a
     * kdp_dra_driver_new driver's: its own). All "" for a device-plugin
     * device. */
    const char *claim_namespace, *claim_name;
    const char *pool_name;
    const char *share_id;
} kdp_pod_device;

/* A snapshot: the devices in the kubelet's order (pods, their containers,
 * their device groups, the IDs of each). Immutable (any thread may read it
 * at once), freed with kdp_pods_free(). */
typedef struct kdp_pods kdp_pods;

/* A query's end: err 0 and pods (yours: free it with kdp_pods_free()), or
 * err < 0 (see above) and pods NULL. */
typedef void (*kdp_pods_fn)(int err, kdp_pods *pods, void *ud);

/* Asynchronous List for p's resource on p's kubelet root's socket
 * (kdp_config.kubelet_root), with kdp_config.replicas resolved into
 * physical_id, deadline KDP_PODS_TIMEOUT_MS. Thread-safe, also from
 * callbacks: queues the query to p's context loop through a wakeup and
 * returns at once. done runs exactly once, on the context's loop thread
 * (keep it short: the loop waits for it; it must not call
 * kdp_plugin_get_pods()), while the context runs (a query made while it
 * does not run waits for it to run): with the snapshot or an error; or with
 * -ECANCELED on the thread freeing p if kdp_plugin_free() comes first (so a
 * query made after the context's last run ends there). Returns 0 (done
 * will run), -EINVAL (p or done NULL), -EAGAIN (KDP_PODS_MAX_QUERIES
 * queries already pending or running for p), -ENOMEM. */
KDP_EXPORT int kdp_plugin_query_pods(kdp_plugin *p, kdp_pods_fn done, void *ud);
/* The same, blocking: from callbacks and author threads, never from the
 * thread running p's context (-EDEADLK, with a log line saying to use
 * kdp_plugin_query_pods()). The call runs on a private loop of the calling
 * thread, so it works whether or not the context runs. timeout_ms 0 =
 * KDP_PODS_TIMEOUT_MS. Returns 0 with *ret the snapshot, -EINVAL, -EDEADLK
 * or an error above. */
KDP_EXPORT int kdp_plugin_get_pods(kdp_plugin *p, unsigned timeout_ms, kdp_pods **ret);
/* Without a plugin (kdpctl, any tool): List. socket NULL = the
 * pod_resources_socket of kdp_kubelet_paths_get(NULL, NULL) (so
 * $KDP_KUBELET_ROOT, else /var/lib/kubelet); resource NULL = every resource.
 * physical_id = device_id. Blocking, on a private loop, any thread.
 * timeout_ms 0 = KDP_PODS_TIMEOUT_MS. Returns 0 with *ret, -EINVAL or an
 * error above. */
KDP_EXPORT int kdp_pods_get(const char *socket, const char *resource, unsigned timeout_ms,
                            kdp_pods **ret);
/* Get: the devices of one pod (namespace ns, name pod; both required),
 * resource NULL = every resource; as kdp_pods_get() otherwise. Returns
 * -ESRCH for a pod the kubelet does not know, and -EOPNOTSUPP from a
 * kubelet without Get: its KubeletPodResourcesGet feature gate off (the
 * default before 1.34) or a kubelet older than 1.27 (the log line says
 * which). */
KDP_EXPORT int kdp_pods_get_pod(const char *socket, const char *ns, const char *pod,
                                const char *resource, unsigned timeout_ms, kdp_pods **ret);
/* GetAllocatableResources: every device the kubelet can allocate, one entry
 * each (pod fields ""), resource NULL = every resource, with its NUMA
 * nodes. Beware: the kubelet includes unhealthy devices in this answer
 * (kubernetes/kubernetes #104122); ask the plugin for health. As
 * kdp_pods_get() otherwise. */
KDP_EXPORT int kdp_allocatable_get(const char *socket, const char *resource, unsigned timeout_ms,
                                   kdp_pods **ret);
/* The snapshot's devices: count, and entry i (NULL past the end). pods may
 * be NULL (0, NULL). */
KDP_EXPORT size_t kdp_pods_count(const kdp_pods *pods);
KDP_EXPORT const kdp_pod_device *kdp_pods_at(const kdp_pods *pods, size_t i);
/* Who holds device id (its device_id or physical_id) of resource (NULL =
 * any resource): the first entry, or NULL. O(n). */
KDP_EXPORT const kdp_pod_device *kdp_pods_find_device(const kdp_pods *pods, const char *resource,
                                                      const char *id);
/* The reverse: the devices pod (namespace ns, name pod) holds, in container
 * (NULL = any of its containers): the first max entries go into
 * out[0..max) (out may be NULL with max 0). Returns how many there are (may
 * exceed max). O(n). */
KDP_EXPORT size_t kdp_pods_find_pod(const kdp_pods *pods, const char *ns, const char *pod,
                                    const char *container, const kdp_pod_device **out, size_t max);
/* Frees a snapshot. NULL ok. */
KDP_EXPORT void kdp_pods_free(kdp_pods *pods);

#ifdef __cplusplus
}
#endif

#endif
