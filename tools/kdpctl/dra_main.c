/* SPDX-License-Identifier: MIT */
/* dra_main: `kdpctl dra SUBCOMMAND`: its flags, help and dispatch. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra.h"
#include "dra_api.h"

enum {
    KD_F_ROOT = 1U << 0,
    KD_F_VERSIONS = 1U << 1,
    KD_F_NO_HEALTH = 1U << 2,
    KD_F_JSON = 1U << 3,
    KD_F_TIMEOUT = 1U << 4,
    KD_F_DIR = 1U << 5,
    KD_F_LISTEN = 1U << 6,
    KD_F_NODE = 1U << 7,
    KD_F_KUBECONFIG = 1U << 8,
    KD_F_DRIVER = 1U << 9,
    KD_F_DEVICE = 1U << 10,
    KD_F_REQUEST = 1U << 11,
    KD_F_HEALTH_VERSIONS = 1U << 14,
    KD_F_CONFIG = 1U << 12,
    KD_F_DELETE = 1U << 13,
    KD_F_SHARE_ID = 1U << 15,
    KD_F_CONSUMED = 1U << 16,
    KD_F_NO_CHECK = 1U << 17,
};
#define KD_SWITCHES (KD_F_NO_HEALTH | KD_F_JSON | KD_F_DELETE | KD_F_NO_CHECK)

static const struct {
    const char *name;
    unsigned bit;
} flags[] = {
    {"--kubelet-root", KD_F_ROOT},
    {"--versions", KD_F_VERSIONS},
    {"--no-health", KD_F_NO_HEALTH},
    {"--json", KD_F_JSON},
    {"--timeout", KD_F_TIMEOUT},
    {"--dir", KD_F_DIR},
    {"--listen", KD_F_LISTEN},
    {"--node", KD_F_NODE},
    {"--kubeconfig", KD_F_KUBECONFIG},
    {"--driver", KD_F_DRIVER},
    {"--device", KD_F_DEVICE},
    {"--request", KD_F_REQUEST},
    {"--config", KD_F_CONFIG},
    {"--delete", KD_F_DELETE},
    {"--health-versions", KD_F_HEALTH_VERSIONS},
    {"--share-id", KD_F_SHARE_ID},
    {"--consumed", KD_F_CONSUMED},
    {"--no-check", KD_F_NO_CHECK},
};

typedef struct kd_sub {
    const char *name;
    unsigned flags;
    size_t min_pos, max_pos;
    int (*run)(const kd_opts *o);
    const char *usage;
    const char *help;
} kd_sub;

static const kd_sub subs[] = {
    {"kubelet",
     KD_F_ROOT | KD_F_VERSIONS | KD_F_NO_HEALTH | KD_F_HEALTH_VERSIONS | KD_F_JSON | KD_F_TIMEOUT,
     0, 0, kd_cmd_kubelet,
     "kdpctl dra kubelet [--kubelet-root DIR] [--versions v1,v1beta1] [--no-health]\n"
     "                          [--health-versions v1,v1alpha1|legacy] [--json] [--timeout D]",
     "The kubelet's DRA side, on kdp's own gRPC client. Walks and watches\n"
     "DIR/plugins_registry (DIR: --kubelet-root, else $KDP_KUBELET_ROOT, else\n"
     "/var/lib/kubelet; created if missing), calls GetInfo on each socket (1s), takes\n"
     "type \"DRAPlugin\" and the first of the plugin's supported_versions, in the\n"
     "plugin's order, that this kubelet supports (--versions, default v1,v1beta1:\n"
     "\"v1.DRAPlugin\", \"v1beta1.DRAPlugin\"), checks that the endpoint is an absolute\n"
     "path to a socket, then calls NotifyRegistrationStatus. A refused socket is asked\n"
     "again after 500ms, doubling up to 2m2s. Each registered driver's health stream\n"
     "(DRAResourceHealth/NodeWatchResources) is opened as the 1.37 kubelet does: the\n"
     "first of --health-versions (default v1,v1alpha1) that the plugin advertises, none\n"
     "advertised no stream, UNIMPLEMENTED not asked again; with --health-versions legacy\n"
     "as 1.34-1.36 do: v1alpha1, advertised or not, asked again every 5s (UNIMPLEMENTED\n"
     "said once). A stream that ends otherwise is reopened 5s later (--no-health: never\n"
     "opened). Every health list is printed: each device's health (Healthy, Unhealthy,\n"
     "Unknown) and message.\n"
     "\n"
     "Commands on stdin, one a line:\n"
     "  prepare DRIVER NS/NAME/UID [NS/NAME/UID...]    one NodePrepareResources call\n"
     "                 with all the claims; prints each claim's devices and CDI IDs or\n"
     "                 its error (a claim missing from the answer is said so)\n"
     "  unprepare DRIVER NS/NAME/UID [NS/NAME/UID...]  one NodeUnprepareResources call\n"
     "  state          the drivers registered and the claims prepared\n"
     "  health DRIVER  the driver's last health list\n"
     "SIGHUP is a kubelet restart: every connection and call dropped, the directory\n"
     "walked again and each socket registered anew, the claims prepared kept.\n"
     "Runs until SIGINT or SIGTERM (exit 0) or for --timeout D (exit 0).\n"
     "  --kubelet-root DIR   the kubelet's root (the driver's must be the same)\n"
     "  --versions LIST      the DRAPlugin versions this kubelet supports, e.g. v1beta1\n"
     "  --no-health          do not open the health stream\n"
     "  --health-versions L  the health versions this kubelet has, preferred first (v1,\n"
     "                       v1alpha1), or legacy (1.34-1.36: v1alpha1 always)\n"
     "  --json               one JSON object per line on stdout (event: found,\n"
     "                       registered, refused, deregistered, health, prepared,\n"
     "                       unprepared, state, command_error, ...)\n"
     "  --timeout D          run for D (500ms, 5s, 2m), then exit 0\n"},
    {"apiserver", KD_F_DIR | KD_F_LISTEN | KD_F_NODE | KD_F_JSON | KD_F_TIMEOUT, 0, 0,
     kd_cmd_apiserver,
     "kdpctl dra apiserver --dir DIR [--listen 127.0.0.1:0] [--node NAME]... [--json]\n"
     "                            [--timeout D]",
     "The small API-server surface a DRA driver needs, over HTTPS. At start it makes a CA\n"
     "and a server certificate (EC P-256; subjectAltName 127.0.0.1, ::1, localhost) and a\n"
     "bearer token, and writes DIR/ca.crt, DIR/token and DIR/kubeconfig (for the driver's\n"
     "--kubeconfig and for kubectl --kubeconfig). Started again with the same DIR, it\n"
     "serves the same CA, certificate and token, at the same address, so that a driver\n"
     "kept running reconnects. Serves /version, discovery (/api,\n"
     "/api/v1, /apis, /apis/resource.k8s.io, /apis/resource.k8s.io/v1), nodes (get,\n"
     "list, watch: one per --node, default $NODE_NAME or the host name),\n"
     "resourceslices (create with generateName, get, list and watch with fieldSelector\n"
     "metadata.name, spec.nodeName, spec.driver and resourceVersion, update with 409 on a\n"
     "stale resourceVersion, merge patch, delete) and resourceclaims (the same, namespaced,\n"
     "with /status), every error a Kubernetes Status. Each slice is printed as it\n"
     "changes: pool, generation, devices with their attributes and capacities.\n"
     "Bounds: 10000 objects, 4 MiB bodies, 64 watches, 128 connections, the last 1000\n"
     "events for watches that resume (older: 410 Expired).\n"
     "\n"
     "Faults for a driver to survive, commands on stdin, one a line:\n"
     "  down SECONDS       an outage: the port closed, connections and watches ended,\n"
     "                     back on the same port SECONDS later (1-3600)\n"
     "  fail CODE [COUNT]  the next COUNT requests (default 1) answered CODE (400-599) as\n"
     "                     a Status; 429 and 503 with Retry-After: 1\n"
     "  conflict [COUNT]   the next COUNT updates of slices answered 409 Conflict\n"
     "  edit-slice NAME    the slice edited by someone else: its last device (or counter\n"
     "                     set) removed, a new generation\n"
     "  delete-slice NAME  the slice deleted (NAME ending in '*', for both: the oldest\n"
     "                     slice whose name starts with the rest, node-a-gpu-example-com-*)\n"
     "  rotate-token       a new token in DIR/token and the kubeconfigs, the old one\n"
     "                     refused (a client of DIR/kubeconfig-tokenfile reads it again)\n"
     "  faults             what is armed\n"
     "Runs until SIGINT or SIGTERM (exit 0) or for --timeout D (exit 0).\n"
     "  --dir DIR            where ca.crt, server.crt, server.key, token, kubeconfig and\n"
     "                       kubeconfig-tokenfile are written (created), and found again\n"
     "  --listen HOST:PORT   the address (default: DIR/kubeconfig's, else 127.0.0.1:0)\n"
     "  --node NAME          a Node object (repeatable)\n"
     "  --json               one JSON object per line on stdout (event: ready, request,\n"
     "                       slice, fault, exit)\n"
     "  --timeout D          run for D, then exit 0\n"},
    {"run",
     KD_F_ROOT | KD_F_VERSIONS | KD_F_NO_HEALTH | KD_F_HEALTH_VERSIONS | KD_F_DIR | KD_F_LISTEN |
         KD_F_NODE | KD_F_JSON | KD_F_TIMEOUT,
     0, 0, kd_cmd_run,
     "kdpctl dra run --dir DIR [--kubelet-root ROOT] [--listen 127.0.0.1:0] [--node NAME]...\n"
     "                      [--versions v1,v1beta1] [--no-health]\n"
     "                      [--health-versions v1,v1alpha1|legacy] [--json] [--timeout D]",
     "`kdpctl dra apiserver` and `kdpctl dra kubelet` in one process, on one loop: the API\n"
     "server's files in DIR (the driver's --kubeconfig DIR/kubeconfig), the kubelet side\n"
     "on ROOT/plugins_registry, its commands (prepare, unprepare, state, health) and the\n"
     "API server's (down, fail, conflict, edit-slice, delete-slice, rotate-token, faults)\n"
     "on stdin.\n"
     "SIGHUP restarts the kubelet side only: the API server keeps its objects.\n"
     "See kdpctl dra help apiserver and kdpctl dra help kubelet for each side.\n"},
    {"claim",
     KD_F_KUBECONFIG | KD_F_DRIVER | KD_F_NODE | KD_F_DEVICE | KD_F_REQUEST | KD_F_CONFIG |
         KD_F_DELETE | KD_F_JSON | KD_F_SHARE_ID | KD_F_CONSUMED | KD_F_NO_CHECK,
     1, 1, kd_cmd_claim,
     "kdpctl dra claim [--kubeconfig FILE] NS/NAME --driver D --node N --device DEV[,DEV...]\n"
     "                        [--request R] [--config JSON] [--share-id UUID|new]\n"
     "                        [--consumed NAME=QTY[,NAME=QTY...]] [--no-check] [--json]\n"
     "       kdpctl dra claim [--kubeconfig FILE] --delete NS/NAME",
     "Creates a ResourceClaim allocated as the scheduler leaves it, through kdp's own API\n"
     "client: spec.devices.requests (one request R, default req-0, of as many devices of\n"
     "the class D as given), then through the /status subresource\n"
     "status.allocation.devices.results (R, D, pool N, each DEV), with --config one opaque\n"
     "config of D for R, and a node selector for N. Prints the claim's UID on stdout\n"
     "(and how to prepare it on stderr). --delete deletes the claim. Works against\n"
     "`kdpctl dra apiserver` (--kubeconfig DIR/kubeconfig) and any API server.\n"
     "  --kubeconfig FILE    the API server (default $KUBECONFIG, else in-cluster)\n"
     "  --driver D           the driver the devices belong to\n"
     "  --node N             the node (and the pool: kdp names the pool after the node)\n"
     "  --device DEV,DEV     the devices allocated\n"
     "  --request R          the request's name (default req-0)\n"
     "  --config JSON        the driver's opaque parameters, a JSON object\n"
     "  --share-id ID        each device is a share (of a device that allows multiple\n"
     "                       allocations): shareID ID (a lower-case UUID), or new: a\n"
     "                       new random one per device, as the scheduler makes them\n"
     "  --consumed N=Q,...   what each share consumed of the device's capacities\n"
     "                       (consumedCapacity; the request asks for the same amounts)\n"
     "  --no-check           allocate DEV even if no slice of D on N offers it (or not\n"
     "                       as asked): to try the driver's refusal. Without it, each\n"
     "                       device must be in a slice of D on N (shared only if it\n"
     "                       allows multiple allocations, consumed only its capacities)\n"
     "  --delete             delete NS/NAME instead\n"},
};

#define N_SUBS (sizeof(subs) / sizeof(subs[0]))

static void dra_help(FILE *f)
{
    fprintf(f, "usage: kdpctl dra SUBCOMMAND [FLAGS]\n\n"
               "DRA without a cluster: try a DRA driver on a laptop.\n\nsubcommands:\n");
    for (size_t i = 0; i < N_SUBS; i++) {
        fprintf(f, "  %s\n", subs[i].usage);
    }
    fprintf(f, "\nkdpctl dra help SUBCOMMAND: a subcommand's manual.\n"
               "exit status: 0 success, 1 failure, 2 bad command line.\n");
}

static int usage_error(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *sub, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kdpctl dra%s%s: ", sub ? " " : "", sub ? sub : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(kdpctl dra help%s%s for help)\n", sub ? " " : "", sub ? sub : "");
    return KC_EXIT_USAGE;
}

static int set_versions(kd_opts *o, const char *sub, const char *v)
{
    kc_strv_free(&o->versions);
    if (kc_split_ids(v, &o->versions) < 0) {
        return KC_EXIT_FAIL;
    }
    for (size_t i = 0; i < o->versions.n; i++) {
        if (strcmp(o->versions.v[i], "v1") != 0 && strcmp(o->versions.v[i], "v1beta1") != 0) {
            return usage_error(sub, "--versions: \"%s\" is not v1 or v1beta1", o->versions.v[i]);
        }
    }
    return o->versions.n ? 0 : usage_error(sub, "--versions wants v1, v1beta1 or v1,v1beta1");
}

static int set_health_versions(kd_opts *o, const char *sub, const char *v)
{
    kc_strv_free(&o->health_versions);
    o->health_legacy = strcmp(v, "legacy") == 0;
    if (o->health_legacy) {
        return 0;
    }
    if (kc_split_ids(v, &o->health_versions) < 0) {
        return KC_EXIT_FAIL;
    }
    for (size_t i = 0; i < o->health_versions.n; i++) {
        const char *x = o->health_versions.v[i];
        if (strcmp(x, "v1") != 0 && strcmp(x, "v1alpha1") != 0) {
            return usage_error(sub,
                               "--health-versions: \"%s\" is not v1 or v1alpha1 (or the "
                               "word legacy)",
                               x);
        }
    }
    return o->health_versions.n
               ? 0
               : usage_error(sub, "--health-versions wants v1, v1alpha1, v1,v1alpha1 or legacy");
}

static int set_flag(kd_opts *o, const char *sub, unsigned bit, const char *v)
{
    switch (bit) {
    case KD_F_ROOT:
        o->root = v;
        return *v == '/' ? 0
                         : usage_error(sub, "--kubelet-root wants an absolute path, not \"%s\"", v);
    case KD_F_VERSIONS:
        return set_versions(o, sub, v);
    case KD_F_HEALTH_VERSIONS:
        return set_health_versions(o, sub, v);
    case KD_F_NO_HEALTH:
        o->no_health = true;
        return 0;
    case KD_F_JSON:
        o->json = true;
        return 0;
    case KD_F_DELETE:
        o->del = true;
        return 0;
    case KD_F_NO_CHECK:
        o->no_check = true;
        return 0;
    case KD_F_TIMEOUT:
        return kc_parse_duration(v, &o->timeout_us) == 0
                   ? 0
                   : usage_error(sub, "--timeout wants a duration like 500ms, 5s or 2m, not \"%s\"",
                                 v);
    case KD_F_DIR:
        o->dir = v;
        return *v ? 0 : usage_error(sub, "--dir wants a directory");
    case KD_F_LISTEN:
        o->listen = v;
        return strchr(v, ':') ? 0 : usage_error(sub, "--listen wants HOST:PORT, not \"%s\"", v);
    case KD_F_NODE:
        if (!*v) {
            return usage_error(sub, "--node wants a node name");
        }
        o->node = v;
        return kc_strv_add(&o->nodes, v) == 0 ? 0 : KC_EXIT_FAIL;
    case KD_F_KUBECONFIG:
        o->kubeconfig = v;
        return *v ? 0 : usage_error(sub, "--kubeconfig wants a file");
    case KD_F_DRIVER:
        o->driver = v;
        return *v ? 0 : usage_error(sub, "--driver wants a driver name");
    case KD_F_DEVICE:
        o->devices = v;
        return *v ? 0 : usage_error(sub, "--device wants DEV[,DEV...]");
    case KD_F_REQUEST:
        o->request = v;
        return *v ? 0 : usage_error(sub, "--request wants a request name");
    case KD_F_SHARE_ID:
        o->share_id = v;
        return *v ? 0 : usage_error(sub, "--share-id wants a lower-case UUID, or new");
    case KD_F_CONSUMED:
        o->consumed = v;
        return *v ? 0 : usage_error(sub, "--consumed wants NAME=QUANTITY[,NAME=QUANTITY...]");
    default:
        o->config = v;
        return 0;
    }
}

/* Returns 0 (taken), 1 (positional) or an exit status. */
static int take_flag(kd_opts *o, const kd_sub *s, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    if (arg[0] != '-' || arg[1] == '\0') {
        return 1;
    }
    for (size_t f = 0; f < sizeof(flags) / sizeof(flags[0]); f++) {
        size_t n = strlen(flags[f].name);
        if (strncmp(arg, flags[f].name, n) != 0 || (arg[n] != '\0' && arg[n] != '=')) {
            continue;
        }
        if (!(s->flags & flags[f].bit)) {
            return usage_error(s->name, "%s is not an option of this subcommand", flags[f].name);
        }
        const char *v = arg[n] == '=' ? arg + n + 1 : NULL;
        if (flags[f].bit & KD_SWITCHES) {
            return v ? usage_error(s->name, "%s takes no value", flags[f].name)
                     : set_flag(o, s->name, flags[f].bit, "");
        }
        if (!v && *i + 1 >= argc) {
            return usage_error(s->name, "%s needs a value", flags[f].name);
        }
        return set_flag(o, s->name, flags[f].bit, v ? v : argv[++*i]);
    }
    return usage_error(s->name, "unknown option %s", arg);
}

