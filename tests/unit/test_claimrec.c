/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

/* The prepared builder and a claim's record: the prepare's answer merged,
 * the CDI IDs, the claim's CDI spec (env edits, a per-claim file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discovery/cdi.h"
#include "dra/claimrec.h"
#include "dra/prepared.h"
#include "dra/recfile.h"

#define KIND      "k8s.gpu.example.com/claim"
#define FILE_NAME "k8s.gpu.example.com-claim_u1.json"

static kdp__dra_rec *record(void)
{
    kdp__dra_rec *r = kdp__dra_rec_new("ns", "c1", "u1");
    kdp__dra_rdev *d = NULL;
    assert_non_null(r);
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu", "gpu-0", NULL, false, &d), 0);
    assert_int_equal(kdp__dra_rec_set(&d->device_id, "GPU0"), 0);
    assert_int_equal(kdp__dra_rec_add_config(r, 0, "{\"a\":1}"), 0);
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu", "gpu-1", NULL, true, &d), 0);
    assert_int_equal(kdp__dra_rec_set(&d->device_id, "GPU1"), 0);
    assert_int_equal(kdp__dra_rec_set((char **)&d->default_node.path, "/dev/gpu1"), 0);
    assert_int_equal(kdp__dra_rec_set((char **)&d->default_node.host_path, "/dev/gpu1"), 0);
    assert_int_equal(kdp__dra_rec_add_dev(r, "nic", "nic-0", NULL, false, &d), 0);
    assert_int_equal(kdp__dra_rec_set(&d->device_id, "NIC0"), 0);
    return r;
}

static void test_prepared_builder(void **state)
{
    (void)state;
    kdp_dra_prepared pr;
    assert_int_equal(kdp__dra_prepared_init(&pr, 2), 0);
    kdp_cdi_node nd = {.path = "/dev/x", .host_path = "/dev/y", .permissions = "rw"};
    assert_int_equal(kdp_dra_prepared_add_node(&pr, 0, &nd), 0);
    assert_int_equal(kdp_dra_prepared_add_node(&pr, 2, &nd), -EINVAL); /* past the claim */
    kdp_cdi_node rel = {.path = "dev/x"};
    assert_int_equal(kdp_dra_prepared_add_node(&pr, 0, &rel), -EINVAL);
    kdp_cdi_node perm = {.path = "/dev/x", .permissions = "rwz"};
    assert_int_equal(kdp_dra_prepared_add_node(&pr, 0, &perm), -EINVAL);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 1, "GPU", "0"), 0);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 1, "A=B", "0"), -EINVAL);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 1, "X", NULL), -EINVAL);
    assert_int_equal(kdp_dra_prepared_add_cdi_id(&pr, 1, "vendor.com/class=dev"), 0);
    assert_int_equal(kdp_dra_prepared_add_cdi_id(&pr, 1, "no-kind"), -EINVAL);
    for (unsigned i = 1; i < KDP__DRA_PREPARED_MAX; i++) {
        assert_int_equal(kdp_dra_prepared_add_env(&pr, 0, "K", "v"), 0);
    }
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 0, "K", "v"), 0);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 0, "K", "v"), -E2BIG);
    assert_int_equal(pr.devs[0].edits.n_nodes, 1);
    assert_string_equal(pr.devs[0].edits.nodes[0].host_path, "/dev/y");
    assert_string_equal(pr.devs[1].edits.env[0], "GPU=0");
    assert_int_equal(kdp_dra_prepared_add_node(NULL, 0, &nd), -EINVAL);
    kdp__dra_prepared_done(&pr);
}

