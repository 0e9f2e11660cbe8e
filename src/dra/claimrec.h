/* SPDX-License-Identifier: MIT */
/*
 * claimrec: a claim as kdp keeps it, a C record from the API server's
 * answer to the checkpoint: the claim (namespace, name, UID), the devices
 * allocated to it from this driver's pool on this node (request, device,
 * its kdp ID, share ID and what the share consumed, admin access, the
 * opaque configs that apply to it),
 * and, once prepared, what the prepare op answered for each device (nodes,
 * variables, CDI IDs) and the boot it was prepared in. Each opaque config
 * is kept once per claim (a device holds indices into the claim's list),
 * however many devices it applies to.
 *
 * The prepare op sees a record as a kdp_dra_claim (a view borrowing its
 * strings); its answer is merged in; the claim's CDI spec is written from
 * it. dra/recfile.h turns records into the checkpoint's JSON and back.
 *
 * Plain data, no locking: a record belongs to one thread at a time.
 */
#ifndef KDP_DRA_CLAIMREC_H
#define KDP_DRA_CLAIMREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dra/edits.h"
#include "k8s/claims.h"
#include "kdp_dra.h"

/* "<8>-<4>-<4>-<4>-<12>" and its NUL. */
#define KDP__DRA_BOOT_ID_LEN 37

typedef struct kdp__dra_rdev {
    char *request;
    char *device;
    char *device_id;            /* NULL: not in the table (an unprepare may see it) */
    char *share_id;             /* NULL: not shared */
    kdp_dra_quantity *consumed; /* what the share consumed of each capacity */
    size_t n_consumed;
    bool admin_access;
    size_t *cfg; /* indices into the record's configs, in order */
    size_t n_cfg;
    kdp_cdi_node default_node; /* the device's host node (path NULL: none) */
    /* the prepare's answer */
    kdp__dra_edits edits; /* its device in kdp's CDI spec (with the default node) */
    char **cdi_ids;
    size_t n_cdi_ids;
    char *cdi_name; /* its device in kdp's CDI spec for the claim (NULL: none) */
    char *status;   /* its status.devices entry's own fields, JSON text (NULL: none) */
    /* its attributes as the slice has them, JSON text, for the device
     * metadata (NULL: none, or the metadata off) */
    char *attrs;
    /* as the claim was read (not in the checkpoint): its binding
     * conditions then failure conditions (KEP-5007), and this driver's
     * entry for it in status.devices (its fields, JSON text; NULL: none),
     * kept when the prepare op gives it no status */
    char **bind;
    size_t n_bind;
    size_t n_bind_fail;
    char *api_status;
    /* a status write leaves the claim's own entry for it as it is (an
     * unprepare's, for a device with binding conditions; not kept) */
    bool keep_entry;
} kdp__dra_rdev;

typedef struct kdp__dra_rec {
    char *ns;
    char *name;
    char *uid;
    char boot_id[KDP__DRA_BOOT_ID_LEN]; /* the boot of its prepare ("": not known) */
    bool prepared;                      /* the answer is in */
    char **configs;                     /* opaque parameters, JSON text, each once */
    size_t n_configs;
    kdp__dra_rdev *devs;
    size_t n_devs;
    /* the prepare's answer for the whole claim (KDP_DRA_CLAIM): its device
     * in kdp's CDI spec, named claim_cdi_name (NULL: none) */
    kdp__dra_edits claim_edits;
    char *claim_cdi_name;
    /* the device metadata (KEP-5304): the pod's name of a claim made from a
     * template (NULL: none), the files' generation (0: none written) */
    char *pod_claim;
    uint64_t md_gen;
} kdp__dra_rec;

/* An empty record of a claim. NULL on -ENOMEM. */
kdp__dra_rec *kdp__dra_rec_new(const char *ns, const char *name, const char *uid);
/* NULL is fine. */
void kdp__dra_rec_free(kdp__dra_rec *r);
/* A deep copy (NULL on -ENOMEM); answer false: the claim only (an answer
 * to come again). */
