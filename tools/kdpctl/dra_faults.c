/* SPDX-License-Identifier: MIT */
/*
 * dra_faults: what `kdpctl dra apiserver` plays for a driver to survive,
 * commands on stdin (or `dra run`'s, after the kubelet's), one a line:
 *   down SECONDS        an outage: the port closed, every connection and
 *                       watch ended; back on the same port SECONDS later
 *   fail CODE [COUNT]   the next COUNT requests (default 1) answered CODE
 *                       (400-599), a Status; 429 and 503 with Retry-After
 *   conflict [COUNT]    the next COUNT writes of slices answered 409
 *   edit-slice NAME     the slice edited as someone else would: its last
 *                       device (or counter set) removed, a new generation
 *   delete-slice NAME   the slice deleted
 *                       (NAME ending in '*': the oldest slice whose name
 *                       starts with the rest, e.g. node-a-gpu-example-com-*)
 *   rotate-token        a new token in DIR/token and the kubeconfigs; the
 *                       old one refused (401) at once
 *   faults              what is armed
 * Each is answered with a `fault` event (--json) or a line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/secret.h"
#include "dra_api.h"

#define MAX_COUNT   1000000UL
#define MAX_DOWN_S  3600UL
#define RELISTEN_US ((uint64_t)1000 * 1000)

static void say(kd_api *a, const char *command, const char *text, bool error)
{
    if (a->o->json) {
        kc_json j;
        kd_json(&j, "fault");
        kc_json_str(&j, "command", command);
        kc_json_str(&j, error ? "error" : "detail", text);
        kc_json_emit(&j);
        return;
    }
    char line[700];
    snprintf(line, sizeof(line), "%s%s: %s", error ? "cannot " : "", command, text);
    kd_say_as("dra-apiserver", line, NULL);
}

/* A whole number in [lo, hi], or false. */
static bool number(const char *s, unsigned long lo, unsigned long hi, unsigned long *ret)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = s && *s >= '0' && *s <= '9' ? strtoul(s, &end, 10) : 0;
    if (!end || *end || errno || v < lo || v > hi) {
        return false;
    }
    *ret = v;
    return true;
}

static const char *reason_of(unsigned code)
{
    static const struct {
        unsigned code;
        const char *reason;
    } reasons[] = {
        {400, "BadRequest"},      {401, "Unauthorized"},          {403, "Forbidden"},
        {404, "NotFound"},        {405, "MethodNotAllowed"},      {409, "Conflict"},
        {410, "Expired"},         {413, "RequestEntityTooLarge"}, {422, "Invalid"},
        {429, "TooManyRequests"}, {500, "InternalError"},         {503, "ServiceUnavailable"},
        {504, "Timeout"}};
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        if (reasons[i].code == code) {
            return reasons[i].reason;
        }
    }
    return "";
}

/* ---- the answers ---- */

bool kd_fault_answer(kd_api *a, kd_hreq *r)
{
    kd_faults *f = &a->faults;
    const char *m = kd_http_method(r);
    const char *p = kd_http_path(r);
    if (f->conflicts && (strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0) &&
        strstr(p, "/resourceslices/")) {
        f->conflicts--;
        char msg[600];
        snprintf(msg, sizeof(msg),
                 "Operation cannot be fulfilled on resourceslices.resource.k8s.io \"%.200s\": the "
                 "object has been modified; please apply your changes to the latest version and "
                 "try again",
                 strrchr(p, '/') + 1);
        kd_status(r, 409, "Conflict", msg);
        return true;
    }
    if (!f->left) {
        return false;
    }
    f->left--;
    char msg[200];
    snprintf(msg, sizeof(msg), "injected by kdpctl dra apiserver (fail %u)", f->code);
    bool later = f->code == 429 || f->code == 503;
    kd_status_with(r, f->code, reason_of(f->code), msg, later ? "Retry-After: 1" : NULL);
    return true;
}

/* ---- an outage ---- */

static void on_up(kdp__timer *t, void *ud)
{
    kd_api *a = ud;
    kd_faults *f = &a->faults;
    int r = kd_http_new(a->loop, f->host, f->port, a->creds.cert_pem, a->creds.key_pem,
                        kd_api_request, a, &a->http);
    if (r < 0) {
        char text[200];
        snprintf(text, sizeof(text), "port %s: %s (trying again every second)", f->port,
                 strerror(-r));
        if (!f->relisten_said) {
            say(a, "up", text, true);
        }
        f->relisten_said = true;
        kdp__timer_start(t, RELISTEN_US);
        return;
    }
    f->relisten_said = false;
    say(a, "up", a->server, false);
}

static void go_down(kd_api *a, unsigned long seconds)
{
    kd_faults *f = &a->faults;
    if (!a->http) {
        say(a, "down", "down already", true);
        return;
    }
    if (!f->up && kdp__timer_new(a->loop, on_up, a, &f->up) < 0) {
        say(a, "down", "out of memory", true);
        return;
    }
    kd_http_free(a->http); /* ends the watches: their close callbacks free them */
    a->http = NULL;
    kd_watches_free(a);
    kdp__timer_start(f->up, (uint64_t)seconds * 1000 * 1000);
    char text[200];
    snprintf(text, sizeof(text), "port %s closed for %lu s (connections and watches ended)",
             f->port, seconds);
    say(a, "down", text, false);
}

/* ---- behind the driver's back ---- */

static const char *created(const kd_obj *o)
{
    const char *c =
        json_string_value(json_object_get(json_object_get(o->o, "metadata"), "creationTimestamp"));
    return c ? c : "";
}

/* Made before b (RFC 3339 times of one format compare as text), else the
 * first name. */
