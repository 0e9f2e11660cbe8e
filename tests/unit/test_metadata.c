/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

/* The device metadata of a claim: one file per base request (subrequests
 * under their request), the stream's documents, the container paths of a
 * claim and of a template's, the CDI IDs and devices, the record's fields
 * through the checkpoint's JSON, and a removal that follows no link. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dra/claimrec.h"
#include "dra/metadata.h"
#include "dra/recfile.h"

#define KIND "k8s.gpu.example.com/claim"

/* gpu/small: gpu-0 (shared twice), gpu-1; nic: nic-0. */
static kdp__dra_rec *record(void)
{
    kdp__dra_rec *r = kdp__dra_rec_new("ns", "c1", "u1");
    kdp__dra_rdev *d = NULL;
    assert_non_null(r);
    r->md_gen = 3;
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu/small", "gpu-0", NULL, false, &d), 0);
    assert_int_equal(kdp__dra_rec_set(&d->attrs, "{\"model\":{\"string\":\"x1\"}}"), 0);
    assert_int_equal(kdp__dra_rec_add_dev(r, "nic", "nic-0", NULL, false, &d), 0);
    assert_int_equal(kdp__dra_rec_set(&d->status,
                                      "{\"networkData\":{\"interfaceName\":\"eth1\",\"ips\":"
                                      "[\"10.0.0.1/24\"]},\"data\":{\"a\":1}}"),
                     0);
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu/small", "gpu-1", NULL, false, NULL), 0);
    return r;
}

static json_t *load_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    char buf[8192];
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    json_t *all = json_array();
    size_t off = 0;
    while (off < len) {
        json_error_t err;
        json_t *o = json_loadb(buf + off, len - off, JSON_DISABLE_EOF_CHECK, &err);
        if (!o) {
            break;
        }
        json_array_append_new(all, o);
        off += (size_t)err.position;
        while (off < len && (buf[off] == '\n' || buf[off] == ' ')) {
            off++;
        }
    }
    *n = json_array_size(all);
    return all;
}