static int run_sub(const kd_sub *s, int argc, char **argv)
{
    kd_opts o = {.sub = s->name};
    int r = 0;
    for (int i = 0; r == 0 && i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: %s\n\n%s", s->usage, s->help);
            r = -1;
            break;
        }
        r = take_flag(&o, s, argc, argv, &i);
        if (r == 1) {
            r = kc_strv_add(&o.pos, argv[i]) == 0 ? 0 : KC_EXIT_FAIL;
        }
    }
    if (r == 0 && o.pos.n < s->min_pos) {
        r = usage_error(s->name, "missing arguments: %s", s->usage);
    } else if (r == 0 && o.pos.n > s->max_pos) {
        r = usage_error(s->name, "unexpected argument \"%s\"", o.pos.v[s->max_pos]);
    }
    if (r == 0 && (s->flags & KD_F_DIR) && !o.dir) {
        r = usage_error(s->name, "--dir DIR is required (where the credentials and the "
                                 "kubeconfig go)");
    }
    if (r == 0 && !o.versions.n && (s->flags & KD_F_VERSIONS)) {
        r = set_versions(&o, s->name, "v1,v1beta1");
    }
    if (r == 0 && !o.health_versions.n && !o.health_legacy && (s->flags & KD_F_HEALTH_VERSIONS)) {
        r = set_health_versions(&o, s->name, "v1,v1alpha1");
    }
    if (r == 0) {
        r = s->run(&o);
    }
    kc_strv_free(&o.versions);
    kc_strv_free(&o.health_versions);
    kc_strv_free(&o.nodes);
    kc_strv_free(&o.pos);
    return r < 0 ? KC_EXIT_OK : r;
}

int kc_dra_main(int argc, char **argv)
{
    if (argc < 1) {
        dra_help(stderr);
        return KC_EXIT_USAGE;
    }
    if (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        dra_help(stdout);
        return KC_EXIT_OK;
    }
    bool help = strcmp(argv[0], "help") == 0;
    if (help && argc < 2) {
        dra_help(stdout);
        return KC_EXIT_OK;
    }
    const char *name = argv[help ? 1 : 0];
    for (size_t i = 0; i < N_SUBS; i++) {
        if (strcmp(subs[i].name, name) == 0) {
            if (help) {
                printf("usage: %s\n\n%s", subs[i].usage, subs[i].help);
                return KC_EXIT_OK;
            }
            return run_sub(&subs[i], argc - 1, argv + 1);
        }
    }
    return usage_error(NULL, "unknown subcommand \"%s\" (kubelet, apiserver, claim, run)", name);
}
