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

/* The functions this package needs beyond these headers (a macro's, HMAC from prepared states, AES-GCM through the
 * provider) are compiled in Sources/COpenSSLShims. */

#endif
