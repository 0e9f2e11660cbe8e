/* SPDX-License-Identifier: MIT */
/* cmocka 1.1.5 needs these first, in this order. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

/* The DRA checkpoint: round trip, atomic writes, a corrupt file kept
 * aside (a name of its own), a newer or unreadable one refused, two
 * instances sharing the file, a version 1 file upgraded. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dra/checkpoint.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/kdp-ckpt-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t count(const char *pattern)
{
    char p[160];
    snprintf(p, sizeof(p), "%s/%s", dir, pattern);
    glob_t g;
    size_t n = glob(p, 0, NULL, &g) == 0 ? g.gl_pathc : 0;
    globfree(&g);
    return n;
}

#define BOOT "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"

/* A record of uid with one device; two configs, one of them twice. */
static kdp__dra_rec *rec_of(const char *uid)
{
    kdp__dra_rec *r = kdp__dra_rec_new("ns", "claim-a", uid);
    assert_non_null(r);
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu", "gpu-0", NULL, false, NULL), 0);
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu", "gpu-1", "share-1", true, NULL), 0);
    assert_int_equal(kdp__dra_rec_add_config(r, 0, "{\"a\":1}"), 0);
    assert_int_equal(kdp__dra_rec_add_config(r, 1, "{\"a\":1}"), 0);
    assert_int_equal(kdp__dra_rec_add_config(r, 1, "{\"b\":[2,3]}"), 0);
    snprintf(r->boot_id, sizeof(r->boot_id), "%s", BOOT);
    r->prepared = true;
    return r;
}

static void test_round_trip(void **state)
{
    (void)state;
    char sub[100];
    snprintf(sub, sizeof(sub), "%s/a/b", dir); /* made */
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(sub, BOOT, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 0);
    kdp__dra_rec *rec = rec_of("u1");
    assert_int_equal(rec->n_configs, 2); /* each config once */
    assert_int_equal(kdp__ckpt_put(c, rec), 0);
    kdp__dra_rec_free(rec);
    rec = rec_of("u2");
    assert_int_equal(kdp__ckpt_put(c, rec), 0);
    kdp__dra_rec_free(rec);
    assert_int_equal(kdp__ckpt_del(c, "u2"), 1);
    assert_int_equal(kdp__ckpt_del(c, "u2"), 0);
    kdp__ckpt_unref(c);

    c = NULL;
    assert_int_equal(kdp__ckpt_open(sub, BOOT, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 1);
    kdp__dra_rec *got = kdp__ckpt_get(c, "u1");
    assert_non_null(got);
    assert_string_equal(got->boot_id, BOOT);
    assert_true(got->prepared);
    assert_int_equal(got->n_devs, 2);
    assert_string_equal(got->devs[1].device, "gpu-1");
    assert_string_equal(got->devs[1].share_id, "share-1");
    assert_true(got->devs[1].admin_access);
    assert_null(got->devs[0].share_id);
    assert_int_equal(got->n_configs, 2);
    assert_int_equal(got->devs[1].n_cfg, 2);
    assert_string_equal(got->configs[got->devs[1].cfg[1]], "{\"b\":[2,3]}");
    kdp__dra_rec_free(got);
    assert_null(kdp__ckpt_get(c, "u2"));
    kdp__ckpt_unref(kdp__ckpt_ref(c)); /* a reference more, then less */
    kdp__ckpt_unref(c);
    kdp__ckpt_unref(NULL);

    /* a file per claim: version, checksum, configs as JSON once; u2's gone;
     * no temporary */
    char path[160];
    snprintf(path, sizeof(path), "%s/" KDP__CKPT_CLAIMS "/u1.json", sub);
    json_t *root = json_load_file(path, 0, NULL);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "version")),
                     KDP__CKPT_RECORD_VERSION);
    assert_true(strncmp(json_string_value(json_object_get(root, "checksum")), "fnv1a64:", 8) == 0);
    json_t *cfgs = json_object_get(json_object_get(root, "claim"), "configs");
    assert_int_equal(json_array_size(cfgs), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(cfgs, 0), "a")), 1);
    json_decref(root);
    assert_int_equal(count("a/b/" KDP__CKPT_CLAIMS "/*.json"), 1);
    assert_int_equal(count("a/b/" KDP__CKPT_FILE), 0);
    assert_int_equal(count("a/b/" KDP__CKPT_CLAIMS "/.*.tmp-*"), 0);
}

