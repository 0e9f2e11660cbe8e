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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "failmalloc.h"
#include "kdp.h"
#include "plugin/devices.h"
#include "plugin/response.h"

static int setup(void **state)
{
    (void)state;
    /* The builders log why they refuse; keep the test output clean. */
    kdp_log_set(KDP_LOG_ERROR, NULL, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kdp_log_set(KDP_LOG_WARNING, NULL, NULL);
    return 0;
}

static const char *env_of(const kdp_alloc_response *r, const char *key)
{
    for (size_t i = 0; i < r->n_envs; i++) {
        if (strcmp(r->envs[i].key, key) == 0) {
            return r->envs[i].value;
        }
    }
    return NULL;
}

static void test_env(void **state)
{
    (void)state;
    kdp_alloc_response r;
    kdp__response_init(&r, NULL, NULL, NULL, 0, NULL);
    assert_int_equal(kdp_response_add_env(&r, "A", "1"), 0);
    assert_int_equal(kdp_response_add_env(&r, "B", ""), 0);
    assert_int_equal(kdp_response_add_env(&r, "A", "2"), 0); /* replaces */
    assert_int_equal(r.n_envs, 2);
    assert_string_equal(env_of(&r, "A"), "2");
    assert_string_equal(env_of(&r, "B"), "");

    assert_int_equal(kdp_response_add_env(&r, "", "x"), -EINVAL);
    assert_int_equal(kdp_response_add_env(&r, "A=B", "x"), -EINVAL);
    assert_int_equal(kdp_response_add_env(&r, NULL, "x"), -EINVAL);
    assert_int_equal(kdp_response_add_env(&r, "C", NULL), -EINVAL);
    assert_int_equal(kdp_response_add_env(NULL, "C", "x"), -EINVAL);
    assert_int_equal(r.n_envs, 2);
    assert_string_equal(env_of(&r, "A"), "2");

    /* Many keys: the arrays grow. */
    char key[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "K%d", i);
        assert_int_equal(kdp_response_add_env(&r, key, key), 0);
    }
    assert_int_equal(r.n_envs, 102);
    assert_string_equal(env_of(&r, "K57"), "K57");
    kdp__response_done(&r);
    assert_int_equal(r.n_envs, 0);
    kdp__response_done(NULL);
}

