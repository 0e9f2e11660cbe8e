/* SPDX-License-Identifier: MIT */
/* main: the command table, flag parsing and help. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kdp.h"
#include "kdpctl.h"
#ifdef KDPCTL_DRA
#include "dra.h"
#endif

typedef struct kc_command {
    const char *name;
    unsigned flags; /* the flags it accepts */
    size_t min_pos; /* positional arguments */
    size_t max_pos; /* SIZE_MAX = any number */
    int (*run)(const kc_opts *o);
    const char *usage;
    const char *summary;
    const char *help;
} kc_command;

#define COMMON_HELP                                                                                \
    "  --device-plugin-dir DIR  where sockets without a '/' are looked up (default:\n"             \
    "                           $KDP_DEVICE_PLUGIN_DIR, else ROOT/device-plugins)\n"               \
    "  --kubelet-root ROOT      the kubelet's root directory (default: $KDP_KUBELET_ROOT,\n"       \
    "                           else " KDP_KUBELET_ROOT ")\n"                                      \
    "  --json                   one JSON object per line on stdout, for scripts\n"

static const kc_command commands[] = {
    {"kubelet", KC_F_COMMON | KC_F_REGISTRY | KC_F_TRACKING, 0, 0, kc_cmd_kubelet,
     "kdpctl kubelet [--device-plugin-dir DIR | --kubelet-root ROOT] [--plugins-registry DIR2]\n"
     "                      [--endpoint-tracking socket|resource] [--json] [--timeout D]",
     "emulate the kubelet: accept registrations, watch devices",
     "Serves DIR/kubelet.sock like the kubelet: at start deletes stale socket files in DIR\n"
     "(keeps other files and kubelet_internal_checkpoint), checks each Register like the\n"
     "kubelet (version v1beta1, the resource-name rule, the kubelet's messages), dials the\n"
     "plugin back and calls GetDevicePluginOptions before answering, then opens\n"
     "ListAndWatch and prints every registration, rejection, device change (added,\n"
     "removed, health, NUMA) and stream end, and the resource's capacity and allocatable\n"
     "(what the node status would say) whenever they change. A later registration of a\n"
     "resource replaces the earlier one.\n"
     "\n"
     "--endpoint-tracking picks the kubelet generation when two registrations of one\n"
     "resource exist (a rolling update with two instances of a plugin on two sockets):\n"
     "socket (the default; kubelets with kubernetes/kubernetes PR #135437): endpoints are\n"
     "tracked per socket path, the end of the older registration leaves the resource\n"
     "alone. resource (kubelets 1.25+ before it): when ANY registration's ListAndWatch\n"
     "ends, or its watcher socket goes, the kubelet looks the registration up by resource\n"
     "name, finds the newest and disconnects it: allocatable drops to 0 until the plugin\n"
     "registers again.\n"
     "\n"
     "With --kubelet-root ROOT (or $KDP_KUBELET_ROOT) it also plays the kubelet's plugin\n"
     "watcher on ROOT/plugins_registry (--plugins-registry DIR2: on DIR2; created if\n"
     "missing; without either, no watcher): walks it at start and watches it (names\n"
     "starting with '.' and non-sockets ignored), calls GetInfo (1s) on each socket,\n"
     "checks type \"DevicePlugin\", \"v1beta1\" among supported_versions and the resource\n"
     "name, connects to the endpoint (\"\" = that socket, else a full path) as for a\n"
     "Register, then calls NotifyRegistrationStatus: true, or false with the kubelet's\n"
     "reason (retried after 500ms, doubling up to 2m2s). A socket removed is deregistered.\n"
     "\n"
     "SIGHUP simulates a kubelet restart: every connection closed, the socket files in DIR\n"
     "deleted, kubelet.sock re-created, plugins_registry kept and walked again (a fresh\n"
     "GetInfo each); each plugin that comes back is reported with the time from the\n"
     "restart to its Register or GetInfo (and, after 10s, any still missing).\n"
     "\n"
     "Runs until SIGINT or SIGTERM (exit 0) or for --timeout D (exit 0).\n"
     "  --plugins-registry DIR2  play the plugin watcher on DIR2\n"
     "  --endpoint-tracking socket|resource\n"
     "                           per socket path (default) or by resource name\n"},
    {"info", KC_F_COMMON | KC_F_REGISTRY, 1, 1, kc_cmd_info, "kdpctl info SOCK",
     "GetInfo on a plugin-watcher registration socket",
     "Calls pluginregistration.Registration/GetInfo, as the kubelet's plugin watcher does,\n"
     "and prints type, name, endpoint and supported_versions, and whether the kubelet takes\n"
     "them (exit 1 with the kubelet's refusal if not). A SOCK without '/' is looked up in\n"
     "the plugins_registry directory (--plugins-registry, else ROOT/plugins_registry).\n"
     "  --plugins-registry DIR2  where SOCK is looked up\n"},
    {"pods", KC_F_COMMON | KC_F_SOCKET | KC_F_RESOURCE | KC_F_DEVICE | KC_F_POD | KC_F_ALLOCATABLE,
     0, 0, kc_cmd_pods,
     "kdpctl pods [--kubelet-root ROOT | --socket PATH] [--resource NAME] [--device ID]\n"
     "                   [--pod NS/NAME] [--allocatable] [--json]",
     "which pod holds which device (the kubelet's PodResources API)",
     "Asks the kubelet's PodResources API v1 on ROOT/pod-resources/kubelet.sock (--socket\n"
     "PATH: that socket) and prints one row per container and resource: NAMESPACE, POD,\n"
     "CONTAINER, RESOURCE and the DEVICES it holds (List; with --pod, Get, falling back to\n"
     "List when the kubelet's KubeletPodResourcesGet gate is off). --allocatable prints\n"
     "what the kubelet can allocate instead (GetAllocatableResources: RESOURCE, DEVICE,\n"
     "NUMA; the kubelet includes unhealthy devices, kubernetes/kubernetes #104122). In a\n"
     "pod, mount the host's /var/lib/kubelet/pod-resources directory.\n"
     "  --socket PATH            the PodResources socket itself\n"
     "  --resource NAME          only this resource's devices\n"
     "  --device ID              only this device (its ID as the kubelet holds it)\n"
     "  --pod NS/NAME            only this pod's devices\n"
     "  --allocatable            the devices the kubelet can allocate\n"},
    {"options", KC_F_COMMON, 1, 1, kc_cmd_options, "kdpctl options SOCK",
     "GetDevicePluginOptions: what the plugin offers",
     "Prints pre_start_required and get_preferred_allocation_available.\n"},
    {"list", KC_F_COMMON, 1, 1, kc_cmd_list, "kdpctl list SOCK",
     "the device list (the first ListAndWatch message) as a table",
     "Opens ListAndWatch, prints the first message as a table (ID, HEALTH, NUMA) and\n"
     "closes the stream.\n"},
    {"watch", KC_F_COMMON | KC_F_COUNT, 1, 1, kc_cmd_watch,
     "kdpctl watch SOCK [--count N] [--timeout D]", "every ListAndWatch message, with what changed",
     "Prints each ListAndWatch message as it comes, with the devices added, removed or\n"
     "changed (health, NUMA) since the one before. Stops after N messages (--count), at\n"
     "--timeout D (exit 0 without --count; with --count, fewer than N messages by then is\n"
     "DEADLINE_EXCEEDED), on SIGINT/SIGTERM (exit 0) or when the plugin ends the stream\n"
     "(exit 1 unless it ended with OK).\n"
     "  --count N                stop after N messages\n"},
    {"allocate", KC_F_COMMON | KC_F_CONTAINER, 1, SIZE_MAX, kc_cmd_allocate,
     "kdpctl allocate SOCK ID... | kdpctl allocate SOCK --container ID,ID [--container ID...]",
     "Allocate: what a container gets (env, mounts, devices, annotations, CDI)",
     "One AllocateRequest. `allocate SOCK a b` asks for one container with devices a and b\n"
     "(the kubelet always sends one container per call). Each --container ID,ID adds one\n"
     "container request with those IDs, in order, to test several containers in one call.\n"
     "Prints each container's env vars, mounts, device nodes, annotations and CDI devices.\n"
     "Fails if the plugin does not answer exactly one response per container.\n"
     "  --container ID,ID        one container request (repeatable)\n"},
    {"preferred", KC_F_COMMON | KC_F_AVAILABLE | KC_F_MUST | KC_F_SIZE, 1, 1, kc_cmd_preferred,
     "kdpctl preferred SOCK --available ID,ID... [--must-include ID,...] --size N",
     "GetPreferredAllocation: which devices the plugin would pick",
     "One PreferredAllocationRequest for one container, as the kubelet sends it when it\n"
     "has a choice.\n"
     "  --available ID,ID        the candidate devices (required)\n"
     "  --must-include ID,ID     devices that must be part of the answer\n"
     "  --size N                 how many devices to pick (required)\n"},
    {"prestart", KC_F_COMMON, 1, SIZE_MAX, kc_cmd_prestart, "kdpctl prestart SOCK ID...",
     "PreStartContainer with these devices",
     "Calls PreStartContainer as the kubelet does before each container start (only when\n"
     "the plugin's pre_start_required is true).\n"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const kc_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

static void main_help(FILE *f)
{
    fprintf(f,
            "kdpctl: a kubelet emulator and inspector for device-plugin authors (kdp %s)\n"
            "\n"
            "usage: kdpctl [--device-plugin-dir DIR | --kubelet-root ROOT] [--json] [--timeout D]\n"
            "              COMMAND [ARGS]\n"
            "\n"
            "commands:\n",
            kdp_version());
    for (size_t i = 0; i < N_COMMANDS; i++) {
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(f, "  %-10s %s\n", "dra", "DRA without a cluster (kdpctl dra help)");
    fprintf(f, "  %-10s %s\n", "help", "help CMD: a command's manual");
    fprintf(f, "\n"
               "SOCK is a plugin's socket: a name without '/' is looked up in the device-plugin\n"
               "directory, anything else is a path.\n"
               "\n"
               "options (before or after the command):\n" COMMON_HELP
               "  --timeout D              bound on a call (default 10s), a watch or the kubelet;\n"
               "                           D is like 500ms, 5s, 1.5s, 2m, 1h\n"
               "  -h, --help               help (kdpctl help CMD: a command's)\n"
               "\n"
               "exit status: 0 success, 1 the call failed (the gRPC status, its message and a\n"
               "hint are printed on stderr), 2 bad command line.\n");
}

static void command_help(const kc_command *c, FILE *f)
{
    fprintf(f, "usage: %s\n\nkdpctl %s: %s.\n\n%s", c->usage, c->name, c->summary, c->help);
    fprintf(f, "\noptions:\n" COMMON_HELP "  --timeout D              %s\n",
            strcmp(c->name, "kubelet") == 0 ? "run for D, then exit 0"
            : strcmp(c->name, "watch") == 0 ? "watch for D"
                                            : "bound on the call (default 10s)");
}

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kdpctl%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(kdpctl %s%s for help)\n", cmd ? "help " : "--help", cmd ? cmd : "");
    return KC_EXIT_USAGE;
}

static const struct {
    const char *name;
    unsigned bit;
} flag_table[] = {
    {"--device-plugin-dir", KC_F_DIR},
    {"--kubelet-root", KC_F_ROOT},
    {"--plugins-registry", KC_F_REGISTRY},
    {"--json", KC_F_JSON},
    {"--timeout", KC_F_TIMEOUT},
    {"--count", KC_F_COUNT},
    {"--container", KC_F_CONTAINER},
    {"--available", KC_F_AVAILABLE},
    {"--must-include", KC_F_MUST},
    {"--size", KC_F_SIZE},
    {"--endpoint-tracking", KC_F_TRACKING},
    {"--socket", KC_F_SOCKET},
    {"--resource", KC_F_RESOURCE},
    {"--device", KC_F_DEVICE},
    {"--pod", KC_F_POD},
    {"--allocatable", KC_F_ALLOCATABLE},
};

static int parse_number(const char *cmd, const char *flag, const char *v, long min, long *ret)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < min || n > INT32_MAX) {
        return usage_error(cmd, "%s wants a number >= %ld, not \"%s\"", flag, min, v);
    }
    *ret = n;
    return 0;
}