/* A version 1 file (every device with its own copy of its configs as JSON
 * text, no boot): read, and written again as version 2; its records of
 * this boot if the file was written since the boot, else of none. */
static void write_v1(void)
{
    json_t *claims = json_pack(
        "{s:{s:s, s:s, s:s, s:[{s:s, s:s, s:s, s:b, s:[s], s:[{s:s, s:s}], s:[s], s:[s]}]}}", "u9",
        "namespace", "ns", "name", "old", "uid", "u9", "devices", "request", "gpu", "device",
        "gpu-0", "device_id", "GPU-0", "admin_access", 0, "configs", "{\"x\":1}", "nodes", "path",
        "/dev/gpu0", "host_path", "/dev/gpu0", "env", "A=1", "cdi_ids",
        "k8s.gpu.example.com/claim=u9-gpu-0");
    char *dump = json_dumps(claims, JSON_COMPACT | JSON_SORT_KEYS);
    char sum[32];
    kdp__ckpt_checksum(dump, sum);
    json_t *root = json_pack("{s:i, s:s, s:o}", "version", 1, "checksum", sum, "claims", claims);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    write_file(KDP__CKPT_FILE, text);
    free(text);
    free(dump);
    json_decref(root);
}

static void test_version_1_upgraded(void **state)
{
    (void)state;
    write_v1();
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    kdp__dra_rec *r = kdp__ckpt_get(c, "u9");
    assert_non_null(r);
    assert_string_equal(r->boot_id, BOOT); /* written since this boot began */
    assert_true(r->prepared);
    assert_int_equal(r->n_configs, 1);
    assert_string_equal(r->configs[0], "{\"x\":1}");
    assert_string_equal(r->devs[0].device_id, "GPU-0");
    assert_string_equal(r->devs[0].cdi_name, "u9-gpu-0"); /* not kept by version 1 */
    assert_int_equal(r->devs[0].edits.n_nodes, 1);
    assert_string_equal(r->devs[0].edits.env[0], "A=1");
    kdp__dra_rec_free(r);
    kdp__ckpt_unref(c);
    /* moved to a file of its own, the old file gone */
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, KDP__CKPT_FILE);
    assert_int_equal(count(KDP__CKPT_FILE), 0);
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u9.json"), 1);
    char rm[200];
    snprintf(rm, sizeof(rm), "%s/" KDP__CKPT_CLAIMS "/u9.json", dir);
    assert_int_equal(unlink(rm), 0);

    /* a version 1 file of before the boot: its claims are of an earlier one */
    write_v1();
    struct timespec old[2] = {{1, 0}, {1, 0}}; /* 1970 */
    assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    r = kdp__ckpt_get(c, "u9");
    assert_non_null(r);
    assert_string_equal(r->boot_id, "");
    kdp__dra_rec_free(r);
    kdp__ckpt_unref(c);
}

static void corrupt(const char *text)
{
    write_file(KDP__CKPT_FILE, text);
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 0);
    kdp__ckpt_unref(c);
}

static void test_corrupt_kept_aside(void **state)
{
    (void)state;
    corrupt("{not json");
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 1);
    /* within the same second: a name of its own each */
    corrupt("{\"version\": 1, \"checksum\": \"fnv1a64:0000000000000000\", \"claims\": {}}");
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 2);
    corrupt("{\"version\": 0, \"checksum\": \"x\", \"claims\": {}}");
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 3);
    assert_int_equal(count(KDP__CKPT_FILE), 0);
}

/* A newer version (a downgrade) and a file that cannot be read are no
 * corruption: refused, the file left where it is. */