static void test_mount_device_annotation_cdi(void **state)
{
    (void)state;
    kdp_alloc_response r;
    kdp__response_init(&r, NULL, NULL, NULL, 0, NULL);

    assert_int_equal(kdp_response_add_mount(&r, "/data", "/srv/data", true), 0);
    assert_int_equal(kdp_response_add_mount(&r, "/cfg", "/etc/cfg", false), 0);
    assert_int_equal(kdp_response_add_mount(&r, "data", "/srv/data", true), -EINVAL);
    assert_int_equal(kdp_response_add_mount(&r, "/data", "srv", true), -EINVAL);
    assert_int_equal(kdp_response_add_mount(&r, NULL, "/srv", true), -EINVAL);
    assert_int_equal(kdp_response_add_mount(&r, "/data", NULL, true), -EINVAL);
    assert_int_equal(kdp_response_add_mount(NULL, "/a", "/b", true), -EINVAL);
    assert_int_equal(r.n_mounts, 2);
    assert_string_equal(r.mounts[0].container_path, "/data");
    assert_string_equal(r.mounts[0].host_path, "/srv/data");
    assert_true(r.mounts[0].read_only);
    assert_false(r.mounts[1].read_only);

    assert_int_equal(kdp_response_add_device(&r, "/dev/a", "/dev/a", NULL), 0);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/b", "mrw"), 0);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/b", "rwx"), -EINVAL);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/b", ""), -EINVAL);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/b", "rr"), -EINVAL);
    assert_int_equal(kdp_response_add_device(&r, "dev/x", "/dev/b", "r"), -EINVAL);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "dev/b", "r"), -EINVAL);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", NULL, "r"), -EINVAL);
    assert_int_equal(kdp_response_add_device(NULL, "/dev/x", "/dev/b", "r"), -EINVAL);
    assert_int_equal(r.n_devices, 2);
    assert_string_equal(r.devices[0].permissions, "rw"); /* NULL = "rw" */
    assert_string_equal(r.devices[1].container_path, "/dev/x");
    assert_string_equal(r.devices[1].host_path, "/dev/b");
    assert_string_equal(r.devices[1].permissions, "mrw");

    assert_int_equal(kdp_response_add_annotation(&r, "example.com/a", "1"), 0);
    assert_int_equal(kdp_response_add_annotation(&r, "example.com/a", "2"), 0);
    assert_int_equal(kdp_response_add_annotation(&r, "b", ""), 0);
    assert_int_equal(kdp_response_add_annotation(&r, "", "x"), -EINVAL);
    assert_int_equal(kdp_response_add_annotation(&r, NULL, "x"), -EINVAL);
    assert_int_equal(kdp_response_add_annotation(&r, "c", NULL), -EINVAL);
    assert_int_equal(kdp_response_add_annotation(NULL, "c", "x"), -EINVAL);
    assert_int_equal(r.n_annotations, 2);
    assert_string_equal(r.annotations[0].value, "2");

    assert_int_equal(kdp_response_add_cdi_device(&r, "example.com/gpu=gpu0"), 0);
    assert_int_equal(kdp_response_add_cdi_device(&r, "example.com/gpu=all"), 0);
    assert_int_equal(kdp_response_add_cdi_device(&r, "gpu0"), -EINVAL);
    assert_int_equal(kdp_response_add_cdi_device(&r, "example.com/gpu"), -EINVAL);
    assert_int_equal(kdp_response_add_cdi_device(&r, NULL), -EINVAL);
    assert_int_equal(kdp_response_add_cdi_device(NULL, "example.com/gpu=gpu0"), -EINVAL);
    assert_int_equal(r.n_cdi, 2);
    assert_string_equal(r.cdi[1], "example.com/gpu=all");

    /* Growth past the first few slots of each array. */
    for (int i = 0; i < 40; i++) {
        char m[32];
        char d[32];
        snprintf(m, sizeof(m), "/m%d", i);
        snprintf(d, sizeof(d), "/dev/m%d", i);
        assert_int_equal(kdp_response_add_mount(&r, m, "/h", i % 2), 0);
        assert_int_equal(kdp_response_add_device(&r, d, "/dev/h", "r"), 0);
        assert_int_equal(kdp_response_add_cdi_device(&r, "example.com/c=d"), 0);
    }
    assert_int_equal(r.n_mounts, 42);
    assert_int_equal(r.n_devices, 42);
    assert_int_equal(r.n_cdi, 42);
    assert_string_equal(r.mounts[41].host_path, "/h");
    kdp__response_done(&r);
}

/* A table: a (host path), b (host + container path, "r"), c (none). */
static void make_tab(kdp__devtab *t)
{
    kdp_device devs[] = {
        {.id = "a", .host_path = "/dev/a"},
        {.id = "b", .host_path = "/dev/b", .container_path = "/dev/xb", .permissions = "r"},
        {.id = "c"},
    };
    kdp__devtab_init(t);
    assert_int_equal(kdp__devtab_from_array(t, devs, 3, NULL), 0);
}

