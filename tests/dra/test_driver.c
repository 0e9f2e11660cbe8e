/* SPDX-License-Identifier: MIT */
/*
 * kdp-test-dra-driver: a DRA driver for tests/dra, with the knobs the
 * gopher example has no business having. Devices dev-0 .. dev-<N-1>, each
 * with a host node /dev/null (so that a claim gets the default node).
 *
 *   kdp-test-dra-driver --kubelet-root ROOT --kubeconfig FILE --driver NAME
 *       --node NODE --cdi-dir DIR [--devices N] [--prepare-delay-ms MS]
 *       [--fail-unprepare-file FILE] [--callback-timeout-ms MS]
 *       [--slow-describe-file FILE] [--device-plugin-too] [--device-plugin-dir DIR]
 *       [--concurrent-claims N] [--no-health-v1alpha1] [--probe-fail-file FILE]
 *       [--unhealthy-taint noschedule|noexecute|none|informational] [--taints-file FILE]
 *       [--describe-file FILE] [--status good|bad] [--status-update-file FILE]
 *       [--resource NAME] [--metrics-address ADDR] [--claim-edits DIR]
 *       [--device-metadata]
 *       [--binding-conditions A,B --binding-failure-conditions F,G] [--binds-to-node]
 *       [--bind ok|fail|later]
 *
 * Without --device-plugin-too the driver is DRA only, made with
 * kdp_dra_driver_new (--resource: a device-plugin name given to it all the
 * same, which it refuses); with it, a plugin (example.com/testdra on
 * testdra.sock) with DRA enabled.
 * --fail-unprepare-file: while FILE exists, the unprepare op fails.
 * --slow-describe-file: while FILE exists, the describe op sleeps 1.5 s.
 * --probe-fail-file: health checks every 100 ms (Unhealthy after 2
 * failures, Healthy after 2 successes); dev-0's fails while FILE exists,
 * every device's answers DOWN while FILE starts with "down".
 * --taints-file: the author's taints, set at each listing (the file's
 * directory is watched: write a new file and move it in), one per line
 * "ID KEY VALUE EFFECT" (VALUE "-": none; EFFECT noschedule, noexecute,
 * informational, or a number); kdp_plugin_set_dra_taints' result is said
 * on stderr ("test-dra-driver: taints dev-0: 0").
 * --binding-conditions, --binding-failure-conditions (comma-separated
 * condition types), --binds-to-node: each device declares them
 * (kdp_dra_device_set_binding_conditions; a refusal fails the describe op,
 * said on stderr: "test-dra-driver: binding conditions dev-0: -22").
 * --describe-file: each device gets a string attribute "firmware", FILE's
 * first word ("fail": the describe op fails); the file's directory is
 * watched, and each listing asks kdp_plugin_redescribe_dra for dev-1 and
 * for an unknown ID "nope", saying the results ("test-dra-driver:
 * redescribe dev-1: 0").
 * --status: prepare gives each device a status in the claim (a Ready
 * condition, data, network data); "bad": one with a reason the API
 * refuses, so kdp_dra_prepared_set_status refuses it; each result is said
 * ("test-dra-driver: status dev-0: 0").
 * --status-update-file: at each listing (its directory watched), each line
 * "UID DEVICE REASON [IP]" sets that device's status in the prepared claim
 * UID (kdp_plugin_set_dra_device_status: a Ready condition, False, REASON;
 * with IP, network data: interface net0 and that address),
 * the result said ("test-dra-driver: status update dev-0: 0").
 * --bind: a bind op (kdp_dra_ops.bind): "ok" sets each device's binding
 * conditions "True" from the callback (kdp_plugin_set_dra_device_status,
 * reason Attached), "fail" fails it (kdp_plugin_set_error: "no fabric
 * port"), "later" returns 0 and leaves them (the test sets them through
 * --status-update-file); each call said ("test-dra-driver: bind UID dev-0
 * ...", and "status bind dev-0: 0"); its unbind op says "unbind UID dev-0".
 * Each prepare and unprepare call is said on stderr ("test-dra-driver:
 * prepare UID"), so that tests count them.
 */
#include <errno.h>
#include <kdp_dra.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned prepare_delay_ms;
static atomic_uint running; /* prepares running now */
static const char *fail_unprepare_file;
static const char *slow_describe_file;
static const char *probe_fail_file;
static const char *taints_file;
static const char *describe_file;
static const char *status_mode;
static const char *claim_edits;
static const char *status_update_file;
static const char *bind_mode;