static void test_refused_not_set_aside(void **state)
{
    (void)state;
    write_file(KDP__CKPT_FILE, "{\"version\": 99, \"checksum\": \"x\", \"claims\": {}}");
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), -EPROTO);
    assert_int_equal(count(KDP__CKPT_FILE), 1);
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, KDP__CKPT_FILE);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0); /* read() fails: EISDIR */
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), -EISDIR);
    assert_int_equal(count(KDP__CKPT_FILE ".corrupt-*"), 0);
    assert_int_equal(rmdir(path), 0);
}

static void put(kdp__ckpt *c, const char *uid)
{
    kdp__dra_rec *rec = rec_of(uid);
    assert_int_equal(kdp__ckpt_put(c, rec), 0);
    kdp__dra_rec_free(rec);
}

static bool has(kdp__ckpt *c, const char *uid)
{
    kdp__dra_rec *rec = kdp__ckpt_get(c, uid);
    kdp__dra_rec_free(rec);
    return rec != NULL;
}

/* Two instances on one state directory (a rolling update): neither loses
 * the other's records. */
static void test_two_instances(void **state)
{
    (void)state;
    kdp__ckpt *a = NULL;
    kdp__ckpt *b = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &a), 0);
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &b), 0);
    put(a, "u1");
    put(b, "u2"); /* b read u1 from the file first */
    put(a, "u3");
    assert_true(has(a, "u2"));
    assert_int_equal(kdp__ckpt_count(a), 3);
    assert_int_equal(kdp__ckpt_del(b, "u1"), 1); /* b had not seen it yet */
    assert_false(has(a, "u1"));
    assert_int_equal(kdp__ckpt_del(a, "u1"), 0);
    kdp__ckpt_unref(a);
    kdp__ckpt_unref(b);
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    assert_int_equal(kdp__ckpt_count(c), 2);
    assert_true(has(c, "u2") && has(c, "u3"));
    kdp__ckpt_unref(c);
}

/* A claim's file that does not parse is set aside, that claim forgotten,
 * the others kept; one of a newer kdp refuses the open, untouched. */
static void test_claim_file_corrupt_or_newer(void **state)
{
    (void)state;
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    put(c, "u1");
    put(c, "u2");
    kdp__ckpt_unref(c);
    write_file(KDP__CKPT_CLAIMS "/u2.json", "{\"version\": 3, \"checksum\": \"fnv1a64:0\"}");
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    assert_true(has(c, "u1"));
    assert_false(has(c, "u2"));
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u2.json.corrupt-*"), 1);
    kdp__ckpt_unref(c);
    /* the file of u3 holding u1's record: not u3's */
    char from[160];
    char to[160];
    snprintf(from, sizeof(from), "%s/" KDP__CKPT_CLAIMS "/u1.json", dir);
    snprintf(to, sizeof(to), "%s/" KDP__CKPT_CLAIMS "/u3.json", dir);
    assert_int_equal(link(from, to), 0);
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    assert_false(has(c, "u3"));
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u3.json.corrupt-*"), 1);
    kdp__ckpt_unref(c);
    write_file(KDP__CKPT_CLAIMS "/u4.json", "{\"version\": 9, \"checksum\": \"x\", \"claim\": {}}");
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), -EPROTO);
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u4.json"), 1);
}

/* A file found corrupt by a read between writes (no lock held: another
 * instance may be replacing it) is left where it is, the memory's copy
 * kept; the next write, under the lock, sets it aside. */
static void test_corrupt_seen_by_a_read(void **state)
{
    (void)state;
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    put(c, "u1");
    put(c, "u2");
    /* replaced as a writer replaces it (the directory changes) */
    write_file(KDP__CKPT_CLAIMS "/.new", "{\"version\": 3, \"checksum\": \"fnv1a64:0\"}");
    char from[160];
    char to[160];
    snprintf(from, sizeof(from), "%s/" KDP__CKPT_CLAIMS "/.new", dir);
    snprintf(to, sizeof(to), "%s/" KDP__CKPT_CLAIMS "/u2.json", dir);
    assert_int_equal(rename(from, to), 0);
    assert_true(has(c, "u2")); /* a read: the memory's copy */
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u2.json.corrupt-*"), 0);
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u2.json"), 1);
    put(c, "u3"); /* a write */
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u2.json.corrupt-*"), 1);
    assert_false(has(c, "u2"));
    assert_true(has(c, "u1"));
    kdp__ckpt_unref(c);
}

