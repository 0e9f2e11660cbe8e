/* SPDX-License-Identifier: MIT */
/*
 * reg_kubelet: registration through the kubelet's Registration service on
 * <dir>/kubelet.sock (the way of every kubelet since 1.8). Register goes
 * out once the plugin serves, retried with capped backoff forever; a
 * missing kubelet.sock is waited for through the directory's events, with
 * a slow fallback check; a new kubelet.sock while registered means a new
 * kubelet: restart.
 */
#ifndef KDP_REG_KUBELET_H
#define KDP_REG_KUBELET_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "base/backoff.h"
#include "deviceplugin.pb-c.h"
#include "grpc/client.h"
#include "plugin/reg.h"
#include "runtime/loop.h"

/* The options the RegisterRequest carries (the served DevicePlugin's). */
typedef void (*kdp__reg_options_fn)(void *ud, V1beta1__DevicePluginOptions *out);

typedef struct kdp__reg_kubelet {
    kdp__reg base;
    kdp__loop *loop;
    const char *resource; /* borrowed */
    const char *endpoint; /* the socket's name, borrowed */
    char *kubelet_path;   /* <dir>/kubelet.sock */
    kdp__reg_options_fn options;
    void *options_ud;
    bool active; /* between start and stop */
    kdp__reg_state state;
    kdp__client_call *call;
    kdp__timer *retry;
    kdp__backoff backoff;
    ino_t kubelet_ino;             /* kubelet.sock at the last Register */
    struct timespec kubelet_ctime; /* its change time then */
    unsigned creates;              /* kubelet.sock creations seen */
    unsigned reg_creates;          /* creates when the last Register went out */
    unsigned fast_retries;         /* quick retries left after kubelet.sock appeared */
} kdp__reg_kubelet;

int kdp__reg_kubelet_init(kdp__reg_kubelet *k, kdp__loop *l, const char *dir, const char *endpoint,
                          const char *resource, kdp__reg_options_fn options, void *options_ud,
                          const kdp__reg_up *up);
void kdp__reg_kubelet_done(kdp__reg_kubelet *k);

#endif