/* kdpctl pods's own flags. */
static int set_pods_flag(kc_opts *o, const char *cmd, unsigned bit, const char *v)
{
    switch (bit) {
    case KC_F_SOCKET:
        o->socket = v;
        return *v ? 0 : usage_error(cmd, "--socket wants a path");
    case KC_F_RESOURCE:
        o->resource = v;
        return *v ? 0 : usage_error(cmd, "--resource wants a resource name");
    case KC_F_DEVICE:
        o->device = v;
        return *v ? 0 : usage_error(cmd, "--device wants a device ID");
    case KC_F_POD: {
        const char *slash = strchr(v, '/');
        o->pod = v;
        return slash && slash != v && slash[1] && !strchr(slash + 1, '/')
                   ? 0
                   : usage_error(cmd, "--pod wants NAMESPACE/NAME, not \"%s\"", v);
    }
    default:
        o->allocatable = true;
        return 0;
    }
}

/* Stores the value of one flag. Returns 0 or an exit status. */
static int set_flag(kc_opts *o, const char *cmd, unsigned bit, const char *v)
{
    switch (bit) {
    case KC_F_DIR:
        o->dir = v;
        return *v ? 0 : usage_error(cmd, "--device-plugin-dir wants a directory");
    case KC_F_ROOT:
        o->root = v;
        return *v == '/' ? 0
                         : usage_error(cmd, "--kubelet-root wants an absolute path, not \"%s\"", v);
    case KC_F_REGISTRY:
        o->registry = v;
        return *v ? 0 : usage_error(cmd, "--plugins-registry wants a directory");
    case KC_F_TRACKING:
        if (strcmp(v, "socket") == 0 || strcmp(v, "resource") == 0) {
            o->tracking = *v == 'r' ? KC_TRACK_RESOURCE : KC_TRACK_SOCKET;
            return 0;
        }
        return usage_error(cmd, "--endpoint-tracking wants socket or resource, not \"%s\"", v);
    case KC_F_TIMEOUT:
        return kc_parse_duration(v, &o->timeout_us) == 0
                   ? 0
                   : usage_error(cmd, "--timeout wants a duration like 500ms, 5s or 2m, not \"%s\"",
                                 v);
    case KC_F_COUNT:
        return parse_number(cmd, "--count", v, 1, &o->count);
    case KC_F_SIZE:
        return parse_number(cmd, "--size", v, 0, &o->size);
    case KC_F_CONTAINER:
        return kc_strv_add(&o->containers, v) == 0 ? 0 : KC_EXIT_FAIL;
    case KC_F_AVAILABLE:
        o->available = v;
        return 0;
    case KC_F_SOCKET:
    case KC_F_RESOURCE:
    case KC_F_DEVICE:
    case KC_F_POD:
    case KC_F_ALLOCATABLE:
        return set_pods_flag(o, cmd, bit, v);
    case KC_F_MUST:
        o->must_include = v;
        return 0;
    default:
        o->json = true;
        return 0;
    }
}

