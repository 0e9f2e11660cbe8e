/* SPDX-License-Identifier: MIT */
/*
 * cdi: CDI spec files (Container Device Interface), written atomically:
 * a temporary file in the same directory (its name ends in neither .json
 * nor .yaml, so CDI readers skip it), fsync, rename over the final name,
 * fsync of the directory. A spec whose content would not change is left
 * alone, so rescans do not wake the runtimes' directory watches.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/validate.h"
#include "discovery/discover.h"
#include "kdp.h"

#define DEFAULT_CDI_DIR "/var/run/cdi"
#define MAX_KIND_LEN    320
#define MAX_SPEC_BYTES  (64U << 20)
#define MAX_CDI_DEVICES 65536U

/* ---- a string builder that remembers running out of memory ---- */

typedef struct sbuf {
    char *s;
    size_t n;
    size_t cap;
    bool failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len)
{
    if (b->failed) {
        return;
    }
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + len + 1) {
            cap *= 2;
        }
        char *ns = cap <= MAX_SPEC_BYTES ? realloc(b->s, cap) : NULL;
        if (!ns) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, len);
    b->n += len;
    b->s[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* A JSON string, quoted and escaped. */
static void sb_json(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            sb_put(b, esc, 2);
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", *p);
            sb_puts(b, esc);
        } else {
            sb_put(b, (const char *)p, 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* ---- checks ---- */

KDP_EXPORT int kdp_validate_cdi_kind(const char *kind, const char **why)
{
    const char *w = NULL;
    if (!kind || !*kind) {
        w = "CDI kind is empty (e.g. example.com/serial)";
    } else if (strlen(kind) > MAX_KIND_LEN) {
        w = "CDI kind is too long (320 bytes at most)";
    } else if (strchr(kind, '=')) {
        w = "CDI kind must not contain '=' (it is vendor/class, e.g. example.com/serial)";
    }
    char buf[MAX_KIND_LEN + 8];
    if (!w) {
        snprintf(buf, sizeof(buf), "%s=x", kind);
        if (kdp__validate_cdi_name(buf, &w) == 0) {
            return 0;
        }
    }
    if (why) {
        *why = w;
    }
    return -EINVAL;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_node(const kdp_cdi_node *nd)
{
    if (!nd->path || kdp__validate_abs_path(nd->path, NULL) < 0 ||
        (nd->host_path && kdp__validate_abs_path(nd->host_path, NULL) < 0) ||
        (nd->permissions && kdp__validate_permissions(nd->permissions, NULL) < 0)) {
        return -EINVAL;
    }
    return 0;
}

/* Names valid and unique, every device with at least one valid node. */
static int check_devices(const char *kind, const kdp_cdi_device *devs, size_t n)
{
    if (n > MAX_CDI_DEVICES) {
        return -E2BIG;
    }
    const char **names = calloc(n ? n : 1, sizeof(*names));
    if (!names) {
        return -ENOMEM;
    }
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        char full[MAX_KIND_LEN + 300];
        const kdp_cdi_device *d = &devs[i];
        int w = d->name ? snprintf(full, sizeof(full), "%s=%s", kind, d->name) : -1;
        if (w < 0 || (size_t)w >= sizeof(full) || kdp__validate_cdi_name(full, NULL) < 0 ||
            d->n_nodes == 0 || !d->nodes) {
            r = -EINVAL;
        }
        for (size_t j = 0; r == 0 && j < d->n_nodes; j++) {
            r = check_node(&d->nodes[j]);
        }
        names[i] = d->name;
    }
    if (r == 0 && n > 1) {
        qsort(names, n, sizeof(*names), cmp_name);
        for (size_t i = 1; i < n && r == 0; i++) {
            r = strcmp(names[i - 1], names[i]) == 0 ? -EEXIST : 0;
        }
    }
    free(names);
    return r;
}

/* ---- the spec ---- */

static const char *cdi_version(const char *kind, const kdp_cdi_device *devs, size_t n)
{
    if (strchr(strchr(kind, '/'), '.')) {
        return "0.6.0"; /* a '.' in the class */
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < devs[i].n_nodes; j++) {
            const kdp_cdi_node *nd = &devs[i].nodes[j];
            if (nd->host_path && strcmp(nd->host_path, nd->path) != 0) {
                return "0.5.0"; /* deviceNodes[].hostPath */
            }
        }
    }
    return "0.3.0";
}

static void put_node(sbuf *b, const kdp_cdi_node *nd, bool last)
{
    sb_puts(b, "          {\"path\": ");
    sb_json(b, nd->path);
    if (nd->host_path && strcmp(nd->host_path, nd->path) != 0) {
        sb_puts(b, ", \"hostPath\": ");
        sb_json(b, nd->host_path);
    }
    if (nd->permissions) {
        sb_puts(b, ", \"permissions\": ");
        sb_json(b, nd->permissions);
    }
    sb_puts(b, last ? "}\n" : "},\n");
}

static void put_spec(sbuf *b, const char *kind, const kdp_cdi_device *devs, size_t n)
{
    sb_puts(b, "{\n  \"cdiVersion\": ");
    sb_json(b, cdi_version(kind, devs, n));
    sb_puts(b, ",\n  \"kind\": ");
    sb_json(b, kind);
    sb_puts(b, ",\n  \"devices\": [\n");
    for (size_t i = 0; i < n; i++) {
        sb_puts(b, "    {\n      \"name\": ");
        sb_json(b, devs[i].name);
        sb_puts(b, ",\n      \"containerEdits\": {\n        \"deviceNodes\": [\n");
        for (size_t j = 0; j < devs[i].n_nodes; j++) {
            put_node(b, &devs[i].nodes[j], j + 1 == devs[i].n_nodes);
        }
        sb_puts(b, i + 1 == n ? "        ]\n      }\n    }\n" : "        ]\n      }\n    },\n");
    }
    sb_puts(b, "  ]\n}\n");
}

/* ---- files ---- */

static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s", dir);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') {
            continue;
        }
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST) {
            return -errno;
        }
        *p = c;
        if (c == '\0') {
            return 0;
        }
    }
}

