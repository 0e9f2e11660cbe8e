/* SPDX-License-Identifier: MIT */
/*
 * dra_api: `kdpctl dra apiserver`, the small API-server surface a DRA driver
 * needs, over HTTPS (dra_http.c) with credentials made at start
 * (dra_tls.c): discovery, nodes, resourceslices and resourceclaims
 * (dra_store.c: the objects, resourceVersions, the event window, watches;
 * dra_rest.c: the REST verbs and Status errors; dra_check.c: names and
 * slices checked; dra_apiserver.c: routing, discovery, the slices printed,
 * the process). JSON through jansson.
 */
#ifndef KDPCTL_DRA_API_H
#define KDPCTL_DRA_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dra.h"
#include "dra_http.h"

#define KD_GROUP         "resource.k8s.io"
#define KD_VERSION       "v1"
#define KD_MAX_OBJECTS   10000
#define KD_WINDOW        1000 /* events kept for watches that resume */
#define KD_MAX_WATCHES   64
#define KD_WATCH_MAX_S   1800 /* a watch's longest life, s */
#define KD_BOOKMARK_US   ((uint64_t)10 * 1000 * 1000)
#define KD_REAP_US       ((uint64_t)5 * 1000 * 1000) /* gone watch clients looked for */
#define KD_MAX_SLICE_DEV 128
#define KD_SEL_TERMS     4

typedef struct kd_creds {
    char *ca_pem, *cert_pem, *key_pem; /* the server's */
    char *token;
} kd_creds;

/* dra_tls.c */
int kd_tls_make(kd_creds *ret);
/* Those an earlier start left in dir, if they hold together. Returns 0 or
 * -ENOENT (none, or not usable: make new ones). */
int kd_tls_load(const char *dir, kd_creds *ret);
/* A new bearer token: 32 random bytes, hex (malloc'd). 0, -EIO, -ENOMEM. */
int kd_token_make(char **ret);
void kd_creds_free(kd_creds *c);

typedef enum kd_kind { KD_NODE, KD_SLICE, KD_CLAIM, KD_CLASS, KD_NKINDS } kd_kind;

typedef struct kd_obj {
    struct kd_obj *next;
    kd_kind kind;
    char *ns; /* NULL for cluster-scoped kinds */
    char *name;
    uint64_t rv;
    json_t *o; /* never changed once stored: an update stores a new one */
} kd_obj;

typedef struct kd_event {
    uint64_t rv;
    kd_kind kind;
    const char *type; /* "ADDED", "MODIFIED", "DELETED" */
    json_t *o;
} kd_event;

typedef struct kd_sel {
    size_t n;
    struct {
        char field[32];
        char value[256];
        bool neg;
    } t[KD_SEL_TERMS];
} kd_sel;

typedef struct kd_api kd_api;

typedef struct kd_watch {
    struct kd_watch *next;
    kd_api *a;
    kd_hreq *r;
    kd_kind kind;
    char *ns; /* NULL = every namespace */
    kd_sel sel;
    bool bookmarks;
    bool table;   /* kubectl get -w: each event's object a Table of one row */
    bool columns; /* the column definitions have gone out */
    kdp__timer *timeout;
} kd_watch;

/* What `kdpctl dra apiserver` plays (dra_faults.c). */
typedef struct kd_faults {
    unsigned code; /* answered to the next `left` requests */
    unsigned long left;
    unsigned long conflicts; /* slice writes answered 409 */
    bool relisten_said;
    kdp__timer *up;          /* the outage's end */
    char host[100], port[8]; /* where it listens (set by the start) */
    kd_lines input;          /* stdin, when not `dra run`'s */
} kd_faults;

struct kd_api {
    const kd_opts *o;
    kdp__loop *loop;
    kd_http *http;
    kd_creds creds;
    char server[128]; /* https://127.0.0.1:PORT */
    kd_obj *objs[KD_NKINDS];
    size_t n_objs;
    uint64_t rv;
    kd_event ev[KD_WINDOW];
    size_t ev_head, ev_n;
    uint64_t ev_floor; /* events up to this rv are gone from the window */
    kd_watch *watches;
    size_t n_watches;
    kdp__timer *bookmark;
    kdp__timer *reaper;
    kdp__signal *sig[2];
    kdp__timer *deadline;
    unsigned long requests, errors;
    int exit;
    bool owns_loop; /* not `dra run`'s */
    bool reused;    /* credentials found in --dir and served again */
    kd_faults faults;
    /* Answers a request before it is served when it returns true (the
     * faults'; NULL: none). */
    bool (*intercept)(kd_api *a, kd_hreq *r);
};

/* The kinds' names. */
const char *kd_kind_resource(kd_kind k); /* "resourceslices" */
const char *kd_kind_name(kd_kind k);     /* "ResourceSlice" */
const char *kd_kind_api_version(kd_kind k);
/* "resourceslices.resource.k8s.io" or "nodes", for messages. */
const char *kd_kind_qualified(kd_kind k);

/* dra_store.c */
kd_obj *kd_store_find(kd_api *a, kd_kind k, const char *ns, const char *name);
/* Stores o (stolen) as a new object, or as obj's new version (obj
 * non-NULL); type is the event. Sets metadata.resourceVersion. Returns
 * the object. */
kd_obj *kd_store_put(kd_api *a, kd_kind k, const char *ns, const char *name, json_t *o,
                     kd_obj *obj);
