/* SPDX-License-Identifier: MIT */
/* metadata: a prepared claim's device metadata files (see metadata.h). */
#include "dra/metadata.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/k8snames.h"
#include "k8s/slicebuild.h"

#define MD_GROUP "metadata.resource.k8s.io"

/* The versions written, newest first: a reader takes the first it knows. */
static const char *const versions[] = {MD_GROUP "/v1beta1", MD_GROUP "/v1alpha1"};

char *kdp__dra_md_attrs(const char *name, const kdp_dra_attr *attrs, size_t n, bool *oom)
{
    if (n == 0) {
        return NULL;
    }
    char why[200];
    kdp__slice_dev sd = {.name = name, .attrs = attrs, .n_attrs = n};
    why[0] = '\0';
    json_t *dev = kdp__slicebuild_device(&sd, why, sizeof(why));
    json_t *a = json_object_get(dev, "attributes");
    char *text = json_object_size(a) ? json_dumps(a, JSON_COMPACT) : NULL;
    *oom |= (!dev && !why[0]) || (json_object_size(a) && !text); /* why: a bad name */
    json_decref(dev);
    return text;
}

/* The length of a request's base name ("gpu" of "gpu/small"). */
static size_t base_len(const char *request)
{
    const char *slash = strchr(request, '/');
    return slash ? (size_t)(slash - request) : strlen(request);
}

static bool same_base(const char *a, const char *b)
{
    size_t n = base_len(a);
    return n == base_len(b) && strncmp(a, b, n) == 0;
}

bool kdp__dra_md_first(const kdp__dra_rec *r, size_t i)
{
    for (size_t k = 0; k < i; k++) {
        if (same_base(r->devs[k].request, r->devs[i].request)) {
            return false;
        }
    }
    return true;
}

/* Whether the names that make the claim's paths are what the API allows
 * (a namespace and a request a DNS label, a claim name a DNS subdomain, a
 * pod's claim name a DNS label): no "..", no '/', whatever the API server
 * or a checkpoint says. why names the first bad one. */
static bool names_ok(const kdp__dra_rec *r, const char *request, const char **why)
{
    char base[64];
    size_t n = base_len(request);
    if (n >= sizeof(base)) {
        *why = "its request's name is over 63 characters";
        return false;
    }
    memcpy(base, request, n);
    base[n] = '\0';
    if (kdp__k8snames_dns_label(r->ns, NULL) < 0) {
        *why = "its namespace is not a DNS label";
    } else if (kdp__k8snames_dns_subdomain(r->name, NULL) < 0) {
        *why = "its name is not a DNS subdomain";
    } else if (kdp__k8snames_dns_label(base, NULL) < 0) {
        *why = "its request's name is not a DNS label";
    } else if (r->pod_claim && kdp__k8snames_dns_label(r->pod_claim, NULL) < 0) {
        *why = "its metadata.annotations[resource.kubernetes.io/pod-claim-name] is not a DNS "
               "label (the name of a claim in the pod's spec)";
    } else {
        return true;
    }
    return false;
}

/* The claim's directory: <ns>_<name>_<uid> (the UID keeps a claim made
 * again under the same name apart), or <uid> alone where that is over the
 * 255 bytes a file name may have. */
static void claim_leaf(const kdp__dra_rec *r, char out[NAME_MAX + 1])
{
    int w = snprintf(out, NAME_MAX + 1, "%s_%s_%s", r->ns, r->name, r->uid);
    if (w < 0 || w > NAME_MAX) {
        snprintf(out, NAME_MAX + 1, "%s", r->uid);
    }
}

