/* SPDX-License-Identifier: MIT */
/*
 * kdp-generic's health checks, run on kdp's worker as the probe op: the
 * device's nodes and an optional file exist under the root, and an
 * optional command (posix_spawn, no shell) exits 0. The command runs in
 * its own process group with the default signal dispositions and an empty
 * mask; the first line of what it prints (stdout and stderr, at most
 * REASON_MAX bytes) is the reason; at its deadline the group is killed
 * (SIGKILL) and the command reaped, and so is whatever it left behind when
 * it exits: no zombie, no stray process. A killed command that does not die
 * at once (uninterruptible sleep: a read of a hung device dies only when
 * the read returns) is not waited for beyond REAP_MS, so that the probe
 * still answers within its deadline; it is reaped at a later check.
 */
#include "health.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REASON_MAX 200
#define SLICE_MS   20
#define DRAIN_MAX  65536 /* bytes read after it exited (its children may go on) */
#define REAP_MS    150   /* a killed process is waited for this long (twice: within the margin) */
#define LEFT_MAX   64    /* killed commands not reaped yet, kept for a later check */

char *gen_health_expand(const char *tmpl, const gen_dev *d)
{
    const char *path = d->n_paths ? d->paths[0] : "";
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f) {
        return NULL;
    }
    for (const char *p = tmpl; *p; p++) {
        if (strncmp(p, "{path}", 6) == 0) {
            fputs(path, f);
            p += 5;
        } else if (strncmp(p, "{name}", 6) == 0) {
            fputs(name, f);
            p += 5;
        } else if (strncmp(p, "{id}", 4) == 0) {
            fputs(d->id, f);
            p += 3;
        } else {
            fputc(*p, f);
        }
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* root + path: whether it exists (follow: false for a node, whose by-id
 * link is what the device is; true for a file, e.g. a sysfs attribute). */
static bool exists_under(const char *root, const char *path, bool follow)
{
    size_t rl = strlen(root);
    while (rl > 0 && root[rl - 1] == '/') {
        rl--;
    }
    char *full = NULL;
    if (asprintf(&full, "%.*s%s", (int)rl, root, path) < 0) {
        return true; /* out of memory: no verdict from this check */
    }
    struct stat st;
    bool ok = (follow ? stat(full, &st) : lstat(full, &st)) == 0;
    free(full);
    return ok;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000U + (uint64_t)ts.tv_nsec / 1000000U;
}

/* The first line of what the command printed, printable. */
typedef struct first_line {
    char text[REASON_MAX + 1];
    size_t len;
    bool done; /* a newline came, or it is full */
} first_line;

static void take_output(first_line *l, const char *buf, size_t n)
{
    for (size_t i = 0; i < n && !l->done; i++) {
        char ch = buf[i];
        if (ch == '\n') {
            l->done = l->len > 0;
            continue;
        }
        if (l->len == 0 && (ch == ' ' || ch == '\t' || ch == '\r')) {
            continue;
        }
        if (ch < 0x20 || ch >= 0x7f) {
            ch = '?';
        }
        l->text[l->len++] = ch;
        l->done = l->len == REASON_MAX;
    }
    l->text[l->len] = '\0';
}

typedef struct run_result {
    bool timed_out;
    int status; /* waitpid's */
    first_line line;
} run_result;

static int spawn(char **argv, int out_fd, pid_t *ret)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    sigset_t none;
    sigset_t all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none); /* kdp-generic blocks SIGTERM and others */
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0); /* its own group: killed as one */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETPGROUP);
    int r = posix_spawn(ret, argv[0], &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return -r;
}

/* Commands killed at their deadline that had not died REAP_MS later: our
 * children still, reaped by a later check (every resource's worker runs
 * checks: one list, under a lock). */
static pthread_mutex_t left_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t killed_left[LEFT_MAX];
static size_t n_left;

static void reap_left(void)
{
    pthread_mutex_lock(&left_mu);
    for (size_t i = 0; i < n_left;) {
        pid_t r = waitpid(killed_left[i], NULL, WNOHANG);
        if (r == killed_left[i] || (r < 0 && errno == ECHILD)) {
            killed_left[i] = killed_left[--n_left];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&left_mu);
}

/* Waits at most REAP_MS for pid (killed) to exit; else keeps it for
 * reap_left(). */
static void reap_killed(pid_t pid, int *status)
{
    uint64_t until = now_ms() + REAP_MS;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) {
            return;
        }
        if (r == 0 && now_ms() >= until) {
            break;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&left_mu);
    if (n_left < LEFT_MAX) {
        killed_left[n_left++] = pid;
    }
    pthread_mutex_unlock(&left_mu);
}

/* Kills what is left of the command's group and reaps whatever of it is
 * ours (the command itself is reaped already). What the command left
 * running becomes ours when kdp-generic is PID 1 (a container's
 * entrypoint) or a subreaper: it is waited for, at most REAP_MS, to die of
 * the SIGKILL, else it would stay a zombie; when none of the group is ours
 * (ECHILD) there is nothing to wait for. */
