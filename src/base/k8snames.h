/* SPDX-License-Identifier: MIT */
/*
 * k8snames: the Kubernetes API's syntax rules for what a DRA driver
 * publishes (resource.k8s.io): names, qualified attribute names, label
 * names and values, quantities and semantic versions. Pure. Each returns 0 or -EINVAL and, when why
 * is not NULL, stores a static English phrase saying what is wrong.
 */
#ifndef KDP_K8SNAMES_H
#define KDP_K8SNAMES_H

/* The API's bounds. */
#define KDP__K8S_DNS_LABEL_MAX     63U
#define KDP__K8S_DNS_SUBDOMAIN_MAX 253U
#define KDP__K8S_DRIVER_NAME_MAX   63U
#define KDP__K8S_ATTR_DOMAIN_MAX   63U /* the "domain/" of a qualified name */
#define KDP__K8S_ATTR_ID_MAX       32U /* the C identifier of a qualified name */
#define KDP__K8S_ATTR_STRING_MAX   64U /* string and version attribute values */
#define KDP__K8S_QUANTITY_MAX      64U /* ours: no real quantity is longer */

/* RFC 1123 label: 1-63 of [a-z0-9-], a letter or digit at both ends. */
int kdp__k8snames_dns_label(const char *s, const char **why);
/* RFC 1123 subdomain: 1-253 characters, labels as above joined by '.'. */
int kdp__k8snames_dns_subdomain(const char *s, const char **why);
/* A DRA driver name: a DNS subdomain of at most 63 characters. */
int kdp__k8snames_driver_name(const char *s, const char **why);
/* A device attribute or capacity name: a C identifier of at most 32
 * characters ("model"), optionally after a DNS subdomain of at most 63 and
 * a '/' ("resource.kubernetes.io/pcieRoot"). */
int kdp__k8snames_qualified_name(const char *s, const char **why);
/* A label value (a device taint's value): empty, or at most 63 of
 * [A-Za-z0-9-_.], a letter or digit at both ends. */
int kdp__k8snames_label_value(const char *s, const char **why);
/* A label name (a device taint's key): a label value that is not empty,
 * optionally after a DNS subdomain and a '/' ("gpu.example.com/unhealthy"). */
int kdp__k8snames_label_name(const char *s, const char **why);
/* A resource.Quantity: an optionally signed decimal number ("4", "1.5",
 * ".5", "5.") then one suffix: binary SI (Ki Mi Gi Ti Pi Ei), decimal SI
 * (n u m "" k M G T P E) or a decimal exponent ("e3", "E-2"). At most 64
 * characters. */
int kdp__k8snames_quantity(const char *s, const char **why);
/* Semantic Versioning 2.0.0: MAJOR.MINOR.PATCH (no leading zeros), an
 * optional "-pre.release" and "+build.meta"; at most 64 characters (the
 * API's bound on a version attribute). */
int kdp__k8snames_semver(const char *s, const char **why);
/* A lower-case UUID, 8-4-4-4-12 hex digits (a share ID: it names files and
 * CDI devices). */
int kdp__k8snames_uuid(const char *s, const char **why);

#endif
