/* SPDX-License-Identifier: MIT */
/* kconfig: kubeconfig files and the in-cluster environment (see kconfig.h). */
#include "k8s/kconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "base/secret.h"
#include "base/yamldepth.h"
#include "k8s/kfile.h"

static int say(char *why, size_t why_len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int say(char *why, size_t why_len, int err, const char *fmt, ...)
{
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return err;
}

void kdp__kconfig_free(kdp__kconfig *kc)
{
    if (!kc) {
        return;
    }
    free(kc->server);
    free(kc->ca_file);
    free(kc->ca_data);
    kdp__secret_free_str(kc->token);
    free(kc->token_file);
    free(kc->cert_file);
    free(kc->key_file);
    free(kc->cert_data);
    kdp__secret_free(kc->key_data, kc->key_len);
    free(kc->source);
    free(kc);
}

int kdp__kconfig_read_token(const char *path, char **ret, char *why, size_t why_len)
{
    char *buf = NULL;
    int r = kdp__kfile_read(path, &buf, NULL);
    if (r < 0 || !buf) {
        r = r < 0 ? r : -ENOMEM;
        return say(why, why_len, r, "cannot read the token file %s: %s", path, strerror(-r));
    }
    char *s = buf;
    while (isspace((unsigned char)*s)) {
        s++;
    }
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1])) {
        n--;
    }
    s[n] = '\0';
    if (n == 0) {
        kdp__secret_free_str(buf);
        return say(why, why_len, -ENODATA, "the token file %s is empty", path);
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x21 || s[i] > 0x7e) {
            kdp__secret_free(buf, (size_t)(s - buf) + n);
            return say(why, why_len, -EINVAL,
                       "the token file %s holds more than one line of printable characters", path);
        }
    }
    char *t = strdup(s);
    kdp__secret_free(buf, (size_t)(s - buf) + n);
    if (!t) {
        return -ENOMEM;
    }
    *ret = t;
    return 0;
}

/* --- YAML navigation (libyaml's document API) --- */

static yaml_node_t *map_get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) {
        return NULL;
    }
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE &&
            strcmp((const char *)k->data.scalar.value, key) == 0) {
            return yaml_document_get_node(doc, p->value);
        }
    }
    return NULL;
}

/* A scalar's text, NULL if absent; "" when not a scalar (flagged). */
static const char *scalar(yaml_node_t *n, bool *not_scalar)
{
    if (!n) {
        return NULL;
    }
    if (n->type != YAML_SCALAR_NODE) {
        *not_scalar = true;
        return NULL;
    }
    return (const char *)n->data.scalar.value;
}

/* The entry named `name` of a list of {name: ..., <kind>: {...}}: its
 * <kind> mapping. */
static yaml_node_t *named(yaml_document_t *doc, yaml_node_t *root, const char *list,
                          const char *kind, const char *name)
{
    yaml_node_t *seq = map_get(doc, root, list);
    if (!seq || seq->type != YAML_SEQUENCE_NODE) {
        return NULL;
    }
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(doc, *it);
        bool ns = false;
        const char *n = scalar(map_get(doc, e, "name"), &ns);
        if (n && strcmp(n, name) == 0) {
            yaml_node_t *m = map_get(doc, e, kind);
            return m && m->type == YAML_MAPPING_NODE ? m : NULL;
        }
    }
    return NULL;
}

/* --- building the configuration --- */

struct kload {
    const char *file; /* the kubeconfig */
    char *dir;        /* its directory, for relative paths */
    yaml_document_t *doc;
    kdp__kconfig *kc;
    char *why;
    size_t why_len;
};

static int dup_into(char **dst, const char *s)
{
    *dst = strdup(s);
    return *dst ? 0 : -ENOMEM;
}

/* A path from the kubeconfig, relative ones against its directory. */
static int path_into(struct kload *ld, char **dst, const char *key, const char *p)
{
    if (!*p) {
        return say(ld->why, ld->why_len, -EINVAL, "%s: %s is empty: give a file's path", ld->file,
                   key);
    }
    if (p[0] == '/') {
        return dup_into(dst, p);
    }
    size_t n = strlen(ld->dir) + strlen(p) + 2;
    *dst = malloc(n);
    if (!*dst) {
        return -ENOMEM;
    }
    snprintf(*dst, n, "%s/%s", ld->dir, p);
    return 0;
}

/* A file's contents must be readable now (a clear error at start rather
 * than at the first call). */
