/* SPDX-License-Identifier: MIT */
/* apierr: the log line of an API server's error answer (see apierr.h). */
#include "k8s/apierr.h"

#include <stdio.h>
#include <string.h>

/* A path's segments (before the query), at most 8 of at most 127 bytes. */
static size_t split_path(const char *p, char seg[8][128])
{
    size_t ns = 0;
    while (*p && *p != '?' && ns < 8) {
        while (*p == '/') {
            p++;
        }
        size_t len = strcspn(p, "/?");
        if (len == 0) {
            break;
        }
        snprintf(seg[ns++], 128, "%.*s", (int)(len < 127 ? len : 127), p);
        p += len;
    }
    return ns;
}

/* The RBAC verb of a request (named: the path names one object). */
static const char *rbac_verb(const kdp__apierr_call *c, bool named)
{
    static const char *const verbs[][2] = {
        {"POST", "create"}, {"PUT", "update"}, {"PATCH", "patch"}, {"DELETE", "delete"}};
    if (c->watch) {
        return "watch";
    }
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        if (strcmp(c->method, verbs[i][0]) == 0) {
            return verbs[i][1];
        }
    }
    return named ? "get" : "list";
}

/* "grant VERB on RESOURCE in GROUP (deploy/rbac)" from a request's method
 * and path, for the hint of a 403. */
static void rbac_hint(const kdp__apierr_call *c, char *out, size_t n)
{
    char seg[8][128];
    size_t ns = split_path(c->path, seg);
    /* /api/v1/... or /apis/<group>/<version>/... */
    size_t i = 0;
    const char *group = "the core API group";
    if (ns >= 2 && strcmp(seg[0], "api") == 0) {
        i = 2;
    } else if (ns >= 3 && strcmp(seg[0], "apis") == 0) {
        group = seg[1];
        i = 3;
    } else {
        snprintf(out, n, "check the RBAC rules of %s", c->path);
        return;
    }
    if (ns >= i + 3 && strcmp(seg[i], "namespaces") == 0) {
        i += 2;
    }
    if (i >= ns) {
        snprintf(out, n, "grant get on %s (deploy/rbac)", c->path);
        return;
    }
    snprintf(out, n, "grant %s on %s%s%s in %s (deploy/rbac)", rbac_verb(c, ns > i + 1), seg[i],
             ns > i + 2 ? "/" : "", ns > i + 2 ? seg[i + 2] : "", group);
}

void kdp__apierr_line(const kdp__apierr_call *c, long code, json_t *status, char *why, size_t n)
{
    const char *msg = NULL;
    const char *reason = NULL;
    if (json_is_object(status)) {
        msg = json_string_value(json_object_get(status, "message"));
        reason = json_string_value(json_object_get(status, "reason"));
    }
    char hint[400] = "";
    if (code == 401) {
        snprintf(hint, sizeof(hint),
                 "the token or client certificate was refused: check the credentials of %s%s",
                 c->source,
                 c->token_file ? " (its token file was re-read and tried once more)" : "");
    } else if (code == 403) {
        rbac_hint(c, hint, sizeof(hint));
    } else if (code == 404) {
        snprintf(hint, sizeof(hint), "not found");
    } else if (code == 410) {
        snprintf(hint, sizeof(hint), "the resourceVersion is too old: list again");
    } else if (code == 409) {
        bool exists = reason && strcmp(reason, "AlreadyExists") == 0;
        snprintf(hint, sizeof(hint), "%s",
                 exists ? "it exists already" : "changed by someone else: re-read and try again");
    } else if (code == 429 || code >= 500) {
        snprintf(hint, sizeof(hint), "the API server is busy or failing: retrying later");
    }
    snprintf(why, n, "%s %s: HTTP %ld%s%s: %s%s%s", c->method, c->path, code, reason ? " " : "",
             reason ? reason : "", *hint ? hint : "unexpected answer",
             msg ? "; the API server says: " : "", msg ? msg : "");
}
