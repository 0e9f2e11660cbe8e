/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "failmalloc.h"
#include "k8s/kconfig.h"

static char dir[256];

static void put(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *path_of(const char *name)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return path;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/kdp-test-kconfig-XXXXXX");
    assert_non_null(mkdtemp(dir));
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv(KDP__KCONFIG_SA_DIR_ENV);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Loads name from dir; wants err; returns the config (or NULL). */
static kdp__kconfig *load(const char *name, int want, const char *why_has)
{
    kdp__kconfig *kc = NULL;
    char why[512] = "";
    int r = kdp__kconfig_load(name ? path_of(name) : NULL, &kc, why, sizeof(why));
    if (r != want || (why_has && !strstr(why, why_has))) {
        print_error("load %s: %d (want %d) why=\"%s\" (want \"%s\")\n", name ? name : "(env)", r,
                    want, why, why_has ? why_has : "");
    }
    assert_int_equal(r, want);
    if (why_has) {
        assert_non_null(strstr(why, why_has));
    }
    return kc;
}

#define HEAD                                                                                       \
    "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"                                         \
    "contexts:\n- name: other\n  context: {cluster: nowhere, user: nobody}\n"                      \
    "- name: dev\n  context:\n    cluster: c1\n    user: u1\n"

static void test_token_and_ca_file(void **state)
{
    (void)state;
    put("ca.crt", "PEM");
    put("kc", HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443/\n"
                   "    certificate-authority: ca.crt\n"
                   "users:\n- name: u1\n  user:\n    token: abc.def\n");
    kdp__kconfig *kc = load("kc", 0, NULL);
    assert_string_equal(kc->server, "https://127.0.0.1:6443");
    assert_string_equal(kc->ca_file, path_of("ca.crt"));
    assert_string_equal(kc->token, "abc.def");
    assert_null(kc->token_file);
    assert_null(kc->cert_file);
    char want[600];
    snprintf(want, sizeof(want), "kubeconfig %s (context dev)", path_of("kc"));
    assert_string_equal(kc->source, want);
    kdp__kconfig_free(kc);
}

static void test_data_and_client_cert(void **state)
{
    (void)state;
    /* "CA PEM", "CERT", "KEY" in base64, one split over two lines */
    put("kc", HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h:1\n"
                   "    certificate-authority-data: Q0EgUEVN\n"
                   "users:\n- name: u1\n  user:\n    client-certificate-data: \"Q0VS\\nVA==\"\n"
                   "    client-key-data: S0VZ\n");
    kdp__kconfig *kc = load("kc", 0, NULL);
    assert_int_equal(kc->ca_len, 6);
    assert_string_equal(kc->ca_data, "CA PEM");
    assert_string_equal(kc->cert_data, "CERT");
    assert_string_equal(kc->key_data, "KEY");
    assert_null(kc->token);
    kdp__kconfig_free(kc);
}

static void test_files_and_token_file(void **state)
{
    (void)state;
    put("tok", "  secret-token\n");
    put("c.pem", "C");
    put("k.pem", "K");
    put("kc", HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h:1\n"
                   "users:\n- name: u1\n  user:\n    tokenFile: tok\n"
                   "    client-certificate: c.pem\n    client-key: k.pem\n");
    kdp__kconfig *kc = load("kc", 0, NULL);
    assert_null(kc->ca_file);
    assert_null(kc->ca_data);
    assert_string_equal(kc->token_file, path_of("tok"));
    assert_string_equal(kc->cert_file, path_of("c.pem"));
    assert_string_equal(kc->key_file, path_of("k.pem"));
    char *t = NULL;
    char why[256];
    assert_int_equal(kdp__kconfig_read_token(kc->token_file, &t, why, sizeof(why)), 0);
    assert_string_equal(t, "secret-token");
    free(t);
    kdp__kconfig_free(kc);
}

static void test_kubeconfig_env(void **state)
{
    (void)state;
    put("kc2", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://env:2'}\n"
                    "users:\n- name: u1\n  user: {token: t}\n");
    char list[700];
    snprintf(list, sizeof(list), "%s:/nonexistent", path_of("kc2"));
    setenv("KUBECONFIG", list, 1);
    kdp__kconfig *kc = load(NULL, 0, NULL);
    assert_string_equal(kc->server, "https://env:2");
    kdp__kconfig_free(kc);
    unsetenv("KUBECONFIG");
}

static void test_kubeconfig_errors(void **state)
{
    (void)state;
    put("nocur", "apiVersion: v1\nclusters: []\n");
    assert_null(load("nocur", -EINVAL, "no current-context in"));
    assert_null(load("nocur", -EINVAL, "kubectl config use-context"));
    put("noctx", "current-context: x\ncontexts: []\n");
    assert_null(load("noctx", -EINVAL, "current-context x is not in contexts"));
    put("nocl", HEAD "clusters: []\n");
    assert_null(load("nocl", -EINVAL, "cluster c1, which is not in clusters"));
    put("nosrv", HEAD "clusters:\n- name: c1\n  cluster: {}\n");
    assert_null(load("nosrv", -EINVAL, "has no server"));
    put("insec", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h', "
                      "insecure-skip-tls-verify: true}\n");
    assert_null(load("insec", -EINVAL, "insecure-skip-tls-verify is not supported"));
    put("exec", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h'}\n"
                     "users:\n- name: u1\n  user: {exec: {command: x}}\n");
    assert_null(load("exec", -EINVAL, "exec or auth-provider"));
    put("half", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h'}\n"
                     "users:\n- name: u1\n  user: {client-certificate-data: Q0VS}\n");
    assert_null(load("half", -EINVAL, "client certificate without its key"));
    put("nouser", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h'}\nusers: []\n");
    assert_null(load("nouser", -EINVAL, "user u1, which is not in users"));
    put("badca", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h', "
                      "certificate-authority: missing.crt}\n");
    assert_null(load("badca", -ENOENT, "certificate-authority"));
    put("bad64", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h', "
                      "certificate-authority-data: '!!'}\n");
    assert_null(load("bad64", -EINVAL, "not base64"));
    put("yaml", "current-context: [x\n");
    assert_null(load("yaml", -EINVAL, "not valid YAML"));
    put("list", "- a\n- b\n");
    assert_null(load("list", -EINVAL, "not a kubeconfig"));
    put("ftp", HEAD "clusters:\n- name: c1\n  cluster: {server: 'ftp://h'}\n");
    assert_null(load("ftp", -EINVAL, "not an https:// URL"));
    put("http", HEAD "clusters:\n- name: c1\n  cluster: {server: 'http://h:8080'}\n");
    assert_null(load("http", -EINVAL, "not an https:// URL"));
    /* no host (fuzz_kconfig's second finding: "https://" became "https:") */
    put("nohost", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://'}\n");
    assert_null(load("nohost", -EINVAL, "has no host"));
    put("nohost2", HEAD "clusters:\n- name: c1\n  cluster: {server: 'https:///x'}\n");
    assert_null(load("nohost2", -EINVAL, "has no host"));
    assert_null(load("absent", -ENOENT, "cannot read the kubeconfig"));
    /* 100,000 nested brackets (finding: 42 s in libyaml's scanner): refused
     * by the pre-scan, at once */
    size_t n = 100000;
    char *deep = malloc(2 * n + 32);
    assert_non_null(deep);
    size_t o = (size_t)sprintf(deep, "\nclusters: ");
    memset(deep + o, '[', n);
    memset(deep + o + n, ']', n);
    strcpy(deep + o + 2 * n, "\n");
    put("deep", deep);
    free(deep);
    assert_null(load("deep", -EINVAL, "line 2 nests [ and { deeper than 64 levels"));
    char ok64[160];
    o = (size_t)sprintf(ok64, "a: ");
    memset(ok64 + o, '[', 64);
    ok64[o + 64] = 'x';
    memset(ok64 + o + 65, ']', 64);
    strcpy(ok64 + o + 129, "\n");
    put("deep64", ok64);
    assert_null(load("deep64", -EINVAL, "no current-context")); /* 64 deep: read */
}

/* ---- credentials: wiped when freed, the process not dumpable ---- */

#define SECRET_TOKEN "kdp-secret-token-4242"
#define SECRET_KEY   "KEY-MATERIAL-4242"
static int secrets_seen;

static void look_for_secrets(const void *p, size_t size)
{
    if (memmem(p, size, SECRET_TOKEN, strlen(SECRET_TOKEN)) ||
        memmem(p, size, SECRET_KEY, strlen(SECRET_KEY))) {
        secrets_seen++;
    }
}

static void test_secrets_wiped(void **state)
{
    (void)state;
    if (!oom_works()) {
        skip(); /* the sanitizers' allocators: no free hook */
    }
    /* client-key-data: base64 of "-----BEGIN KEY-----KEY-MATERIAL-4242-----END KEY-----" */
    put("secret",
        HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://h'}\n"
             "users:\n- name: u1\n  user: {token: " SECRET_TOKEN ", "
             "client-certificate-data: Q0VSVA==, client-key-data: "
             "LS0tLS1CRUdJTiBLRVktLS0tLUtFWS1NQVRFUklBTC00MjQyLS0tLS1FTkQgS0VZLS0tLS0=}\n");
    put("satoken", "  " SECRET_TOKEN "\n");
    secrets_seen = 0;
    free_hook = look_for_secrets;
    kdp__kconfig *kc = load("secret", 0, NULL);
    assert_non_null(kc);
    assert_non_null(strstr(kc->token, SECRET_TOKEN));
    assert_int_equal(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0); /* holding a token */
    kdp__kconfig_free(kc);
    char tok_path[300];
    snprintf(tok_path, sizeof(tok_path), "%s/satoken", dir);
    char *tok = NULL;
    char why[256];
    assert_int_equal(kdp__kconfig_read_token(tok_path, &tok, why, sizeof(why)), 0);
    assert_string_equal(tok, SECRET_TOKEN);
    free(tok); /* the caller's copy: seen, as it should be */
    free_hook = NULL;
    assert_int_equal(secrets_seen, 1); /* only the caller's own copy, freed as is */
}

static void test_in_cluster(void **state)
{
    (void)state;
    assert_null(load(NULL, -ENOENT, "set $KUBECONFIG"));
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    setenv(KDP__KCONFIG_SA_DIR_ENV, dir, 1);
    /* no token yet */
    assert_null(load(NULL, -ENOENT, "service account token mounted"));
    put("token", "tok1\n");
    assert_null(load(NULL, -ENOENT, "cannot read the CA"));
    put("ca.crt", "PEM");
    kdp__kconfig *kc = load(NULL, 0, NULL);
    assert_string_equal(kc->server, "https://10.96.0.1:443");
    assert_string_equal(kc->token_file, path_of("token"));
    assert_string_equal(kc->ca_file, path_of("ca.crt"));
    assert_string_equal(kc->source, "in-cluster");
    assert_null(kc->token);
    kdp__kconfig_free(kc);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    kc = load(NULL, 0, NULL);
    assert_string_equal(kc->server, "https://[fd00::1]:443");
    kdp__kconfig_free(kc);
    put("token", "\n \n");
    assert_null(load(NULL, -ENODATA, "is empty"));
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv(KDP__KCONFIG_SA_DIR_ENV);
}

static void test_token_file_errors(void **state)
{
    (void)state;
    char *t = NULL;
    char why[256];
    assert_int_equal(kdp__kconfig_read_token(path_of("nope"), &t, why, sizeof(why)), -ENOENT);
    assert_non_null(strstr(why, "nope"));
    put("two", "a b\n");
    assert_int_equal(kdp__kconfig_read_token(path_of("two"), &t, why, sizeof(why)), -EINVAL);
    assert_int_equal(kdp__kconfig_read_token(dir, &t, why, sizeof(why)), -EISDIR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_token_and_ca_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_and_client_cert, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_and_token_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secrets_wiped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_file_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
