/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the kubeconfig reader (src/k8s/kconfig.c): a DRA
 * driver's first input, a YAML file (libyaml parses it; kdp walks contexts,
 * clusters and users, decodes the *-data fields, resolves relative paths).
 * The input is the file's content, written to a private temp dir as
 * "config"; the kubeconfig's relative paths resolve there (nothing else is
 * in it), absolute ones are whatever the machine has, read only.
 * Oracle, abort()s on any breach: a success has an https:// server without a
 * trailing '/', a source line, and a usable credential (a token, a token
 * file, or a client certificate with its key) or none at all, with data
 * lengths that agree with the data; a failure has a why line and leaves *ret
 * alone. Base64 decoding (src/k8s/kfile.c) of the input itself is checked
 * too: what decodes re-decodes to the same bytes from a canonical encoding.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "k8s/kconfig.h"
#include "k8s/kfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            fprintf(stderr, "fuzz_kconfig: check failed: %s (line %d)\n", #x, __LINE__);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static char dir[64];
static char path[96];

static void setup(void)
{
    if (dir[0]) {
        return;
    }
    snprintf(dir, sizeof(dir), "/tmp/kdp-fuzz-kconfig.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/config", dir);
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The canonical (padded) encoding of in[0..n). */
static char *encode(const char *in, size_t n)
{
    char *out = malloc((n + 2) / 3 * 4 + 1);
    CHECK(out != NULL);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(uint8_t)in[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)(uint8_t)in[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= (uint8_t)in[i + 2];
        }
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static void check_base64(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    char *dec = NULL;
    size_t n = 0;
    if (kdp__kfile_base64(s, &dec, &n) == 0) {
        CHECK(dec != NULL && dec[n] == '\0');
        char *enc = encode(dec, n);
        char *again = NULL;
        size_t m = 0;
        CHECK(kdp__kfile_base64(enc, &again, &m) == 0);
        CHECK(m == n && memcmp(again, dec, n) == 0);
        free(again);
        free(enc);
        free(dec);
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    check_base64(data, size);
    FILE *f = fopen(path, "we");
    CHECK(f != NULL);
    CHECK(size == 0 || fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);

    kdp__kconfig *kc = (kdp__kconfig *)(uintptr_t)1; /* must stay untouched on failure */
    char why[512];
    why[0] = '\0';
    int r = kdp__kconfig_load(path, &kc, why, sizeof(why));
    if (r < 0) {
        CHECK(kc == (kdp__kconfig *)(uintptr_t)1);
        CHECK(why[0] != '\0');
        return 0;
    }
    CHECK(r == 0 && kc != NULL);
    CHECK(kc->server && strncmp(kc->server, "https://", 8) == 0);
    size_t sl = strlen(kc->server);
    CHECK(sl > 8 && kc->server[sl - 1] != '/');
    CHECK(kc->source && *kc->source);
    CHECK(!kc->ca_data || kc->ca_len > 0);
    CHECK(!kc->cert_data || kc->cert_len > 0);
    CHECK(!kc->key_data || kc->key_len > 0);
    bool cert = kc->cert_file || kc->cert_data;
    bool key = kc->key_file || kc->key_data;
    CHECK(cert == key);
    kdp__kconfig_free(kc);
    return 0;
}