static void test_documents(void **state)
{
    (void)state;
    char dir[] = "/tmp/kdp-md-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char mdir[300];
    snprintf(mdir, sizeof(mdir), "%s/md", dir);
    kdp__dra_md md = {mdir, "gpu.example.com", "node-a"};
    kdp__dra_rec *r = record();
    assert_true(kdp__dra_md_first(r, 0));
    assert_true(kdp__dra_md_first(r, 1));
    assert_false(kdp__dra_md_first(r, 2));
    assert_false(kdp__dra_md_present(&md, r));
    char why[300] = "";
    assert_int_equal(kdp__dra_md_write(&md, r, why, sizeof(why)), 0);
    assert_true(kdp__dra_md_present(&md, r));

    char path[400];
    snprintf(path, sizeof(path), "%s/ns_c1_u1/gpu/metadata.json", mdir);
    size_t n = 0;
    json_t *docs = load_all(path, &n);
    assert_int_equal(n, 2);
    json_t *beta = json_array_get(docs, 0);
    assert_string_equal(json_string_value(json_object_get(beta, "apiVersion")),
                        "metadata.resource.k8s.io/v1beta1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(docs, 1), "apiVersion")),
                        "metadata.resource.k8s.io/v1alpha1");
    json_t *want = json_loads(
        "{\"kind\":\"DeviceMetadata\",\"apiVersion\":\"metadata.resource.k8s.io/v1beta1\","
        "\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns\",\"uid\":\"u1\",\"generation\":3},"
        "\"requests\":[{\"name\":\"gpu/small\",\"devices\":["
        "{\"driver\":\"gpu.example.com\",\"pool\":\"node-a\",\"name\":\"gpu-0\","
        "\"attributes\":{\"model\":{\"string\":\"x1\"}}},"
        "{\"driver\":\"gpu.example.com\",\"pool\":\"node-a\",\"name\":\"gpu-1\"}]}]}",
        0, NULL);
    assert_true(json_equal(beta, want));
    json_decref(want);
    json_decref(docs);

    snprintf(path, sizeof(path), "%s/ns_c1_u1/nic/metadata.json", mdir);
    docs = load_all(path, &n);
    json_t *dev = json_array_get(
        json_object_get(json_array_get(json_object_get(json_array_get(docs, 0), "requests"), 0),
                        "devices"),
        0);
    want = json_loads("{\"interfaceName\":\"eth1\",\"ips\":[\"10.0.0.1/24\"]}", 0, NULL);
    assert_true(json_equal(json_object_get(dev, "networkData"), want));
    assert_null(json_object_get(dev, "attributes"));
    json_decref(want);
    json_decref(docs);

    /* CDI: a device per base request, its ID on the request's first device */
    assert_int_equal(kdp__dra_md_add_ids(r, KIND), 0);
    assert_int_equal(r->devs[0].n_cdi_ids, 1);
    assert_string_equal(r->devs[0].cdi_ids[0], KIND "=u1_metadata_gpu");
    assert_string_equal(r->devs[1].cdi_ids[0], KIND "=u1_metadata_nic");
    assert_int_equal(r->devs[2].n_cdi_ids, 0);
    kdp__dra_md_cdi c;
    assert_int_equal(kdp__dra_md_cdi_init(&c, &md, r), 0);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.devs[0].name, "u1_metadata_gpu");
    assert_string_equal(c.devs[0].mounts[0].container_path,
                        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/c1/gpu/"
                        "gpu.example.com-metadata.json");
    assert_true(c.devs[0].mounts[0].read_only);
    kdp__dra_md_cdi_done(&c);
    /* a claim from a template: under the pod's name for it */
    assert_int_equal(kdp__dra_rec_set(&r->pod_claim, "my-gpu"), 0);
    assert_int_equal(kdp__dra_md_cdi_init(&c, &md, r), 0);
    assert_string_equal(c.devs[1].mounts[0].container_path,
                        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/"
                        "my-gpu/nic/gpu.example.com-metadata.json");
    kdp__dra_md_cdi_done(&c);
    char *s = kdp__dra_md_stream(&md, r, 1);
    assert_non_null(strstr(s, "\"podClaimName\": \"my-gpu\""));
    free(s);

    /* through the checkpoint's JSON: generation, pod claim, attributes */
    json_t *o = kdp__recfile_to_json(r);
    kdp__dra_rec *back = NULL;
    assert_int_equal(kdp__recfile_from_json(o, 3, &back, why, sizeof(why)), 0);
    assert_int_equal(back->md_gen, 3);
    assert_string_equal(back->pod_claim, "my-gpu");
    assert_string_equal(back->devs[0].attrs, r->devs[0].attrs);
    kdp__dra_rec_free(back);
    json_object_set_new(o, "md_gen", json_integer(-1));
    assert_int_equal(kdp__recfile_from_json(o, 3, &back, why, sizeof(why)), -EINVAL);
    json_decref(o);

    /* removal: a link planted in the claim's directory is unlinked, its
     * target kept */
    char target[400];
    char link[400];
    snprintf(target, sizeof(target), "%s/keep", dir);
    int fd = open(target, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(link, sizeof(link), "%s/ns_c1_u1/gpu/evil", mdir);
    assert_int_equal(symlink(dir, link), 0);
    assert_int_equal(kdp__dra_md_remove(&md, r), 1);
    assert_int_equal(kdp__dra_md_remove(&md, r), 0);
    assert_int_equal(access(target, F_OK), 0);
    snprintf(path, sizeof(path), "%s/ns_c1_u1", mdir);
    assert_int_not_equal(access(path, F_OK), 0);
    /* a link where the claim's directory would be: removed, not followed */
    assert_int_equal(symlink(dir, path), 0);
    assert_int_equal(kdp__dra_md_remove(&md, r), 1);
    assert_int_equal(access(target, F_OK), 0);
    kdp__dra_rec_free(r);
    unlink(target);
    rmdir(mdir);
    assert_int_equal(rmdir(dir), 0);
}

