/* SPDX-License-Identifier: MIT */
/*
 * cdi: CDI spec files (Container Device Interface), written atomically:
 * a temporary file in the same directory (its name ends in neither .json
 * nor .yaml, so CDI readers skip it), fsync, rename over the final name,
 * fsync of the directory. A spec whose content would not change is left
 * alone, so rescans do not wake the runtimes' directory watches. Devices
 * carry device nodes and environment variables (cdi.h: the DRA driver's
 * per-claim specs).
 */
#include "discovery/cdi.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/jsonstr.h"
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

static void sb_put_cb(const char *s, size_t len, void *ud)
{
    sb_put(ud, s, len);
}

/* A JSON string, quoted and escaped (valid UTF-8 whatever s holds). */
static void sb_json(sbuf *b, const char *s)
{
    kdp__json_string(s, sb_put_cb, b);
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

static int check_env(const char *kv)
{
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq || eq == kv || strlen(kv) > 32768) {
        return -EINVAL;
    }
    char key[256];
    size_t klen = (size_t)(eq - kv);
    if (klen >= sizeof(key)) {
        return -EINVAL;
    }
    memcpy(key, kv, klen);
    key[klen] = '\0';
    return kdp__validate_env_key(key, NULL) < 0 ? -EINVAL : 0;
}

static int check_mount(const kdp__cdi_mount *m)
{
    return kdp__validate_abs_path(m->host_path, NULL) < 0 ||
                   kdp__validate_abs_path(m->container_path, NULL) < 0
               ? -EINVAL
               : 0;
}

/* One device: a valid name, at least one edit, each valid. */
static int check_device(const char *kind, const kdp__cdi_dev *d)
{
    char full[MAX_KIND_LEN + 300];
    int w = d->name ? snprintf(full, sizeof(full), "%s=%s", kind, d->name) : -1;
    if (w < 0 || (size_t)w >= sizeof(full) || kdp__validate_cdi_name(full, NULL) < 0 ||
        (d->n_nodes == 0 && d->n_env == 0 && d->n_mounts == 0) || (d->n_nodes && !d->nodes) ||
        (d->n_env && !d->env) || (d->n_mounts && !d->mounts)) {
        return -EINVAL;
    }
    int r = 0;
    for (size_t j = 0; r == 0 && j < d->n_nodes; j++) {
        r = check_node(&d->nodes[j]);
    }
    for (size_t j = 0; r == 0 && j < d->n_env; j++) {
        r = check_env(d->env[j]);
    }
    for (size_t j = 0; r == 0 && j < d->n_mounts; j++) {
        r = check_mount(&d->mounts[j]);
    }
    return r;
}

/* Names valid and unique, every device with at least one valid node or
 * variable. */
