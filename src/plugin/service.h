/* SPDX-License-Identifier: MIT */
/* service: the v1beta1 DevicePlugin methods a plugin serves. Loop thread. */
#ifndef KDP_SERVICE_H
#define KDP_SERVICE_H

#include "deviceplugin.pb-c.h"
#include "grpc/server.h"
#include "plugin/plugin_int.h"

#define KDP__SERVICE_METHODS 5

/* Fills the method table for p's server (ud = p). */
void kdp__service_methods(kdp_plugin *p, kdp__method out[KDP__SERVICE_METHODS]);
/* The options that follow from p's ops (same in Register and in
 * GetDevicePluginOptions). */
void kdp__service_options(const kdp_plugin *p, V1beta1__DevicePluginOptions *out);
/* Sends p->law_msg to every open ListAndWatch stream. */
void kdp__service_broadcast(kdp_plugin *p);

#endif
