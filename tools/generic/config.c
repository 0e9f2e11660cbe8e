/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's configuration (docs/generic.md): the file, read with
 * libyaml's document loader and walked with yamlwalk.c, which names the
 * file, the line and the key in every error ("config.yaml:7:
 * resources[0].count: must be a positive integer"). Here, the top-level
 * keys (resources, root, sysfs, cdiDir), the checks across resources, each
 * resource's fingerprint, and freeing; a resource's keys are
 * config_resource.c's, its devices: config_devices.c's, its health:
 * config_health.c's. Each table of fields has an enum of its fields, so
 * that a check reads "seen & YW_BIT(TOP_RESOURCES)" rather than a bare bit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/yamldepth.h"
#include "config_devices.h"
#include "config_dra.h"
#include "config_health.h"
#include "config_resource.h"
#include "yamlwalk.h"

#define SCALAR_BUDGET 200000 /* scalars copied per load, aliases included */

/* ---- the file ---- */

typedef struct top {
    gen_config *cfg;
    gen_rparse *rps;
    char *root;
    char *sysfs;
    char *cdi_dir;
    char *kubeconfig;
} top;

static int f_resources(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    top *t = obj;
    if (yw_check_list(c, v, key, 1, GEN_MAX_RESOURCES) < 0) {
        return -1;
    }
    size_t n = yw_list_len(v);
    t->cfg->res = calloc(n, sizeof(*t->cfg->res));
    t->rps = calloc(n, sizeof(*t->rps));
    if (!t->cfg->res || !t->rps) {
        return yw_oom(c, v, key);
    }
    t->cfg->n_res = n;
    for (size_t i = 0; i < n; i++) {
        char sub[YW_KEYLEN];
        yw_item_key(sub, key, i);
        t->rps[i].r = &t->cfg->res[i];
        if (gen_resource_parse(c, yw_node_at(c, v->data.sequence.items.start[i]), sub, &t->rps[i]) <
            0) {
            return -1;
        }
    }
    return 0;
}

static int f_root(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((top *)obj)->root);
}

static int f_sysfs(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((top *)obj)->sysfs);
}

static int f_cdi_dir(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((top *)obj)->cdi_dir);
}

static int f_kubeconfig(yw_ctx *c, yaml_node_t *v, const char *key, void *obj)
{
    return yw_get_path(c, v, key, GEN_MAX_STRING, &((top *)obj)->kubeconfig);
}

enum { TOP_RESOURCES, TOP_ROOT, TOP_SYSFS, TOP_CDI_DIR, TOP_KUBECONFIG, TOP_FIELDS };
static const yw_field top_fields[TOP_FIELDS] = {
    [TOP_RESOURCES] = {"resources", f_resources},
    [TOP_ROOT] = {"root", f_root},
    [TOP_SYSFS] = {"sysfs", f_sysfs},
    [TOP_CDI_DIR] = {"cdiDir", f_cdi_dir},
    [TOP_KUBECONFIG] = {"kubeconfig", f_kubeconfig},
};

/* Names, sockets and CDI kinds must be unique across resources. */
static int check_unique(yw_ctx *c, const top *t)
{
    const gen_config *cfg = t->cfg;
    for (size_t j = 1; j < cfg->n_res; j++) {
        const gen_resource *b = &cfg->res[j];
        for (size_t i = 0; i < j; i++) {
            const gen_resource *a = &cfg->res[i];
            char key[YW_KEYLEN];
            if (strcmp(a->name, b->name) == 0) {
                snprintf(key, sizeof(key), "resources[%zu].name", j);
                return yw_fail(c, t->rps[j].name_node, key,
                               "duplicate resource name \"%s\" (also resources[%zu])", b->name, i);
            }
            if (strcmp(a->socket, b->socket) == 0) {
                snprintf(key, sizeof(key), "resources[%zu].socket", j);
                return yw_fail(c, t->rps[j].socket_node, key,
                               "socket \"%s\" is also used by resources[%zu]", b->socket, i);
            }
            if (a->dra.set && b->dra.set && strcmp(a->dra.driver, b->dra.driver) == 0) {
                snprintf(key, sizeof(key), "resources[%zu].dra.driver", j);
                return yw_fail(c, t->rps[j].dra_node, key,
                               "DRA driver \"%s\" is also resources[%zu]'s", b->dra.driver, i);
            }
            if (a->cdi && b->cdi && strcmp(a->cdi_kind, b->cdi_kind) == 0) {
                snprintf(key, sizeof(key), "resources[%zu].cdi", j);
                return yw_fail(c, t->rps[j].cdi_node, key,
                               "CDI kind \"%s\" is also used by resources[%zu]", b->cdi_kind, i);
            }
        }
    }
    return 0;
}

