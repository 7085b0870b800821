/* Definitions of CTSS2Templates.h, which says what each is for. */
#include "CTSS2Templates.h"

#include <string.h>

/* A public area of `type`, named with SHA-256, with `attributes`, everything else zero. */
static TPMT_PUBLIC *la_tpm_area(TPM2B_PUBLIC *out, TPMI_ALG_PUBLIC type, TPMA_OBJECT attributes) {
    memset(out, 0, sizeof *out);
    TPMT_PUBLIC *area = &out->publicArea;
    area->type = type;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = attributes;
    return area;
}

/* An ECC P-256 key made inside the TPM (fixedTPM, fixedParent, sensitiveDataOrigin, userWithAuth, noDA) with
 * `usage` added to its attributes; no symmetric algorithm, scheme or KDF until a template sets one. */
static TPMT_PUBLIC *la_tpm_p256_area(TPM2B_PUBLIC *out, TPMA_OBJECT usage) {
    TPMT_PUBLIC *area = la_tpm_area(out, TPM2_ALG_ECC, usage | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
        TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA);
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    return area;
}

/* The storage root key: the TCG's ECC P-256 storage template (restricted decryption, AES-128-CFB), so a primary made
 * from it is the same key every time the owner seed is the same. */
void la_tpm_srk_template(TPM2B_PUBLIC *out) {
    TPMT_PUBLIC *area = la_tpm_p256_area(out, TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT);
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    area->parameters.eccDetail.symmetric.keyBits.aes = 128;
    area->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
}

/* A sealed data object: the secret is given (no sensitiveDataOrigin), used only through its authorization value.
 * With `dictionary_attack_protected`, noDA is clear: every wrong authorization counts towards the TPM's lockout
 * (TPM2_DictionaryAttackParameters), so guessing the authorization is rate-limited by the TPM. */
void la_tpm_sealed_template(TPM2B_PUBLIC *out, int dictionary_attack_protected) {
    TPMT_PUBLIC *area = la_tpm_area(out, TPM2_ALG_KEYEDHASH,
        TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_USERWITHAUTH);
    if (!dictionary_attack_protected) area->objectAttributes |= TPMA_OBJECT_NODA;
    area->parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
}

/* An enclave P-256 key: made inside the TPM, never duplicable, for signing and for ECDH (TPM2_ECDH_ZGen); the
 * scheme is chosen per use. */
void la_tpm_p256_template(TPM2B_PUBLIC *out) {
    la_tpm_p256_area(out, TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_DECRYPT);
}

/* The attestation key: an ECC P-256 restricted signing key (ECDSA-SHA256) made as a primary in the endorsement
 * hierarchy, so the same TPM makes the same key every time; restricted, it signs only what the TPM produced itself
 * (TPM2_Certify's attestation structures), never a digest it is handed. */
void la_tpm_ak_template(TPM2B_PUBLIC *out) {
    TPMT_PUBLIC *area = la_tpm_p256_area(out, TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT);
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
    area->parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
}

/* The endorsement key as the TCG EK profile's template L-1 makes it: RSA-2048, restricted decryption, AES-128-CFB,
 * usable only through the endorsement hierarchy's policy (PolicySecret(TPM_RH_ENDORSEMENT)), with a 256-byte zero
 * unique field. The TPM's manufacturer certifies this key (its certificate at NV index 0x01C00002), and every TPM
 * makes the same key from this template each time. */
void la_tpm_ek_rsa_template(TPM2B_PUBLIC *out) {
    static const BYTE policy_a_sha256[32] = {
        0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xB3, 0xF8, 0x1A, 0x90, 0xCC, 0x8D, 0x46, 0xA5, 0xD7, 0x24,
        0xFD, 0x52, 0xD7, 0x6E, 0x06, 0x52, 0x0B, 0x64, 0xF2, 0xA1, 0xDA, 0x1B, 0x33, 0x14, 0x69, 0xAA};
    TPMT_PUBLIC *area = la_tpm_area(out, TPM2_ALG_RSA, TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
        TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT);
    area->authPolicy.size = sizeof policy_a_sha256;
    memcpy(area->authPolicy.buffer, policy_a_sha256, sizeof policy_a_sha256);
    area->parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_AES;
    area->parameters.rsaDetail.symmetric.keyBits.aes = 128;
    area->parameters.rsaDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    area->parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
    area->parameters.rsaDetail.keyBits = 2048;
    area->parameters.rsaDetail.exponent = 0;
    area->unique.rsa.size = 256;
}

/* AES-128-CFB parameter encryption for the salted sessions. */
TPMT_SYM_DEF la_tpm_session_symmetric(void) {
    TPMT_SYM_DEF out;
    memset(&out, 0, sizeof out);
    out.algorithm = TPM2_ALG_AES;
    out.keyBits.aes = 128;
    out.mode.aes = TPM2_ALG_CFB;
    return out;
}

TPMT_SIG_SCHEME la_tpm_ecdsa_sha256(void) {
    TPMT_SIG_SCHEME out;
    memset(&out, 0, sizeof out);
    out.scheme = TPM2_ALG_ECDSA;
    out.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    return out;
}

/* "No ticket": signing a digest the TPM did not hash itself, allowed for unrestricted keys. */
TPMT_TK_HASHCHECK la_tpm_null_ticket(void) {
    TPMT_TK_HASHCHECK out;
    memset(&out, 0, sizeof out);
    out.tag = TPM2_ST_HASHCHECK;
    out.hierarchy = TPM2_RH_NULL;
    return out;
}