static void test_defaults_with_host_paths(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *ids[] = {"b", "c", "a"};
    kdp_alloc_response r;
    kdp__response_init(&r, &t, ids, NULL, 3, "KDP_DEVICES_X");
    assert_int_equal(kdp_response_add_env(&r, "KDP_DEVICES_X", "stale"), 0);
    assert_int_equal(kdp_response_add_defaults(&r), 0);

    assert_int_equal(r.n_devices, 2);
    assert_string_equal(r.devices[0].container_path, "/dev/xb");
    assert_string_equal(r.devices[0].host_path, "/dev/b");
    assert_string_equal(r.devices[0].permissions, "r");
    assert_string_equal(r.devices[1].container_path, "/dev/a"); /* default: host path */
    assert_string_equal(r.devices[1].host_path, "/dev/a");
    assert_string_equal(r.devices[1].permissions, "rw"); /* default */
    assert_int_equal(r.n_envs, 1);                       /* replaced, not added */
    assert_string_equal(env_of(&r, "KDP_DEVICES_X"), "b,c,a");
    assert_int_equal(r.n_mounts, 0);
    assert_int_equal(r.n_annotations, 0);
    assert_int_equal(r.n_cdi, 0);
    kdp__response_done(&r);
    assert_int_equal(kdp_response_add_defaults(NULL), -EINVAL);
    kdp__devtab_clear(&t);
}

/* Replicas: the devices are the resolved ones, each node once however many
 * of its replicas came; the env var lists what the kubelet asked. */
static void test_defaults_with_replicas(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *ids[] = {"b-0", "a-3", "b-1"};
    const char *dev_ids[] = {"b", "a", "b"};
    kdp_alloc_response r;
    kdp__response_init(&r, &t, ids, dev_ids, 3, "KDP_DEVICES_X");
    assert_int_equal(kdp_response_add_defaults(&r), 0);
    assert_int_equal(r.n_devices, 2);
    assert_string_equal(r.devices[0].host_path, "/dev/b");
    assert_string_equal(r.devices[1].host_path, "/dev/a");
    assert_string_equal(env_of(&r, "KDP_DEVICES_X"), "b-0,a-3,b-1");
    kdp__response_done(&r);
    kdp__devtab_clear(&t);
}

/* One device node and one mount per container path: the same one again is
 * a no-op, another one at that path is refused (the runtime would fail the
 * container, or keep one of them silently). */
static void test_one_per_container_path(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *ids[] = {"a"};
    kdp_alloc_response r;
    kdp__response_init(&r, &t, ids, NULL, 1, NULL);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/a", "rw"), 0);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/a", NULL), 0); /* same: rw */
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/b", "rw"), -EEXIST);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/a", "r"), -EEXIST);
    assert_int_equal(kdp_response_add_device(&r, "/dev/y", "/dev/a", "r"), 0);
    assert_int_equal(r.n_devices, 2);
    assert_int_equal(kdp_response_add_mount(&r, "/m", "/h", true), 0);
    assert_int_equal(kdp_response_add_mount(&r, "/m", "/h", true), 0);
    assert_int_equal(kdp_response_add_mount(&r, "/m", "/h", false), -EEXIST);
    assert_int_equal(kdp_response_add_mount(&r, "/m", "/other", true), -EEXIST);
    assert_int_equal(r.n_mounts, 1);
    /* the defaults after the author added the same node: still one */
    assert_int_equal(kdp_response_add_defaults(&r), 0);
    assert_int_equal(r.n_devices, 3); /* "a": host path /dev/a at /dev/a */
    assert_int_equal(kdp_response_add_defaults(&r), 0);
    assert_int_equal(r.n_devices, 3);
    kdp__response_done(&r);
    kdp__devtab_clear(&t);
}

static void test_defaults_without_host_paths(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *ids[] = {"c"};
    kdp_alloc_response r;
    kdp__response_init(&r, &t, ids, NULL, 1, "DEVS");
    assert_int_equal(kdp_response_add_defaults(&r), 0);
    assert_int_equal(r.n_devices, 0);
    assert_int_equal(r.n_envs, 1);
    assert_string_equal(env_of(&r, "DEVS"), "c");
    kdp__response_done(&r);

    /* No table, an unknown ID: only the env var. */
    const char *ids2[] = {"x", "y"};
    kdp__response_init(&r, NULL, ids2, NULL, 2, "DEVS");
    assert_int_equal(kdp_response_add_defaults(&r), 0);
    assert_int_equal(r.n_devices, 0);
    assert_string_equal(env_of(&r, "DEVS"), "x,y");
    kdp__response_done(&r);

    /* No env name: only the device nodes. */
    const char *ids3[] = {"a"};
    kdp__response_init(&r, &t, ids3, NULL, 1, NULL);
    assert_int_equal(kdp_response_add_defaults(&r), 0);
    assert_int_equal(r.n_devices, 1);
    assert_int_equal(r.n_envs, 0);
    kdp__response_done(&r);
    kdp__devtab_clear(&t);
}