static void put_field(FILE *f, const char *s)
{
    fputs(s ? s : "\x1e", f);
    fputc('\x1f', f);
}

static char *fingerprint(const gen_resource *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        return NULL;
    }
    const char *strs[] = {r->name,  r->socket,  r->permissions, r->root,
                          r->sysfs, r->cdi_dir, r->cdi_kind,    r->kubeconfig};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        put_field(f, strs[i]);
    }
    fprintf(f, "%u\x1f%d\x1f%d\x1f%d\x1f%d\x1f", r->count, r->cdi, r->cdi_device_specs,
            r->preferred, r->one_per_container);
    for (size_t i = 0; i < r->n_entries; i++) {
        gen_entry_fingerprint(f, &r->entries[i]);
    }
    for (size_t i = 0; i < r->n_mounts; i++) {
        fprintf(f, "mount\x1f%d\x1f", r->mounts[i].read_only);
        put_field(f, r->mounts[i].host_path);
        put_field(f, r->mounts[i].container_path);
    }
    for (size_t i = 0; i < r->n_env; i++) {
        put_field(f, "env");
        put_field(f, r->env[i].key);
        put_field(f, r->env[i].value);
    }
    gen_health_fingerprint(f, &r->health);
    gen_dra_fingerprint(f, &r->dra);
    fprintf(f, "shared\x1f%zu\x1f%u\x1f", r->n_shared, r->rescan_ms);
    for (size_t i = 0; i < r->n_shared; i++) {
        put_field(f, r->shared[i]);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The global settings go into each resource (and its fingerprint). */
static int finish_config(yw_ctx *c, top *t, yaml_node_t *root_node)
{
    const char *dflt[3] = {"/", "/sys", "/var/run/cdi"};
    char **src[3] = {&t->root, &t->sysfs, &t->cdi_dir};
    for (size_t i = 0; i < t->cfg->n_res; i++) {
        gen_resource *r = &t->cfg->res[i];
        char **dst[3] = {&r->root, &r->sysfs, &r->cdi_dir};
        for (size_t k = 0; k < 3; k++) {
            *dst[k] = strdup(*src[k] ? *src[k] : dflt[k]);
            if (!*dst[k]) {
                return yw_oom(c, root_node, "");
            }
        }
        if (t->kubeconfig && !(r->kubeconfig = strdup(t->kubeconfig))) {
            return yw_oom(c, root_node, "");
        }
        r->fingerprint = fingerprint(r);
        if (!r->fingerprint) {
            return yw_oom(c, root_node, "");
        }
    }
    return check_unique(c, t);
}

static int walk(yw_ctx *c, gen_config *cfg)
{
    yaml_node_t *root = yaml_document_get_root_node(&c->doc);
    if (!root) {
        return yw_fail(c, NULL, "", "the file is empty: expected a mapping with a resources: list");
    }
    if (root->type != YAML_MAPPING_NODE) {
        return yw_fail(c, root, "", "expected a mapping with a resources: list, not %s",
                       yw_type_name(root));
    }
    top t = {.cfg = cfg};
    unsigned seen = 0;
    int r = yw_parse_map(c, root, "", top_fields, TOP_FIELDS, &t, &seen);
    if (r == 0 && !(seen & YW_BIT(TOP_RESOURCES))) {
        r = yw_fail(c, root, "resources", "is required");
    }
    if (r == 0) {
        r = finish_config(c, &t, root);
    }
    free(t.rps);
    free(t.root);
    free(t.sysfs);
    free(t.cdi_dir);
    free(t.kubeconfig);
    return r;
}

/* Reads the whole file (a regular file, capped). */
static int read_file(yw_ctx *c, unsigned char **ret, size_t *ret_len)
{
    int fd = open(c->file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        return yw_fail(c, NULL, "", "cannot read the file: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size > (off_t)GEN_MAX_FILE_BYTES) {
        close(fd);
        return yw_fail(c, NULL, "", "must be a regular file of at most %u bytes",
                       GEN_MAX_FILE_BYTES);
    }
    unsigned char *buf = malloc((size_t)st.st_size + 1);
    ssize_t n = buf ? read(fd, buf, (size_t)st.st_size + 1) : -1;
    close(fd);
    if (n < 0 || (size_t)n > (size_t)st.st_size) {
        free(buf);
        return yw_fail(c, NULL, "", "cannot read the file%s", n < 0 ? "" : ": it changed size");
    }
    *ret = buf;
    *ret_len = (size_t)n;
    return 0;
}

static int syntax_error(yw_ctx *c, const yaml_parser_t *p)
{
    if (p->error == YAML_MEMORY_ERROR) {
        return yw_fail(c, NULL, "", "out of memory");
    }
    const yaml_mark_t *m = p->problem ? &p->problem_mark : &p->context_mark;
    char ctx[256] = "";
    if (p->context) {
        snprintf(ctx, sizeof(ctx), " (%s, line %zu)", p->context, p->context_mark.line + 1);
    }
    yaml_node_t at = {.start_mark = *m};
    return yw_fail(c, &at, "", "YAML syntax error: %s%s", p->problem ? p->problem : "invalid YAML",
                   ctx);
}

int gen_config_load(const char *file, const char *dp_dir, gen_config *out, char **err)
{
    memset(out, 0, sizeof(*out));
    *err = NULL;
    yw_ctx c = {.file = file, .dp_dir = dp_dir, .budget = SCALAR_BUDGET};
    unsigned char *buf = NULL;
    size_t len = 0;
    if (read_file(&c, &buf, &len) < 0) {
        *err = c.err;
        return -1;
    }
    size_t deep_line = 0;
    if (kdp__yaml_flow_depth((const char *)buf, len, KDP__YAML_MAX_FLOW_DEPTH, &deep_line) < 0) {
        yaml_mark_t m = {.line = deep_line - 1};
        yaml_node_t at = {.start_mark = m};
        (void)yw_fail(&c, &at, "", "[ and { nest deeper than %u levels here",
                      KDP__YAML_MAX_FLOW_DEPTH);
        free(buf);
        *err = c.err;
        return -1;
    }
    yaml_parser_t parser;
    int r = -1;
    if (!yaml_parser_initialize(&parser)) {
        r = yw_fail(&c, NULL, "", "out of memory");
    } else {
        yaml_parser_set_input_string(&parser, buf, len);
        if (!yaml_parser_load(&parser, &c.doc)) {
            r = syntax_error(&c, &parser);
        } else {
            r = walk(&c, out);
            yaml_document_delete(&c.doc);
        }
        yaml_parser_delete(&parser);
    }
    free(buf);
    if (r < 0) {
        gen_config_free(out);
        *err = c.err;
        return -1;
    }
    return 0;
}

/* ---- freeing ---- */

void gen_resource_clear(gen_resource *r)
{
    for (size_t i = 0; i < r->n_entries; i++) {
        gen_entry_clear(&r->entries[i]);
    }
    free(r->entries);
    for (size_t i = 0; i < r->n_mounts; i++) {
        free(r->mounts[i].host_path);
        free(r->mounts[i].container_path);
    }
    free(r->mounts);
    for (size_t i = 0; i < r->n_env; i++) {
        free(r->env[i].key);
        free(r->env[i].value);
    }
    free(r->env);
    gen_health_clear(&r->health);
    for (size_t i = 0; i < r->n_shared; i++) {
        free(r->shared[i]);
    }
    free(r->shared);
    gen_dra_clear(&r->dra);
    char *strs[] = {r->name,  r->socket,  r->permissions, r->cdi_kind,   r->root,
                    r->sysfs, r->cdi_dir, r->kubeconfig,  r->fingerprint};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        free(strs[i]);
    }
    memset(r, 0, sizeof(*r));
}

void gen_config_free(gen_config *c)
{
    for (size_t i = 0; i < c->n_res; i++) {
        gen_resource_clear(&c->res[i]);
    }
    free(c->res);
    memset(c, 0, sizeof(*c));
}
