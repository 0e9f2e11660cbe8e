/* SPDX-License-Identifier: MIT */
/*
 * config: a DRA driver's configuration (kdp_dra_config) checked, its
 * defaults taken ($NODE_NAME, $POD_UID, the plugin's kubelet root and
 * instance) and the paths made: the registration and service sockets, the
 * state directory, the CDI directory and kind. Every bad field is refused
 * with a log line naming it.
 */
#ifndef KDP_DRA_CONFIG_H
#define KDP_DRA_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kdp_dra.h"

typedef struct kdp__dra_conf {
    char *driver;
    char *node;
    char *instance;   /* NULL: none */
    char *kubeconfig; /* NULL: $KUBECONFIG, else in-cluster */
    char *state_dir;
    char *cdi_dir;
    unsigned cdi_mode; /* 0644 unless asked */
    char *cdi_kind;    /* "k8s.<driver>/claim" */
    char *reg_path;    /* <root>/plugins_registry/<driver>[-<instance>]-reg.sock */
    char *svc_dir;     /* <root>/plugins/<driver> */
    char *svc_path;    /* <svc_dir>/dra[-<instance>].sock */
    bool device_plugin_too;
    bool no_health;
    bool no_health_v1alpha1;
    unsigned resync_ms;
    unsigned concurrent_claims;
    kdp_dra_taint_effect unhealthy_taint;
    bool device_metadata;
    char *md_dir;    /* <state_dir>/dra-device-metadata */
    char *taint_key; /* "<driver>/unhealthy" */
    const char *versions[4];
    size_t n_versions;
} kdp__dra_conf;

/* Returns 0, -EINVAL (logged, naming the field), -ENAMETOOLONG (a socket
 * path too long: logged), -ENOMEM. c is to be done either way. */
int kdp__dra_conf_init(kdp__dra_conf *c, kdp_plugin *p, const kdp_dra_config *cfg);
void kdp__dra_conf_done(kdp__dra_conf *c);

#endif