static void test_ids_join(void **state)
{
    (void)state;
    const char *ids[] = {"gpu0", "gpu3", "x"};
    char *s = kdp_ids_join(ids, 3, NULL);
    assert_string_equal(s, "gpu0,gpu3,x");
    free(s);
    s = kdp_ids_join(ids, 2, ", ");
    assert_string_equal(s, "gpu0, gpu3");
    free(s);
    s = kdp_ids_join(ids, 1, ":");
    assert_string_equal(s, "gpu0");
    free(s);
    s = kdp_ids_join(NULL, 0, NULL);
    assert_string_equal(s, "");
    free(s);
    assert_null(kdp_ids_join(NULL, 2, NULL));
    const char *with_null[] = {"a", NULL};
    assert_null(kdp_ids_join(with_null, 2, NULL));

    kdp_alloc_response r;
    kdp__response_init(&r, NULL, ids, NULL, 3, NULL);
    assert_int_equal(kdp_response_add_env_ids(&r, "GPUS", ";"), 0);
    assert_string_equal(env_of(&r, "GPUS"), "gpu0;gpu3;x");
    assert_int_equal(kdp_response_add_env_ids(&r, "bad=key", NULL), -EINVAL);
    assert_int_equal(kdp_response_add_env_ids(NULL, "K", NULL), -EINVAL);
    kdp__response_done(&r);
}

static V1beta1__ContainerAllocateResponse *round_trip(const kdp_alloc_response *r)
{
    V1beta1__ContainerAllocateResponse pb = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
    assert_int_equal(kdp__response_to_pb(r, &pb), 0);
    size_t len = v1beta1__container_allocate_response__get_packed_size(&pb);
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    assert_int_equal(v1beta1__container_allocate_response__pack(&pb, buf), len);
    kdp__response_pb_done(&pb);
    assert_int_equal(pb.n_envs + pb.n_mounts + pb.n_devices + pb.n_annotations + pb.n_cdi_devices,
                     0);
    assert_null(pb.envs);
    V1beta1__ContainerAllocateResponse *m =
        v1beta1__container_allocate_response__unpack(NULL, len, buf);
    assert_non_null(m);
    free(buf);
    return m;
}

