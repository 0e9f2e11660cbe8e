/* SPDX-License-Identifier: MIT */
/* api: the Kubernetes API client on kdp's loop (see api.h). */
#include "k8s/api.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/list.h"
#include "base/log.h"
#include "base/secret.h"
#include "k8s/apierr.h"
#include "k8s/httpc.h"
#include "k8s/jsonbudget.h"

#define WHY_MAX 1024

struct kdp__api {
    kdp__loop *loop;
    kdp__httpc_client *http;
    const kdp__kconfig *kc;
    char *token;
    uint64_t token_at_us; /* when the token file was read */
    uint64_t token_every_us;
    kdp__timer *kick; /* starts queued calls, delivers deferred ends */
    kdp__link calls;  /* in flight, queued or ending: kdp__api_req.node */
    kdp__api_stats stats;
};

enum call_state {
    CALL_QUEUED,   /* waiting for kick to start it */
    CALL_FLIGHT,   /* in httpc */
    CALL_ENDING,   /* its end is to be delivered by kick */
    CALL_CANCELLED /* to be freed by kick, no callback */
};

struct kdp__api_req {
    kdp__link node;
    kdp__api *a;
    enum call_state state;
    char *method;
    char *path;
    char *body;
    size_t body_len;
    kdp__api_done_cb done;
    kdp__api_event_cb event;
    void *ud;
    kdp__httpc_call *hc;
    bool watch;
    kdp__api_bound bound;
    bool retried; /* after a 401, once */
    bool in_done; /* its done callback runs */
    int end_err;  /* CALL_ENDING: what to deliver */
    long end_code;
    char *end_why;
    void *aux; /* kdp__api_req_own's, freed with the call */
};