static void test_view(void **state)
{
    (void)state;
    kdp__dra_rec *rec = record();
    kdp__dra_claimview v;
    assert_int_equal(kdp__dra_claimview_init(&v, rec), 0);
    assert_string_equal(v.claim.ref.uid, "u1");
    assert_int_equal(v.claim.n_devices, 3);
    assert_string_equal(v.claim.devices[0].device_id, "GPU0");
    assert_int_equal(v.claim.devices[0].n_configs, 1);
    assert_string_equal(v.claim.devices[0].configs[0], "{\"a\":1}");
    assert_true(v.claim.devices[1].admin_access);
    assert_null(v.claim.devices[1].share_id);
    kdp__dra_claimview_done(&v);
    /* a copy without the answer keeps the claim, drops the boot */
    snprintf(rec->boot_id, sizeof(rec->boot_id), "b1");
    kdp__dra_rec *c = kdp__dra_rec_dup(rec, false);
    assert_string_equal(c->devs[1].default_node.path, "/dev/gpu1");
    assert_string_equal(c->configs[c->devs[0].cfg[0]], "{\"a\":1}");
    assert_string_equal(c->boot_id, "");
    assert_true(kdp__dra_rec_bytes(c) > 100);
    kdp__dra_rec_free(c);
    kdp__dra_rec_free(rec);
}

static void test_merge_and_cdi(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/kdp-claimrec-XXXXXX");
    assert_non_null(mkdtemp(dir));
    kdp__dra_rec *rec = record();
    kdp_dra_prepared pr;
    assert_int_equal(kdp__dra_prepared_init(&pr, 3), 0);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 0, "GPU", "0"), 0);
    assert_int_equal(kdp_dra_prepared_add_cdi_id(&pr, 0, "vendor.com/gpu=all"), 0);
    /* device 1: nothing, so its default node; device 2: nothing at all */
    assert_int_equal(kdp__dra_rec_merge(rec, &pr, KIND), 0);
    kdp__dra_prepared_done(&pr);
    assert_true(rec->prepared);
    assert_int_equal(rec->devs[0].n_cdi_ids, 2);
    assert_string_equal(rec->devs[0].cdi_ids[0], KIND "=u1-gpu-0");
    assert_string_equal(rec->devs[0].cdi_ids[1], "vendor.com/gpu=all");
    assert_string_equal(rec->devs[1].cdi_ids[0], KIND "=u1-gpu-1");
    assert_int_equal(rec->devs[2].n_cdi_ids, 0);
    assert_true(kdp__dra_rec_has_cdi(rec));

    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0644, NULL, 0), 1);
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0644, NULL, 0),
                     0); /* unchanged */
    assert_true(kdp__cdi_file_exists(dir, FILE_NAME));
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, FILE_NAME);
    /* the mode asked for, whatever the umask; another mode is a change */
    struct stat st;
    mode_t old_umask = umask(0);
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0600, NULL, 0), 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0600, NULL, 0), 0);
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0644, NULL, 0), 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    umask(old_umask);
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0755, NULL, 0), -EINVAL);
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0044, NULL, 0), -EINVAL);
    json_t *spec = json_load_file(path, 0, NULL);
    assert_non_null(spec);
    assert_string_equal(json_string_value(json_object_get(spec, "kind")), KIND);
    json_t *sd = json_object_get(spec, "devices");
    assert_int_equal(json_array_size(sd), 2);
    json_t *e0 = json_object_get(json_array_get(sd, 0), "containerEdits");
    assert_string_equal(json_string_value(json_object_get(json_array_get(sd, 0), "name")),
                        "u1-gpu-0");
    assert_string_equal(json_string_value(json_array_get(json_object_get(e0, "env"), 0)), "GPU=0");
    json_t *e1 = json_object_get(json_array_get(sd, 1), "containerEdits");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(e1, "deviceNodes"), 0), "path")),
                        "/dev/gpu1");
    json_decref(spec);
    assert_int_equal(kdp__cdi_remove_file(dir, FILE_NAME), 1);
    assert_int_equal(kdp__cdi_remove_file(dir, FILE_NAME), 0);
    assert_int_equal(kdp__cdi_remove_file(dir, "../x.json"), -EINVAL);
    assert_int_equal(kdp__cdi_write_file(dir, ".hidden.json", KIND, NULL, 0, 0644), -EINVAL);
    kdp__dra_rec_free(rec);
    rmdir(dir);
}