static int check_readable(struct kload *ld, const char *key, const char *path)
{
    if (!path) {
        return -EINVAL;
    }
    if (access(path, R_OK) < 0) {
        int r = -errno;
        return say(ld->why, ld->why_len, r == -ENOENT ? -ENOENT : -EACCES, "%s: %s %s: %s",
                   ld->file, key, path, strerror(-r));
    }
    return 0;
}

static int data_into(struct kload *ld, char **dst, size_t *len, const char *key, const char *b64)
{
    int r = kdp__kfile_base64(b64, dst, len);
    if (r == -EINVAL || (r == 0 && *len == 0)) {
        return say(ld->why, ld->why_len, -EINVAL, "%s: %s is not base64-encoded PEM data", ld->file,
                   key);
    }
    return r;
}

static int cluster(struct kload *ld, yaml_node_t *c, const char *name)
{
    bool ns = false;
    const char *server = scalar(map_get(ld->doc, c, "server"), &ns);
    const char *ca = scalar(map_get(ld->doc, c, "certificate-authority"), &ns);
    const char *ca_data = scalar(map_get(ld->doc, c, "certificate-authority-data"), &ns);
    const char *insecure = scalar(map_get(ld->doc, c, "insecure-skip-tls-verify"), &ns);
    if (ns) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: cluster %s: server, certificate-authority[-data] and "
                   "insecure-skip-tls-verify must be plain values",
                   ld->file, name);
    }
    if (!server || !*server) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: cluster %s has no server: set one with kubectl config set-cluster %s "
                   "--server=https://HOST:PORT",
                   ld->file, name, name);
    }
    if (strncmp(server, "https://", 8) != 0) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: cluster %s: server %s is not an https:// URL (kdp talks to the API "
                   "server over TLS only)",
                   ld->file, name, server);
    }
    if (insecure && (strcmp(insecure, "true") == 0 || strcmp(insecure, "True") == 0)) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: cluster %s: insecure-skip-tls-verify is not supported (kdp always "
                   "verifies the API server): give certificate-authority or "
                   "certificate-authority-data instead",
                   ld->file, name);
    }
    int r = dup_into(&ld->kc->server, server);
    size_t n = r == 0 ? strlen(ld->kc->server) : 0;
    while (n > 0 && ld->kc->server[n - 1] == '/') {
        ld->kc->server[--n] = '\0';
    }
    if (r == 0 && (n <= 8 || ld->kc->server[8] == '/')) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: cluster %s: server %s has no host: set one with kubectl config "
                   "set-cluster %s --server=https://HOST:PORT",
                   ld->file, name, server, name);
    }
    if (r == 0 && ca_data) {
        r = data_into(ld, &ld->kc->ca_data, &ld->kc->ca_len, "certificate-authority-data", ca_data);
    } else if (r == 0 && ca) {
        r = path_into(ld, &ld->kc->ca_file, "certificate-authority", ca);
        if (r == 0) {
            r = check_readable(ld, "certificate-authority", ld->kc->ca_file);
        }
    }
    return r;
}

/* key (a file, checked readable) or key-data (base64 PEM, preferred);
 * neither is fine. */
static int file_or_data(struct kload *ld, const char *key, const char *file, const char *data,
                        char **ret_file, char **ret_data, size_t *ret_len)
{
    char data_key[64];
    snprintf(data_key, sizeof(data_key), "%s-data", key);
    if (data && ret_data) {
        return data_into(ld, ret_data, ret_len, data_key, data);
    }
    if (!file || !ret_file) {
        return 0;
    }
    int r = path_into(ld, ret_file, key, file);
    return r < 0 ? r : check_readable(ld, key, *ret_file);
}

static int user(struct kload *ld, yaml_node_t *u, const char *name)
{
    bool ns = false;
    yaml_document_t *d = ld->doc;
    const char *token = scalar(map_get(d, u, "token"), &ns);
    const char *token_file = scalar(map_get(d, u, "tokenFile"), &ns);
    const char *cert = scalar(map_get(d, u, "client-certificate"), &ns);
    const char *cert_data = scalar(map_get(d, u, "client-certificate-data"), &ns);
    const char *key = scalar(map_get(d, u, "client-key"), &ns);
    const char *key_data = scalar(map_get(d, u, "client-key-data"), &ns);
    if (ns) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: user %s: token, tokenFile and client-* must be plain values", ld->file,
                   name);
    }
    if (map_get(d, u, "exec") || map_get(d, u, "auth-provider")) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: user %s uses an exec or auth-provider plugin, which kdp does not run: "
                   "give a token, tokenFile or client certificate",
                   ld->file, name);
    }
    if (map_get(d, u, "username") || map_get(d, u, "password")) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: user %s uses a username and password (basic auth, removed from "
                   "Kubernetes): give a token or client certificate",
                   ld->file, name);
    }
    int r = token
                ? dup_into(&ld->kc->token, token)
                : file_or_data(ld, "tokenFile", token_file, NULL, &ld->kc->token_file, NULL, NULL);
    if (r == 0) {
        r = file_or_data(ld, "client-certificate", cert, cert_data, &ld->kc->cert_file,
                         &ld->kc->cert_data, &ld->kc->cert_len);
    }
    if (r == 0) {
        r = file_or_data(ld, "client-key", key, key_data, &ld->kc->key_file, &ld->kc->key_data,
                         &ld->kc->key_len);
    }
    if (r < 0) {
        return r;
    }
    bool has_cert = ld->kc->cert_file || ld->kc->cert_data;
    bool has_key = ld->kc->key_file || ld->kc->key_data;
    if (has_cert != has_key) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: user %s has a client %s without its %s: give both", ld->file, name,
                   has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
    }
    return 0;
}