/* <dir>/<leaf>[/<base>[/metadata.json]] */
static int claim_path(const kdp__dra_md *md, const kdp__dra_rec *r, const char *request, bool file,
                      char *out, size_t len)
{
    char leaf[NAME_MAX + 1];
    claim_leaf(r, leaf);
    int w = request ? snprintf(out, len, "%s/%s/%.*s%s", md->dir, leaf, (int)base_len(request),
                               request, file ? "/metadata.json" : "")
                    : snprintf(out, len, "%s/%s", md->dir, leaf);
    return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

static int container_path(const kdp__dra_md *md, const kdp__dra_rec *r, const char *request,
                          char *out, size_t len)
{
    const char *sub = r->pod_claim ? "resourceclaimtemplates" : "resourceclaims";
    int w = snprintf(out, len, KDP__DRA_MD_CONTAINER_DIR "/%s/%s/%.*s/%s-metadata.json", sub,
                     r->pod_claim ? r->pod_claim : r->name, (int)base_len(request), request,
                     md->driver);
    return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* The device's networkData, from its recorded status (NULL: none). */
static json_t *network_data(const kdp__dra_rdev *d)
{
    json_t *st = d->status ? json_loads(d->status, 0, NULL) : NULL;
    json_t *nd = json_incref(json_object_get(st, "networkData"));
    json_decref(st);
    return nd;
}

static json_t *device_json(const kdp__dra_md *md, const kdp__dra_rdev *d)
{
    json_t *o =
        json_pack("{s:s, s:s, s:s}", "driver", md->driver, "pool", md->pool, "name", d->device);
    json_t *attrs = d->attrs ? json_loads(d->attrs, 0, NULL) : NULL;
    json_t *nd = network_data(d);
    if (o && json_object_size(attrs) > 0 && json_object_set(o, "attributes", attrs) < 0) {
        json_decref(o);
        o = NULL;
    }
    if (o && nd && json_object_set(o, "networkData", nd) < 0) {
        json_decref(o);
        o = NULL;
    }
    json_decref(attrs);
    json_decref(nd);
    return o;
}

/* One version's document for the base request of device i. */
static json_t *document(const kdp__dra_md *md, const kdp__dra_rec *r, size_t i, const char *version)
{
    json_t *devs = json_array();
    json_t *req = json_pack("{s:s}", "name", r->devs[i].request);
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:I}}", "kind", "DeviceMetadata",
                          "apiVersion", version, "metadata", "name", r->name, "namespace", r->ns,
                          "uid", r->uid, "generation", (json_int_t)r->md_gen);
    bool bad = !devs || !req || !o;
    for (size_t k = i; !bad && k < r->n_devs; k++) {
        if (same_base(r->devs[k].request, r->devs[i].request)) {
            bad = json_array_append_new(devs, device_json(md, &r->devs[k])) < 0;
        }
    }
    if (!bad && r->pod_claim) {
        bad = json_object_set_new(o, "podClaimName", json_string(r->pod_claim)) < 0;
    }
    if (!bad) {
        bad = json_object_set(req, "devices", devs) < 0 ||
              json_object_set_new(o, "requests", json_pack("[O]", req)) < 0;
    }
    json_decref(devs);
    json_decref(req);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *kdp__dra_md_stream(const kdp__dra_md *md, const kdp__dra_rec *r, size_t i)
{
    char *out = NULL;
    size_t len = 0;
    for (size_t v = 0; v < sizeof(versions) / sizeof(versions[0]); v++) {
        json_t *doc = document(md, r, i, versions[v]);
        char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
        json_decref(doc);
        size_t tl = text ? strlen(text) : 0;
        char *grown = text ? realloc(out, len + tl + 2) : NULL;
        if (!grown) {
            free(text);
            free(out);
            return NULL;
        }
        out = grown;
        memcpy(out + len, text, tl);
        len += tl;
        out[len++] = '\n';
        out[len] = '\0';
        free(text);
    }
    return out;
}

int kdp__dra_md_write(const kdp__dra_md *md, const kdp__dra_rec *r, char *why, size_t why_len)
{
    for (size_t i = 0; md->dir && i < r->n_devs; i++) {
        if (!kdp__dra_md_first(r, i)) {
            continue;
        }
        char dir[PATH_MAX];
        char path[PATH_MAX];
        const char *bad = NULL;
        if (!names_ok(r, r->devs[i].request, &bad)) {
            snprintf(why, why_len, "cannot write the claim's device metadata: %s", bad);
            return -EINVAL;
        }
        int e = claim_path(md, r, r->devs[i].request, false, dir, sizeof(dir));
        if (e == 0) {
            e = claim_path(md, r, r->devs[i].request, true, path, sizeof(path));
        }
        if (e == 0) {
            e = kdp__mkdir_p(dir, 0755);
        }
        char *text = e == 0 ? kdp__dra_md_stream(md, r, i) : NULL;
        if (e == 0 && !text) {
            e = -ENOMEM;
        }
        if (e == 0) {
            e = kdp__replace_file(path, text, strlen(text), 0644);
        }
        free(text);
        if (e < 0) {
            snprintf(why, why_len, "cannot write the device metadata of request %s: %s%s%s",
                     r->devs[i].request, e == -ENAMETOOLONG ? "" : path,
                     e == -ENAMETOOLONG ? "" : ": ", strerror(-e));
            return e;
        }
    }
    return 0;
}

bool kdp__dra_md_present(const kdp__dra_md *md, const kdp__dra_rec *r)
{
    for (size_t i = 0; md->dir && i < r->n_devs; i++) {
        char path[PATH_MAX];
        struct stat st;
        if (kdp__dra_md_first(r, i) &&
            (claim_path(md, r, r->devs[i].request, true, path, sizeof(path)) < 0 ||
             lstat(path, &st) < 0 || !S_ISREG(st.st_mode))) {
            return false;
        }
    }
    return true;
}

