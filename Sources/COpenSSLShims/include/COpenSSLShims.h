#ifndef LA_COPENSSL_SHIMS_H
#define LA_COPENSSL_SHIMS_H

/* What Swift cannot call in libcrypto directly, compiled once in shims.c: a macro, HMAC-SHA256 from prepared states,
 * and AES-GCM decryption through the cipher provider's own functions with EVP as the fallback. */

#include <stddef.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

/* OPENSSL_free, a macro that passes __FILE__/__LINE__ to CRYPTO_free. */
void la_openssl_free(void *pointer);

/* HMAC-SHA256 from a key prepared once: the SHA-256 states after the inner and the outer padded key block. */
typedef struct {
    SHA256_CTX inner;
    SHA256_CTX outer;
} la_hmac_sha256_key;

/* Prepares `prepared` from `key` (hashed first when longer than a block, per RFC 2104). */
void la_hmac_sha256_prepare(la_hmac_sha256_key *prepared, const unsigned char *key, size_t length);

/* The 32-byte code of `message` under `prepared`. */
void la_hmac_sha256(const la_hmac_sha256_key *prepared, const void *message, size_t length, unsigned char out[32]);

/* One AES-GCM cipher's decryption functions: its provider's own (as EVP_DecryptInit_ex2/Update/Final_ex call them,
 * without the parameter searches OpenSSL 3.0's EVP layer adds around each call), or EVP's when the provider does not
 * give every one of them. Made once per cipher and never freed. */
typedef struct la_cipher_functions la_cipher_functions;

/* The functions for `cipher`; NULL only when no memory is left. `force_evp` takes EVP's (for tests). */
la_cipher_functions *la_cipher_functions_new(const EVP_CIPHER *cipher, int force_evp);

/* Whether `functions` call the provider directly (1) or go through EVP (0). */
int la_cipher_functions_direct(const la_cipher_functions *functions);

/* A decryption context, NULL on failure; freed (and wiped, by the provider) with la_cipher_free. */
void *la_cipher_new(const la_cipher_functions *functions);
void la_cipher_free(const la_cipher_functions *functions, void *context);

/* Starts a decryption: the key when not NULL, the nonce (12 or 16 bytes) when not NULL, the tag to expect when not
 * NULL. 1 on success. */
int la_cipher_decrypt_init(const la_cipher_functions *functions, void *context, const unsigned char *key,
                           size_t key_length, const unsigned char *nonce, size_t nonce_length,
                           const unsigned char *tag, size_t tag_length);

/* Adds associated data (`output` NULL) or decrypts `length` bytes of `input` into `output`. 1 on success. */
int la_cipher_update(const la_cipher_functions *functions, void *context, unsigned char *output,
                     const unsigned char *input, size_t length);

/* Ends a decryption: 1 only when the tag verifies. */
int la_cipher_final(const la_cipher_functions *functions, void *context);

#endif