static void test_to_pb_round_trip(void **state)
{
    (void)state;
    kdp_alloc_response r;
    kdp__response_init(&r, NULL, NULL, NULL, 0, NULL);
    assert_int_equal(kdp_response_add_env(&r, "A", "1"), 0);
    assert_int_equal(kdp_response_add_env(&r, "B", "two=2"), 0);
    assert_int_equal(kdp_response_add_mount(&r, "/data", "/srv/data", true), 0);
    assert_int_equal(kdp_response_add_mount(&r, "/cfg", "/etc/cfg", false), 0);
    assert_int_equal(kdp_response_add_device(&r, "/dev/x", "/dev/b", "rwm"), 0);
    assert_int_equal(kdp_response_add_annotation(&r, "example.com/k", "v"), 0);
    assert_int_equal(kdp_response_add_cdi_device(&r, "example.com/gpu=gpu0"), 0);
    assert_int_equal(kdp_response_add_cdi_device(&r, "example.com/gpu=gpu1"), 0);

    V1beta1__ContainerAllocateResponse *m = round_trip(&r);
    assert_int_equal(m->n_envs, 2);
    assert_string_equal(m->envs[0]->key, "A");
    assert_string_equal(m->envs[0]->value, "1");
    assert_string_equal(m->envs[1]->key, "B");
    assert_string_equal(m->envs[1]->value, "two=2");
    assert_int_equal(m->n_mounts, 2);
    assert_string_equal(m->mounts[0]->container_path, "/data");
    assert_string_equal(m->mounts[0]->host_path, "/srv/data");
    assert_true(m->mounts[0]->read_only);
    assert_string_equal(m->mounts[1]->container_path, "/cfg");
    assert_string_equal(m->mounts[1]->host_path, "/etc/cfg");
    assert_false(m->mounts[1]->read_only);
    assert_int_equal(m->n_devices, 1);
    assert_string_equal(m->devices[0]->container_path, "/dev/x");
    assert_string_equal(m->devices[0]->host_path, "/dev/b");
    assert_string_equal(m->devices[0]->permissions, "rwm");
    assert_int_equal(m->n_annotations, 1);
    assert_string_equal(m->annotations[0]->key, "example.com/k");
    assert_string_equal(m->annotations[0]->value, "v");
    assert_int_equal(m->n_cdi_devices, 2);
    assert_string_equal(m->cdi_devices[0]->name, "example.com/gpu=gpu0");
    assert_string_equal(m->cdi_devices[1]->name, "example.com/gpu=gpu1");
    v1beta1__container_allocate_response__free_unpacked(m, NULL);
    kdp__response_done(&r);

    /* An empty response is an empty message. */
    kdp__response_init(&r, NULL, NULL, NULL, 0, NULL);
    m = round_trip(&r);
    assert_int_equal(m->n_envs + m->n_mounts + m->n_devices + m->n_annotations + m->n_cdi_devices,
                     0);
    v1beta1__container_allocate_response__free_unpacked(m, NULL);
    kdp__response_done(&r);

    V1beta1__ContainerAllocateResponse pb = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
    assert_int_equal(kdp__response_to_pb(NULL, &pb), -EINVAL);
    kdp__response_pb_done(NULL);
}

static void test_defaults_round_trip(void **state)
{
    (void)state;
    kdp__devtab t;
    make_tab(&t);
    const char *ids[] = {"a", "b"};
    kdp_alloc_response r;
    kdp__response_init(&r, &t, ids, NULL, 2, "KDP_DEVICES_EXAMPLE_COM_FOO");
    assert_int_equal(kdp_response_add_defaults(&r), 0);
    V1beta1__ContainerAllocateResponse *m = round_trip(&r);
    assert_int_equal(m->n_envs, 1);
    assert_string_equal(m->envs[0]->key, "KDP_DEVICES_EXAMPLE_COM_FOO");
    assert_string_equal(m->envs[0]->value, "a,b");
    assert_int_equal(m->n_devices, 2);
    assert_string_equal(m->devices[0]->host_path, "/dev/a");
    assert_string_equal(m->devices[1]->container_path, "/dev/xb");
    v1beta1__container_allocate_response__free_unpacked(m, NULL);
    kdp__response_done(&r);
    kdp__devtab_clear(&t);
}

static void test_id_list(void **state)
{
    (void)state;
    kdp_id_list l;
    kdp__id_list_init(&l);
    assert_int_equal(kdp_id_list_add(&l, "gpu1"), 0);
    assert_int_equal(kdp_id_list_add(&l, "gpu0"), 0);
    assert_int_equal(kdp_id_list_add(&l, ""), -EINVAL);
    assert_int_equal(kdp_id_list_add(&l, "a,b"), -EINVAL);
    assert_int_equal(kdp_id_list_add(&l, NULL), -EINVAL);
    assert_int_equal(kdp_id_list_add(NULL, "gpu2"), -EINVAL);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.ids[0], "gpu1"); /* order of preference kept */
    assert_string_equal(l.ids[1], "gpu0");
    char id[16];
    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof(id), "d%d", i);
        assert_int_equal(kdp_id_list_add(&l, id), 0);
    }
    assert_int_equal(l.n, 102);
    assert_true(l.cap >= l.n);
    assert_string_equal(l.ids[101], "d99");
    kdp__id_list_done(&l);
    assert_int_equal(l.n, 0);
    assert_null(l.ids);
    kdp__id_list_done(NULL);
}

