/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's health: section: each key with its check, the defaults
 * kdp applies left as 0, and the errors naming the key and the fix.
 */
#include "config_health.h"

#include <kdp.h>
#include <stdlib.h>
#include <string.h>

/* kdp's bounds on the interval (kdp_config.probe_interval_ms). */
#define INTERVAL_MIN_MS 100U
#define INTERVAL_MAX_MS 86400000U
#define AFTER_MAX       1000U

const char *gen_health_template_error(const char *s)
{
    static const char *const names[] = {"{path}", "{name}", "{id}"};
    for (const char *p = strchr(s, '{'); p; p = strchr(p + 1, '{')) {
        bool ok = false;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !ok; i++) {
            ok = strncmp(p, names[i], strlen(names[i])) == 0;
        }
        if (!ok) {
            return "has an unknown placeholder: use {path} (the device's first node), {name} "
                   "(its base name) or {id} (the device's ID)";
        }
    }
    return strchr(s, '}') && !strchr(s, '{') ? "has a '}' without its '{'" : NULL;
}

static int f_interval(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_duration(c, v, key, INTERVAL_MIN_MS, INTERVAL_MAX_MS, "100ms to 24h (1440m)",
                           &((gen_health *)obj)->interval_ms);
}

static int f_timeout(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_duration(c, v, key, 100, GEN_HEALTH_MAX_TIMEOUT_MS,
                           "100ms to 9s (below kdp's 10 s callback deadline)",
                           &((gen_health *)obj)->timeout_ms);
}

static int f_unhealthy_after(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_count(c, v, key, AFTER_MAX, &((gen_health *)obj)->unhealthy_after);
}

static int f_healthy_after(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_count(c, v, key, AFTER_MAX, &((gen_health *)obj)->healthy_after);
}

static int f_on_down(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    const char *s = yw_text(c, v, key, 16, false);
    if (!s) {
        return -1;
    }
    gen_health *h = obj;
    if (strcmp(s, "unhealthy") == 0) {
        h->on_down = KDP_PROBE_DOWN_UNHEALTHY;
    } else if (strcmp(s, "keep") == 0) {
        h->on_down = KDP_PROBE_DOWN_KEEP;
    } else {
        return yw_fail(c, v, key,
                       "must be \"unhealthy\" (every device Unhealthy while the check cannot "
                       "tell) or \"keep\" (their last state), not \"%s\"",
                       s);
    }
    return 0;
}

static int f_node_exists(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_bool(c, v, key, &((gen_health *)obj)->node_exists);
}

static int f_file(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_health *h = obj;
    if (yw_get_path(c, v, key, GEN_MAX_STRING, &h->file) < 0) {
        return -1;
    }
    const char *why = gen_health_template_error(h->file);
    return why ? yw_fail(c, v, key, "%s", why) : 0;
}

static int f_command(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    gen_health *h = obj;
    if (v->type == YAML_SCALAR_NODE) {
        return yw_fail(c, v, key,
                       "must be a list: the program and its arguments, no shell (e.g. "
                       "[\"/usr/local/bin/check\", \"{path}\"])");
    }
    if (yw_check_list(c, v, key, 1, GEN_MAX_ARGV) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    h->command = calloc(n + 1, sizeof(*h->command));
    if (!h->command) {
        return yw_oom(c, v, key);
    }
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        yaml_node_t *item = yw_node_at(c, v->data.sequence.items.start[i]);
        if (yw_dup_text(c, item, sub, GEN_MAX_STRING, &h->command[i]) < 0) {
            return -1;
        }
        h->n_command++;
        const char *why = gen_health_template_error(h->command[i]);
        if (why) {
            return yw_fail(c, item, sub, "%s", why);
        }
        if (i == 0 && h->command[0][0] != '/') {
            return yw_fail(c, item, sub,
                           "must be the program's absolute path (no $PATH search, no shell), "
                           "not \"%s\"",
                           h->command[0]);
        }
    }
    return 0;
}

enum {
    H_INTERVAL,
    H_UNHEALTHY_AFTER,
    H_HEALTHY_AFTER,
    H_ON_DOWN,
    H_NODE_EXISTS,
    H_FILE,
    H_COMMAND,
    H_TIMEOUT,
    H_FIELDS
};
static const yw_field health_fields[H_FIELDS] = {
    [H_INTERVAL] = {"interval", f_interval},
    [H_UNHEALTHY_AFTER] = {"unhealthyAfter", f_unhealthy_after},
    [H_HEALTHY_AFTER] = {"healthyAfter", f_healthy_after},
    [H_ON_DOWN] = {"onProbeDown", f_on_down},
    [H_NODE_EXISTS] = {"nodeExists", f_node_exists},
    [H_FILE] = {"file", f_file},
    [H_COMMAND] = {"command", f_command},
    [H_TIMEOUT] = {"timeout", f_timeout},
};

int gen_health_parse(yw_ctx *c, yaml_node_t *n, const char *key, gen_health *h)
{
    if (n->type != YAML_MAPPING_NODE) {
        return yw_fail(c, n, key,
                       "must be a mapping (e.g. {nodeExists: true, interval: 10s}), not %s",
                       yw_type_name(n));
    }
    h->set = true;
    h->node_exists = true;
    unsigned seen = 0;
    if (yw_parse_map(c, n, key, health_fields, H_FIELDS, h, &seen) < 0) {
        return -1;
    }
    if (!h->node_exists && !h->file && !h->command) {
        return yw_fail(c, n, key,
                       "checks nothing: keep nodeExists (the default), or set file or command");
    }
    if ((seen & YW_BIT(H_TIMEOUT)) && !h->command) {
        char sub[YW_KEYLEN];
        yw_subkey(sub, key, "timeout");
        return yw_fail(c, n, sub, "is the command's deadline: set command too, or remove it");
    }
    return 0;
}

void gen_health_fingerprint(FILE *f, const gen_health *h)
{
    fprintf(f, "health\x1f%d\x1f%u\x1f%u\x1f%u\x1f%d\x1f%d\x1f%u\x1f", h->set, h->interval_ms,
            h->unhealthy_after, h->healthy_after, h->on_down, h->node_exists, h->timeout_ms);
    fprintf(f, "%s\x1f", h->file ? h->file : "\x1e");
    for (size_t i = 0; i < h->n_command; i++) {
        fprintf(f, "arg\x1f%s\x1f", h->command[i]);
    }
}

void gen_health_clear(gen_health *h)
{
    free(h->file);
    for (size_t i = 0; i < h->n_command; i++) {
        free(h->command[i]);
    }
    free((void *)h->command);
    memset(h, 0, sizeof(*h));
}