/* Removes obj (a DELETED event with a new resourceVersion); returns the
 * object as deleted (a new reference). */
json_t *kd_store_delete(kd_api *a, kd_obj *obj);
void kd_store_free(kd_api *a);
/* Parses a fieldSelector for kind k: 0, or -EINVAL with a message. */
int kd_sel_parse(kd_kind k, const char *s, kd_sel *ret, char *why, size_t cap);
bool kd_sel_match(const kd_sel *s, const json_t *o);
/* Starts a watch on r (the stream is answered here). Returns 0 or an HTTP
 * error code with a message (the caller answers it). */
unsigned kd_watch_start(kd_api *a, kd_hreq *r, kd_kind k, const char *ns, const kd_sel *sel,
                        char *why, size_t cap);
void kd_watches_free(kd_api *a);
/* Random lowercase-hex UUID (v4) in buf (37 bytes). */
void kd_uuid(char buf[37]);
/* RFC 3339 UTC now in buf (21 bytes). */
void kd_now(char buf[32]);

/* dra_rest.c */
/* Serves one request under a resource path: segments after the version
 * ("resourceslices", "NAME"...). */
void kd_rest(kd_api *a, kd_hreq *r, kd_kind k, const char *ns, const char *name, const char *sub);
/* Answers a Status error. */
void kd_status(kd_hreq *r, unsigned code, const char *reason, const char *message);
/* The same with a header "Name: value" (NULL: none). */
void kd_status_with(kd_hreq *r, unsigned code, const char *reason, const char *message,
                    const char *header);
/* Answers a JSON object. */
void kd_reply_json(kd_hreq *r, unsigned code, const json_t *o);

/* dra_table.c */
/* The request asks for a Table (kubectl get). */
bool kd_wants_table(kd_hreq *r);
/* items (kind k) as a meta.k8s.io/v1 Table (a new reference, NULL when out
 * of memory); its columnDefinitions when with_columns. */
json_t *kd_table_of(kd_kind k, const json_t *items, uint64_t rv, bool with_columns);
/* Answers items (kind k) as a Table. */
void kd_reply_table(kd_hreq *r, kd_kind k, const json_t *items, uint64_t rv);

/* dra_route.c */
/* Serves one request (a kd_http_fn; ud = the kd_api). */
void kd_api_request(kd_hreq *r, void *ud);
/* A slice changed: printed. */
void kd_print_slice(kd_api *a, const char *type, const json_t *o);

/* dra_apiserver.c */
int kd_cmd_apiserver(const kd_opts *o);
/* Starts the API server in *a: on shared (`dra run`: its loop, signals and
 * --timeout), or on a loop of its own when NULL. Returns 0, or an exit
 * status with the failure printed; kd_apiserver_close() either way. */
int kd_apiserver_open(kd_api *a, const kd_opts *o, kdp__loop *shared);
void kd_apiserver_close(kd_api *a);

/* Writes DIR's files: ca.crt, server.crt, server.key, token, kubeconfig
 * (the token in it) and kubeconfig-tokenfile (tokenFile: DIR/token, read
 * again by a client after a 401). 0 or -errno. */
int kd_api_write_files(kd_api *a);

/* dra_faults.c */
/* Starts the faults, once listening (and reads stdin for their commands
 * when read_stdin). */
int kd_faults_start(kd_api *a, bool read_stdin);
void kd_faults_stop(kd_api *a);
/* A fault command (argv[0] its name): true when it is one (done, or its
 * error said). */
bool kd_fault_command(kd_api *a, char **argv, size_t argc);
/* Answers r when a fault is armed for it: true then. */
bool kd_fault_answer(kd_api *a, kd_hreq *r);

/* dra_run.c */
int kd_cmd_run(const kd_opts *o);

/* dra_claim.c */
int kd_cmd_claim(const kd_opts *o);

/* dra_binding.c: binding conditions (KEP-5007) as the scheduler handles
 * them. */
typedef enum kd_bind_state { KD_BIND_READY, KD_BIND_PENDING, KD_BIND_FAILED } kd_bind_state;
/* The scheduler's PreBind check of claim at now: the state, and in text
 * "ready", "pending: waiting for A,B", "failed: TYPE Reason" or "failed:
 * timeout" (600 s after allocationTimestamp). Pure. */
kd_bind_state kd_binding_state(const json_t *claim, time_t now, char *text, size_t cap);
/* "ready", "pending", "failed". */
const char *kd_binding_state_name(kd_bind_state s);
/* Copies a slice device's bindingConditions and bindingFailureConditions
 * into an allocation result: true when it has binding conditions. */
bool kd_binding_copy(json_t *result, const json_t *device);
/* Some result of the claim's allocation has binding conditions. */
bool kd_binding_any(const json_t *claim);
/* A claim with binding conditions changed: its state printed. */
void kd_print_claim_binding(const kd_api *a, const char *type, const json_t *o);

/* The device named name in the node's slices of driver (the pool named
 * after the node), or NULL. */
const json_t *kd_claim_find_device(const json_t *list, const char *driver, const char *node,
                                   const char *name);

/* dra_claim_check.c: what is wrong with allocating devices of driver on
 * node (shared: with share IDs; consumed: {capacity: quantity} or NULL),
 * given the API server's list of ResourceSlices: NULL, or a line in why. */
const char *kd_claim_problem(const json_t *list, const char *driver, const char *node,
                             const kc_strv *devices, bool shared, const json_t *consumed, char *why,
                             size_t len);

#endif
