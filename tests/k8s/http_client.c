/* SPDX-License-Identifier: MIT */
/*
 * kdp-test-http: runs HTTP(S) calls through src/k8s/httpc on a kdp loop, for
 * tests/k8s/test_http.py. Reads one call a line from stdin until EOF:
 *
 *   ID METHOD URL [key=value ...]
 *
 * keys: token, ca, cert, key, body (no spaces), ctype, header (one
 * "Name:value"), timeout (ms), connect (ms), max (bytes), stream=1,
 * cancel_lines=N (cancel from the N-th line callback), cancel_ms=N (cancel
 * from a timer), count=N (N copies, retried on -EAGAIN when one ends).
 * A line "free_ms=N" frees the client N ms after the start, calls in flight
 * or not, and prints {"freed":true,"active":N}: no callback may follow.
 *
 * Prints one JSON line per event: {"id","line"} for a streamed line,
 * {"id","status","code","len","body","error"} at the end of a call,
 * {"id","cancelled":true}, and once every call has ended
 * {"done":true,"eagain":N,"max_active":N,"timeout_ms":T,"watched":W,"wakeups":K}
 * (after 300 ms idle: timeout_ms is the loop's next timer, -1 if none; W the
 * sockets still watched; K the callbacks the loop ran meanwhile). Exit 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s/httpc.h"
#include "runtime/loop.h"

#define MAX_SPECS  64
#define MAX_COPIES 1024

struct spec {
    char id[64];
    char *fields[16];
    kdp__httpc_request req;
    const char *headers[2];
    long cancel_lines;
    long cancel_ms;
    long count;
};

struct run {
    struct spec *s;
    kdp__httpc_call *call;
    long lines;
    kdp__timer *cancel_timer;
    int live;
};

static kdp__loop *loop;
static kdp__httpc_client *client;
static int pending;                   /* runs not ended */
static size_t eagain;                 /* -EAGAIN answers */
static size_t max_active;             /* the most calls in flight at once */
static struct run *queue[MAX_COPIES]; /* runs waiting for a free slot */
static size_t nqueue;
static struct run runs[MAX_COPIES];
static size_t nruns;

static void print_str(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            printf("\\%c", ch);
        } else if (ch < 0x20 || ch >= 0x7f) {
            printf("\\u%04x", ch);
        } else {
            putchar(ch);
        }
    }
    putchar('"');
}

static void start_queued(void);

static void ended(struct run *r)
{
    kdp__timer_free(r->cancel_timer);
    r->cancel_timer = NULL;
    r->live = 0;
    pending--;
    if (pending == 0) {
        kdp__loop_quit(loop);
    }
}

static void on_done(kdp__httpc_call *call, int status, long code, const char *body, size_t len,
                    const char *error, void *ud)
{
    (void)call;
    struct run *r = ud;
    printf("{\"id\":");
    print_str(r->s->id, strlen(r->s->id));
    printf(",\"status\":%d,\"code\":%ld,\"len\":%zu,\"body\":", status, code, len);
    print_str(body ? body : "", body ? len : 0);
    printf(",\"error\":");
    if (error) {
        print_str(error, strlen(error));
    } else {
        printf("null");
    }
    printf("}\n");
    fflush(stdout);
    ended(r);
    start_queued();
}

static void cancel_run(struct run *r)
{
    kdp__httpc_cancel(r->call);
    printf("{\"id\":");
    print_str(r->s->id, strlen(r->s->id));
    printf(",\"cancelled\":true,\"lines\":%ld}\n", r->lines);
    fflush(stdout);
    ended(r);
}

static void on_line(kdp__httpc_call *call, const char *line, size_t len, void *ud)
{
    (void)call;
    struct run *r = ud;
    r->lines++;
    printf("{\"id\":");
    print_str(r->s->id, strlen(r->s->id));
    printf(",\"line\":");
    print_str(line, len);
    printf("}\n");
    fflush(stdout);
    if (r->s->cancel_lines > 0 && r->lines == r->s->cancel_lines) {
        cancel_run(r);
    }
}

static void on_cancel_timer(kdp__timer *t, void *ud)
{
    (void)t;
    struct run *r = ud;
    if (r->live) {
        cancel_run(r);
    }
}

/* Returns 0, or -EAGAIN (queued again by the caller), or exits. */
static int start(struct run *r)
{
    int rc = kdp__httpc_start(client, &r->s->req, on_done, r, &r->call);
    if (rc == -EAGAIN) {
        eagain++;
        return rc;
    }
    if (rc < 0) {
        printf("{\"id\":\"%s\",\"start\":%d}\n", r->s->id, rc);
        fflush(stdout);
        ended(r);
        return 0;
    }
    r->live = 1;
    if (kdp__httpc_active(client) > max_active) {
        max_active = kdp__httpc_active(client);
    }
    if (r->s->cancel_ms > 0) {
        if (kdp__timer_new(loop, on_cancel_timer, r, &r->cancel_timer) < 0) {
            exit(2);
        }
        kdp__timer_start(r->cancel_timer, (uint64_t)r->s->cancel_ms * 1000);
    }
    return 0;
}

