/* SPDX-License-Identifier: MIT */
#include "plugin/handover.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"
#include "runtime/sock.h"

#define SOCK_SUFFIX ".sock"

static size_t stem_len(const char *socket_name)
{
    size_t n = strlen(socket_name);
    size_t s = sizeof(SOCK_SUFFIX) - 1;
    return n > s && strcmp(socket_name + n - s, SOCK_SUFFIX) == 0 ? n - s : n;
}

char *kdp__handover_socket_name(const char *socket_name, const char *instance)
{
    char *s = NULL;
    if (!instance) {
        return strdup(socket_name);
    }
    int n =
        asprintf(&s, "%.*s-%s%s", (int)stem_len(socket_name), socket_name, instance, SOCK_SUFFIX);
    return n < 0 ? NULL : s;
}

int kdp__handover_check_instance(const char *instance, const char **why)
{
    size_t n = instance ? strlen(instance) : 0;
    if (n == 0 || n > KDP__INSTANCE_MAX) {
        *why = "must be 1 to 64 characters";
        return -EINVAL;
    }
    if (instance[0] == '.') {
        *why = "must not start with '.'";
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        char c = instance[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.';
        if (!ok) {
            *why = "may hold only letters, digits, '-', '_' and '.'";
            return -EINVAL;
        }
    }
    return 0;
}

int kdp__handover_init(kdp__handover *h, const char *resource, const char *dir,
                       const char *socket_name, const char *stem_of, const char *instance,
                       uint64_t generation)
{
    memset(h, 0, sizeof(*h));
    if (!instance) {
        return 0;
    }
    h->on = true;
    h->resource = resource;
    h->generation = generation;
    h->instance = strdup(instance);
    h->dir = strdup(dir);
    h->socket_name = strdup(socket_name);
    h->stem_of = strdup(stem_of);
    if (asprintf(&h->marker_name, ".%.*s.newest", (int)stem_len(stem_of), stem_of) < 0) {
        h->marker_name = NULL;
    }
    if (h->marker_name && asprintf(&h->marker_path, "%s/%s", dir, h->marker_name) < 0) {
        h->marker_path = NULL;
    }
    if (!h->instance || !h->dir || !h->socket_name || !h->stem_of || !h->marker_name ||
        !h->marker_path) {
        kdp__handover_done(h);
        return -ENOMEM;
    }
    return 0;
}

void kdp__handover_done(kdp__handover *h)
{
    free(h->instance);
    free(h->dir);
    free(h->socket_name);
    free(h->stem_of);
    free(h->marker_name);
    free(h->marker_path);
    memset(h, 0, sizeof(*h));
}

bool kdp__handover_is_marker(const kdp__handover *h, const char *name)
{
    return h->on && name && strcmp(name, h->marker_name) == 0;
}

typedef struct marker {
    char instance[KDP__INSTANCE_MAX + 1];
    char socket[256];
    uint64_t generation;
} marker;

/* Whether m names an instance of this plugin by its own socket name
 * ("<stem>-<instance>.sock"): a marker naming anything else (kubelet.sock,
 * another plugin's socket) is not one kdp wrote. */
static bool names_an_instance(const kdp__handover *h, const marker *m)
{
    const char *why = NULL;
    if (kdp__handover_check_instance(m->instance, &why) < 0) {
        return false;
    }
    char *want = kdp__handover_socket_name(h->stem_of, m->instance);
    bool ok = want && strcmp(want, m->socket) == 0;
    free(want);
    return ok;
}

/* Reads the marker: 1 (read), 0 (none, or not one of ours: ignored). A
 * marker that is not a plain file of this user's (a FIFO, a planted hard
 * link, someone else's) is not read. */
static int read_marker(const kdp__handover *h, marker *m)
{
    int fd = open(h->marker_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        return 0;
    }
    if (kdp__own_plain_file(fd, h->marker_path) < 0) {
        close(fd);
        return 0;
    }
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return 0;
    }
    char resource[256] = "";
    char gen[32] = "";
    int n = fscanf(f, "kdp-handover 1 resource %255s instance %64s generation %31s socket %255s",
                   resource, m->instance, gen, m->socket);
    fclose(f);
    char *end = NULL;
    errno = 0;
    m->generation = strtoull(gen, &end, 10);
    bool ok = n == 4 && !errno && end != gen && *end == '\0' && gen[0] != '-' &&
              strcmp(resource, h->resource) == 0 && strchr(m->socket, '/') == NULL;
    if (ok && !names_an_instance(h, m)) {
        log_warn("%s: %s names socket %.255s, which is not an instance of this plugin: ignored",
                 h->resource, h->marker_path, m->socket);
        ok = false;
    }
    return ok;
}

