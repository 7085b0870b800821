#ifndef LA_COPENSSL_SHIM_H
#define LA_COPENSSL_SHIM_H

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/sha.h>
#include <string.h>

/* OPENSSL_free is a macro that passes __FILE__/__LINE__ to CRYPTO_free; Swift cannot call macros. */
static inline void la_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

/*
 * HMAC-SHA256 from a key prepared once: the SHA-256 states after the inner and the outer padded key block. A code
 * copies each state (a plain struct) and hashes the message, then the inner digest: three or four compressions and
 * no allocation, where EVP_MAC_CTX_dup of a keyed context costs about 6,000 instructions for a 60-byte message
 * (the keychain's blind index on every lookup). The low-level SHA-256 calls are deprecated in OpenSSL 3 in favour
 * of EVP, but remain part of its API and use the same SHA-NI/AVX2 code; the deprecation warning is silenced here only.
 */
typedef struct {
    SHA256_CTX inner;
    SHA256_CTX outer;
} la_hmac_sha256_key;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Prepares `prepared` from `key` (hashed first when longer than a block, per RFC 2104). */
static inline void la_hmac_sha256_prepare(la_hmac_sha256_key *prepared, const unsigned char *key, size_t length) {
    unsigned char block[SHA256_CBLOCK];
    unsigned char pad[SHA256_CBLOCK];
    memset(block, 0, sizeof block);
    if (length > SHA256_CBLOCK) {
        SHA256(key, length, block);
    } else if (length > 0) {
        memcpy(block, key, length);
    }
    for (size_t i = 0; i < SHA256_CBLOCK; i++) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&prepared->inner);
    SHA256_Update(&prepared->inner, pad, sizeof pad);
    for (size_t i = 0; i < SHA256_CBLOCK; i++) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&prepared->outer);
    SHA256_Update(&prepared->outer, pad, sizeof pad);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
}

/* The 32-byte code of `message` under `prepared`. */
static inline void la_hmac_sha256(const la_hmac_sha256_key *prepared, const void *message, size_t length,
                                  unsigned char out[SHA256_DIGEST_LENGTH]) {
    SHA256_CTX ctx = prepared->inner;
    unsigned char inner[SHA256_DIGEST_LENGTH];
    if (length > 0) SHA256_Update(&ctx, message, length);
    SHA256_Final(inner, &ctx);
    ctx = prepared->outer;
    SHA256_Update(&ctx, inner, sizeof inner);
    SHA256_Final(out, &ctx);
    OPENSSL_cleanse(inner, sizeof inner);
    OPENSSL_cleanse(&ctx, sizeof ctx);
}

#pragma GCC diagnostic pop

#endif