/* Names that would leave the directory are refused before any file is
 * made, whatever the API server or a checkpoint says. */
static void test_names_checked(void **state)
{
    (void)state;
    char dir[] = "/tmp/kdp-md-XXXXXX";
    assert_non_null(mkdtemp(dir));
    kdp__dra_md md = {dir, "gpu.example.com", "node-a"};
    const char *bad[][4] = {
        {"..", "c1", "gpu", NULL},  {"ns", "../x", "gpu", NULL}, {"ns", "c1", "..", NULL},
        {"ns", "c1", "/gpu", NULL}, {"ns", "c1", "gpu", "../t"}, {"ns", "c1", "Gpu", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        kdp__dra_rec *r = kdp__dra_rec_new(bad[i][0], bad[i][1], "u1");
        assert_int_equal(kdp__dra_rec_add_dev(r, bad[i][2], "gpu-0", NULL, false, NULL), 0);
        assert_int_equal(kdp__dra_rec_set(&r->pod_claim, bad[i][3]), 0);
        r->md_gen = 1;
        char why[300] = "";
        assert_int_equal(kdp__dra_md_write(&md, r, why, sizeof(why)), -EINVAL);
        assert_non_null(strstr(why, "cannot write the claim's device metadata: its "));
        kdp__dra_md_cdi c;
        assert_int_equal(kdp__dra_md_cdi_init(&c, &md, r), -EINVAL);
        kdp__dra_rec_free(r);
    }
    assert_int_equal(rmdir(dir), 0); /* nothing was made in it */
}

/* A namespace and name too long for one file name together: the UID alone
 * names the claim's directory, made and removed. */
static void test_long_names(void **state)
{
    (void)state;
    char dir[] = "/tmp/kdp-md-XXXXXX";
    assert_non_null(mkdtemp(dir));
    kdp__dra_md md = {dir, "gpu.example.com", "node-a"};
    char ns[64];
    char name[254];
    memset(ns, 'n', 63);
    ns[63] = '\0';
    for (size_t i = 0; i < 253; i++) {
        name[i] = i % 64 == 63 ? '.' : 'c';
    }
    name[253] = '\0';
    kdp__dra_rec *r = kdp__dra_rec_new(ns, name, "9f1c2d3e-0000-4000-8000-000000000001");
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu", "gpu-0", NULL, false, NULL), 0);
    r->md_gen = 1;
    char why[300] = "";
    assert_int_equal(kdp__dra_md_write(&md, r, why, sizeof(why)), 0);
    char path[600];
    snprintf(path, sizeof(path), "%s/9f1c2d3e-0000-4000-8000-000000000001/gpu/metadata.json", dir);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(kdp__dra_md_remove(&md, r), 1);
    assert_int_equal(rmdir(dir), 0);
    kdp__dra_rec_free(r);
}

static void test_attrs(void **state)
{
    (void)state;
    bool oom = false;
    assert_null(kdp__dra_md_attrs("d", NULL, 0, &oom));
    kdp_dra_attr a[] = {{.name = "index", .type = KDP_DRA_ATTR_INT, .int_value = 2},
                        {.name = "resource.kubernetes.io/pcieRoot",
                         .type = KDP_DRA_ATTR_STRING,
                         .string_value = "pci0000:40"}};
    char *s = kdp__dra_md_attrs("d", a, 2, &oom);
    assert_false(oom);
    assert_string_equal(s, "{\"index\":{\"int\":2},\"resource.kubernetes.io/pcieRoot\":"
                           "{\"string\":\"pci0000:40\"}}");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_documents),
        cmocka_unit_test(test_names_checked),
        cmocka_unit_test(test_long_names),
        cmocka_unit_test(test_attrs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
