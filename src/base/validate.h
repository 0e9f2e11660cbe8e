/* SPDX-License-Identifier: MIT */
/* validate: names and strings checked before they reach the kubelet. Each
 * returns 0 or -EINVAL, and, when why is not NULL, stores a static English
 * phrase saying what is wrong (for log lines and gRPC messages). */
#ifndef KDP_VALIDATE_H
#define KDP_VALIDATE_H

/* The kubelet's extended-resource-name rule: must contain '/'; must not
 * contain "kubernetes.io/"; must not start with "requests."; and
 * "requests." + name must be a qualified name: an optional DNS-1123 subdomain
 * prefix (at most 253 chars, lower-case alphanumerics, '-' and '.', each
 * label starting and ending alphanumeric) then '/', then a name of 1-63 chars
 * matching [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?. */
int kdp__validate_resource_name(const char *name, const char **why);
/* A socket file name in the device-plugin dir: 1-100 bytes, no '/', not "."
 * or "..", no NUL or control characters, not "kubelet.sock", and ending in
 * ".sock" is not required. */
int kdp__validate_socket_name(const char *name, const char **why);
/* A device ID: 1-255 bytes of printable ASCII (0x21-0x7E) without '/' or ','. */
int kdp__validate_device_id(const char *id, const char **why);
/* Device permissions: non-empty, only 'r', 'w', 'm', each at most once. */
int kdp__validate_permissions(const char *perm, const char **why);
/* An absolute path: starts with '/', at most 4095 bytes, no control chars. */
int kdp__validate_abs_path(const char *path, const char **why);
/* A fully qualified CDI device name "vendor/class=name", with the CDI
 * parser's rules: vendor and class start with a letter, end with a letter or
 * digit, and contain [A-Za-z0-9_.-]; name starts and ends with a letter or
 * digit and contains [A-Za-z0-9_.:-] (e.g. "example.com/gpu=gpu0"). */
int kdp__validate_cdi_name(const char *name, const char **why);
/* An env var name: non-empty, no '=' and no NUL. */
int kdp__validate_env_key(const char *key, const char **why);

#endif