/* --binding-conditions and --binding-failure-conditions, split at ',' */
static char *bind_text[2];
static const char *bind_lists[2][8];
static size_t n_bind[2];
static bool binds_to_node;

static void split_list(size_t which, char *v)
{
    bind_text[which] = v;
    n_bind[which] = 0;
    for (char *save = NULL, *t = strtok_r(v, ",", &save); t && n_bind[which] < 8;
         t = strtok_r(NULL, ",", &save)) {
        bind_lists[which][n_bind[which]++] = t;
    }
}

static int describe_binding(const kdp_device *d, kdp_dra_device *out)
{
    if (!bind_text[0] && !bind_text[1] && !binds_to_node) {
        return 0;
    }
    int r = kdp_dra_device_set_binding_conditions(out, bind_lists[0], n_bind[0], bind_lists[1],
                                                  n_bind[1], binds_to_node);
    fprintf(stderr, "test-dra-driver: binding conditions %s: %d\n", d->id, r);
    return r;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int describe(kdp_plugin *p, const kdp_device *d, kdp_dra_device *out, void *ud)
{
    (void)p;
    (void)ud;
    if (slow_describe_file && access(slow_describe_file, F_OK) == 0) {
        sleep_ms(1500);
    }
    int r = describe_binding(d, out);
    if (r < 0 || !describe_file) {
        return r;
    }
    char fw[32] = "none";
    FILE *f = fopen(describe_file, "re");
    if (f) {
        if (fscanf(f, "%31s", fw) != 1) {
            snprintf(fw, sizeof(fw), "empty");
        }
        fclose(f);
    }
    if (strcmp(fw, "fail") == 0) {
        return -EIO;
    }
    kdp_dra_attr a = {.name = "firmware", .type = KDP_DRA_ATTR_STRING, .string_value = fw};
    return kdp_dra_device_add_attr(out, &a);
}

static int probe(kdp_plugin *p, const kdp_device *d, void *ud)
{
    (void)ud;
    char what[16] = "";
    FILE *f = fopen(probe_fail_file, "re");
    if (!f) {
        return KDP_PROBE_HEALTHY;
    }
    if (!fgets(what, sizeof(what), f)) {
        what[0] = '\0';
    }
    fclose(f);
    if (strncmp(what, "down", 4) == 0) {
        kdp_plugin_set_error(p, "the test's health library is down");
        return KDP_PROBE_DOWN;
    }
    if (strcmp(d->id, "dev-0") == 0) {
        /* not UTF-8: the health stream's message must be, whatever the author says */
        kdp_plugin_set_error(p, "the test's probe fails at 95\xb0"
                                "C");
        return KDP_PROBE_UNHEALTHY;
    }
    return KDP_PROBE_HEALTHY;
}

static kdp_dra_taint_effect effect_of(const char *s)
{
    return strcmp(s, "noschedule") == 0      ? KDP_DRA_TAINT_NO_SCHEDULE
           : strcmp(s, "noexecute") == 0     ? KDP_DRA_TAINT_NO_EXECUTE
           : strcmp(s, "informational") == 0 ? KDP_DRA_TAINT_INFORMATIONAL
           : strcmp(s, "none") == 0          ? KDP_DRA_TAINT_NONE
                                             : (kdp_dra_taint_effect)atoi(s);
}

/* Device id's taints from the taints file, set (none if it has none). */
static void set_taints(kdp_plugin *p, const char *id)
{
    enum { MAX = KDP_DRA_MAX_TAINTS + 2 }; /* room for one too many */
    char keys[MAX][400];
    char values[MAX][100];
    kdp_dra_taint t[MAX];
    size_t n = 0;
    FILE *f = fopen(taints_file, "re");
    char line[600];
    while (f && n < MAX && fgets(line, sizeof(line), f)) {
        char lid[64];
        char eff[32];
        if (sscanf(line, "%63s %399s %99s %31s", lid, keys[n], values[n], eff) == 4 &&
            strcmp(lid, id) == 0) {
            t[n] = (kdp_dra_taint){.key = keys[n],
                                   .value = strcmp(values[n], "-") == 0 ? NULL : values[n],
                                   .effect = effect_of(eff)};
            n++;
        }
    }
    if (f) {
        fclose(f);
    }
    fprintf(stderr, "test-dra-driver: taints %s: %d\n", id, kdp_plugin_set_dra_taints(p, id, t, n));
}

/* The status updates the file asks for. */
static void update_statuses(kdp_plugin *p)
{
    FILE *f = fopen(status_update_file, "re");
    char uid[64];
    char dev[64];
    char reason[64];
    char ip[64];
    char line[300];
    while (f && fgets(line, sizeof(line), f)) {
        int k = sscanf(line, "%63s %63s %63s %63s", uid, dev, reason, ip);
        if (k < 3) {
            continue;
        }
        kdp_dra_condition c = {.type = "Ready", .status = "False", .reason = reason};
        const char *ips[1] = {ip};
        kdp_dra_device_status st = {.conditions = &c,
                                    .n_conditions = 1,
                                    .interface_name = k == 4 ? "net0" : NULL,
                                    .ips = k == 4 ? ips : NULL,
                                    .n_ips = k == 4 ? 1 : 0};
        fprintf(stderr, "test-dra-driver: status update %s: %d\n", dev,
                kdp_plugin_set_dra_device_status(p, uid, dev, NULL, &st));
    }
    if (f) {
        fclose(f);
    }
}

static int list(kdp_plugin *p, kdp_device_list *out, void *ud)
{
    unsigned n = *(unsigned *)ud;
    if (status_update_file) {
        update_statuses(p);
    }
    if (describe_file) {
        fprintf(stderr, "test-dra-driver: redescribe dev-1: %d\n",
                kdp_plugin_redescribe_dra(p, "dev-1"));
        fprintf(stderr, "test-dra-driver: redescribe nope: %d\n",
                kdp_plugin_redescribe_dra(p, "nope"));
    }
    for (unsigned i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "dev-%u", i);
        kdp_device d = {.id = id, .health = KDP_HEALTHY, .host_path = "/dev/null"};
        if (taints_file) {
            set_taints(p, id);
        }
        int r = kdp_device_list_add(out, &d);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* --status: each device's status in the claim; "bad": one the API would
 * refuse, refused at the call. */
static void set_status(const kdp_dra_claim *c, kdp_dra_prepared *out)
{
    for (size_t i = 0; i < c->n_devices; i++) {
        char msg[128];
        char data[128];
        char ip[32];
        char ifname[32];
        snprintf(msg, sizeof(msg), "device %s ready", c->devices[i].device);
        snprintf(data, sizeof(data), "{\"claim\": \"%s\", \"index\": %zu}", c->ref.uid, i);
        snprintf(ip, sizeof(ip), "10.0.0.%zu/24", i + 1);
        snprintf(ifname, sizeof(ifname), "net%zu", i);
        kdp_dra_condition cond = {.type = "Ready",
                                  .status = "True",
                                  .reason =
                                      strcmp(status_mode, "bad") == 0 ? "not ok!" : "Prepared",
                                  .message = msg};
        const char *ips[1] = {ip};
        kdp_dra_device_status st = {.conditions = &cond,
                                    .n_conditions = 1,
                                    .data = data,
                                    .interface_name = ifname,
                                    .ips = ips,
                                    .n_ips = 1,
                                    .hardware_address = "02:00:00:00:00:01"};
        fprintf(stderr, "test-dra-driver: status %s: %d\n", c->devices[i].device,
                kdp_dra_prepared_set_status(out, i, &st));
    }
}

/* --claim-edits DIR: the whole claim gets CLAIM_UID=<uid> and DIR mounted at
 * /run/claim; each device its own variable and DIR/<device> read-only at
 * /opt/<device>. */
static int add_claim_edits(const kdp_dra_claim *c, kdp_dra_prepared *out)
{
    char host[512];
    int r = kdp_dra_prepared_add_env(out, KDP_DRA_CLAIM, "CLAIM_UID", c->ref.uid);
    if (r == 0) {
        r = kdp_dra_prepared_add_mount(out, KDP_DRA_CLAIM, "/run/claim", claim_edits, false);
    }
    for (size_t i = 0; r == 0 && i < c->n_devices; i++) {
        char ctr[300];
        snprintf(host, sizeof(host), "%s/%s", claim_edits, c->devices[i].device);
        snprintf(ctr, sizeof(ctr), "/opt/%s", c->devices[i].device);
        r = kdp_dra_prepared_add_mount(out, i, ctr, host, true);
    }
    return r;
}

static int prepare(kdp_plugin *p, const kdp_dra_claim *c, kdp_dra_prepared *out, void *ud)
{
    (void)p;
    (void)ud;
    unsigned now = atomic_fetch_add(&running, 1) + 1;
    fprintf(stderr, "test-dra-driver: prepare %s (%u running)\n", c->ref.uid, now);
    sleep_ms(prepare_delay_ms);
    if (status_mode) {
        set_status(c, out);
    }
    int r = claim_edits ? add_claim_edits(c, out) : 0;
    atomic_fetch_sub(&running, 1);
    return r;
}

/* --bind: the claim's devices wait for their binding conditions. */
static int bind(kdp_plugin *p, const kdp_dra_claim *c, void *ud)
{
    (void)ud;
    fprintf(stderr, "test-dra-driver: bind %s", c->ref.uid);
    for (size_t i = 0; i < c->n_devices; i++) {
        fprintf(stderr, " %s", c->devices[i].device);
    }
    fprintf(stderr, "\n");
    if (strcmp(bind_mode, "fail") == 0) {
        kdp_plugin_set_error(p, "no fabric port for %s", c->devices[0].device);
        return -EIO;
    }
    for (size_t i = 0; strcmp(bind_mode, "ok") == 0 && i < c->n_devices; i++) {
        const kdp_dra_alloc *a = &c->devices[i];
        kdp_dra_condition conds[4];
        for (size_t k = 0; k < a->n_binding_conditions && k < 4; k++) {
            conds[k] = (kdp_dra_condition){.type = a->binding_conditions[k],
                                           .status = "True",
                                           .reason = "Attached",
                                           .message = "attached by the test driver"};
        }
        kdp_dra_device_status st = {.conditions = conds,
                                    .n_conditions =
                                        a->n_binding_conditions < 4 ? a->n_binding_conditions : 4};
        fprintf(stderr, "test-dra-driver: status bind %s: %d\n", a->device,
                kdp_plugin_set_dra_device_status(p, c->ref.uid, a->device, a->share_id, &st));
    }
    return 0;
}

/* --bind: the allocation ended. */
static int unbind(kdp_plugin *p, const kdp_dra_claim *c, void *ud)
{
    (void)p;
    (void)ud;
    fprintf(stderr, "test-dra-driver: unbind %s", c->ref.uid);
    for (size_t i = 0; i < c->n_devices; i++) {
        fprintf(stderr, " %s", c->devices[i].device);
    }
    fprintf(stderr, "\n");
    return 0;
}

static int unprepare(kdp_plugin *p, const kdp_dra_claim *c, void *ud)
{
    (void)ud;
    fprintf(stderr, "test-dra-driver: unprepare %s\n", c->ref.uid);
    if (fail_unprepare_file && access(fail_unprepare_file, F_OK) == 0) {
        kdp_plugin_set_error(p, "unprepare of %s refused by the test", c->ref.uid);
        return -EBUSY;
    }
    return 0;
}

int main(int argc, char **argv)
{
    kdp_config cfg = {.resource_name = "example.com/testdra",
                      .socket_name = "testdra.sock",
                      .callback_timeout_ms = 30000};
    kdp_dra_config dc = {0};
    const char *resource = NULL;
    const char *metrics = NULL;
    unsigned n = 4;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i];
        if (strcmp(k, "--device-plugin-too") == 0 || strcmp(k, "--no-health-v1alpha1") == 0 ||
            strcmp(k, "--device-metadata") == 0 || strcmp(k, "--binds-to-node") == 0) {
            dc.device_plugin_too |= strcmp(k, "--device-plugin-too") == 0;
            dc.no_health_v1alpha1 |= strcmp(k, "--no-health-v1alpha1") == 0;
            dc.device_metadata |= strcmp(k, "--device-metadata") == 0;
            binds_to_node |= strcmp(k, "--binds-to-node") == 0;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kdp-test-dra-driver: %s needs a value\n", k);
            return 2;
        }
        const char *v = argv[i + 1];
        if (strcmp(k, "--kubelet-root") == 0) {
            cfg.kubelet_root = v;
        } else if (strcmp(k, "--kubeconfig") == 0) {
            dc.kubeconfig = v;
        } else if (strcmp(k, "--driver") == 0) {
            dc.driver_name = v;
        } else if (strcmp(k, "--node") == 0) {
            dc.node_name = v;
        } else if (strcmp(k, "--cdi-dir") == 0) {
            dc.cdi_dir = v;
        } else if (strcmp(k, "--devices") == 0) {
            n = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(k, "--prepare-delay-ms") == 0) {
            prepare_delay_ms = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(k, "--fail-unprepare-file") == 0) {
            fail_unprepare_file = v;
        } else if (strcmp(k, "--callback-timeout-ms") == 0) {
            cfg.callback_timeout_ms = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(k, "--slow-describe-file") == 0) {
            slow_describe_file = v;
        } else if (strcmp(k, "--device-plugin-dir") == 0) {
            cfg.device_plugin_dir = v;
        } else if (strcmp(k, "--probe-fail-file") == 0) {
            probe_fail_file = v;
            cfg.probe_interval_ms = 100;
            cfg.probe_unhealthy_after = 2;
            cfg.probe_healthy_after = 2;
        } else if (strcmp(k, "--unhealthy-taint") == 0) {
            dc.unhealthy_taint = effect_of(v);
        } else if (strcmp(k, "--taints-file") == 0) {
            taints_file = v;
        } else if (strcmp(k, "--describe-file") == 0) {
            describe_file = v;
        } else if (strcmp(k, "--status") == 0) {
            status_mode = v;
        } else if (strcmp(k, "--status-update-file") == 0) {
            status_update_file = v;
        } else if (strcmp(k, "--concurrent-claims") == 0) {
            dc.concurrent_claims = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(k, "--bind") == 0) {
            bind_mode = v;
        } else if (strcmp(k, "--binding-conditions") == 0) {
            split_list(0, argv[i + 1]);
        } else if (strcmp(k, "--binding-failure-conditions") == 0) {
            split_list(1, argv[i + 1]);
        } else if (strcmp(k, "--claim-edits") == 0) {
            claim_edits = v;
        } else if (strcmp(k, "--resource") == 0) {
            resource = v;
        } else if (strcmp(k, "--metrics-address") == 0) {
            metrics = v;
        } else if (strcmp(k, "--cdi-mode") == 0) {
            dc.cdi_mode = (unsigned)strtoul(v, NULL, 8);
        } else {
            fprintf(stderr, "kdp-test-dra-driver: unknown flag %s\n", k);
            return 2;
        }
    }
    kdp_log_set(KDP_LOG_INFO, NULL, NULL);
    kdp_ops ops = {.list = list, .probe = probe_fail_file ? probe : NULL};
    kdp_dra_ops dops = {.describe = describe,
                        .prepare = prepare,
                        .unprepare = unprepare,
                        .bind = bind_mode ? bind : NULL,
                        .unbind = bind_mode ? unbind : NULL};
    kdp_plugin *p;
    if (!dc.device_plugin_too) {
        /* DRA only: no device-plugin name (--resource: one anyway, refused) */
        cfg.resource_name = resource;
        cfg.socket_name = NULL;
        if (kdp_dra_driver_new(NULL, &cfg, &ops, &dc, &dops, &n, &p) < 0) {
            return 1;
        }
    } else if (kdp_plugin_new(NULL, &cfg, &ops, &n, &p) < 0) {
        return 1;
    } else if (kdp_plugin_enable_dra(p, &dc, &dops) < 0) {
        kdp_plugin_free(p);
        return 1;
    }
    if (metrics && kdp_ctx_serve_metrics(kdp_plugin_get_ctx(p), metrics) < 0) {
        kdp_plugin_free(p);
        return 1;
    }
    const char *watched = taints_file     ? taints_file
                          : describe_file ? describe_file
                                          : status_update_file;
    if (watched) {
        char dir[512];
        snprintf(dir, sizeof(dir), "%s", watched);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = '\0';
        }
        if (kdp_plugin_watch_path(p, dir, 0, NULL) < 0) {
            kdp_plugin_free(p);
            return 1;
        }
    }
    int r = kdp_plugin_run(p);
    kdp_plugin_free(p);
    return r == 0 ? 0 : 1;
}