/* The same device twice in a claim (a shared device, admin access): CDI
 * names of their own, so the spec is written. */
static void test_device_twice(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/kdp-claimrec-XXXXXX");
    assert_non_null(mkdtemp(dir));
    kdp__dra_rec *rec = kdp__dra_rec_new("ns", "c1", "u1");
    assert_int_equal(kdp__dra_rec_add_dev(rec, "a", "gpu-0", NULL, false, NULL), 0);
    kdp__dra_rdev *d = NULL;
    assert_int_equal(kdp__dra_rec_add_dev(rec, "b", "gpu-0", "s1", false, &d), 0);
    const kdp_dra_quantity used[] = {{"memory", "8Gi"}};
    assert_int_equal(kdp__dra_rec_set_consumed(d, used, 1), 0);
    assert_int_equal(kdp__dra_rec_add_dev(rec, "c", "gpu-0", NULL, false, NULL), 0);
    kdp_dra_prepared pr;
    assert_int_equal(kdp__dra_prepared_init(&pr, 3), 0);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 0, "A", "1"), 0);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 1, "B", "1"), 0);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, 2, "C", "1"), 0);
    assert_int_equal(kdp__dra_rec_merge(rec, &pr, KIND), 0);
    kdp__dra_prepared_done(&pr);
    assert_string_equal(rec->devs[2].cdi_ids[0], KIND "=u1-gpu-0_2"); /* named again */
    /* the author's view: the share and what it consumed */
    kdp__dra_claimview v;
    assert_int_equal(kdp__dra_claimview_init(&v, rec), 0);
    assert_string_equal(v.claim.devices[1].share_id, "s1");
    assert_int_equal(v.claim.devices[1].n_consumed, 1);
    assert_string_equal(v.claim.devices[1].consumed[0].value, "8Gi");
    kdp__dra_claimview_done(&v);
    assert_string_equal(rec->devs[0].cdi_ids[0], KIND "=u1-gpu-0");
    assert_string_equal(rec->devs[1].cdi_ids[0], KIND "=u1-gpu-0-s1"); /* a share: its own */
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0644, NULL, 0), 1);
    /* through the checkpoint's JSON and back: the same spec */
    json_t *j = kdp__recfile_to_json(rec);
    kdp__dra_rec *back = NULL;
    char why[200];
    assert_int_equal(kdp__recfile_from_json(j, 2, &back, why, sizeof(why)), 0);
    json_decref(j);
    assert_string_equal(back->devs[1].share_id, "s1");
    assert_int_equal(back->devs[1].n_consumed, 1);
    assert_string_equal(back->devs[1].consumed[0].name, "memory");
    assert_string_equal(back->devs[1].consumed[0].value, "8Gi");
    assert_int_equal(back->devs[0].n_consumed, 0);
    assert_int_equal(kdp__dra_rec_write_cdi(back, dir, FILE_NAME, KIND, 0644, NULL, 0),
                     0); /* unchanged */
    kdp__dra_rec_free(back);
    /* a record that is not one */
    j = json_pack("{s:s}", "uid", "u1");
    assert_int_equal(kdp__recfile_from_json(j, 2, &back, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "namespace"));
    json_decref(j);
    assert_int_equal(kdp__cdi_remove_file(dir, FILE_NAME), 1);
    kdp__dra_rec_free(rec);
    rmdir(dir);
}

/* Double use: one device in two claims, unless admin access or two
 * shares with distinct share IDs. */
