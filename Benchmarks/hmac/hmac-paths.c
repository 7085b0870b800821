/*
 * HMAC-SHA256 three ways, for the choice in Sources/COpenSSLShims/shims.c: the prepared SHA-256 states this package
 * uses, EVP_MAC with one context re-initialised per code (key kept: EVP_MAC_init(ctx, NULL, 0, NULL)), and
 * EVP_MAC_CTX_dup of a keyed context per code. A 60-byte message, as the keychain's blind index hashes.
 *
 *   gcc -O2 -ISources/COpenSSLShims/include Benchmarks/hmac/hmac-paths.c Sources/COpenSSLShims/shims.c -lcrypto \
 *       -o /tmp/hmac-paths && /tmp/hmac-paths 300000
 *   valgrind --tool=callgrind /tmp/hmac-paths N MODE   (MODE prepared, reinit or dup; instructions per code are the
 *                                                      difference between two N, divided by their difference)
 */
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "COpenSSLShims.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    unsigned char key[32], msg[60], out[32];
    memset(key, 7, sizeof key); memset(msg, 9, sizeof msg);
    la_hmac_sha256_key prepared;
    la_hmac_sha256_prepare(&prepared, key, sizeof key);
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0), OSSL_PARAM_END};
    EVP_MAC_init(ctx, key, sizeof key, params);
    EVP_MAC_CTX *keyed = EVP_MAC_CTX_dup(ctx);
    unsigned char out2[32]; size_t len;
    /* check equality */
    la_hmac_sha256(&prepared, msg, sizeof msg, out);
    EVP_MAC_init(ctx, NULL, 0, NULL); EVP_MAC_update(ctx, msg, sizeof msg); EVP_MAC_final(ctx, out2, &len, sizeof out2);
    if (memcmp(out, out2, 32) != 0) { printf("mismatch\n"); return 1; }
    const char *mode = argc > 2 ? argv[2] : "all";
    double t0, t1;
    if (!strcmp(mode, "all") || !strcmp(mode, "prepared")) {
        t0 = now(); for (int i = 0; i < n; i++) la_hmac_sha256(&prepared, msg, sizeof msg, out); t1 = now();
        printf("prepared SHA-256 states: %.0f ns\n", (t1 - t0) / n * 1e9);
    }
    if (!strcmp(mode, "all") || !strcmp(mode, "reinit")) {
        t0 = now();
        for (int i = 0; i < n; i++) { EVP_MAC_init(ctx, NULL, 0, NULL); EVP_MAC_update(ctx, msg, sizeof msg); EVP_MAC_final(ctx, out2, &len, 32); }
        t1 = now(); printf("EVP_MAC, one context re-initialised (key kept): %.0f ns\n", (t1 - t0) / n * 1e9);
    }
    if (!strcmp(mode, "all") || !strcmp(mode, "dup")) {
        t0 = now();
        for (int i = 0; i < n; i++) { EVP_MAC_CTX *c = EVP_MAC_CTX_dup(keyed); EVP_MAC_update(c, msg, sizeof msg); EVP_MAC_final(c, out2, &len, 32); EVP_MAC_CTX_free(c); }
        t1 = now(); printf("EVP_MAC_CTX_dup of a keyed context: %.0f ns\n", (t1 - t0) / n * 1e9);
    }
    return 0;
}
