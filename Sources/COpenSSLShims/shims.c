#include "COpenSSLShims.h"

#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void la_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

/*
 * HMAC-SHA256 from prepared states. A code copies each state (a plain struct) and hashes the message, then the inner
 * digest: three or four compressions and no allocation. The keychain computes one on every lookup (its blind index).
 * Measured for a 60-byte message (Benchmarks/hmac/hmac-paths.c, OpenSSL 3.0, this package's 2-core VM): these states
 * 6,790 instructions (callgrind) and about 195 ns; through the provider API, EVP_MAC with one context per thread
 * re-initialised with its key kept 8,310 and about 320 ns (and a context pool per key, as contexts are not shared
 * between threads); EVP_MAC_CTX_dup of a keyed context 11,874 and about 730 ns. The low-level SHA-256 calls are
 * deprecated in OpenSSL 3 in favour of EVP but remain part of its API and use the same SHA-NI/AVX2 code; the
 * deprecation warning is silenced here only. They do not go through a provider: with a FIPS provider configured,
 * these codes are not FIPS-validated computations.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

void la_hmac_sha256_prepare(la_hmac_sha256_key *prepared, const unsigned char *key, size_t length) {
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

void la_hmac_sha256(const la_hmac_sha256_key *prepared, const void *message, size_t length, unsigned char out[32]) {
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
 * AES-GCM decryption. The direct path calls the cipher functions of the provider that implements the fetched
 * cipher, found through OSSL_PROVIDER_query_operation (the provider interface, provider-cipher(7)); the context is
 * the one EVP would make, and the provider wipes it when freed. EVP_DecryptInit_ex2 would also ask the provider for
 * the key's and the nonce's lengths through parameter lists it then searches by name (about 2,000 instructions and
 * 45 strcmp calls per keychain lookup, which opens two boxes). A provider that does not give every function (another
 * provider loaded in its place, a future OpenSSL) gets the EVP path: slower, and the same results.
 */
struct la_cipher_functions {
    const EVP_CIPHER *cipher;
    int direct;
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_decrypt_init_fn *decrypt_init;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    void *provider_context;
};

/* Whether one of the ':'-separated names in `names` is a name of `cipher`. */
static int names_match(const EVP_CIPHER *cipher, const char *names) {
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

/* Fills the provider's functions: 1 when it gives every one needed. */
static int load_provider_functions(la_cipher_functions *functions) {
    const OSSL_PROVIDER *provider = EVP_CIPHER_get0_provider(functions->cipher);
    if (provider == NULL) return 0;
    int no_cache = 0;
    const OSSL_ALGORITHM *algorithms =
        OSSL_PROVIDER_query_operation((OSSL_PROVIDER *)provider, OSSL_OP_CIPHER, &no_cache);
    if (algorithms == NULL) return 0;
    for (const OSSL_ALGORITHM *algorithm = algorithms; algorithm->algorithm_names != NULL; algorithm++) {
        if (!names_match(functions->cipher, algorithm->algorithm_names)) continue;
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
        && functions->update != NULL && functions->final != NULL && functions->provider_context != NULL;
}

la_cipher_functions *la_cipher_functions_new(const EVP_CIPHER *cipher, int force_evp) {
    la_cipher_functions *functions = calloc(1, sizeof *functions);
    if (functions == NULL) return NULL;
    functions->cipher = cipher;
    functions->direct = !force_evp && load_provider_functions(functions);
    return functions;
}

int la_cipher_functions_direct(const la_cipher_functions *functions) {
    return functions->direct;
}

void *la_cipher_new(const la_cipher_functions *functions) {
    if (!functions->direct) return EVP_CIPHER_CTX_new();
    return functions->newctx(functions->provider_context);
}

void la_cipher_free(const la_cipher_functions *functions, void *context) {
    if (!functions->direct) {
        EVP_CIPHER_CTX_free(context);  /* clears the context, key schedule included */
        return;
    }
    functions->freectx(context);
}

int la_cipher_decrypt_init(const la_cipher_functions *functions, void *context, const unsigned char *key,
                           size_t key_length, const unsigned char *nonce, size_t nonce_length,
                           const unsigned char *tag, size_t tag_length) {
    if (functions->direct) {
        OSSL_PARAM params[2] = {OSSL_PARAM_END, OSSL_PARAM_END};
        if (tag != NULL)
            params[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, tag_length);
        return functions->decrypt_init(context, key, key == NULL ? 0 : key_length, nonce,
                                       nonce == NULL ? 0 : nonce_length, tag == NULL ? NULL : params);
    }
    EVP_CIPHER_CTX *ctx = context;
    /* The cipher once (a context not yet set up), then the nonce's length before the nonce, then key and nonce. */
    if (EVP_CIPHER_CTX_get0_cipher(ctx) == NULL && EVP_DecryptInit_ex2(ctx, functions->cipher, NULL, NULL, NULL) != 1)
        return 0;
    if (nonce != NULL) {
        size_t length = nonce_length;
        OSSL_PARAM params[2] = {OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &length), OSSL_PARAM_END};
        if (EVP_CIPHER_CTX_set_params(ctx, params) != 1) return 0;
    }
    if (EVP_DecryptInit_ex2(ctx, NULL, key, nonce, NULL) != 1) return 0;
    if (tag != NULL) {
        OSSL_PARAM params[2] = {
            OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, tag_length), OSSL_PARAM_END};
        if (EVP_CIPHER_CTX_set_params(ctx, params) != 1) return 0;
    }
    return 1;
}

int la_cipher_update(const la_cipher_functions *functions, void *context, unsigned char *output,
                     const unsigned char *input, size_t length) {
    if (functions->direct) {
        size_t written = 0;
        return functions->update(context, output, &written, length, input, length) == 1
            && (output == NULL || written == length);
    }
    if (length > INT32_MAX) return 0;
    int written = 0;
    return EVP_DecryptUpdate(context, output, &written, input, (int)length) == 1
        && (output == NULL || (size_t)written == length);
}

int la_cipher_final(const la_cipher_functions *functions, void *context) {
    unsigned char scratch[32];
    if (functions->direct) {
        size_t written = 0;
        return functions->final(context, scratch, &written, 0);
    }
    int written = 0;
    return EVP_DecryptFinal_ex(context, scratch, &written) == 1;
}
