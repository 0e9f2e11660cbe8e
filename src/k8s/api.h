/* SPDX-License-Identifier: MIT */
/*
 * api: the Kubernetes API client on kdp's loop, over httpc (libcurl's
 * multi-socket API, no thread) with JSON bodies through jansson.
 *
 * Errors are -errno, with a line for the log (`why`) naming the call, the
 * API server's Status message and what to do:
 *   0            a 2xx with a JSON object body (obj, borrowed for the call)
 *   -EACCES      401 (the token or certificate was refused) or 403 (an RBAC
 *                rule is missing: why names the verb, resource and group)
 *   -ENOENT      404
 *   -EEXIST      409 AlreadyExists
 *   -ESTALE      409 Conflict (a stale resourceVersion: re-read and retry)
 *   -EIDRM       410 Gone/Expired (a watch's or list's resourceVersion is
 *                too old: list again)
 *   -EINVAL      400, 422 (the request is wrong)
 *   -EAGAIN      429 and 5xx (retry later)
 *   -EPROTO      a 2xx whose body is not a JSON object; a bad watch line
 *   -ENOTSUP     discovery: none of the wanted versions is served
 *   transport    httpc's -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, ...
 *   other codes  -EIO
 *
 * The bearer token: from the kubeconfig, or its token file, re-read every
 * minute (as client-go does) and at once on a 401, after which the call is
 * retried once with the new token.
 *
 * Threading: loop thread only. Callbacks run on the loop thread, never from
 * inside the kdp__api_* call that started them; they may start and cancel
 * calls (but not free the client).
 */
#ifndef KDP_K8S_API_H
#define KDP_K8S_API_H

#include <jansson.h>
#include <stddef.h>

#include "k8s/apicount.h"
#include "k8s/kconfig.h"
#include "runtime/loop.h"

/* Calls waiting for a slot of httpc (KDP__HTTPC_MAX_CALLS in flight) at
 * most; past it kdp__api_call() answers -EAGAIN. */
#define KDP__API_MAX_PENDING 256
/* The bound on one call (watches have none: give timeoutSeconds). */
#define KDP__API_CALL_TIMEOUT_MS 30000U
/* How often the token file is re-read. */
#define KDP__API_TOKEN_REFRESH_MS 60000U

typedef struct kdp__api kdp__api;
typedef struct kdp__api_req kdp__api_req; /* a call or watch in flight */

/* The end of a call (see the top for err). code: the HTTP status (0 if
 * none). obj: the body (a 2xx) or the Status object (an error) when JSON,
 * else NULL; borrowed for the call (json_incref to keep it). why: NULL when
 * err is 0, else a line for the log. */
typedef void (*kdp__api_done_cb)(int err, long code, json_t *obj, const char *why, void *ud);
/* One watch event: type "ADDED", "MODIFIED", "DELETED" or "BOOKMARK" and
 * its object (borrowed). An "ERROR" event ends the watch instead (end gets
 * the Status's error, e.g. -EIDRM for 410). */
typedef void (*kdp__api_event_cb)(const char *type, json_t *obj, void *ud);

/* A client for the API server kc describes (kc must outlive it). Returns 0
 * or -errno (-ENOMEM, -EIO); *ret untouched on failure. */
int kdp__api_new(kdp__loop *l, const kdp__kconfig *kc, kdp__api **ret);
/* Cancels every call (no callback runs) and frees. NULL is fine. Not from
 * inside one of its callbacks. */
void kdp__api_free(kdp__api *a);
/* How often the token file is re-read (before a call, when this long has
 * passed); 0 = KDP__API_TOKEN_REFRESH_MS. For tests. */
void kdp__api_set_token_refresh(kdp__api *a, unsigned ms);
/* The loop it runs on. */
kdp__loop *kdp__api_loop(const kdp__api *a);
/* The server's URL and the configuration's source, for log lines. */
const char *kdp__api_server(const kdp__api *a);
const char *kdp__api_source(const kdp__api *a);

