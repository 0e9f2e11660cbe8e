/* SPDX-License-Identifier: MIT */
/*
 * kdpctl: a kubelet emulator and an inspector for device-plugin authors,
 * built on libkdp's own transport (src/grpc/server.h, src/grpc/client.h).
 *
 * One struct holds every flag of every command (each command accepts a
 * subset, see main.c); the commands live in commands.c (one plugin socket)
 * and kubelet.c + registration.c (the emulator).
 */
#ifndef KDPCTL_H
#define KDPCTL_H

#include <kdp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses. */
#define KC_EXIT_OK    0
#define KC_EXIT_FAIL  1 /* the call failed, or the plugin misbehaved */
#define KC_EXIT_USAGE 2 /* bad command line */

#define KC_DEFAULT_TIMEOUT ((uint64_t)10 * 1000 * 1000) /* us, for one call */

/* Flags, as bits: which ones a command accepts. */
enum {
    KC_F_DIR = 1U << 0,
    KC_F_JSON = 1U << 1,
    KC_F_TIMEOUT = 1U << 2,
    KC_F_COUNT = 1U << 3,
    KC_F_CONTAINER = 1U << 4,
    KC_F_AVAILABLE = 1U << 5,
    KC_F_MUST = 1U << 6,
    KC_F_SIZE = 1U << 7,
    KC_F_ROOT = 1U << 8,
    KC_F_REGISTRY = 1U << 9,
    KC_F_TRACKING = 1U << 10,
    KC_F_SOCKET = 1U << 11,
    KC_F_RESOURCE = 1U << 12,
    KC_F_DEVICE = 1U << 13,
    KC_F_POD = 1U << 14,
    KC_F_ALLOCATABLE = 1U << 15,
};
#define KC_F_COMMON (KC_F_DIR | KC_F_ROOT | KC_F_JSON | KC_F_TIMEOUT)
#define KC_SWITCHES (KC_F_JSON | KC_F_ALLOCATABLE) /* flags without a value */

/* kubelet --endpoint-tracking: how the emulated kubelet finds the
 * registration to drop when a plugin's stream ends or its watcher socket
 * goes (kubernetes/kubernetes PR #135437). */
typedef enum kc_tracking {
    KC_TRACK_SOCKET,   /* per socket path (PR #135437): the default */
    KC_TRACK_RESOURCE, /* by resource name: kubelets 1.25+ before that PR */
} kc_tracking;

/* A list of strings (borrowed from argv, or split copies: see owned). */
typedef struct kc_strv {
    char **v;
    size_t n;
} kc_strv;

typedef struct kc_opts {
    const char *cmd;      /* the command's name, for messages */
    const char *dir;      /* device-plugin dir: flag, $KDP_DEVICE_PLUGIN_DIR, the root's */
    const char *root;     /* --kubelet-root; NULL = $KDP_KUBELET_ROOT, else the default */
    const char *registry; /* --plugins-registry; NULL = not given */
    kc_tracking tracking; /* kubelet --endpoint-tracking */
    bool json;            /* one JSON object per line on stdout */
    uint64_t timeout_us;  /* 0 = not given */
    long count;           /* watch --count; 0 = not given */
    kc_strv containers;   /* allocate --container (each "a,b"), in order */
    const char *available;
    const char *must_include;
    long size; /* preferred --size; -1 = not given */
    /* pods */
    const char *socket;   /* --socket: the PodResources socket */
    const char *resource; /* --resource */
    const char *device;   /* --device ID */
    const char *pod;      /* --pod NS/NAME */
    bool allocatable;     /* --allocatable */
    kc_strv pos;
} kc_opts;

/* args.c */
/* Parses "500ms", "5s", "1.5s", "2m", "1h" into microseconds (> 0).
 * Returns 0 or -EINVAL. */
int kc_parse_duration(const char *s, uint64_t *ret_us);
/* Formats a duration the way it is parsed ("500ms", "10s", "2m"). */
const char *kc_format_duration(uint64_t us, char *buf, size_t cap);
/* Splits "a,b,c" into ret (empty items dropped). The strings are malloc'ed;
 * free with kc_strv_free. Returns 0 or -ENOMEM. */
int kc_split_ids(const char *list, kc_strv *ret);
/* Appends a copy of s. Returns 0 or -ENOMEM. */
int kc_strv_add(kc_strv *v, const char *s);
void kc_strv_free(kc_strv *v);
/* The socket path of a SOCK argument: as given if it contains '/', else
 * DIR/SOCK. Returns a malloc'ed string or NULL. */
char *kc_socket_path(const kc_opts *o, const char *sock);
/* The device-plugin dir from the environment or the default. */
/* The device-plugin directory as the library finds it with this kubelet root
 * (NULL = not given), or NULL if the root is not an absolute path. */
const char *kc_default_dir(const char *kubelet_root);

/* commands.c: one plugin socket. Each returns an exit status. */
int kc_cmd_options(const kc_opts *o);
int kc_cmd_list(const kc_opts *o);
int kc_cmd_watch(const kc_opts *o);
int kc_cmd_allocate(const kc_opts *o);
int kc_cmd_preferred(const kc_opts *o);
int kc_cmd_prestart(const kc_opts *o);

/* info.c: GetInfo on a plugin-watcher registration socket. */
int kc_cmd_info(const kc_opts *o);
/* args.c: the plugins_registry directory: --plugins-registry, else the kubelet
 * root's (explicit_only: only from --kubelet-root or $KDP_KUBELET_ROOT;
 * NULL if neither is given). NULL also if the root is not absolute. */
const char *kc_registry_dir(const kc_opts *o, bool explicit_only);

/* pods.c: the kubelet's PodResources API. */
int kc_cmd_pods(const kc_opts *o);

/* kubelet.c: the emulator. */
int kc_cmd_kubelet(const kc_opts *o);

#endif