/* argv[*i] as a flag allowed by mask: returns 0 (taken, *i past its value),
 * 1 (not a flag: a positional argument) or an exit status (> 1). */
static int take_flag(kc_opts *o, const char *cmd, unsigned mask, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    if (arg[0] != '-' || arg[1] == '\0') {
        return 1;
    }
    for (size_t f = 0; f < sizeof(flag_table) / sizeof(flag_table[0]); f++) {
        size_t n = strlen(flag_table[f].name);
        if (strncmp(arg, flag_table[f].name, n) != 0 || (arg[n] != '\0' && arg[n] != '=')) {
            continue;
        }
        if (!(mask & flag_table[f].bit)) {
            return usage_error(cmd, "%s is not an option of this command", flag_table[f].name);
        }
        const char *v = arg[n] == '=' ? arg + n + 1 : NULL;
        if (flag_table[f].bit & KC_SWITCHES) {
            return v ? usage_error(cmd, "%s takes no value", flag_table[f].name)
                     : set_flag(o, cmd, flag_table[f].bit, "");
        }
        if (!v && *i + 1 >= argc) {
            return usage_error(cmd, "%s needs a value", flag_table[f].name);
        }
        int r = set_flag(o, cmd, flag_table[f].bit, v ? v : argv[++*i]);
        return r == 0 ? 0 : r;
    }
    return usage_error(cmd, "unknown option %s", arg);
}