static bool older(const kd_obj *a, const kd_obj *b)
{
    int c = strcmp(created(a), created(b));
    return c < 0 || (c == 0 && strcmp(a->name, b->name) < 0);
}

/* The slice NAME, or with NAME ending in '*' the first one (oldest) whose
 * name starts with the rest (a generateName prefix, the driver's slices). */
static kd_obj *slice_named(kd_api *a, const char *command, const char *name)
{
    size_t n = strlen(name);
    kd_obj *o = NULL;
    if (n > 0 && name[n - 1] == '*') {
        for (kd_obj *it = a->objs[KD_SLICE]; it; it = it->next) {
            if (strncmp(it->name, name, n - 1) == 0 && (!o || older(it, o))) {
                o = it;
            }
        }
    } else {
        o = kd_store_find(a, KD_SLICE, NULL, name);
    }
    if (!o) {
        char text[400];
        snprintf(text, sizeof(text), "no ResourceSlice \"%.200s\" (the slice events name them)",
                 name);
        say(a, command, text, true);
    }
    return o;
}

static void edit_slice(kd_api *a, const char *name)
{
    kd_obj *obj = slice_named(a, "edit-slice", name);
    if (!obj) {
        return;
    }
    json_t *n = json_deep_copy(obj->o);
    json_t *spec = json_object_get(n, "spec");
    json_t *devs = json_object_get(spec, "devices");
    json_t *sets = json_object_get(spec, "sharedCounters");
    json_t *arr = json_array_size(devs) ? devs : sets;
    size_t len = json_array_size(arr);
    if (!n || len == 0) {
        say(a, "edit-slice", n ? "the slice has no device nor counter set to remove" : "no memory",
            true);
        json_decref(n);
        return;
    }
    char what[300];
    snprintf(what, sizeof(what), "%s %s removed", arr == devs ? "device" : "counter set",
             json_string_value(json_object_get(json_array_get(arr, len - 1), "name")));
    json_array_remove(arr, len - 1);
    json_t *md = json_object_get(n, "metadata");
    json_int_t g = json_integer_value(json_object_get(md, "generation"));
    json_object_set_new(md, "generation", json_integer(g + 1));
    kd_store_put(a, KD_SLICE, NULL, obj->name, n, obj);
    say(a, "edit-slice", what, false);
}

static void delete_slice(kd_api *a, const char *name)
{
    kd_obj *obj = slice_named(a, "delete-slice", name);
    if (obj) {
        char text[300];
        snprintf(text, sizeof(text), "%s deleted", obj->name);
        json_decref(kd_store_delete(a, obj));
        say(a, "delete-slice", text, false);
    }
}

static void rotate_token(kd_api *a)
{
    char *t = NULL;
    int r = kd_token_make(&t);
    if (r == 0) { /* the new one from now on, whatever the files say */
        kdp__secret_free_str(a->creds.token);
        a->creds.token = t;
        r = kd_api_write_files(a);
    }
    say(a, "rotate-token",
        r < 0 ? strerror(-r) : "a new token in DIR/token and the kubeconfigs; the old one refused",
        r < 0);
}

/* ---- the commands ---- */

static void armed(kd_api *a)
{
    const kd_faults *f = &a->faults;
    char text[300];
    snprintf(text, sizeof(text), "%s; fail: %lu more (code %u); conflict: %lu more",
             a->http ? "up" : "down", f->left, f->code, f->conflicts);
    say(a, "faults", text, false);
}

bool kd_fault_command(kd_api *a, char **argv, size_t argc)
{
    kd_faults *f = &a->faults;
    const char *c = argv[0];
    unsigned long v = 1;
    unsigned long code = 0;
    bool one = argc == 2;
    if (strcmp(c, "down") == 0 && one && number(argv[1], 1, MAX_DOWN_S, &v)) {
        go_down(a, v);
    } else if (strcmp(c, "fail") == 0 && (argc == 2 || argc == 3) &&
               number(argv[1], 400, 599, &code) &&
               (argc == 2 || number(argv[2], 1, MAX_COUNT, &v))) {
        f->code = (unsigned)code;
        f->left = v;
        armed(a);
    } else if (strcmp(c, "conflict") == 0 && argc <= 2 &&
               (argc == 1 || number(argv[1], 1, MAX_COUNT, &v))) {
        f->conflicts = v;
        armed(a);
    } else if (strcmp(c, "edit-slice") == 0 && one) {
        edit_slice(a, argv[1]);
    } else if (strcmp(c, "delete-slice") == 0 && one) {
        delete_slice(a, argv[1]);
    } else if (strcmp(c, "rotate-token") == 0 && argc == 1) {
        rotate_token(a);
    } else if (strcmp(c, "faults") == 0 && argc == 1) {
        armed(a);
    } else {
        return false;
    }
    return true;
}

static void on_line(char *line, void *ud)
{
    kd_api *a = ud;
    char *argv[4];
    size_t argc = line ? kd_words(line, argv, 4) : 0;
    if (!line) {
        say(a, "command", "a command longer than 64 KiB: ignored", true);
    } else if (argc && argv[0][0] != '#' && (argc > 4 || !kd_fault_command(a, argv, argc))) {
        say(a, "command", "unknown, or wrong arguments: " KD_FAULT_USAGE, true);
    }
}

int kd_faults_start(kd_api *a, bool read_stdin)
{
    a->intercept = kd_fault_answer;
    return read_stdin ? kd_lines_start(&a->faults.input, a->loop, on_line, a) : 0;
}

void kd_faults_stop(kd_api *a)
{
    kd_lines_stop(&a->faults.input);
    kdp__timer_free(a->faults.up);
    a->faults.up = NULL;
}