static int say(char *why, size_t n, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int say(char *why, size_t n, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return err;
}

void kdp__api_set_token_refresh(kdp__api *a, unsigned ms)
{
    a->token_every_us = (ms ? ms : KDP__API_TOKEN_REFRESH_MS) * 1000ULL;
}

kdp__loop *kdp__api_loop(const kdp__api *a)
{
    return a->loop;
}

const char *kdp__api_server(const kdp__api *a)
{
    return a->kc->server;
}

const char *kdp__api_source(const kdp__api *a)
{
    return a->kc->source;
}

void kdp__api_get_stats(const kdp__api *a, kdp__api_stats *ret)
{
    *ret = a->stats;
    ret->in_flight = kdp__httpc_active(a->http);
}

int kdp__api_errno(long code, const char *reason)
{
    if (code >= 200 && code < 300) {
        return 0;
    }
    switch (code) {
    case 400:
    case 422:
        return -EINVAL;
    case 401:
    case 403:
        return -EACCES;
    case 404:
        return -ENOENT;
    case 409:
        return reason && strcmp(reason, "AlreadyExists") == 0 ? -EEXIST : -ESTALE;
    case 410:
        return -EIDRM;
    case 429:
        return -EAGAIN;
    default:
        return code >= 500 && code < 600 ? -EAGAIN : -EIO;
    }
}

/* --- the token --- */

static void token_refresh(kdp__api *a, bool now)
{
    if (!a->kc->token_file) {
        return;
    }
    uint64_t t = kdp__now_us();
    if (!now && a->token && t - a->token_at_us < a->token_every_us) {
        return;
    }
    char *tok = NULL;
    char why[512];
    a->stats.token_reads++;
    a->token_at_us = t;
    int r = kdp__kconfig_read_token(a->kc->token_file, &tok, why, sizeof(why));
    if (r < 0) {
        log_warn("k8s: %s (keeping the token read before)", why);
        return;
    }
    if (a->token && strcmp(a->token, tok) != 0) {
        log_info("k8s: the token in %s changed: using the new one", a->kc->token_file);
    }
    kdp__secret_free_str(a->token);
    a->token = tok;
}

/* --- calls --- */

static void call_free(kdp__api_req *c)
{
    if (!c) {
        return;
    }
    kdp__link_remove(&c->node);
    free(c->method);
    free(c->path);
    free(c->body);
    free(c->end_why);
    free(c->aux);
    free(c);
}

static void kick_soon(kdp__api *a)
{
    if (!kdp__timer_armed(a->kick)) {
        kdp__timer_start(a->kick, 0);
    }
}

/* Ends c later from kick (from places where its callback may not run). */
static void defer_end(kdp__api_req *c, int err, long code, const char *why)
{
    c->state = CALL_ENDING;
    c->end_err = err;
    c->end_code = code;
    free(c->end_why);
    c->end_why = why ? strdup(why) : NULL;
    kick_soon(c->a);
}

/* The line for a non-2xx answer (k8s/apierr.h). */
static void error_line(const kdp__api_req *c, long code, json_t *status, char *why, size_t n)
{
    kdp__apierr_call e = {
        .method = c->method,
        .path = c->path,
        .watch = c->watch,
        .source = c->a->kc->source,
        .token_file = c->a->kc->token_file != NULL,
    };
    kdp__apierr_line(&e, code, status, why, n);
}

static void deliver(kdp__api_req *c, int err, long code, json_t *obj, const char *why)
{
    kdp__link_remove(&c->node);
    c->in_done = true;
    c->done(err, code, obj, why, c->ud);
    c->in_done = false;
    call_free(c);
}

static int start_call(kdp__api_req *c);

/* The end of a call that got no HTTP answer. */
static void transport_error(kdp__api_req *c, int status, const char *error)
{
    char why[WHY_MAX];
    const kdp__kconfig *kc = c->a->kc;
    const char *what = error ? error : strerror(-status);
    if (status == -ECONNREFUSED || status == -EHOSTUNREACH) {
        say(why, sizeof(why), 0, "%s %s: API server at %s unreachable (%s): is it up? (%s)",
            c->method, c->path, kc->server, what, kc->source);
    } else {
        say(why, sizeof(why), 0, "%s %s: %s (API server at %s, %s)", c->method, c->path, what,
            kc->server, kc->source);
    }
    deliver(c, status, 0, NULL, why);
}

/* The end of a call with an HTTP answer (after the 401 retry). */
static void answer(kdp__api_req *c, long code, const char *body, size_t len)
{
    char why[WHY_MAX];
    json_error_t jerr;
    size_t cost = body && len ? kdp__json_cost(body, len) : 0;
    if (cost > c->bound.max_decode) {
        say(why, sizeof(why), 0,
            "%s %s: HTTP %ld with a body of %zu bytes that would take about %zu MiB to decode "
            "(bound %zu MiB): refused",
            c->method, c->path, code, len, cost >> 20, c->bound.max_decode >> 20);
        deliver(c, -EMSGSIZE, code, NULL, why);
        return;
    }
    json_t *obj = body && len ? json_loadb(body, len, 0, &jerr) : NULL;
    if (obj && !json_is_object(obj)) {
        json_decref(obj);
        obj = NULL;
    }
    int err = kdp__api_errno(code, obj ? json_string_value(json_object_get(obj, "reason")) : NULL);
    if (err == 0 && c->watch) {
        deliver(c, 0, code, NULL, NULL); /* the server closed the stream */
    } else if (err == 0 && !obj) {
        say(why, sizeof(why), 0, "%s %s: HTTP %ld with a body that is not a JSON object%s%s",
            c->method, c->path, code, body && len ? ": " : "", body && len ? jerr.text : "");
        deliver(c, -EPROTO, code, NULL, why);
    } else if (err == 0) {
        deliver(c, 0, code, obj, NULL);
    } else {
        error_line(c, code, obj, why, sizeof(why));
        deliver(c, err, code, obj, why);
    }
    json_decref(obj);
}

static void hc_done(kdp__httpc_call *hc, int status, long code, const char *body, size_t len,
                    const char *error, void *ud)
{
    (void)hc;
    kdp__api_req *c = ud;
    kdp__api *a = c->a;
    c->hc = NULL;
    kdp__api_counts_add(&a->stats.requests, c->watch ? "WATCH" : c->method, status < 0 ? 0 : code);
    if (status < 0) {
        transport_error(c, status, error);
        return;
    }
    if (code == 401 && !c->retried && a->kc->token_file) {
        c->retried = true;
        a->stats.retries_401++;
        token_refresh(a, true);
        if (start_call(c) == 0) {
            return;
        }
    }
    answer(c, code, body, len);
}

static void hc_line(kdp__httpc_call *hc, const char *line, size_t len, void *ud)
{
    kdp__api_req *c = ud;
    if (c->state != CALL_FLIGHT) {
        return;
    }
    if (len == 0) {
        return;
    }
    char why[WHY_MAX];
    json_error_t jerr;
    if (kdp__json_cost(line, len) > c->bound.max_decode) {
        say(why, sizeof(why), 0,
            "watch %s: an event of %zu bytes that would take over %zu MiB to decode: watching "
            "again",
            c->path, len, c->bound.max_decode >> 20);
        kdp__httpc_cancel(hc);
        c->hc = NULL;
        defer_end(c, -EMSGSIZE, 200, why);
        return;
    }
    json_t *ev = json_loadb(line, len, 0, &jerr);
    const char *type = ev ? json_string_value(json_object_get(ev, "type")) : NULL;
    json_t *obj = ev ? json_object_get(ev, "object") : NULL;
    if (!type || !json_is_object(obj)) {
        say(why, sizeof(why), 0, "watch %s: a bad event line (%s): watching again", c->path,
            ev ? "no type or object" : jerr.text);
        kdp__httpc_cancel(hc);
        c->hc = NULL;
        defer_end(c, -EPROTO, 200, why);
    } else if (strcmp(type, "ERROR") == 0) {
        json_t *code = json_object_get(obj, "code");
        long http = json_is_integer(code) ? (long)json_integer_value(code) : 500;
        int err = kdp__api_errno(http, json_string_value(json_object_get(obj, "reason")));
        error_line(c, http, obj, why, sizeof(why));
        kdp__httpc_cancel(hc);
        c->hc = NULL;
        defer_end(c, err ? err : -EIO, http, why);
    } else {
        c->event(type, obj, c->ud);
    }
    json_decref(ev);
}

static int start_call(kdp__api_req *c)
{
    kdp__api *a = c->a;
    token_refresh(a, false);
    const kdp__kconfig *kc = a->kc;
    size_t n = strlen(kc->server) + strlen(c->path) + 1;
    char *url = malloc(n);
    if (!url) {
        return -ENOMEM;
    }
    snprintf(url, n, "%s%s", kc->server, c->path);
    const char *headers[] = {"Accept: application/json", "User-Agent: kdp", NULL};
    kdp__httpc_request req = {
        .method = c->method,
        .url = url,
        .headers = headers,
        .bearer_token = kc->token ? kc->token : a->token,
        .body = c->body,
        .body_len = c->body_len,
        .content_type =
            strcmp(c->method, "PATCH") == 0 ? "application/merge-patch+json" : "application/json",
        .ca_file = kc->ca_file,
        .cert_file = kc->cert_file,
        .key_file = kc->key_file,
        .ca_pem = kc->ca_data,
        .ca_pem_len = kc->ca_len,
        .cert_pem = kc->cert_data,
        .cert_pem_len = kc->cert_len,
        .key_pem = kc->key_data,
        .key_pem_len = kc->key_len,
        .timeout_ms = c->watch ? 0 : KDP__API_CALL_TIMEOUT_MS,
        .max_body = c->bound.max_body,
        .on_line = c->watch ? hc_line : NULL,
    };
    int r = kdp__httpc_start(a->http, &req, hc_done, c, &c->hc);
    free(url);
    if (r == -EBUSY || r == -EAGAIN) {
        c->state = CALL_QUEUED; /* from a line callback, or httpc full: kick starts it */
        kick_soon(a);
        return 0;
    }
    if (r == 0) {
        c->state = CALL_FLIGHT;
        a->stats.calls++;
    }
    return r;
}

static void kick_cb(kdp__timer *t, void *ud)
{
    (void)t;
    kdp__api *a = ud;
    /* one pass over what is there now: calls added meanwhile wait for the
     * next kick */
    kdp__link *l;
    kdp__link *tmp;
    bool full = false;
    kdp__list_for_each_safe(l, tmp, &a->calls)
    {
        kdp__api_req *c = KDP__CONTAINER_OF(l, kdp__api_req, node);
        if (c->state == CALL_CANCELLED) {
            call_free(c);
        } else if (c->state == CALL_ENDING) {
            deliver(c, c->end_err, c->end_code, NULL, c->end_why);
            /* tmp may have been cancelled and freed by the callback: restart */
            kick_soon(a);
            return;
        } else if (c->state == CALL_QUEUED && !full) {
            if (kdp__httpc_active(a->http) >= KDP__HTTPC_MAX_CALLS) {
                full = true;
                continue;
            }
            int r = start_call(c);
            if (r < 0) {
                char why[WHY_MAX];
                say(why, sizeof(why), 0, "%s %s: cannot start the call: %s", c->method, c->path,
                    strerror(-r));
                deliver(c, r, 0, NULL, why);
                kick_soon(a);
                return;
            }
        }
    }
    if (full) {
        kdp__timer_start(a->kick, 10ULL * 1000); /* a slot frees when a call ends */
    }
}

static int new_call(kdp__api *a, const char *method, const char *path, json_t *body,
                    kdp__api_req **ret)
{
    if (!method || !path || path[0] != '/' || strpbrk(path, " \r\n")) {
        return -EINVAL;
    }
    size_t queued = 0;
    kdp__link *l;
    kdp__list_for_each(l, &a->calls)
    {
        queued++;
    }
    if (queued >= KDP__API_MAX_PENDING + KDP__HTTPC_MAX_CALLS) {
        return -EAGAIN;
    }
    kdp__api_req *c = calloc(1, sizeof(*c));
    if (!c) {
        return -ENOMEM;
    }
    kdp__link_init(&c->node);
    c->a = a;
    c->method = strdup(method);
    c->path = strdup(path);
    if (body) {
        c->body = json_dumps(body, JSON_COMPACT);
        c->body_len = c->body ? strlen(c->body) : 0;
    }
    if (!c->method || !c->path || (body && !c->body)) {
        call_free(c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}

static int launch(kdp__api *a, kdp__api_req *c, kdp__api_req **ret)
{
    kdp__list_append(&a->calls, &c->node);
    int r = start_call(c);
    if (r < 0) {
        call_free(c);
        return r;
    }
    if (ret) {
        *ret = c;
    }
    return 0;
}

static kdp__api_bound bound_or_default(kdp__api_bound b)
{
    b.max_body = b.max_body ? b.max_body : KDP__HTTPC_MAX_BODY;
    b.max_decode = b.max_decode ? b.max_decode : 8 * b.max_body;
    return b;
}

int kdp__api_call_bounded(kdp__api *a, const char *method, const char *path, json_t *body,
                          kdp__api_bound bound, kdp__api_done_cb done, void *ud, kdp__api_req **ret)
{
    if (!a || !done) {
        return -EINVAL;
    }
    kdp__api_req *c = NULL;
    int r = new_call(a, method, path, body, &c);
    if (r < 0) {
        return r;
    }
    c->bound = bound_or_default(bound);
    c->done = done;
    c->ud = ud;
    return launch(a, c, ret);
}

int kdp__api_call(kdp__api *a, const char *method, const char *path, json_t *body,
                  kdp__api_done_cb done, void *ud, kdp__api_req **ret)
{
    return kdp__api_call_bounded(a, method, path, body, (kdp__api_bound){0, 0}, done, ud, ret);
}

int kdp__api_watch(kdp__api *a, const char *path, kdp__api_event_cb event, kdp__api_done_cb end,
                   void *ud, kdp__api_req **ret)
{
    return kdp__api_watch_bounded(a, path, (kdp__api_bound){0, 0}, event, end, ud, ret);
}

int kdp__api_watch_bounded(kdp__api *a, const char *path, kdp__api_bound bound,
                           kdp__api_event_cb event, kdp__api_done_cb end, void *ud,
                           kdp__api_req **ret)
{
    if (!a || !path || !event || !end) {
        return -EINVAL;
    }
    size_t n = strlen(path) + 16;
    char *full = malloc(n);
    if (!full) {
        return -ENOMEM;
    }
    snprintf(full, n, "%s%swatch=true", path, strchr(path, '?') ? "&" : "?");
    kdp__api_req *c = NULL;
    int r = new_call(a, "GET", full, NULL, &c);
    free(full);
    if (r < 0) {
        return r;
    }
    c->watch = true;
    c->bound = bound_or_default(bound);
    c->done = end;
    c->event = event;
    c->ud = ud;
    return launch(a, c, ret);
}

void kdp__api_cancel(kdp__api_req *c)
{
    if (!c || c->in_done || c->state == CALL_CANCELLED) {
        return;
    }
    if (c->hc) {
        kdp__httpc_cancel(c->hc);
        c->hc = NULL;
    }
    c->state = CALL_CANCELLED;
    kick_soon(c->a); /* freed there: the caller may be inside its line callback */
}

void kdp__api_req_own(kdp__api_req *r, void *p)
{
    free(r->aux);
    r->aux = p;
}

/* --- the client --- */

int kdp__api_new(kdp__loop *l, const kdp__kconfig *kc, kdp__api **ret)
{
    if (!l || !kc || !kc->server || !ret) {
        return -EINVAL;
    }
    kdp__api *a = calloc(1, sizeof(*a));
    if (!a) {
        return -ENOMEM;
    }
    a->loop = l;
    a->kc = kc;
    a->token_every_us = KDP__API_TOKEN_REFRESH_MS * 1000ULL;
    kdp__link_init(&a->calls);
    int r = kdp__httpc_client_new(l, &a->http);
    if (r == 0) {
        r = kdp__timer_new(l, kick_cb, a, &a->kick);
    }
    if (r < 0) {
        kdp__api_free(a);
        return r;
    }
    token_refresh(a, true);
    *ret = a;
    return 0;
}

void kdp__api_free(kdp__api *a)
{
    if (!a) {
        return;
    }
    kdp__httpc_client_free(a->http); /* no httpc callback after this */
    kdp__link *l;
    kdp__link *tmp;
    kdp__list_for_each_safe(l, tmp, &a->calls)
    {
        call_free(KDP__CONTAINER_OF(l, kdp__api_req, node));
    }
    kdp__timer_free(a->kick);
    kdp__secret_free_str(a->token);
    free(a);
}
