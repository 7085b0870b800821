#ifndef LA_CTSS2_SHIM_H
#define LA_CTSS2_SHIM_H

/* tpm2-tss: ESAPI, the TCTI loader, marshalling and error texts. The templates below are C because TPM2B and
 * union fields are awkward to fill from Swift; they hold no logic beyond the fixed values each object is made with. */
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_sys.h>
#include <tss2/tss2_tctildr.h>

/* The storage root key: the TCG's ECC P-256 storage template (restricted decryption, AES-128-CFB), so a primary made
 * from it is the same key every time the owner seed is the same. */
static inline void la_tpm_srk_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    TPMT_PUBLIC *area = &out->publicArea;
    area->type = TPM2_ALG_ECC;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM |
        TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    area->parameters.eccDetail.symmetric.keyBits.aes = 128;
    area->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

/* A sealed data object: the secret is given (no sensitiveDataOrigin), used only through its authorization value. */
static inline void la_tpm_sealed_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    TPMT_PUBLIC *area = &out->publicArea;
    area->type = TPM2_ALG_KEYEDHASH;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH |
        TPMA_OBJECT_NODA;
    area->parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
}

/* An enclave P-256 key: made inside the TPM, never duplicable, for signing and for ECDH (TPM2_ECDH_ZGen); the
 * scheme is chosen per use. */
static inline void la_tpm_p256_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    TPMT_PUBLIC *area = &out->publicArea;
    area->type = TPM2_ALG_ECC;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM |
        TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

/* The attestation key: an ECC P-256 restricted signing key (ECDSA-SHA256) made as a primary in the endorsement
 * hierarchy, so the same TPM makes the same key every time; restricted, it signs only what the TPM produced itself
 * (TPM2_Certify's attestation structures), never a digest it is handed. */
static inline void la_tpm_ak_template(TPM2B_PUBLIC *out) {
    memset(out, 0, sizeof *out);
    TPMT_PUBLIC *area = &out->publicArea;
    area->type = TPM2_ALG_ECC;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_FIXEDTPM |
        TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
    area->parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

/* AES-128-CFB parameter encryption for the salted sessions. */
static inline TPMT_SYM_DEF la_tpm_session_symmetric(void) {
    TPMT_SYM_DEF out;
    memset(&out, 0, sizeof out);
    out.algorithm = TPM2_ALG_AES;
    out.keyBits.aes = 128;
    out.mode.aes = TPM2_ALG_CFB;
    return out;
}

static inline TPMT_SIG_SCHEME la_tpm_ecdsa_sha256(void) {
    TPMT_SIG_SCHEME out;
    memset(&out, 0, sizeof out);
    out.scheme = TPM2_ALG_ECDSA;
    out.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    return out;
}

/* "No ticket": signing a digest the TPM did not hash itself, allowed for unrestricted keys. */
static inline TPMT_TK_HASHCHECK la_tpm_null_ticket(void) {
    TPMT_TK_HASHCHECK out;
    memset(&out, 0, sizeof out);
    out.tag = TPM2_ST_HASHCHECK;
    out.hierarchy = TPM2_RH_NULL;
    return out;
}

#endif
