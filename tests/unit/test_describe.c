/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

/* The describe builder (kdp_dra_device), the default names and the public
 * validators. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dra/describe.h"

static void test_validators(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(kdp_dra_validate_driver_name("gpu.example.com", &why), 0);
    assert_int_equal(kdp_dra_validate_driver_name("Gpu.example.com", &why), -EINVAL);
    assert_non_null(why);
    why = NULL;
    assert_int_equal(kdp_dra_validate_driver_name(NULL, &why), -EINVAL);
    assert_non_null(why);
    char long_name[80];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(kdp_dra_validate_driver_name(long_name, NULL), -EINVAL); /* > 63 */
    assert_int_equal(kdp_dra_validate_device_name("gpu-0", NULL), 0);
    assert_int_equal(kdp_dra_validate_device_name("gpu.0", NULL), -EINVAL);
    assert_int_equal(kdp_dra_validate_device_name("-gpu", NULL), -EINVAL);
    assert_int_equal(kdp_dra_validate_device_name(NULL, NULL), -EINVAL);
}

static void test_default_name(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(kdp__dra_default_name("GPU_0", out), 0);
    assert_string_equal(out, "gpu-0");
    assert_int_equal(kdp__dra_default_name("--a.b--", out), 0);
    assert_string_equal(out, "a-b");
    strcpy(out, "kept");
    assert_int_equal(kdp__dra_default_name("___", out), -EINVAL);
    assert_string_equal(out, "kept");
    char long_id[100];
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    assert_int_equal(kdp__dra_default_name(long_id, out), 0);
    assert_int_equal(strlen(out), 63);
}

