/* SPDX-License-Identifier: MIT */
/*
 * regmode: which way a plugin registers (kdp_config.registration,
 * $KDP_REGISTRATION), the auto rule, and where the plugin's socket goes for
 * each way.
 */
#ifndef KDP_REGMODE_H
#define KDP_REGMODE_H

#include "kdp.h"

/* The way to use for cfg: KDP_REGISTRATION_KUBELET or _WATCHER (auto and
 * the default resolved; the decision and its reason logged at info for
 * auto). Returns 0 or -EINVAL (a bad value in the config or the
 * environment: logged). */
int kdp__regmode_resolve(const kdp_config *cfg, const kdp_kubelet_paths *paths,
                         kdp_registration *ret);

/* The directory the plugin's socket goes into for mode. */
const char *kdp__regmode_dir(kdp_registration mode, const kdp_kubelet_paths *paths);

/* "kubelet.sock" or "plugin watcher", for log lines. */
const char *kdp__regmode_name(kdp_registration mode);

#endif
