/* SPDX-License-Identifier: MIT */
/*
 * response: the builders behind kdp_alloc_response and kdp_id_list, and their
 * conversion to v1beta1 protobuf-c messages.
 */
#ifndef KDP_RESPONSE_H
#define KDP_RESPONSE_H

#include <stddef.h>

#include "deviceplugin.pb-c.h"
#include "kdp.h"
#include "plugin/devices.h"

typedef struct kdp__kv {
    char *key;
    char *value;
} kdp__kv;

struct kdp_alloc_response {
    /* what add_defaults needs, borrowed for the builder's life */
    const kdp__devtab *tab;
    const char *const *ids;        /* as the kubelet sent them */
    const char *const *device_ids; /* the device of each (replicas resolved) */
    size_t n_ids;
    const char *env_name;

    kdp__kv *envs; /* a key appears once: a later add replaces */
    size_t n_envs;
    kdp__kv *annotations;
    size_t n_annotations;
    V1beta1__Mount *mounts; /* strings owned by the builder */
    size_t n_mounts;
    V1beta1__DeviceSpec *devices;
    size_t n_devices;
    char **cdi;
    size_t n_cdi;
};

/* tab, ids, device_ids and env_name are borrowed and must outlive the
 * builder. device_ids[i] is the ID in tab of ids[i]'s device (NULL = ids:
 * no replicas). */
void kdp__response_init(kdp_alloc_response *r, const kdp__devtab *tab, const char *const *ids,
                        const char *const *device_ids, size_t n_ids, const char *env_name);
void kdp__response_done(kdp_alloc_response *r);
/* Fills out (initialised by the caller with V1BETA1__CONTAINER_ALLOCATE_RESPONSE__INIT)
 * with pointers into r and arrays allocated here; release those with
 * kdp__response_pb_done(out) before kdp__response_done(r). Returns 0 or
 * -ENOMEM. */
int kdp__response_to_pb(const kdp_alloc_response *r, V1beta1__ContainerAllocateResponse *out);
void kdp__response_pb_done(V1beta1__ContainerAllocateResponse *out);

struct kdp_id_list {
    char **ids;
    size_t n;
    size_t cap;
};
void kdp__id_list_init(kdp_id_list *l);
void kdp__id_list_done(kdp_id_list *l);

/* The default env var name for a resource: "KDP_DEVICES_" + the name
 * upper-cased, every character other than [A-Z0-9] as '_'. malloc'ed. */
char *kdp__default_env_name(const char *resource_name);

#endif
