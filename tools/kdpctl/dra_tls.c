/* SPDX-License-Identifier: MIT */
/*
 * dra_tls: the credentials of `kdpctl dra apiserver`, made with OpenSSL's
 * libcrypto: a CA (EC P-256, self-signed, X.509 v3, CA:TRUE, keyCertSign)
 * and a server certificate it signs (EC P-256, serverAuth, subjectAltName
 * 127.0.0.1, ::1, localhost), valid from an hour ago for a year, and a
 * bearer token (32 random bytes, hex); or those a start before left in the
 * directory (ca.crt, server.crt, server.key, token), when they still hold
 * together (the key the certificate's, the certificate the CA's and valid
 * for another day), so that a driver kept running across a restart of the
 * API server is served again.
 */
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dra_api.h"
#include "k8s/kfile.h"

static char *bio_string(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        memcpy(s, data, (size_t)n);
        s[n] = '\0';
    }
    return s;
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext && X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate for key, named cn, signed by issuer_key (issuer NULL:
 * self-signed). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, bool ca)
{
    X509 *x = X509_new();
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    bool ok = x && RAND_bytes(serial, sizeof(serial)) == 1;
    if (ok) {
        serial[0] &= 0x7f; /* positive */
        bn = BN_bin2bn(serial, sizeof(serial), NULL);
        ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
             X509_set_version(x, 2) == 1 && X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
             X509_gmtime_adj(X509_getm_notAfter(x), 365L * 24 * 3600) &&
             X509_set_pubkey(x, key) == 1;
    }
    BN_free(bn);
    X509_NAME *name = ok ? X509_get_subject_name(x) : NULL;
    ok = ok && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"kdpctl",
                                          -1, -1, 0) == 1;
    ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
                                          -1, 0) == 1;
    ok = ok && X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) == 1;
    X509 *signer = issuer ? issuer : x;
    if (ca) {
        ok = ok && add_ext(x, signer, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(x, signer, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") &&
             add_ext(x, signer, NID_subject_key_identifier, "hash");
    } else {
        ok = ok && add_ext(x, signer, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(x, signer, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
             add_ext(x, signer, NID_ext_key_usage, "serverAuth") &&
             add_ext(x, signer, NID_subject_alt_name, "IP:127.0.0.1,IP:::1,DNS:localhost") &&
             add_ext(x, signer, NID_authority_key_identifier, "keyid:always");
    }
    ok = ok && X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static char *cert_pem(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s = b && PEM_write_bio_X509(b, x) == 1 ? bio_string(b) : NULL;
    BIO_free(b);
    return s;
}

static char *key_pem(EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *s =
        b && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1 ? bio_string(b) : NULL;
    BIO_free(b);
    return s;
}

int kd_token_make(char **ret)
{
    unsigned char tok[32];
    *ret = NULL;
    if (RAND_bytes(tok, sizeof(tok)) != 1) {
        return -EIO;
    }
    char *t = malloc(sizeof(tok) * 2 + 1);
    if (!t) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < sizeof(tok); i++) {
        snprintf(t + 2 * i, 3, "%02x", tok[i]);
    }
    OPENSSL_cleanse(tok, sizeof(tok));
    *ret = t;
    return 0;
}

int kd_tls_make(kd_creds *ret)
{
    memset(ret, 0, sizeof(*ret));
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    EVP_PKEY *srv_key = EVP_EC_gen("P-256");
    X509 *ca = ca_key ? make_cert(ca_key, "kdpctl-dra-ca", NULL, NULL, true) : NULL;
    X509 *srv =
        ca && srv_key ? make_cert(srv_key, "kdpctl-dra-apiserver", ca, ca_key, false) : NULL;
    int r = srv ? kd_token_make(&ret->token) : -EIO;
    if (r == 0) {
        ret->ca_pem = cert_pem(ca);
        ret->cert_pem = cert_pem(srv);
        ret->key_pem = key_pem(srv_key);
        r = ret->ca_pem && ret->cert_pem && ret->key_pem ? 0 : -ENOMEM;
    }
    X509_free(ca);
    X509_free(srv);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(srv_key);
    if (r < 0) {
        kd_creds_free(ret);
    }
    return r;
}

/* DIR/name's text (malloc'd, a regular file), or NULL. */
static char *read_small(const char *dir, const char *name)
{
    char path[4200];
    char *text = NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return kdp__kfile_read(path, &text, NULL) == 0 ? text : NULL;
}

static X509 *x509_of(const char *pem)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

/* The server certificate signed by the CA, its key, valid for a day more. */
static bool hold_together(const kd_creds *c)
{
    X509 *ca = x509_of(c->ca_pem);
    X509 *srv = x509_of(c->cert_pem);
    BIO *b = BIO_new_mem_buf(c->key_pem, -1);
    EVP_PKEY *key = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    EVP_PKEY *ca_pub = ca ? X509_get0_pubkey(ca) : NULL;
    time_t day = time(NULL) + (time_t)24 * 3600;
    bool ok = ca && srv && key && ca_pub && X509_verify(srv, ca_pub) == 1 &&
              X509_check_private_key(srv, key) == 1 &&
              X509_cmp_time(X509_get0_notAfter(srv), &day) > 0;
    EVP_PKEY_free(key);
    BIO_free(b);
    X509_free(ca);
    X509_free(srv);
    return ok;
}

int kd_tls_load(const char *dir, kd_creds *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->ca_pem = read_small(dir, "ca.crt");
    ret->cert_pem = read_small(dir, "server.crt");
    ret->key_pem = read_small(dir, "server.key");
    ret->token = read_small(dir, "token");
    bool ok = ret->ca_pem && ret->cert_pem && ret->key_pem && ret->token;
    if (ok) {
        ret->token[strcspn(ret->token, "\r\n")] = '\0';
        ok = strlen(ret->token) >= 32 && hold_together(ret);
    }
    if (!ok) {
        kd_creds_free(ret);
        return -ENOENT;
    }
    return 0;
}

void kd_creds_free(kd_creds *c)
{
    free(c->ca_pem);
    free(c->cert_pem);
    if (c->key_pem) {
        OPENSSL_cleanse(c->key_pem, strlen(c->key_pem));
    }
    free(c->key_pem);
    free(c->token);
    memset(c, 0, sizeof(*c));
}
