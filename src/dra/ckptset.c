/* SPDX-License-Identifier: MIT */
/* ckptset: the checkpoint's records and their file text (see ckptset.h). */
#include "dra/ckptset.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/recfile.h"

void kdp__ckpt_checksum(const char *s, char out[32])
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    snprintf(out, 32, "fnv1a64:%016" PRIx64, h);
}

void kdp__ckptset_clear(kdp__ckpt_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        kdp__dra_rec_free(s->recs[i]);
    }
    free(s->recs);
    s->recs = NULL;
    s->n = 0;
}

long kdp__ckptset_find(const kdp__ckpt_set *s, const char *uid)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->recs[i]->uid, uid) == 0) {
            return (long)i;
        }
    }
    return -1;
}

/* Takes rec over (freed on failure); replaces the record of its UID. */
int kdp__ckptset_put(kdp__ckpt_set *s, kdp__dra_rec *rec)
{
    long i = kdp__ckptset_find(s, rec->uid);
    if (i >= 0) {
        kdp__dra_rec_free(s->recs[i]);
        s->recs[i] = rec;
        return 0;
    }
    if (s->n >= KDP__CKPT_MAX_CLAIMS) {
        kdp__dra_rec_free(rec);
        return -ENOSPC;
    }
    // NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
    kdp__dra_rec **v = realloc(s->recs, (s->n + 1) * sizeof(*v));
    if (!v) {
        kdp__dra_rec_free(rec);
        return -ENOMEM;
    }
    s->recs = v;
    v[s->n++] = rec;
    return 0;
}

bool kdp__ckptset_del(kdp__ckpt_set *s, const char *uid)
{
    long i = kdp__ckptset_find(s, uid);
    if (i < 0 || !s->recs) {
        return false;
    }
    kdp__dra_rec_free(s->recs[i]);
    s->recs[i] = s->recs[--s->n];
    return true;
}

int kdp__ckptset_copy(kdp__ckpt_set *to, const kdp__ckpt_set *from)
{
    memset(to, 0, sizeof(*to));
    for (size_t i = 0; i < from->n; i++) {
        kdp__dra_rec *r = kdp__dra_rec_dup(from->recs[i], true);
        if (!r || kdp__ckptset_put(to, r) < 0) {
            kdp__ckptset_clear(to);
            return -ENOMEM;
        }
    }
    return 0;
}

/* Returns 0, -EBADMSG (a record that is not one: why), -ENOMEM. */
static int parse_claims(const json_t *claims, int version, kdp__ckpt_set *set, char *why,
                        size_t len)
{
    const char *uid;
    json_t *v;
    json_object_foreach((json_t *)claims, uid, v)
    {
        kdp__dra_rec *r = NULL;
        int e = kdp__recfile_from_json(v, version, &r, why, len);
        if (e == 0 && strcmp(r->uid, uid) != 0) {
            snprintf(why, len, "the record of %.80s has the UID %.80s", uid, r->uid);
            kdp__dra_rec_free(r);
            e = -EINVAL;
        }
        if (e == 0) {
            e = kdp__ckptset_put(set, r);
        }
        if (e < 0) {
            kdp__ckptset_clear(set);
            return e == -EINVAL ? -EBADMSG : e;
        }
    }
    return 0;
}

/* A file's envelope: {"version": min..max, "checksum": of member key,
 * key: an object}. Returns 0 with *root (json_decref it), *member
 * (borrowed) and *version, or -EBADMSG / -EPROTO (newer) / -ENOMEM with
 * why. */
static int envelope(const char *text, const char *key, int min, int max, json_t **root,
                    json_t **member, int *version, char *why, size_t len)
{
    json_error_t jerr;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!o) {
        snprintf(why, len, "not JSON (line %d: %s)", jerr.line, jerr.text);
        return -EBADMSG;
    }
    json_t *ver = json_object_get(o, "version");
    json_t *sum = json_object_get(o, "checksum");
    json_t *m = json_object_get(o, key);
    json_int_t v = json_is_integer(ver) ? json_integer_value(ver) : 0;
    char *dump = NULL;
    char want[32];
    int r = -EBADMSG;
    if (v > max) {
        snprintf(why, len, "version %lld, newer than this driver's %d", (long long)v, max);
        r = -EPROTO;
    } else if (v < min && min == max) {
        snprintf(why, len, "not version %d", min);
    } else if (v < min) {
        snprintf(why, len, "no version %d to %d", min, max);
    } else if (!json_is_object(m) || !json_is_string(sum)) {
        snprintf(why, len, "no \"%s\" object or \"checksum\"", key);
    } else if (!(dump = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS))) {
        snprintf(why, len, "out of memory");
        r = -ENOMEM;
    } else {
        kdp__ckpt_checksum(dump, want);
        if (strcmp(want, json_string_value(sum)) != 0) {
            snprintf(why, len, "checksum %.40s, the content's is %s", json_string_value(sum), want);
        } else {
            r = 0;
        }
    }
    free(dump);
    if (r < 0) {
        json_decref(o);
        return r;
    }
    *root = o;
    *member = m;
    *version = (int)v;
    return 0;
}

int kdp__ckptset_parse(const char *text, kdp__ckpt_set *set, int *ret_version, char *why,
                       size_t len)
{
    memset(set, 0, sizeof(*set));
    json_t *root = NULL;
    json_t *claims = NULL;
    int r = envelope(text, "claims", 1, KDP__CKPT_VERSION, &root, &claims, ret_version, why, len);
    if (r == 0) {
        r = parse_claims(claims, *ret_version, set, why, len);
        json_decref(root);
    }
    return r;
}

char *kdp__ckptset_record_text(const kdp__dra_rec *r)
{
    json_t *claim = kdp__recfile_to_json(r);
    char *dump = claim ? json_dumps(claim, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_t *root = NULL;
    if (dump) {
        char sum[32];
        kdp__ckpt_checksum(dump, sum);
        root = json_pack("{s:i, s:s, s:O}", "version", KDP__CKPT_RECORD_VERSION, "checksum", sum,
                         "claim", claim);
    }
    char *text = root ? json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    free(dump);
    json_decref(root);
    json_decref(claim);
    return text;
}

int kdp__ckptset_record_parse(const char *text, const char *uid, kdp__dra_rec **ret, char *why,
                              size_t len)
{
    json_t *root = NULL;
    json_t *claim = NULL;
    int version = 0;
    int r = envelope(text, "claim", KDP__CKPT_RECORD_VERSION, KDP__CKPT_RECORD_VERSION, &root,
                     &claim, &version, why, len);
    if (r < 0) {
        return r;
    }
    r = kdp__recfile_from_json(claim, 2, ret, why, len); /* a version-2 record */
    if (r == 0 && strcmp((*ret)->uid, uid) != 0) {
        snprintf(why, len, "the file of %.80s holds the record of %.80s", uid, (*ret)->uid);
        kdp__dra_rec_free(*ret);
        *ret = NULL;
        r = -EINVAL;
    }
    json_decref(root);
    return r == -EINVAL ? -EBADMSG : r;
}

size_t kdp__ckptset_bytes(const kdp__ckpt_set *s)
{
    size_t b = 0;
    for (size_t i = 0; i < s->n; i++) {
        b += kdp__dra_rec_bytes(s->recs[i]);
    }
    return b;
}