kdp__dra_rec *kdp__dra_rec_dup(const kdp__dra_rec *r, bool answer);
/* A device appended (strings copied; share_id may be NULL); *ret (may be
 * NULL) points at it until the next append. Returns 0 or -ENOMEM. */
int kdp__dra_rec_add_dev(kdp__dra_rec *r, const char *request, const char *device,
                         const char *share_id, bool admin_access, kdp__dra_rdev **ret);
/* What device d's share consumed (copied, replacing). Returns 0 or
 * -ENOMEM. */
int kdp__dra_rec_set_consumed(kdp__dra_rdev *d, const kdp_dra_quantity *q, size_t n);
/* Config text applies to device i (kept once in the record). Returns 0 or
 * -ENOMEM. */
int kdp__dra_rec_add_config(kdp__dra_rec *r, size_t i, const char *text);
/* Sets a string member (copied; NULL clears it). Returns 0 or -ENOMEM. */
int kdp__dra_rec_set(char **member, const char *value);
/* The record of a claim read from the API server (its devices filtered to
 * this driver and pool already). Returns 0 or -ENOMEM. */
int kdp__dra_rec_from_claim(const kdp__claim *c, kdp__dra_rec **ret);
/* The bytes the record holds (strings and arrays), for caps and figures. */
size_t kdp__dra_rec_bytes(const kdp__dra_rec *r);

/* Whether claims a and b (two claims) may not both be prepared: a device
 * they both hold, unless one of them holds it with admin access or both
 * hold shares of it with distinct share IDs. *ret_device (may be NULL)
 * names it. */
bool kdp__dra_rec_conflict(const kdp__dra_rec *a, const kdp__dra_rec *b, const char **ret_device);

/* A kdp_dra_claim over a record (valid while the record is unchanged). */
typedef struct kdp__dra_claimview {
    kdp_dra_claim claim;
    kdp_dra_alloc *allocs;
    const char **configs; /* every device's, one array */
} kdp__dra_claimview;

/* Returns 0 or -ENOMEM. */
int kdp__dra_claimview_init(kdp__dra_claimview *v, const kdp__dra_rec *r);
void kdp__dra_claimview_done(kdp__dra_claimview *v);

/* Merges the prepare op's answer (pr: one entry per device; NULL: none)
 * into r: nodes, variables, CDI IDs (kind=<uid>-<device> first when the
 * device has nodes or variables, <uid>-<device>_<index> for a device named
 * again in the claim; a device with none of the three gets its default
 * node), and r->prepared. An answer there before is replaced. Returns 0 or
 * -ENOMEM (r then holds no answer). */
int kdp__dra_rec_merge(kdp__dra_rec *r, const kdp_dra_prepared *pr, const char *kind);
/* Appends id (taken over: freed on a failure; NULL is -ENOMEM) to d's CDI
 * IDs. Returns 0 or -ENOMEM. */
int kdp__dra_rdev_add_cdi_id(kdp__dra_rdev *d, char *id);
/* The CDI device name of device i in kdp's spec: <uid>-<device>,
 * <uid>-<device>-<share ID> for a share, or ..._<i> for a device named
 * again in the claim. Returns what asprintf returns. */
int kdp__dra_rec_cdi_name(const kdp__dra_rec *r, size_t i, char **ret);
/* Whether some device of r has edits in kdp's spec (or r has device
 * metadata). */
bool kdp__dra_rec_has_cdi(const kdp__dra_rec *r);
/* Writes r's CDI spec as <dir>/<file> with file mode `mode`, with
 * extra[0..n_extra) (the device metadata's) beside its devices (removed
 * when there is none). Returns what kdp__cdi_write_file returns. */
int kdp__dra_rec_write_cdi(const kdp__dra_rec *r, const char *dir, const char *file,
                           const char *kind, unsigned mode, const kdp__cdi_dev *extra,
                           size_t n_extra);

#endif
