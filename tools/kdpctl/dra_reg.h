/* SPDX-License-Identifier: MIT */
/*
 * dra_reg: `kdpctl dra kubelet`'s registration of a plugin through its
 * socket in plugins_registry, as the kubelet does it: GetInfo (1 s); type
 * "DRAPlugin", then the version: the plugin's supported_versions in its
 * order, the first the kubelet supports (--versions, default v1,v1beta1;
 * "v1alpha1.DRAResourceHealth" only notes the health service); the endpoint
 * must be an absolute path to a socket that no other registration holds;
 * then NotifyRegistrationStatus. A refused or unreachable socket is asked
 * again after a backoff (500 ms doubling to 2m2s). A later registration of
 * a driver replaces the earlier one. Once registered, the health stream
 * (dra_health_stream.h) is opened.
 */
#ifndef KDPCTL_DRA_REG_H
#define KDPCTL_DRA_REG_H

#include "dra.h"

/* Registers p afresh: what an earlier registration said forgotten, the
 * backoff reset, GetInfo sent. */
void kd_reg_start(kd_plugin *p);
/* The callback of p's retry timer (ud = p): GetInfo again, or, once p is
 * registered, its health stream reopened. */
void kd_reg_on_retry(kdp__timer *t, void *ud);
/* Cancels p's calls (GetInfo, the notify, the health stream), stops its
 * retry timer and forgets what GetInfo said and the last health list. */
void kd_reg_reset(kd_plugin *p);

#endif