static int check_devices(const char *kind, const kdp__cdi_dev *devs, size_t n)
{
    if (n > MAX_CDI_DEVICES) {
        return -E2BIG;
    }
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    const char **names = calloc(n ? n : 1, sizeof(*names));
    if (!names) {
        return -ENOMEM;
    }
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++) {
        r = check_device(kind, &devs[i]);
        names[i] = devs[i].name;
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

static const char *cdi_version(const char *kind, const kdp__cdi_dev *devs, size_t n)
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

static void put_mount(sbuf *b, const kdp__cdi_mount *m, bool last)
{
    sb_puts(b, "          {\"hostPath\": ");
    sb_json(b, m->host_path);
    sb_puts(b, ", \"containerPath\": ");
    sb_json(b, m->container_path);
    sb_puts(b, m->read_only ? ", \"options\": [\"ro\", \"nosuid\", \"nodev\", \"bind\"]"
                            : ", \"options\": [\"nosuid\", \"nodev\", \"bind\"]");
    sb_puts(b, last ? "}\n" : "},\n");
}

static void put_edits(sbuf *b, const kdp__cdi_dev *d)
{
    if (d->n_env) {
        sb_puts(b, "        \"env\": [");
        for (size_t j = 0; j < d->n_env; j++) {
            sb_json(b, d->env[j]);
            sb_puts(b, j + 1 == d->n_env ? "]" : ", ");
        }
        sb_puts(b, d->n_nodes || d->n_mounts ? ",\n" : "\n");
    }
    if (d->n_nodes) {
        sb_puts(b, "        \"deviceNodes\": [\n");
        for (size_t j = 0; j < d->n_nodes; j++) {
            put_node(b, &d->nodes[j], j + 1 == d->n_nodes);
        }
        sb_puts(b, d->n_mounts ? "        ],\n" : "        ]\n");
    }
    if (d->n_mounts) {
        sb_puts(b, "        \"mounts\": [\n");
        for (size_t j = 0; j < d->n_mounts; j++) {
            put_mount(b, &d->mounts[j], j + 1 == d->n_mounts);
        }
        sb_puts(b, "        ]\n");
    }
}

static void put_spec(sbuf *b, const char *kind, const kdp__cdi_dev *devs, size_t n)
{
    sb_puts(b, "{\n  \"cdiVersion\": ");
    sb_json(b, cdi_version(kind, devs, n));
    sb_puts(b, ",\n  \"kind\": ");
    sb_json(b, kind);
    sb_puts(b, ",\n  \"devices\": [\n");
    for (size_t i = 0; i < n; i++) {
        sb_puts(b, "    {\n      \"name\": ");
        sb_json(b, devs[i].name);
        sb_puts(b, ",\n      \"containerEdits\": {\n");
        put_edits(b, &devs[i]);
        sb_puts(b, i + 1 == n ? "      }\n    }\n" : "      }\n    },\n");
    }
    sb_puts(b, "  ]\n}\n");
}

/* ---- files ---- */

static int spec_file(const char *kind, char out[NAME_MAX + 1])
{
    const char *slash = strchr(kind, '/');
    int w = snprintf(out, NAME_MAX + 1, "%.*s-%s.json", (int)(slash - kind), kind, slash + 1);
    return w < 0 || w > NAME_MAX ? -ENAMETOOLONG : 0;
}

/* A file name of ours in the CDI directory: no '/', not hidden, ".json". */
static bool file_ok(const char *file)
{
    size_t n = file ? strlen(file) : 0;
    return n > 5 && n <= NAME_MAX && file[0] != '.' && !strchr(file, '/') &&
           strcmp(file + n - 5, ".json") == 0;
}

/* True if path holds exactly buf, with that mode. */
static bool same_content(const char *path, const char *buf, size_t len, unsigned mode)
{
    /* O_NONBLOCK: a FIFO planted there never holds the thread (not a
     * regular file: different, and replaced by the rename) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        return false;
    }
    struct stat st;
    bool same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len &&
                (st.st_mode & 07777) == mode;
    char chunk[8192];
    for (size_t off = 0; same && off < len;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        same = n > 0 && (size_t)n <= len - off && memcmp(chunk, buf + off, (size_t)n) == 0;
        off += n > 0 ? (size_t)n : 0;
    }
    close(fd);
    return same;
}

static int make_names(const char *kind, const kdp__cdi_dev *devs, size_t n, char ***ret)
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

/* The spec into <dir>/<file> (dir made, and trusted: nobody else writes
 * there), unless it holds it already. Returns 1, 0 or -errno. */
static int put_file(const char *dir, const char *file, const char *kind, const kdp__cdi_dev *devs,
                    size_t n, unsigned mode)
{
    char path[PATH_MAX];
    sbuf b = {0};
    put_spec(&b, kind, devs, n);
    int w = snprintf(path, sizeof(path), "%s/%s", dir, file);
    int r = b.failed ? -ENOMEM : (w < 0 || (size_t)w >= sizeof(path) ? -ENAMETOOLONG : 0);
    if (r == 0) {
        r = kdp__mkdir_p(dir, 0755);
    }
    if (r == 0) {
        r = kdp__dir_trusted(dir, NULL) == -KDP__EUNTRUSTED ? -KDP__EUNTRUSTED : 0;
    }
    if (r == 0 && !same_content(path, b.s, b.n, mode)) {
        r = kdp__replace_file(path, b.s, b.n, mode);
        r = r < 0 ? r : 1;
    }
    free(b.s);
    return r;
}

static int write_file(const char *dir, const char *file, const char *kind, const kdp__cdi_dev *devs,
                      size_t n, unsigned mode, char ***ret_names)
{
    int r = check_devices(kind, devs, n);
    char **names = NULL;
    if (r == 0 && ret_names) {
        r = make_names(kind, devs, n, &names);
    }
    if (r < 0) {
        return r;
    }
    r = n == 0 ? kdp__cdi_remove_file(dir, file) : put_file(dir, file, kind, devs, n, mode);
    if (r < 0) {
        kdp_strv_free(names);
        return r;
    }
    if (ret_names) {
        *ret_names = names;
    }
    return r;
}

bool kdp__cdi_mode_ok(unsigned mode)
{
    return !(mode & ~0666U) && (mode & 0600U) == 0600U;
}

int kdp__cdi_write_file(const char *dir, const char *file, const char *kind,
                        const kdp__cdi_dev *devs, size_t n, unsigned mode)
{
    if (!dir || dir[0] != '/' || !file_ok(file) || kdp_validate_cdi_kind(kind, NULL) < 0 ||
        (!devs && n) || !kdp__cdi_mode_ok(mode)) {
        return -EINVAL;
    }
    return write_file(dir, file, kind, devs, n, mode, NULL);
}

int kdp__cdi_remove_file(const char *dir, const char *file)
{
    if (!dir || dir[0] != '/' || !file_ok(file)) {
        return -EINVAL;
    }
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (w < 0 || (size_t)w >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    if (unlink(path) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    (void)kdp__sync_dir(dir);
    return 1;
}

bool kdp__cdi_file_exists(const char *dir, const char *file)
{
    char path[PATH_MAX];
    struct stat st;
    int w = snprintf(path, sizeof(path), "%s/%s", dir, file);
    return w > 0 && (size_t)w < sizeof(path) && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
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
    if (n > MAX_CDI_DEVICES) {
        return -E2BIG;
    }
    for (size_t i = 0; i < n; i++) {
        if (devs[i].n_nodes == 0 || !devs[i].nodes) {
            return -EINVAL; /* the public call's devices have nodes */
        }
    }
    kdp__cdi_dev *d = calloc(n ? n : 1, sizeof(*d));
    if (!d) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        d[i] = (kdp__cdi_dev){
            .name = devs[i].name, .nodes = devs[i].nodes, .n_nodes = devs[i].n_nodes};
    }
    char file[NAME_MAX + 1];
    int r = spec_file(kind, file);
    if (r == 0) {
        r = write_file(dir, file, kind, d, n, 0644, ret_names);
    }
    free(d);
    return r;
}

KDP_EXPORT int kdp_cdi_remove_spec(const char *dir, const char *kind)
{
    if (!dir) {
        dir = DEFAULT_CDI_DIR;
    }
    if (dir[0] != '/' || kdp_validate_cdi_kind(kind, NULL) < 0) {
        return -EINVAL;
    }
    char file[NAME_MAX + 1];
    int r = spec_file(kind, file);
    return r < 0 ? r : kdp__cdi_remove_file(dir, file);
}