static void test_builder(void **state)
{
    (void)state;
    kdp_dra_device d;
    kdp__dra_device_init(&d, "id-0");
    assert_int_equal(kdp_dra_device_set_name(&d, "Bad_Name"), -EINVAL);
    assert_null(d.name);
    assert_int_equal(kdp_dra_device_set_name(&d, "gpu-0"), 0);
    assert_string_equal(d.name, "gpu-0");
    kdp_dra_attr a = {.name = "model", .type = KDP_DRA_ATTR_STRING, .string_value = "x1"};
    assert_int_equal(kdp_dra_device_add_attr(&d, &a), 0);
    assert_int_equal(kdp_dra_device_add_attr(&d, &a), -EEXIST);
    kdp_dra_attr v = {
        .name = "driverVersion", .type = KDP_DRA_ATTR_VERSION, .string_value = "1.2.3"};
    assert_int_equal(kdp_dra_device_add_attr(&d, &v), 0);
    v.name = "badVersion";
    v.string_value = "1.2";
    assert_int_equal(kdp_dra_device_add_attr(&d, &v), -EINVAL);
    kdp_dra_attr q = {
        .name = "resource.kubernetes.io/pcieRoot", .type = KDP_DRA_ATTR_INT, .int_value = 7};
    assert_int_equal(kdp_dra_device_add_attr(&d, &q), 0);
    kdp_dra_attr bad = {.name = "has space", .type = KDP_DRA_ATTR_BOOL};
    assert_int_equal(kdp_dra_device_add_attr(&d, &bad), -EINVAL);
    char big[70];
    memset(big, 's', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    kdp_dra_attr s = {.name = "long", .type = KDP_DRA_ATTR_STRING, .string_value = big};
    assert_int_equal(kdp_dra_device_add_attr(&d, &s), -EINVAL); /* > 64 characters */
    kdp_dra_attr t = {.name = "typeless", .type = (kdp_dra_attr_type)99};
    assert_int_equal(kdp_dra_device_add_attr(&d, &t), -EINVAL);
    assert_int_equal(kdp_dra_device_add_capacity(&d, "memory", "80Gi"), 0);
    assert_int_equal(kdp_dra_device_add_capacity(&d, "memory", "1"), -EEXIST);
    assert_int_equal(kdp_dra_device_add_capacity(&d, "model", "1"), 0); /* another map */
    assert_int_equal(kdp_dra_device_add_capacity(&d, "cores", "lots"), -EINVAL);
    assert_int_equal(d.n_attrs, 3);
    assert_int_equal(d.n_caps, 2);
    assert_string_equal(d.attrs[0].string_value, "x1");
    kdp__dra_device_done(&d);
}

static void test_field_cap(void **state)
{
    (void)state;
    kdp_dra_device d;
    kdp__dra_device_init(&d, "id");
    char name[16];
    for (unsigned i = 0; i < KDP_DRA_MAX_DEVICE_FIELDS; i++) {
        snprintf(name, sizeof(name), "a%u", i);
        kdp_dra_attr a = {.name = name, .type = KDP_DRA_ATTR_INT, .int_value = i};
        assert_int_equal(kdp_dra_device_add_attr(&d, &a), 0);
    }
    kdp_dra_attr a = {.name = "more", .type = KDP_DRA_ATTR_BOOL};
    assert_int_equal(kdp_dra_device_add_attr(&d, &a), -E2BIG);
    assert_int_equal(kdp_dra_device_add_capacity(&d, "more", "1"), -E2BIG);
    kdp__dra_device_done(&d);
    kdp__dra_device_done(NULL);
}

/* The standard PCI attributes: all or none. */
static void test_pci_attrs(void **state)
{
    (void)state;
    kdp_dra_device d;
    kdp__dra_device_init(&d, "gpu");
    char addr[] = "0000:41:00.0";
    char root[] = "pci0000:40";
    char addr2[] = "0000:00:06.0";
    kdp_pci_device pci = {.address = addr, .pcie_root = root, .numa_node = 1};
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, &pci), 0);
    assert_int_equal(d.n_attrs, 3);
    assert_string_equal(d.attrs[0].name, "resource.kubernetes.io/pciBusID");
    assert_string_equal(d.attrs[0].string_value, "0000:41:00.0");
    assert_string_equal(d.attrs[1].name, "resource.kubernetes.io/pcieRoot");
    assert_string_equal(d.attrs[1].string_value, "pci0000:40");
    assert_string_equal(d.attrs[2].name, "resource.kubernetes.io/numaNode");
    assert_int_equal(d.attrs[2].type, KDP_DRA_ATTR_INT);
    assert_int_equal(d.attrs[2].int_value, 1);
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, &pci), -EEXIST); /* twice */
    assert_int_equal(d.n_attrs, 3);
    kdp__dra_device_done(&d);
    /* no root complex, no NUMA node: the bus ID only */
    kdp__dra_device_init(&d, "gpu");
    kdp_pci_device bare = {.address = addr2, .numa_node = -1};
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, &bare), 0);
    assert_int_equal(d.n_attrs, 1);
    kdp__dra_device_done(&d);
    /* a clash drops what the call added */
    kdp__dra_device_init(&d, "gpu");
    kdp_dra_attr mine = {.name = "resource.kubernetes.io/numaNode", .type = KDP_DRA_ATTR_INT};
    assert_int_equal(kdp_dra_device_add_attr(&d, &mine), 0);
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, &pci), -EEXIST);
    assert_int_equal(d.n_attrs, 1);
    kdp__dra_device_done(&d);
    /* no room for three more */
    kdp__dra_device_init(&d, "gpu");
    char name[16];
    for (unsigned i = 0; i + 2 < KDP_DRA_MAX_DEVICE_FIELDS; i++) {
        snprintf(name, sizeof(name), "a%u", i);
        kdp_dra_attr a = {.name = name, .type = KDP_DRA_ATTR_BOOL};
        assert_int_equal(kdp_dra_device_add_attr(&d, &a), 0);
    }
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, &pci), -E2BIG);
    assert_int_equal(d.n_attrs, KDP_DRA_MAX_DEVICE_FIELDS - 2);
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, &bare), 0);
    kdp__dra_device_done(&d);
    kdp_pci_device none = {.numa_node = -1};
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, &none), -EINVAL);
    assert_int_equal(kdp_dra_device_add_pci_attrs(NULL, &pci), -EINVAL);
    assert_int_equal(kdp_dra_device_add_pci_attrs(&d, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validators), cmocka_unit_test(test_default_name),
        cmocka_unit_test(test_builder),    cmocka_unit_test(test_field_cap),
        cmocka_unit_test(test_pci_attrs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