/* fn(dir, name) for each entry of directory fd (closed here) but "." and
 * "..": the first error it returned. */
static int each_entry(int fd, int (*fn)(int dir, const char *name))
{
    DIR *dp = fdopendir(fd);
    if (!dp) {
        int e = -errno;
        close(fd);
        return e;
    }
    int err = 0;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            int e = fn(dirfd(dp), de->d_name);
            err = err ? err : e;
        }
    }
    closedir(dp);
    return err;
}

static int unlink_entry(int dir, const char *name)
{
    return unlinkat(dir, name, 0) < 0 ? -errno : 0;
}

/* An entry of a claim's directory: a request's directory emptied of its
 * files (a directory there fails: no deeper) and removed; a file or a link
 * unlinked, never followed. */
static int remove_entry(int dir, const char *name)
{
    int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
        return unlink_entry(dir, name);
    }
    int e = each_entry(sub, unlink_entry);
    return e == 0 && unlinkat(dir, name, AT_REMOVEDIR) < 0 ? -errno : e;
}

int kdp__dra_md_remove(const kdp__dra_md *md, const kdp__dra_rec *r)
{
    if (!md->dir) {
        return 0;
    }
    char leaf[NAME_MAX + 1];
    claim_leaf(r, leaf);
    if (strchr(leaf, '/') || leaf[0] == '.' || leaf[0] == '\0') {
        return 0; /* never made: its names were refused */
    }
    int top = open(md->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    int fd = openat(top, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = 0;
    if (fd < 0) {
        err = errno == ENOENT ? 0 : errno == ENOTDIR || errno == ELOOP ? 1 : -errno;
        if (err == 1 && unlinkat(top, leaf, 0) < 0) {
            err = -errno; /* not a directory: removed as what it is */
        }
    } else if ((err = each_entry(fd, remove_entry)) == 0) {
        err = unlinkat(top, leaf, AT_REMOVEDIR) < 0 ? -errno : 1;
    }
    close(top);
    return err;
}

int kdp__dra_md_add_ids(kdp__dra_rec *r, const char *kind)
{
    for (size_t i = 0; i < r->n_devs; i++) {
        kdp__dra_rdev *d = &r->devs[i];
        char *id = NULL;
        if (kdp__dra_md_first(r, i) && (asprintf(&id, "%s=%s_metadata_%.*s", kind, r->uid,
                                                 (int)base_len(d->request), d->request) < 0 ||
                                        kdp__dra_rdev_add_cdi_id(d, id) < 0)) {
            return -ENOMEM;
        }
    }
    return 0;
}

void kdp__dra_md_cdi_done(kdp__dra_md_cdi *c)
{
    for (size_t i = 0; i < c->n_strs; i++) {
        free(c->strs[i]);
    }
    free(c->strs);
    free(c->devs);
    free(c->mounts);
    memset(c, 0, sizeof(*c));
}

int kdp__dra_md_cdi_init(kdp__dra_md_cdi *c, const kdp__dra_md *md, const kdp__dra_rec *r)
{
    memset(c, 0, sizeof(*c));
    if (!md->dir || r->md_gen == 0 || r->n_devs == 0) {
        return 0;
    }
    c->devs = calloc(r->n_devs, sizeof(*c->devs));
    c->mounts = calloc(r->n_devs, sizeof(*c->mounts));
    c->strs = calloc(3 * r->n_devs, sizeof(*c->strs));
    int err = c->devs && c->mounts && c->strs ? 0 : -ENOMEM;
    for (size_t i = 0; err == 0 && i < r->n_devs; i++) {
        const char *req = r->devs[i].request;
        char host[PATH_MAX];
        char cont[PATH_MAX];
        if (!kdp__dra_md_first(r, i)) {
            continue;
        }
        const char *bad = NULL;
        err = names_ok(r, req, &bad) ? claim_path(md, r, req, true, host, sizeof(host)) : -EINVAL;
        if (err == 0) {
            err = container_path(md, r, req, cont, sizeof(cont));
        }
        char **s = &c->strs[c->n_strs];
        if (err == 0 &&
            (!(s[0] = strdup(host)) || !(s[1] = strdup(cont)) ||
             asprintf(&s[2], "%s_metadata_%.*s", r->uid, (int)base_len(req), req) < 0)) {
            s[2] = NULL;
            err = -ENOMEM;
        }
        c->n_strs += 3;
        if (err == 0) {
            c->mounts[c->n] = (kdp__cdi_mount){s[0], s[1], true};
            c->devs[c->n] = (kdp__cdi_dev){.name = s[2], .mounts = &c->mounts[c->n], .n_mounts = 1};
            c->n++;
        }
    }
    if (err < 0) {
        kdp__dra_md_cdi_done(c);
    }
    return err;
}