static int spec_path(const char *dir, const char *kind, char out[PATH_MAX])
{
    const char *slash = strchr(kind, '/');
    int w = snprintf(out, PATH_MAX, "%s/%.*s-%s.json", dir, (int)(slash - kind), kind, slash + 1);
    return w < 0 || w >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* True if path holds exactly buf. */
static bool same_content(const char *path, const char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return false;
    }
    struct stat st;
    bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len;
    char chunk[8192];
    for (size_t off = 0; same && off < len;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        same = n > 0 && (size_t)n <= len - off && memcmp(chunk, buf + off, (size_t)n) == 0;
        off += n > 0 ? (size_t)n : 0;
    }
    close(fd);
    return same;
}

static int sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -errno : -EIO;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Temporary file, fsync, rename: the final name only ever holds a whole spec. */
static int replace_file(const char *dir, const char *path, const char *buf, size_t len)
{
    char tmp[PATH_MAX];
    int w = snprintf(tmp, sizeof(tmp), "%s/.%s.tmp-XXXXXX", dir, strrchr(path, '/') + 1);
    if (w < 0 || (size_t)w >= sizeof(tmp)) {
        return -ENAMETOOLONG;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int r = fchmod(fd, 0644) < 0 ? -errno : 0;
    if (r == 0) {
        r = write_all(fd, buf, len);
    }
    if (r == 0 && fsync(fd) < 0) {
        r = -errno;
    }
    if (close(fd) < 0 && r == 0) {
        r = -errno;
    }
    if (r == 0 && rename(tmp, path) < 0) {
        r = -errno;
    }
    if (r < 0) {
        (void)unlink(tmp);
        return r;
    }
    return sync_dir(dir);
}

static int make_names(const char *kind, const kdp_cdi_device *devs, size_t n, char ***ret)
{
    kdp__strv s = {0};
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        char full[MAX_KIND_LEN + 300];
        snprintf(full, sizeof(full), "%s=%s", kind, devs[i].name);
        r = kdp__strv_add(&s, full, MAX_CDI_DEVICES);
    }
    char **v = r == 0 ? kdp__strv_take(&s) : NULL;
    kdp__strv_clear(&s);
    if (!v) {
        return r < 0 ? r : -ENOMEM;
    }
    *ret = v;
    return 0;
}

KDP_EXPORT int kdp_cdi_write_spec(const char *dir, const char *kind, const kdp_cdi_device *devs,
                                  size_t n, char ***ret_names)
{
    if (!dir) {
        dir = DEFAULT_CDI_DIR;
    }
    if (dir[0] != '/' || kdp_validate_cdi_kind(kind, NULL) < 0 || (!devs && n)) {
        return -EINVAL;
    }
    int r = check_devices(kind, devs, n);
    char **names = NULL;
    if (r == 0 && ret_names) {
        r = make_names(kind, devs, n, &names);
    }
    if (r < 0) {
        return r;
    }
    if (n == 0) {
        r = kdp_cdi_remove_spec(dir, kind);
    } else {
        char path[PATH_MAX];
        sbuf b = {0};
        put_spec(&b, kind, devs, n);
        r = b.failed ? -ENOMEM : spec_path(dir, kind, path);
        if (r == 0) {
            r = mkdir_p(dir);
        }
        if (r == 0 && !same_content(path, b.s, b.n)) {
            r = replace_file(dir, path, b.s, b.n);
            r = r < 0 ? r : 1;
        }
        free(b.s);
    }
    if (r < 0) {
        kdp_strv_free(names);
        return r;
    }
    if (ret_names) {
        *ret_names = names;
    }
    return r;
}

KDP_EXPORT int kdp_cdi_remove_spec(const char *dir, const char *kind)
{
    if (!dir) {
        dir = DEFAULT_CDI_DIR;
    }
    char path[PATH_MAX];
    if (dir[0] != '/' || kdp_validate_cdi_kind(kind, NULL) < 0) {
        return -EINVAL;
    }
    int r = spec_path(dir, kind, path);
    if (r < 0) {
        return r;
    }
    if (unlink(path) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    (void)sync_dir(dir);
    return 1;
}