static int from_doc(struct kload *ld)
{
    yaml_document_t *d = ld->doc;
    yaml_node_t *root = yaml_document_get_root_node(d);
    if (!root || root->type != YAML_MAPPING_NODE) {
        return say(ld->why, ld->why_len, -EINVAL, "%s is not a kubeconfig (no YAML mapping)",
                   ld->file);
    }
    bool ns = false;
    const char *ctx = scalar(map_get(d, root, "current-context"), &ns);
    if (!ctx || !*ctx) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "no current-context in %s: set one with kubectl config use-context", ld->file);
    }
    yaml_node_t *c = named(d, root, "contexts", "context", ctx);
    if (!c) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: current-context %s is not in contexts: kubectl config get-contexts "
                   "lists them",
                   ld->file, ctx);
    }
    const char *cl = scalar(map_get(d, c, "cluster"), &ns);
    const char *us = scalar(map_get(d, c, "user"), &ns);
    if (!cl || !*cl) {
        return say(ld->why, ld->why_len, -EINVAL, "%s: context %s names no cluster", ld->file, ctx);
    }
    yaml_node_t *cn = named(d, root, "clusters", "cluster", cl);
    if (!cn) {
        return say(ld->why, ld->why_len, -EINVAL,
                   "%s: context %s names cluster %s, which is not in clusters", ld->file, ctx, cl);
    }
    int r = cluster(ld, cn, cl);
    if (r < 0) {
        return r;
    }
    if (us && *us) {
        yaml_node_t *un = named(d, root, "users", "user", us);
        if (!un) {
            return say(ld->why, ld->why_len, -EINVAL,
                       "%s: context %s names user %s, which is not in users", ld->file, ctx, us);
        }
        r = user(ld, un, us);
        if (r < 0) {
            return r;
        }
    }
    size_t n = strlen(ld->file) + strlen(ctx) + 32;
    ld->kc->source = malloc(n);
    if (!ld->kc->source) {
        return -ENOMEM;
    }
    snprintf(ld->kc->source, n, "kubeconfig %s (context %s)", ld->file, ctx);
    return 0;
}

/* Zeroes every scalar of the document before libyaml frees it. */
static void wipe_scalars(yaml_document_t *doc)
{
    for (yaml_node_t *n = doc->nodes.start; n < doc->nodes.top; n++) {
        if (n->type == YAML_SCALAR_NODE && n->data.scalar.value) {
            explicit_bzero(n->data.scalar.value, n->data.scalar.length);
        }
    }
}