static void start_queued(void)
{
    while (nqueue > 0 && start(queue[0]) == 0) {
        memmove(queue, queue + 1, (nqueue - 1) * sizeof(queue[0]));
        nqueue--;
    }
}

static void on_free_timer(kdp__timer *t, void *ud)
{
    (void)ud;
    kdp__timer_free(t);
    size_t active = kdp__httpc_active(client);
    kdp__httpc_client_free(client);
    client = NULL;
    for (size_t i = 0; i < nruns; i++) {
        kdp__timer_free(runs[i].cancel_timer);
        runs[i].cancel_timer = NULL;
        runs[i].live = 0;
    }
    nqueue = 0;
    printf("{\"freed\":true,\"active\":%zu}\n", active);
    fflush(stdout);
    kdp__loop_quit(loop);
}

static void parse(struct spec *s, char *line)
{
    char *save = NULL;
    char *tok = strtok_r(line, " \t\n", &save);
    snprintf(s->id, sizeof(s->id), "%s", tok ? tok : "?");
    s->req.method = strtok_r(NULL, " \t\n", &save);
    s->req.url = strtok_r(NULL, " \t\n", &save);
    s->count = 1;
    while ((tok = strtok_r(NULL, " \t\n", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            continue;
        }
        *eq = '\0';
        const char *v = eq + 1;
        if (strcmp(tok, "token") == 0) {
            s->req.bearer_token = v;
        } else if (strcmp(tok, "ca") == 0) {
            s->req.ca_file = v;
        } else if (strcmp(tok, "cert") == 0) {
            s->req.cert_file = v;
        } else if (strcmp(tok, "key") == 0) {
            s->req.key_file = v;
        } else if (strcmp(tok, "body") == 0) {
            s->req.body = v;
            s->req.body_len = strlen(v);
        } else if (strcmp(tok, "ctype") == 0) {
            s->req.content_type = v;
        } else if (strcmp(tok, "header") == 0) {
            s->headers[0] = v;
            s->req.headers = s->headers;
        } else if (strcmp(tok, "timeout") == 0) {
            s->req.timeout_ms = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(tok, "connect") == 0) {
            s->req.connect_timeout_ms = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(tok, "max") == 0) {
            s->req.max_body = strtoul(v, NULL, 10);
        } else if (strcmp(tok, "stream") == 0) {
            s->req.on_line = on_line;
        } else if (strcmp(tok, "cancel_lines") == 0) {
            s->cancel_lines = strtol(v, NULL, 10);
        } else if (strcmp(tok, "cancel_ms") == 0) {
            s->cancel_ms = strtol(v, NULL, 10);
        } else if (strcmp(tok, "count") == 0) {
            s->count = strtol(v, NULL, 10);
        }
    }
}

int main(void)
{
    static struct spec specs[MAX_SPECS];
    static char lines[MAX_SPECS][4096];
    size_t nspecs = 0;
    long free_ms = 0;
    while (nspecs < MAX_SPECS && fgets(lines[nspecs], sizeof(lines[nspecs]), stdin)) {
        if (lines[nspecs][0] == '\n' || lines[nspecs][0] == '#') {
            continue;
        }
        if (strncmp(lines[nspecs], "free_ms=", 8) == 0) {
            free_ms = strtol(lines[nspecs] + 8, NULL, 10);
            continue;
        }
        parse(&specs[nspecs], lines[nspecs]);
        if (!specs[nspecs].req.url) {
            fprintf(stderr, "kdp-test-http: a line needs ID METHOD URL\n");
            return 2;
        }
        for (long i = 0; i < specs[nspecs].count && nruns < MAX_COPIES; i++) {
            runs[nruns++].s = &specs[nspecs];
        }
        nspecs++;
    }
    if (kdp__loop_new(&loop) < 0 || kdp__httpc_client_new(loop, &client) < 0) {
        fprintf(stderr, "kdp-test-http: no loop or client\n");
        return 2;
    }
    pending = (int)nruns;
    for (size_t i = 0; i < nruns; i++) {
        if (start(&runs[i]) == -EAGAIN) {
            queue[nqueue++] = &runs[i];
        }
    }
    if (free_ms > 0) {
        kdp__timer *t;
        if (kdp__timer_new(loop, on_free_timer, NULL, &t) < 0) {
            return 2;
        }
        kdp__timer_start(t, (uint64_t)free_ms * 1000);
    }
    if (pending > 0) {
        kdp__loop_run(loop);
    }
    /* idle: what the loop does in the next 300 ms with nothing in flight */
    int wakeups = 0;
    uint64_t end = kdp__now_us() + 300000;
    for (uint64_t now = kdp__now_us(); now < end; now = kdp__now_us()) {
        int n = kdp__loop_dispatch(loop, (int)((end - now + 999) / 1000));
        wakeups += n > 0 ? n : 0;
    }
    printf("{\"done\":true,\"eagain\":%zu,\"max_active\":%zu,\"timeout_ms\":%d,\"watched\":%zu,"
           "\"wakeups\":%d}\n",
           eagain, max_active, kdp__loop_next_timeout_ms(loop),
           client ? kdp__httpc_watched(client) : 0, wakeups);
    kdp__httpc_client_free(client);
    kdp__loop_free(loop);
    return 0;
}
