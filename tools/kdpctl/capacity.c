/* SPDX-License-Identifier: MIT */
/*
 * capacity: what the emulated kubelet would report in the node status for
 * each resource, as tests/kubelet (kdp-test-kubelet) computes it: capacity
 * = the devices its current registration last listed, allocatable = the
 * healthy ones, 0 once a stream end or a deregistration made the kubelet
 * count them all unhealthy (until the next list), 0 and 0 after a restart.
 * Each change is printed, so a rolling update's effect can be watched.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubelet.h"

static kl_res *res_get(kl *k, const char *name)
{
    for (kl_res *r = k->res; r; r = r->next) {
        if (strcmp(r->name, name) == 0) {
            return r;
        }
    }
    kl_res *r = calloc(1, sizeof(*r));
    if (r) {
        r->name = strdup(name);
        if (!r->name) {
            free(r);
            return NULL;
        }
        r->next = k->res;
        k->res = r;
    }
    return r;
}

static void cause_text(kc_buf *b, const char *cause, const char *endpoint)
{
    const char *e = endpoint ? endpoint : "?";
    if (strcmp(cause, "devices") == 0) {
        kc_buf_printf(b, "a device list from %s", e);
    } else if (strcmp(cause, "stream_end") == 0) {
        kc_buf_printf(b, "the ListAndWatch of %s ended", e);
    } else if (strcmp(cause, "deregistered") == 0) {
        kc_buf_printf(b, "%s deregistered", e);
    } else {
        kc_buf_puts(b, "kubelet restart: forgotten until it registers again");
    }
}

/* Prints r's (capacity, allocatable) if they differ from the last printed. */
static void note(kl *k, kl_res *r, const char *cause, const char *endpoint)
{
    size_t cap = r->n;
    size_t alloc = r->marked ? 0 : r->healthy;
    if (r->reported ? cap == r->last_capacity && alloc == r->last_allocatable
                    : cap == 0 && alloc == 0) {
        return;
    }
    r->reported = true;
    r->last_capacity = cap;
    r->last_allocatable = alloc;
    if (k->o->json) {
        kc_json j;
        kl_json(&j, "capacity");
        kc_json_str(&j, "resource", r->name);
        kc_json_uint(&j, "capacity", cap);
        kc_json_uint(&j, "allocatable", alloc);
        kc_json_str(&j, "cause", cause);
        kc_json_str(&j, "endpoint", endpoint);
        kc_json_emit(&j);
        return;
    }
    kc_buf b = {0};
    kc_buf_printf(&b, "capacity %zu, allocatable %zu (", cap, alloc);
    cause_text(&b, cause, endpoint);
    kc_buf_puts(&b, ")");
    kl_say(r->name, b.failed ? "capacity changed" : b.s, NULL);
    kc_buf_free(&b);
}

void kl_cap_devices(kl_plugin *p)
{
    kl_res *r = res_get(p->k, p->resource);
    if (!r) {
        return;
    }
    r->n = p->tab.n;
    r->healthy = kdp__devtab_count_healthy(&p->tab);
    r->marked = false;
    note(p->k, r, "devices", p->endpoint);
}

void kl_cap_mark(kl *k, const char *resource, const char *cause, const char *endpoint)
{
    kl_res *r = res_get(k, resource);
    if (r) {
        r->marked = true;
        note(k, r, cause, endpoint);
    }
}

size_t kl_cap_count(kl *k, const char *resource)
{
    for (kl_res *r = k->res; r; r = r->next) {
        if (strcmp(r->name, resource) == 0) {
            return r->n;
        }
    }
    return 0;
}

void kl_cap_forget(kl *k)
{
    for (kl_res *r = k->res; r; r = r->next) {
        r->n = 0;
        r->healthy = 0;
        r->marked = false;
        note(k, r, "restart", NULL);
    }
}

void kl_cap_free(kl *k)
{
    while (k->res) {
        kl_res *r = k->res;
        k->res = r->next;
        free(r->name);
        free(r);
    }
}
