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


/*
 * AES-GCM decryption through the cipher functions of the provider that implements the fetched cipher, as
 * EVP_DecryptInit_ex2/EVP_DecryptUpdate/EVP_DecryptFinal_ex call them, without what OpenSSL 3.0's EVP layer adds
 * around each call: EVP_DecryptInit_ex2 asks the provider for the key's and the nonce's lengths through parameter
 * lists it then searches by name (about 2,000 instructions and 45 strcmp calls per keychain lookup, which opens two
 * boxes). The functions come from OSSL_PROVIDER_query_operation, the provider interface OpenSSL documents
 * (provider-cipher(7)); the provider's context is the one EVP would make (and wipes itself when freed).
 */
#include <openssl/core_dispatch.h>
#include <openssl/provider.h>

typedef struct {
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_decrypt_init_fn *decrypt_init;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    void *provider_context;
} la_cipher_functions;

/* Whether one of the ':'-separated names in `names` is a name of `cipher`. */
static inline int la_cipher_names_match(const EVP_CIPHER *cipher, const char *names) {
    char name[128];
    while (*names != '\0') {
        const char *end = strchr(names, ':');
        size_t length = end == NULL ? strlen(names) : (size_t)(end - names);
        if (length < sizeof name) {
            memcpy(name, names, length);
            name[length] = '\0';
            if (EVP_CIPHER_is_a(cipher, name)) return 1;
        }
        if (end == NULL) break;
        names = end + 1;
    }
    return 0;
}

/* Fills `functions` from the provider that implements `cipher`: 1 when it has every function needed, else 0. */
static inline int la_cipher_functions_load(const EVP_CIPHER *cipher, la_cipher_functions *functions) {
    memset(functions, 0, sizeof *functions);
    const OSSL_PROVIDER *provider = EVP_CIPHER_get0_provider(cipher);
    if (provider == NULL) return 0;
    int no_cache = 0;
    const OSSL_ALGORITHM *algorithms =
        OSSL_PROVIDER_query_operation((OSSL_PROVIDER *)provider, OSSL_OP_CIPHER, &no_cache);
    if (algorithms == NULL) return 0;
    for (const OSSL_ALGORITHM *algorithm = algorithms; algorithm->algorithm_names != NULL; algorithm++) {
        if (!la_cipher_names_match(cipher, algorithm->algorithm_names)) continue;
        for (const OSSL_DISPATCH *function = algorithm->implementation; function->function_id != 0; function++) {
            switch (function->function_id) {
            case OSSL_FUNC_CIPHER_NEWCTX: functions->newctx = OSSL_FUNC_cipher_newctx(function); break;
            case OSSL_FUNC_CIPHER_FREECTX: functions->freectx = OSSL_FUNC_cipher_freectx(function); break;
            case OSSL_FUNC_CIPHER_DECRYPT_INIT:
                functions->decrypt_init = OSSL_FUNC_cipher_decrypt_init(function);
                break;
            case OSSL_FUNC_CIPHER_UPDATE: functions->update = OSSL_FUNC_cipher_update(function); break;
            case OSSL_FUNC_CIPHER_FINAL: functions->final = OSSL_FUNC_cipher_final(function); break;
            default: break;
            }
        }
        break;
    }
    OSSL_PROVIDER_unquery_operation((OSSL_PROVIDER *)provider, OSSL_OP_CIPHER, algorithms);
    functions->provider_context = OSSL_PROVIDER_get0_provider_ctx(provider);
    return functions->newctx != NULL && functions->freectx != NULL && functions->decrypt_init != NULL
        && functions->update != NULL && functions->final != NULL;
}

static inline void *la_cipher_new(const la_cipher_functions *functions) {
    return functions->newctx(functions->provider_context);
}

static inline void la_cipher_free(const la_cipher_functions *functions, void *context) {
    functions->freectx(context);
}

/* Starts a decryption: the key when not NULL, the nonce when not NULL, and the tag to expect when not NULL. */
static inline int la_cipher_decrypt_init(const la_cipher_functions *functions, void *context, const unsigned char *key,
                                         size_t key_length, const unsigned char *nonce, size_t nonce_length,
                                         const unsigned char *tag, size_t tag_length) {
    OSSL_PARAM params[2] = {OSSL_PARAM_END, OSSL_PARAM_END};
    if (tag != NULL) params[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, tag_length);
    return functions->decrypt_init(context, key, key == NULL ? 0 : key_length, nonce, nonce == NULL ? 0 : nonce_length,
                                   tag == NULL ? NULL : params);
}

/* Adds associated data (`output` NULL) or decrypts `length` bytes of `input` into `output`. */
static inline int la_cipher_update(const la_cipher_functions *functions, void *context, unsigned char *output,
                                   const unsigned char *input, size_t length) {
    size_t written = 0;
    return functions->update(context, output, &written, length, input, length) == 1
        && (output == NULL || written == length);
}

/* Ends a decryption: 1 only when the tag verifies. */
static inline int la_cipher_final(const la_cipher_functions *functions, void *context) {
    unsigned char scratch[32];
    size_t written = 0;
    return functions->final(context, scratch, &written, 0);
}

#endif