static int check_args(const kc_command *c, kc_opts *o)
{
    if (o->pos.n < c->min_pos) {
        return usage_error(c->name, "missing arguments: %s", c->usage);
    }
    if (o->pos.n > c->max_pos) {
        return usage_error(c->name, "unexpected argument \"%s\"", o->pos.v[c->max_pos]);
    }
    if (c->flags & KC_F_AVAILABLE) {
        if (!o->available) {
            return usage_error(c->name, "--available ID,ID... is required");
        }
        if (o->size < 0) {
            return usage_error(c->name, "--size N is required");
        }
    }
    if (!o->dir) {
        o->dir = kc_default_dir(o->root);
        if (!o->dir) {
            return usage_error(c->name, "$%s must be an absolute path", KDP_KUBELET_ROOT_ENV);
        }
    }
    return 0;
}

/* The command's own arguments; returns 0, -1 (help printed) or an exit status. */
static int parse_command(const kc_command *c, kc_opts *o, int argc, char **argv, int i)
{
    bool rest = false;
    for (; i < argc; i++) {
        if (!rest && strcmp(argv[i], "--") == 0) {
            rest = true;
            continue;
        }
        if (!rest && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)) {
            command_help(c, stdout);
            return -1;
        }
        int r = rest ? 1 : take_flag(o, c->name, c->flags, argc, argv, &i);
        if (r == 1 && kc_strv_add(&o->pos, argv[i]) < 0) {
            r = KC_EXIT_FAIL;
        }
        if (r > 1) {
            return r;
        }
    }
    return check_args(c, o);
}

