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

/* OPENSSL_free is a macro that passes __FILE__/__LINE__ to CRYPTO_free; Swift cannot call macros. */
static inline void la_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

#endif