static void end_group(pid_t pid)
{
    (void)kill(-pid, SIGKILL);
    uint64_t until = now_ms() + REAP_MS;
    for (;;) {
        pid_t r = waitpid(-pid, NULL, WNOHANG);
        if (r > 0 || (r < 0 && errno == EINTR)) {
            continue;
        }
        if (r < 0 || now_ms() >= until) {
            return;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* A command running: its pid, the read end of its output. */
typedef struct child {
    pid_t pid;
    int fd;
    uint64_t deadline;
    bool eof, exited;
    size_t after_exit;
    run_result *res;
} child;

/* Reads what is there within wait_ms. Returns the bytes read (0: none;
 * eof set at the end of the output). */
static size_t pump(child *c, int wait_ms)
{
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    if (poll(&pfd, 1, wait_ms) <= 0) {
        return 0;
    }
    char buf[512];
    ssize_t n = read(c->fd, buf, sizeof(buf));
    if (n <= 0) {
        c->eof = n == 0 || (errno != EINTR && errno != EAGAIN);
        return 0;
    }
    take_output(&c->res->line, buf, (size_t)n);
    c->after_exit += c->exited ? (size_t)n : 0;
    return (size_t)n;
}

/* One turn of the wait. Returns true once it is over: exited (and what it
 * printed read, not what its children keep open), or killed at the
 * deadline. */
static bool step(child *c)
{
    if (!c->exited && waitpid(c->pid, &c->res->status, WNOHANG) == c->pid) {
        c->exited = true;
    }
    uint64_t now = now_ms();
    if (!c->exited && now >= c->deadline) {
        c->res->timed_out = true;
        (void)kill(-c->pid, SIGKILL);
        (void)kill(c->pid, SIGKILL);
        reap_killed(c->pid, &c->res->status);
        return true;
    }
    if (c->eof) {
        if (!c->exited) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)SLICE_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
        return c->exited;
    }
    uint64_t left = c->deadline - now;
    int wait = c->exited ? 0 : (int)(left < SLICE_MS ? left : SLICE_MS);
    if (pump(c, wait) > 0 && c->after_exit < DRAIN_MAX) {
        return false; /* drain: a full pipe must not block it */
    }
    return c->exited;
}

/* Runs argv with a deadline; its output's first line into res. Returns 0
 * (res filled) or -errno (it could not be started). */
static int run_command(char **argv, unsigned timeout_ms, run_result *res)
{
    memset(res, 0, sizeof(*res));
    reap_left();
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) {
        return -errno;
    }
    child c = {.fd = fds[0], .deadline = now_ms() + timeout_ms, .res = res};
    int r = spawn(argv, fds[1], &c.pid);
    close(fds[1]);
    if (r < 0) {
        close(fds[0]);
        return r;
    }
    while (!step(&c)) {
    }
    close(fds[0]);
    end_group(c.pid);
    return 0;
}

/* The command's outcome as an answer, its reason given to kdp. */
static int verdict(kdp_plugin *p, const char *cmd, unsigned timeout_ms, const run_result *res)
{
    const char *sep = res->line.len ? ": " : "";
    if (res->timed_out) {
        kdp_plugin_set_error(p, "health command %s did not finish within %u ms: killed%s%s", cmd,
                             timeout_ms, sep, res->line.text);
        return -ETIMEDOUT;
    }
    if (!WIFEXITED(res->status)) {
        kdp_plugin_set_error(p, "health command %s was killed by signal %d%s%s", cmd,
                             WIFSIGNALED(res->status) ? WTERMSIG(res->status) : 0, sep,
                             res->line.text);
        return -EIO;
    }
    int code = WEXITSTATUS(res->status);
    if (code != 0) {
        kdp_plugin_set_error(p, "health command %s exited with %d%s%s%s", cmd, code,
                             code == 2 ? " (the health subsystem is down)" : "", sep,
                             res->line.text);
    }
    return code == 0   ? KDP_PROBE_HEALTHY
           : code == 1 ? KDP_PROBE_UNHEALTHY
           : code == 2 ? KDP_PROBE_DOWN
                       : -EIO;
}

static void free_argv(char **argv, size_t n)
{
    for (size_t i = 0; argv && i < n; i++) {
        free(argv[i]);
    }
    free((void *)argv);
}

static int check_command(kdp_plugin *p, const gen_health *h, const gen_dev *d)
{
    char **argv = calloc(h->n_command + 1, sizeof(*argv));
    bool ok = argv && h->n_command > 0;
    for (size_t i = 0; ok && i < h->n_command; i++) {
        ok = (argv[i] = gen_health_expand(h->command[i], d)) != NULL;
    }
    if (!ok) {
        free_argv(argv, h->n_command);
        kdp_plugin_set_error(p, "out of memory running the health command");
        return -ENOMEM;
    }
    unsigned timeout_ms = h->timeout_ms ? h->timeout_ms : GEN_HEALTH_TIMEOUT_MS;
    run_result res;
    int r = run_command(argv, timeout_ms, &res);
    if (r < 0) {
        /* the check itself is broken: it cannot tell */
        kdp_plugin_set_error(p, "cannot run the health command %s: %s", argv[0], strerror(-r));
        r = KDP_PROBE_DOWN;
    } else {
        r = verdict(p, argv[0], timeout_ms, &res);
    }
    free_argv(argv, h->n_command);
    return r;
}

int gen_health_check(kdp_plugin *p, const gen_resource *r, const gen_dev *d)
{
    const gen_health *h = &r->health;
    for (size_t i = 0; h->node_exists && i < d->n_paths; i++) {
        if (!exists_under(r->root, d->paths[i], false)) {
            kdp_plugin_set_error(p, "device node %s is missing (root %s)", d->paths[i], r->root);
            return KDP_PROBE_UNHEALTHY;
        }
    }
    if (h->file) {
        char *f = gen_health_expand(h->file, d);
        if (!f) {
            kdp_plugin_set_error(p, "out of memory checking the health file");
            return -ENOMEM;
        }
        bool ok = exists_under(r->root, f, true);
        if (!ok) {
            kdp_plugin_set_error(p, "health file %s is missing (root %s)", f, r->root);
        }
        free(f);
        if (!ok) {
            return KDP_PROBE_UNHEALTHY;
        }
    }
    return h->command ? check_command(p, h, d) : KDP_PROBE_HEALTHY;
}
