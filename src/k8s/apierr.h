/* SPDX-License-Identifier: MIT */
/*
 * apierr: the log line of an API server's error answer (a non-2xx, or a
 * watch's ERROR event): the call, the HTTP status and the Status's reason,
 * what to do (a 401: the credentials of the configuration; a 403: the RBAC
 * rule to grant, its verb, resource and API group read from the method and
 * path; a 404, 409, 410, 429 or 5xx: what it means), and the API server's
 * own message. Pure: no I/O, no state; any thread.
 */
#ifndef KDP_K8S_APIERR_H
#define KDP_K8S_APIERR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The call that got the answer (every pointer borrowed for the call). */
typedef struct kdp__apierr_call {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* from the server's root, with its query */
    bool watch;         /* a watch (the RBAC verb "watch") */
    const char *source; /* the configuration's source, named for a 401 */
    bool token_file;    /* a token file was re-read and the call tried again (a 401) */
} kdp__apierr_call;

/* The line for code and status (the Status object, or NULL) into why (n
 * bytes, truncated to fit). */
void kdp__apierr_line(const kdp__apierr_call *c, long code, json_t *status, char *why, size_t n);

#endif
