/* SPDX-License-Identifier: MIT */
/*
 * metadata: the device metadata of a prepared claim (KEP-5304, beta in
 * Kubernetes 1.37): for each request of the claim (its base name: "gpu"
 * for "gpu/small") with devices of this driver, one file on the host,
 *   <state dir>/dra-device-metadata/<namespace>_<claim>_<uid>/<request>/metadata.json
 * (<uid> alone when that name is over 255 bytes)
 * holding a DeviceMetadata document (metadata.resource.k8s.io) written
 * twice, v1beta1 then v1alpha1, as a JSON stream (a reader takes the first
 * version it knows): the claim's name, namespace and UID, the files'
 * generation (1 at prepare, one more at each change of a device's network
 * data), the pod's name for a claim made from a template, and the request's
 * devices with their attributes (as the slice has them) and network data
 * (kdp_dra_device_status's).
 *
 * The container sees it read-only at
 *   /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/
 *       <request>/<driver>-metadata.json
 * (resourceclaimtemplates/<pod's claim name>/... for a claim made from a
 * template), through a bind mount in the claim's CDI spec: a device
 * "<claim UID>_metadata_<request>" whose CDI ID goes with the first device
 * of that request.
 *
 * Files are replaced atomically (a container started before a change
 * keeps the file it was given: a bind mount of a file holds it); a claim's
 * directory is removed at its unprepare, never following a link in it. The
 * names that make a path (namespace, claim, request, the pod's claim name)
 * are checked with the API's rules first: none can leave the directory.
 * Any thread (plain file operations on the caller's).
 */
#ifndef KDP_DRA_METADATA_H
#define KDP_DRA_METADATA_H

#include <stdbool.h>
#include <stddef.h>

#include "discovery/cdi.h"
#include "dra/claimrec.h"
#include "kdp_dra.h"

#define KDP__DRA_MD_SUBDIR        "dra-device-metadata"
#define KDP__DRA_MD_CONTAINER_DIR "/var/run/kubernetes.io/dra-device-attributes"

/* The driver's settings (borrowed). */
typedef struct kdp__dra_md {
    const char *dir; /* <state dir>/dra-device-metadata; NULL: no metadata */
    const char *driver;
    const char *pool;
} kdp__dra_md;

/* A device's attributes as its slice has them (JSON text, malloc'd; NULL:
 * none, or -ENOMEM with *oom set). */
char *kdp__dra_md_attrs(const char *name, const kdp_dra_attr *attrs, size_t n, bool *oom);
/* Whether device i of r is the first of its base request. */
bool kdp__dra_md_first(const kdp__dra_rec *r, size_t i);
/* The document stream for the base request of device i (malloc'd text;
 * NULL on -ENOMEM). */
char *kdp__dra_md_stream(const kdp__dra_md *md, const kdp__dra_rec *r, size_t i);
/* Writes the file of each base request of r (generation r->md_gen).
 * Returns 0, -EINVAL (a name the API would refuse: why names it) or
 * -errno (why says which file). */
int kdp__dra_md_write(const kdp__dra_md *md, const kdp__dra_rec *r, char *why, size_t why_len);
/* Whether every file of r is there. */
bool kdp__dra_md_present(const kdp__dra_md *md, const kdp__dra_rec *r);
/* Removes the directory of claim r with what it holds (1: removed, 0:
 * there was none, -errno). */
int kdp__dra_md_remove(const kdp__dra_md *md, const kdp__dra_rec *r);
/* Gives the first device of each base request of r the CDI ID
 * "<kind>=<uid>_metadata_<request>". Returns 0 or -ENOMEM. */
int kdp__dra_md_add_ids(kdp__dra_rec *r, const char *kind);

/* The CDI devices of r's metadata (one per base request), and what they
 * borrow. */
typedef struct kdp__dra_md_cdi {
    kdp__cdi_dev *devs;
    size_t n;
    kdp__cdi_mount *mounts;
    char **strs;
    size_t n_strs;
} kdp__dra_md_cdi;
/* Returns 0 (c->n 0 when md is off or r has none) or -ENOMEM. */
int kdp__dra_md_cdi_init(kdp__dra_md_cdi *c, const kdp__dra_md *md, const kdp__dra_rec *r);
void kdp__dra_md_cdi_done(kdp__dra_md_cdi *c);

#endif