static int help_command(int argc, char **argv, int i)
{
    if (i >= argc) {
        main_help(stdout);
        return KC_EXIT_OK;
    }
    const kc_command *c = find_command(argv[i]);
    if (!c) {
        return usage_error(NULL, "no such command: %s", argv[i]);
    }
    command_help(c, stdout);
    return KC_EXIT_OK;
}

int main(int argc, char **argv)
{
    kc_opts o = {.size = -1};
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            main_help(stdout);
            return KC_EXIT_OK;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("kdpctl (kdp) %s\n", kdp_version());
            return KC_EXIT_OK;
        }
        int r = take_flag(&o, NULL, KC_F_COMMON, argc, argv, &i);
        if (r > 1) {
            return r;
        }
        if (r == 1) {
            break;
        }
    }
    if (i >= argc) {
        main_help(stderr);
        return KC_EXIT_USAGE;
    }
    if (strcmp(argv[i], "help") == 0) {
        return help_command(argc, argv, i + 1);
    }
    if (strcmp(argv[i], "dra") == 0) {
#ifdef KDPCTL_DRA
        return kc_dra_main(argc - i - 1, argv + i + 1);
#else
        return usage_error(NULL, "this kdpctl is built without DRA (a static build): use a "
                                 "dynamically linked kdpctl for `kdpctl dra`");
#endif
    }
    const kc_command *c = find_command(argv[i]);
    if (!c) {
        return usage_error(NULL, "unknown command \"%s\"", argv[i]);
    }
    o.cmd = c->name;
    int r = parse_command(c, &o, argc, argv, i + 1);
    if (r == 0) {
        r = c->run(&o);
    }
    kc_strv_free(&o.pos);
    kc_strv_free(&o.containers);
    return r < 0 ? KC_EXIT_OK : r;
}