/* A call: method "GET", "POST", "PUT", "PATCH" (a JSON merge patch) or
 * "DELETE"; path from the server's root with its query
 * ("/api/v1/nodes/n1"); body sent as JSON when non-NULL (not stolen).
 * done runs exactly once unless cancelled. *ret (if non-NULL) names the
 * call until done runs. Returns 0, -EINVAL, -EAGAIN (too many pending),
 * -ENOMEM. */
int kdp__api_call(kdp__api *a, const char *method, const char *path, json_t *body,
                  kdp__api_done_cb done, void *ud, kdp__api_req **ret);

/* What a call's answer may be (or a watch's every line): max_body bytes
 * (0: KDP__HTTPC_MAX_BODY, 16 MiB), and what decoding it may cost
 * (k8s/jsonbudget; 0: 8 times max_body). An answer past either ends the
 * call with -EMSGSIZE, saying which bound. */
typedef struct kdp__api_bound {
    size_t max_body;
    size_t max_decode;
} kdp__api_bound;
/* Bounds by what a call can need: one object (a claim, a Node, a slice:
 * etcd keeps at most 1.5 MiB), discovery, a list of a pool's slices. */
#define KDP__API_BOUND_OBJECT   ((kdp__api_bound){3U << 20, 32U << 20})
#define KDP__API_BOUND_DISCOVER ((kdp__api_bound){1U << 20, 8U << 20})
#define KDP__API_BOUND_LIST     ((kdp__api_bound){16U << 20, 96U << 20})
/* kdp__api_call with bounds on the answer. */
int kdp__api_call_bounded(kdp__api *a, const char *method, const char *path, json_t *body,
                          kdp__api_bound bound, kdp__api_done_cb done, void *ud,
                          kdp__api_req **ret);
/* A watch: GET path with watch=true added (give resourceVersion,
 * timeoutSeconds, allowWatchBookmarks, selectors in path). event runs per
 * event; end runs once when the stream ends: err 0 when the server closed
 * it (watch again from the last resourceVersion), else as for a call
 * (-EIDRM: list again; -EPROTO: a bad line). Same returns. */
int kdp__api_watch(kdp__api *a, const char *path, kdp__api_event_cb event, kdp__api_done_cb end,
                   void *ud, kdp__api_req **ret);
/* kdp__api_watch with bounds on each line (an event: one object). */
int kdp__api_watch_bounded(kdp__api *a, const char *path, kdp__api_bound bound,
                           kdp__api_event_cb event, kdp__api_done_cb end, void *ud,
                           kdp__api_req **ret);
/* Cancels a call or watch: no callback runs for it after this. NULL is
 * fine; from its own done callback it does nothing. */
void kdp__api_cancel(kdp__api_req *c);

/* Hands p (malloc'd; typically the call's ud) to the request: freed with
 * free() after its done callback returned, or when it is cancelled or the
 * client freed. Once per request. */
void kdp__api_req_own(kdp__api_req *r, void *p);

/* Discovery: GET /apis/<group> and pick the first of wanted (NULL
 * terminated, e.g. {"v1", "v1beta2", "v1beta1", NULL}) that the server
 * serves. done(0, version, NULL) or done(-errno, NULL, why): -ENOTSUP when
 * the group or none of the versions is served (why names what is served
 * and the Kubernetes release needed), else as for a call. Same returns;
 * *ret cancels it. */
typedef void (*kdp__api_discover_cb)(int err, const char *version, const char *why, void *ud);
int kdp__api_discover(kdp__api *a, const char *group, const char *const *wanted,
                      kdp__api_discover_cb done, void *ud, kdp__api_req **ret);

/* Maps an HTTP status and a Status object's reason to the errors above. */
int kdp__api_errno(long code, const char *reason);
/* Calls made, 401 retries, token file reads (for tests and status). */
typedef struct kdp__api_stats {
    unsigned long calls;
    unsigned long retries_401;
    unsigned long token_reads;
    size_t in_flight;
    kdp__api_counts requests; /* each HTTP request (a 401's retry too) */
} kdp__api_stats;
void kdp__api_get_stats(const kdp__api *a, kdp__api_stats *ret);

#endif
