/* SPDX-License-Identifier: MIT */
/* kdp_kubelet_paths_get: the kubelet root, its subdirectories, and which
 * setting wins. */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <kdp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char last_error[512];
static int n_errors;

static void sink(kdp_log_level level, const char *msg, void *ud)
{
    (void)ud;
    if (level == KDP_LOG_ERROR) {
        snprintf(last_error, sizeof(last_error), "%s", msg);
        n_errors++;
    }
}

static int setup(void **state)
{
    (void)state;
    unsetenv(KDP_KUBELET_ROOT_ENV);
    unsetenv(KDP_DEVICE_PLUGIN_DIR_ENV);
    kdp_log_set(KDP_LOG_ERROR, sink, NULL);
    n_errors = 0;
    last_error[0] = '\0';
    return 0;
}

static void test_defaults(void **state)
{
    (void)state;
    kdp_kubelet_paths p;
    assert_int_equal(kdp_kubelet_paths_get(NULL, NULL, &p), 0);
    assert_string_equal(p.root, "/var/lib/kubelet");
    assert_string_equal(p.device_plugin_dir, KDP_DEVICE_PLUGIN_DIR);
    assert_string_equal(p.plugins_registry_dir, "/var/lib/kubelet/plugins_registry");
    assert_string_equal(p.pod_resources_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
    assert_string_equal(p.root_from, "the default");
    assert_string_equal(p.device_plugin_dir_from, "the kubelet's constant");
    /* "" is "not set", as NULL */
    setenv(KDP_KUBELET_ROOT_ENV, "", 1);
    setenv(KDP_DEVICE_PLUGIN_DIR_ENV, "", 1);
    assert_int_equal(kdp_kubelet_paths_get("", "", &p), 0);
    assert_string_equal(p.device_plugin_dir, KDP_DEVICE_PLUGIN_DIR);
}

static void test_root_from_env_and_config(void **state)
{
    (void)state;
    kdp_kubelet_paths p;
    setenv(KDP_KUBELET_ROOT_ENV, "/var/snap/microk8s/common/var/lib/kubelet//", 1);
    assert_int_equal(kdp_kubelet_paths_get(NULL, NULL, &p), 0);
    assert_string_equal(p.root, "/var/snap/microk8s/common/var/lib/kubelet");
    /* the kubelet's --root-dir does not move it: neither does kdp */
    assert_string_equal(p.device_plugin_dir, KDP_DEVICE_PLUGIN_DIR);
    assert_string_equal(p.plugins_registry_dir,
                        "/var/snap/microk8s/common/var/lib/kubelet/plugins_registry");
    assert_string_equal(p.pod_resources_socket,
                        "/var/snap/microk8s/common/var/lib/kubelet/pod-resources/kubelet.sock");
    assert_string_equal(p.root_from, "$KDP_KUBELET_ROOT");
    /* the config's root wins over the environment's */
    assert_int_equal(kdp_kubelet_paths_get("/k", NULL, &p), 0);
    assert_string_equal(p.root, "/k");
    assert_string_equal(p.plugins_registry_dir, "/k/plugins_registry");
    assert_string_equal(p.device_plugin_dir, KDP_DEVICE_PLUGIN_DIR);
    assert_string_equal(p.root_from, "kdp_config.kubelet_root");
    /* "/" as the root */
    assert_int_equal(kdp_kubelet_paths_get("///", NULL, &p), 0);
    assert_string_equal(p.root, "/");
    assert_string_equal(p.plugins_registry_dir, "/plugins_registry");
    assert_string_equal(p.pod_resources_socket, "/pod-resources/kubelet.sock");
}

static void test_directory_settings(void **state)
{
    (void)state;
    kdp_kubelet_paths p;
    setenv(KDP_KUBELET_ROOT_ENV, "/r", 1);
    setenv(KDP_DEVICE_PLUGIN_DIR_ENV, "/dp/", 1);
    assert_int_equal(kdp_kubelet_paths_get("/k", NULL, &p), 0);
    assert_string_equal(p.device_plugin_dir, "/dp");
    assert_string_equal(p.device_plugin_dir_from, "$KDP_DEVICE_PLUGIN_DIR");
    assert_string_equal(p.plugins_registry_dir, "/k/plugins_registry"); /* still the root's */
    assert_int_equal(kdp_kubelet_paths_get("/k", "/mine", &p), 0);
    assert_string_equal(p.device_plugin_dir, "/mine");
    assert_string_equal(p.device_plugin_dir_from, "kdp_config.device_plugin_dir");
}

static void test_invalid(void **state)
{
    (void)state;
    kdp_kubelet_paths p;
    assert_int_equal(kdp_kubelet_paths_get(NULL, NULL, NULL), -EINVAL);
    assert_int_equal(kdp_kubelet_paths_get("var/lib/kubelet", NULL, &p), -EINVAL);
    assert_non_null(strstr(last_error, "kdp_config.kubelet_root"));
    assert_non_null(strstr(last_error, "\"var/lib/kubelet\" is not an absolute path"));
    assert_int_equal(kdp_kubelet_paths_get(NULL, "device-plugins", &p), -EINVAL);
    assert_non_null(strstr(last_error, "kdp_config.device_plugin_dir"));
    setenv(KDP_KUBELET_ROOT_ENV, "relative", 1);
    assert_int_equal(kdp_kubelet_paths_get(NULL, NULL, &p), -EINVAL);
    assert_non_null(strstr(last_error, "$KDP_KUBELET_ROOT"));
    assert_int_equal(kdp_kubelet_paths_get("/ok", NULL, &p), 0); /* the config's is used */
    unsetenv(KDP_KUBELET_ROOT_ENV);
    char *long_root = malloc(4200);
    assert_non_null(long_root);
    memset(long_root, 'a', 4199);
    long_root[0] = '/';
    long_root[4199] = '\0';
    assert_int_equal(kdp_kubelet_paths_get(long_root, NULL, &p), -ENAMETOOLONG);
    long_root[4080] = '\0'; /* the root fits, root/plugins_registry does not */
    assert_int_equal(kdp_kubelet_paths_get(long_root, NULL, &p), -ENAMETOOLONG);
    assert_non_null(strstr(last_error, "over 4095 bytes"));
    free(long_root);
}

/* kdp_plugin_new takes its directory from the same rule. */
static void test_plugin_new_uses_it(void **state)
{
    (void)state;
    kdp_config cfg = {.resource_name = "example.com/x", .socket_name = "x.sock"};
    kdp_plugin *pl = NULL;
    cfg.kubelet_root = "relative/root";
    assert_int_equal(kdp_plugin_new(NULL, &cfg, NULL, NULL, &pl), -EINVAL);
    assert_null(pl);
    assert_non_null(strstr(last_error, "kdp_config.kubelet_root"));
    cfg.kubelet_root = "/tmp/kdp-no-such-root";
    assert_int_equal(kdp_plugin_new(NULL, &cfg, NULL, NULL, &pl), 0);
    kdp_plugin_status st;
    assert_int_equal(kdp_plugin_get_status(pl, &st), 0);
    assert_int_equal(st.state, KDP_PLUGIN_IDLE);
    kdp_plugin_free(pl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, setup),
        cmocka_unit_test_setup(test_root_from_env_and_config, setup),
        cmocka_unit_test_setup(test_directory_settings, setup),
        cmocka_unit_test_setup(test_invalid, setup),
        cmocka_unit_test_setup(test_plugin_new_uses_it, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
