/* SPDX-License-Identifier: MIT */
/*
 * kconfig: where the API server is and how to authenticate to it, from a
 * kubeconfig file (its current context) or from the in-cluster environment
 * (a pod's service account). Loaded once; the token file is re-read by the
 * API client (kdp__kconfig_read_token) as it rotates. The files and the
 * base64 data themselves are read by k8s/kfile.h.
 *
 * Supported: server; certificate-authority[-data]; token, tokenFile;
 * client-certificate[-data] and client-key[-data]. Refused with a message
 * saying so: insecure-skip-tls-verify (kdp always verifies the server),
 * exec and auth-provider plugins, username/password.
 *
 * Threading: none (pure data once loaded; load reads files).
 */
#ifndef KDP_K8S_KCONFIG_H
#define KDP_K8S_KCONFIG_H

#include <stddef.h>

/* The in-cluster service account's directory ($KDP_SERVICEACCOUNT_DIR
 * overrides it, for tests). */
#define KDP__KCONFIG_SA_DIR     "/var/run/secrets/kubernetes.io/serviceaccount"
#define KDP__KCONFIG_SA_DIR_ENV "KDP_SERVICEACCOUNT_DIR"

typedef struct kdp__kconfig {
    char *server; /* "https://host:port" (no trailing '/') */
    /* The CA that signs the server's certificate: a file, or PEM data
     * (certificate-authority-data, decoded); both NULL = the system's. */
    char *ca_file;
    char *ca_data;
    size_t ca_len;
    /* A bearer token: fixed, or read from token_file (re-read as it
     * rotates). Both NULL with a client certificate. */
    char *token;
    char *token_file;
    /* A client certificate and key (PEM): files or data. */
    char *cert_file;
    char *key_file;
    char *cert_data;
    size_t cert_len;
    char *key_data;
    size_t key_len;
    /* For log lines: "kubeconfig /x (context y)" or "in-cluster". */
    char *source;
} kdp__kconfig;

/* Loads a configuration: from the kubeconfig file `kubeconfig`; with NULL,
 * from $KUBECONFIG if set (the first file of a ':' list), else the
 * in-cluster environment ($KUBERNETES_SERVICE_HOST/_PORT, the service
 * account's token and ca.crt). Returns 0, or -errno and a line in why
 * naming the file, the key and the fix: -ENOENT (no such file; not in a
 * cluster and no kubeconfig), -EINVAL (malformed or unsupported), -EACCES
 * (unreadable), -ENOMEM. *ret untouched on failure. A configuration with
 * a token or a client key makes the process non-dumpable (base/secret.h);
 * kdp__kconfig_free wipes them. */
int kdp__kconfig_load(const char *kubeconfig, kdp__kconfig **ret, char *why, size_t why_len);
void kdp__kconfig_free(kdp__kconfig *kc);

/* Reads the token file (whitespace around it removed) into *ret (malloc'd).
 * Returns 0, or -errno with why: -ENOENT, -EACCES, -ENODATA (empty),
 * -EINVAL (not one line of printable characters), -ENOMEM. */
int kdp__kconfig_read_token(const char *path, char **ret, char *why, size_t why_len);

#endif