static void expect_env_name(const char *resource, const char *want)
{
    char *s = kdp__default_env_name(resource);
    assert_non_null(s);
    assert_string_equal(s, want);
    free(s);
}

static void test_default_env_name(void **state)
{
    (void)state;
    expect_env_name("example.com/gopher", "KDP_DEVICES_EXAMPLE_COM_GOPHER");
    expect_env_name("a-b.c/D_9x", "KDP_DEVICES_A_B_C_D_9X");
    expect_env_name("Z/z", "KDP_DEVICES_Z_Z");
    expect_env_name("", "KDP_DEVICES_");
    expect_env_name("\xc3\xa9/~", "KDP_DEVICES_____");
    assert_null(kdp__default_env_name(NULL));
}

static void test_oom(void **state)
{
    (void)state;
    if (!oom_works()) {
        skip();
    }
    kdp__devtab t;
    make_tab(&t);
    const char *ids[] = {"a", "b", "c"};
    kdp_alloc_response r;
    kdp__response_init(&r, &t, ids, NULL, 3, "DEVS");
    OOM_LOOP(kdp_response_add_env(&r, "A", "1"), assert_int_equal(r.n_envs, 0));
    OOM_LOOP(kdp_response_add_env(&r, "A", "2"), assert_string_equal(r.envs[0].value, "1"));
    assert_string_equal(r.envs[0].value, "2");
    OOM_LOOP(kdp_response_add_annotation(&r, "k", "v"), assert_int_equal(r.n_annotations, 0));
    OOM_LOOP(kdp_response_add_mount(&r, "/a", "/b", true), assert_int_equal(r.n_mounts, 0));
    OOM_LOOP(kdp_response_add_device(&r, "/a", "/b", "r"), assert_int_equal(r.n_devices, 0));
    OOM_LOOP(kdp_response_add_cdi_device(&r, "example.com/c=d"), assert_int_equal(r.n_cdi, 0));
    V1beta1__ContainerAllocateResponse pb = V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT;
    OOM_LOOP(kdp__response_to_pb(&r, &pb),
             assert_int_equal(
                 pb.n_envs + pb.n_annotations + pb.n_mounts + pb.n_devices + pb.n_cdi_devices, 0));
    assert_int_equal(pb.n_devices, 1);
    kdp__response_pb_done(&pb);
    kdp__response_done(&r);

    /* add_defaults may leave part of its work on failure, never a leak. */
    for (long k = 0;; k++) {
        kdp__response_init(&r, &t, ids, NULL, 3, "DEVS");
        oom_countdown = k;
        int ret = kdp_response_add_defaults(&r);
        oom_countdown = -1;
        kdp__response_done(&r);
        if (ret == 0) {
            break;
        }
        assert_int_equal(ret, -ENOMEM);
    }

    kdp_id_list l;
    kdp__id_list_init(&l);
    for (int i = 0; i < 5; i++) {
        OOM_LOOP(kdp_id_list_add(&l, "x"), assert_int_equal(l.n, (size_t)i));
    }
    kdp__id_list_done(&l);

    oom_countdown = 0;
    char *name = kdp__default_env_name("example.com/x");
    oom_countdown = -1;
    assert_null(name);
    kdp__devtab_clear(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_mount_device_annotation_cdi),
        cmocka_unit_test(test_defaults_with_host_paths),
        cmocka_unit_test(test_defaults_with_replicas),
        cmocka_unit_test(test_defaults_without_host_paths),
        cmocka_unit_test(test_one_per_container_path),
        cmocka_unit_test(test_to_pb_round_trip),
        cmocka_unit_test(test_defaults_round_trip),
        cmocka_unit_test(test_id_list),
        cmocka_unit_test(test_ids_join),
        cmocka_unit_test(test_default_env_name),
        cmocka_unit_test(test_oom),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