static int load_file(const char *file, kdp__kconfig *kc, char *why, size_t why_len)
{
    char *text = NULL;
    size_t len = 0;
    int r = kdp__kfile_read(file, &text, &len);
    if (r < 0) {
        return say(why, why_len,
                   r == -ENOENT   ? -ENOENT
                   : r == -ENOMEM ? -ENOMEM
                                  : -EACCES,
                   "cannot read the kubeconfig %s: %s", file, strerror(-r));
    }
    struct kload ld = {.file = file, .kc = kc, .why = why, .why_len = why_len};
    const char *slash = strrchr(file, '/');
    ld.dir = slash ? strndup(file, slash == file ? 1 : (size_t)(slash - file)) : strdup(".");
    yaml_parser_t parser;
    yaml_document_t doc;
    bool have_parser = false, have_doc = false;
    if (!ld.dir || !yaml_parser_initialize(&parser)) {
        r = -ENOMEM;
        goto out;
    }
    have_parser = true;
    size_t deep_line = 0;
    if (kdp__yaml_flow_depth(text, len, KDP__YAML_MAX_FLOW_DEPTH, &deep_line) < 0) {
        r = say(why, why_len, -EINVAL,
                "%s: line %zu nests [ and { deeper than %u levels: not a kubeconfig", file,
                deep_line, KDP__YAML_MAX_FLOW_DEPTH);
        goto out;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        r = say(why, why_len, -EINVAL, "%s is not valid YAML: %s at line %zu, column %zu", file,
                parser.problem ? parser.problem : "error", parser.problem_mark.line + 1,
                parser.problem_mark.column + 1);
        goto out;
    }
    have_doc = true;
    ld.doc = &doc;
    r = from_doc(&ld);
out:
    if (have_doc) {
        wipe_scalars(&doc); /* a token or a key among them */
        yaml_document_delete(&doc);
    }
    if (have_parser) {
        /* its copies of the text: the raw input chunk and the decoded one */
        if (parser.raw_buffer.start) {
            explicit_bzero(parser.raw_buffer.start,
                           (size_t)(parser.raw_buffer.end - parser.raw_buffer.start));
        }
        if (parser.buffer.start) {
            explicit_bzero(parser.buffer.start, (size_t)(parser.buffer.end - parser.buffer.start));
        }
        yaml_parser_delete(&parser);
    }
    free(ld.dir);
    kdp__secret_free(text, len);
    return r;
}

static int load_in_cluster(kdp__kconfig *kc, char *why, size_t why_len)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        return say(why, why_len, -ENOENT,
                   "no API server configuration: not in a cluster (KUBERNETES_SERVICE_HOST/_PORT "
                   "unset) and no kubeconfig: set $KUBECONFIG to a kubeconfig file, or run in a "
                   "pod with a service account");
    }
    if (strpbrk(host, "/ \t@") || strpbrk(port, "/ \t@")) {
        return say(why, why_len, -EINVAL, "KUBERNETES_SERVICE_HOST or _PORT is malformed");
    }
    const char *dir = getenv(KDP__KCONFIG_SA_DIR_ENV);
    if (!dir || !*dir) {
        dir = KDP__KCONFIG_SA_DIR;
    }
    size_t n = strlen(host) + strlen(port) + 16;
    kc->server = malloc(n);
    size_t pn = strlen(dir) + 16;
    kc->token_file = malloc(pn);
    kc->ca_file = malloc(pn);
    kc->source = strdup("in-cluster");
    if (!kc->server || !kc->token_file || !kc->ca_file || !kc->source) {
        return -ENOMEM;
    }
    bool v6 = strchr(host, ':') != NULL;
    snprintf(kc->server, n, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    snprintf(kc->token_file, pn, "%s/token", dir);
    snprintf(kc->ca_file, pn, "%s/ca.crt", dir);
    char *tok = NULL;
    int r = kdp__kconfig_read_token(kc->token_file, &tok, why, why_len);
    if (r < 0) {
        size_t used = why ? strlen(why) : 0;
        if (why && used < why_len) {
            snprintf(why + used, why_len - used,
                     " (in-cluster: is the service account token mounted? "
                     "automountServiceAccountToken must not be false)");
        }
        return r;
    }
    free(tok);
    if (access(kc->ca_file, R_OK) < 0) {
        r = -errno;
        return say(why, why_len, r == -ENOENT ? -ENOENT : -EACCES,
                   "in-cluster: cannot read the CA %s: %s", kc->ca_file, strerror(-r));
    }
    return 0;
}

int kdp__kconfig_load(const char *kubeconfig, kdp__kconfig **ret, char *why, size_t why_len)
{
    if (!ret) {
        return -EINVAL;
    }
    if (why && why_len) {
        why[0] = '\0';
    }
    kdp__kconfig *kc = calloc(1, sizeof(*kc));
    if (!kc) {
        return -ENOMEM;
    }
    char *first = NULL;
    const char *env = getenv("KUBECONFIG");
    if (!kubeconfig && env && *env) {
        /* a ':' list: the first file (kdp reads one file, not a merge) */
        first = strndup(env, strcspn(env, ":"));
        if (!first) {
            kdp__kconfig_free(kc);
            return -ENOMEM;
        }
        kubeconfig = first;
    }
    int r =
        kubeconfig ? load_file(kubeconfig, kc, why, why_len) : load_in_cluster(kc, why, why_len);
    free(first);
    if (r < 0) {
        if (r == -ENOMEM) {
            say(why, why_len, r, "out of memory loading the API server's configuration");
        }
        kdp__kconfig_free(kc);
        return r;
    }
    if (kc->token || kc->token_file || kc->key_data || kc->key_file) {
        kdp__secret_held(); /* no core file with the token or the key in it */
    }
    *ret = kc;
    return 0;
}