static void test_conflict(void **state)
{
    (void)state;
    kdp__dra_rec *a = kdp__dra_rec_new("ns", "a", "ua");
    kdp__dra_rec *b = kdp__dra_rec_new("ns", "b", "ub");
    assert_int_equal(kdp__dra_rec_add_dev(a, "r", "gpu-0", NULL, false, NULL), 0);
    assert_int_equal(kdp__dra_rec_add_dev(b, "r", "gpu-1", NULL, false, NULL), 0);
    assert_false(kdp__dra_rec_conflict(a, b, NULL));
    assert_int_equal(kdp__dra_rec_add_dev(b, "r", "gpu-0", NULL, false, NULL), 0);
    const char *dev = NULL;
    assert_true(kdp__dra_rec_conflict(a, b, &dev));
    assert_string_equal(dev, "gpu-0");
    b->devs[1].admin_access = true; /* admin access: not exclusive */
    assert_false(kdp__dra_rec_conflict(a, b, NULL));
    b->devs[1].admin_access = false;
    assert_int_equal(kdp__dra_rec_set(&a->devs[0].share_id, "s1"), 0);
    assert_true(kdp__dra_rec_conflict(a, b, NULL)); /* a share and a whole device */
    assert_int_equal(kdp__dra_rec_set(&b->devs[1].share_id, "s2"), 0);
    assert_false(kdp__dra_rec_conflict(a, b, NULL)); /* two shares */
    assert_int_equal(kdp__dra_rec_set(&b->devs[1].share_id, "s1"), 0);
    assert_true(kdp__dra_rec_conflict(b, a, NULL)); /* the same share twice */
    kdp__dra_rec_free(a);
    kdp__dra_rec_free(b);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* KDP_DRA_CLAIM: the whole claim's edits as a device of kdp's spec named
 * after the claim's UID, its CDI ID with every device (one without edits of
 * its own too); mounts in the spec; the checkpoint keeps all of it. */