/* Writes the marker ours: a temporary file renamed over it (readers see the
 * old one or the new one, whole). */
static int write_marker(const kdp__handover *h)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.%s.tmp", h->marker_path, h->instance);
    /* a new file, never one planted there (a hard link to another file
     * would be overwritten): a leftover is removed first */
    (void)unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return -errno;
    }
    char text[700];
    int n =
        snprintf(text, sizeof(text),
                 "kdp-handover 1\nresource %s\ninstance %s\ngeneration %" PRIu64 "\nsocket %s\n",
                 h->resource, h->instance, h->generation, h->socket_name);
    int r = write(fd, text, (size_t)n) == n ? 0 : -EIO;
    if (close(fd) < 0 && r == 0) {
        r = -errno;
    }
    if (r == 0 && rename(tmp, h->marker_path) < 0) {
        r = -errno;
    }
    if (r < 0) {
        (void)unlink(tmp);
    }
    return r;
}

/* The other instance's socket, a socket of this user's, accepts
 * connections. */
static bool alive(const kdp__handover *h, const char *name)
{
    char path[4200];
    int n = snprintf(path, sizeof(path), "%s/%s", h->dir, name);
    struct stat st;
    if (n < 0 || (size_t)n >= sizeof(path) || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode) ||
        st.st_uid != geteuid()) {
        return false;
    }
    int fd = -1;
    int r = kdp__sock_connect(path, &fd);
    if (r == 0) {
        close(fd);
    }
    return r == 0 || r == -EAGAIN; /* a full listen queue: someone listens */
}

static bool is_us(const kdp__handover *h, const marker *m)
{
    return strcmp(m->instance, h->instance) == 0;
}

static void name_it(const marker *m, char *who, size_t cap)
{
    snprintf(who, cap, "instance %s (generation %" PRIu64 ", socket %s)", m->instance,
             m->generation, m->socket);
}

static int write_ours(kdp__handover *h)
{
    int r = write_marker(h);
    if (r < 0) {
        log_error("%s: cannot write %s: %s: an older instance of this plugin will not know to stop",
                  h->resource, h->marker_path, strerror(-r));
    }
    return r;
}

int kdp__handover_outranked(kdp__handover *h, char *who, size_t cap)
{
    marker m;
    if (h->on && read_marker(h, &m) && !is_us(h, &m) && m.generation > h->generation &&
        alive(h, m.socket)) {
        name_it(&m, who, cap);
        return 1;
    }
    return 0;
}

int kdp__handover_registered(kdp__handover *h, char *who, size_t cap)
{
    if (!h->on) {
        return 0;
    }
    if (kdp__handover_outranked(h, who, cap)) {
        return 1;
    }
    return write_ours(h);
}

int kdp__handover_changed(kdp__handover *h, char *who, size_t cap)
{
    marker m;
    if (!h->on || !read_marker(h, &m) || is_us(h, &m)) {
        return 0;
    }
    if (m.generation < h->generation) {
        (void)write_ours(h); /* an older one took it: ours again */
        return 0;
    }
    if (!alive(h, m.socket)) {
        log_warn("%s: %s says instance %s registered, but nothing answers on %s: staying",
                 h->resource, h->marker_name, m.instance, m.socket);
        return 0;
    }
    name_it(&m, who, cap);
    return 1;
}