/* What a claim keeps, and all of them, is bounded: a record past either
 * is refused, the others untouched. */
static void test_bounds(void **state)
{
    (void)state;
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    size_t big = 200U << 10;
    char *cfg = malloc(big + 16);
    assert_non_null(cfg);
    kdp__dra_rec *r = kdp__dra_rec_new("ns", "big", "b0");
    assert_int_equal(kdp__dra_rec_add_dev(r, "gpu", "gpu-0", NULL, false, NULL), 0);
    for (int i = 0; i < 6; i++) { /* 6 x 200 KiB: over 1 MiB */
        int n = snprintf(cfg, 16, "{\"%d\":\"", i);
        memset(cfg + n, 'x', big);
        strcpy(cfg + n + big, "\"}");
        assert_int_equal(kdp__dra_rec_add_config(r, 0, cfg), 0);
    }
    assert_int_equal(kdp__ckpt_put(c, r), -EFBIG);
    assert_false(has(c, "b0"));
    kdp__dra_rec_free(r);
    /* 4 configs of 200 KiB each (800 KiB) a claim: the 41st claim is past
     * 32 MiB in all */
    int refused = 0;
    for (int k = 0; k < 41 && !refused; k++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "k%d", k);
        r = kdp__dra_rec_new("ns", "c", uid);
        assert_int_equal(kdp__dra_rec_add_dev(r, "gpu", "gpu-0", NULL, false, NULL), 0);
        for (int i = 0; i < 4; i++) {
            int n = snprintf(cfg, 16, "{\"%d\":\"", i);
            memset(cfg + n, 'a' + (char)(k % 26), big);
            strcpy(cfg + n + big, "\"}");
            assert_int_equal(kdp__dra_rec_add_config(r, 0, cfg), 0);
        }
        int e = kdp__ckpt_put(c, r);
        refused = e == -ENOSPC ? k : 0;
        assert_true(e == 0 || e == -ENOSPC);
        kdp__dra_rec_free(r);
    }
    free(cfg);
    assert_int_equal(refused, 40);
    assert_int_equal(kdp__ckpt_count(c), 40);
    kdp__ckpt_unref(c);
}

/* An old kdp's instance in a rolling update writes checkpoint.json while
 * this one runs: its claims are seen at once, imported at the next write. */
static void test_old_instance_beside(void **state)
{
    (void)state;
    kdp__ckpt *c = NULL;
    assert_int_equal(kdp__ckpt_open(dir, BOOT, &c), 0);
    put(c, "u1");
    write_v1(); /* u9, by the old instance */
    assert_true(has(c, "u9"));
    assert_int_equal(count(KDP__CKPT_FILE), 1);
    put(c, "u2"); /* a write: the import */
    assert_int_equal(count(KDP__CKPT_FILE), 0);
    assert_int_equal(count(KDP__CKPT_CLAIMS "/u9.json"), 1);
    assert_true(has(c, "u9") && has(c, "u1") && has(c, "u2"));
    assert_int_equal(kdp__ckpt_count(c), 3);
    kdp__ckpt_unref(c);
}

static void test_checksum(void **state)
{
    (void)state;
    char a[32], b[32];
    kdp__ckpt_checksum("{}", a);
    kdp__ckpt_checksum("{ }", b);
    assert_string_not_equal(a, b);
    kdp__ckpt_checksum("", a);
    assert_string_equal(a, "fnv1a64:cbf29ce484222325");
}

static void test_unwritable(void **state)
{
    (void)state;
    if (geteuid() == 0) {
        skip(); /* root writes anywhere */
    }
    kdp__ckpt *c = NULL;
    assert_true(kdp__ckpt_open("/proc/kdp-no/such", BOOT, &c) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version_1_upgraded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_kept_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_not_set_aside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_instances, setup, teardown),
        cmocka_unit_test(test_checksum),
        cmocka_unit_test_setup_teardown(test_corrupt_seen_by_a_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_claim_file_corrupt_or_newer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_instance_beside, setup, teardown),
        cmocka_unit_test(test_unwritable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