static void test_claim_wide(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/kdp-claimrec-XXXXXX");
    assert_non_null(mkdtemp(dir));
    kdp__dra_rec *rec = record();
    kdp_dra_prepared pr;
    assert_int_equal(kdp__dra_prepared_init(&pr, 3), 0);
    assert_int_equal(kdp_dra_prepared_add_env(&pr, KDP_DRA_CLAIM, "CLAIM", "u1"), 0);
    assert_int_equal(
        kdp_dra_prepared_add_mount(&pr, KDP_DRA_CLAIM, "/run/shared", "/srv/u1", false), 0);
    kdp_cdi_node ctl = {.path = "/dev/gpuctl"};
    assert_int_equal(kdp_dra_prepared_add_node(&pr, KDP_DRA_CLAIM, &ctl), 0);
    assert_int_equal(kdp_dra_prepared_add_mount(&pr, 0, "/opt/fw", "/lib/firmware/gpu", true), 0);
    /* what is per device only, and bad paths */
    assert_int_equal(kdp_dra_prepared_add_cdi_id(&pr, KDP_DRA_CLAIM, "vendor.com/gpu=all"),
                     -EINVAL);
    kdp_dra_device_status st = {0};
    assert_int_equal(kdp_dra_prepared_set_status(&pr, KDP_DRA_CLAIM, &st), -EINVAL);
    assert_int_equal(kdp_dra_prepared_add_mount(&pr, 0, "relative", "/x", false), -EINVAL);
    assert_int_equal(kdp_dra_prepared_add_mount(&pr, 0, "/x", NULL, false), -EINVAL);
    assert_int_equal(kdp_dra_prepared_add_mount(&pr, 3, "/x", "/y", false), -EINVAL);
    assert_int_equal(kdp__dra_rec_merge(rec, &pr, KIND), 0);
    kdp__dra_prepared_done(&pr);
    assert_string_equal(rec->claim_cdi_name, "u1");
    assert_int_equal(rec->claim_edits.n_env, 1);
    for (size_t i = 0; i < 3; i++) {
        const kdp__dra_rdev *d = &rec->devs[i];
        assert_true(d->n_cdi_ids >= 1);
        assert_string_equal(d->cdi_ids[d->n_cdi_ids - 1], KIND "=u1");
    }
    assert_int_equal(rec->devs[2].n_cdi_ids, 1); /* nothing of its own: the claim's only */
    assert_int_equal(kdp__dra_rec_write_cdi(rec, dir, FILE_NAME, KIND, 0644, NULL, 0), 1);
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, FILE_NAME);
    const char *spec = slurp(path);
    assert_non_null(strstr(spec, "\"name\": \"u1\""));
    assert_non_null(strstr(spec, "\"env\": [\"CLAIM=u1\"]"));
    assert_non_null(strstr(spec, "{\"hostPath\": \"/srv/u1\", \"containerPath\": \"/run/shared\", "
                                 "\"options\": [\"nosuid\", \"nodev\", \"bind\"]}"));
    assert_non_null(strstr(spec, "{\"hostPath\": \"/lib/firmware/gpu\", \"containerPath\": "
                                 "\"/opt/fw\", \"options\": [\"ro\", \"nosuid\", \"nodev\", "
                                 "\"bind\"]}"));
    assert_non_null(strstr(spec, "{\"path\": \"/dev/gpuctl\"}"));
    /* the checkpoint's JSON and back: the same spec */
    json_t *j = kdp__recfile_to_json(rec);
    assert_non_null(j);
    kdp__dra_rec *back = NULL;
    char why[128];
    assert_int_equal(kdp__recfile_from_json(j, 3, &back, why, sizeof(why)), 0);
    json_decref(j);
    assert_string_equal(back->claim_cdi_name, "u1");
    assert_int_equal(back->devs[0].edits.n_mounts, 1);
    assert_true(back->devs[0].edits.mounts[0].read_only);
    assert_int_equal(kdp__dra_rec_write_cdi(back, dir, FILE_NAME, KIND, 0644, NULL, 0),
                     0); /* unchanged */
    kdp__dra_rec *dup = kdp__dra_rec_dup(back, true);
    assert_string_equal(dup->claim_edits.mounts[0].host_path, "/srv/u1");
    assert_true(kdp__dra_rec_bytes(dup) > kdp__dra_rec_bytes(rec) / 2);
    kdp__dra_rec_free(dup);
    kdp__dra_rec_free(back);
    /* a record whose claim part is not one: named */
    json_t *badj = json_pack("{s:s, s:s, s:s, s:[], s:{s:i}}", "namespace", "ns", "name", "n",
                             "uid", "u", "devices", "claim", "cdi_name", 3);
    assert_int_equal(kdp__recfile_from_json(badj, 3, &back, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "claim"));
    json_decref(badj);
    badj = json_pack("{s:s, s:s, s:s, s:[], s:{s:s, s:[{s:s}]}}", "namespace", "ns", "name", "n",
                     "uid", "u", "devices", "claim", "cdi_name", "u", "mounts", "host_path", "/x");
    assert_int_equal(kdp__recfile_from_json(badj, 3, &back, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "mounts"));
    json_decref(badj);
    kdp__dra_rec_free(rec);
    unlink(path);
    rmdir(dir);
}

static void test_cdi_env_checks(void **state)
{
    (void)state;
    const char *env[] = {"=x"};
    kdp__cdi_dev d = {.name = "a", .env = env, .n_env = 1};
    assert_int_equal(kdp__cdi_write_file("/tmp", "k.json", KIND, &d, 1, 0644), -EINVAL);
    kdp__cdi_dev none = {.name = "a"};
    assert_int_equal(kdp__cdi_write_file("/tmp", "k.json", KIND, &none, 1, 0644), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prepared_builder), cmocka_unit_test(test_view),
        cmocka_unit_test(test_merge_and_cdi),    cmocka_unit_test(test_device_twice),
        cmocka_unit_test(test_cdi_env_checks),   cmocka_unit_test(test_conflict),
        cmocka_unit_test(test_claim_wide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
