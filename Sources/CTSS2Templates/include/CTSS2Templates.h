#ifndef LA_CTSS2_TEMPLATES_H
#define LA_CTSS2_TEMPLATES_H

/* The TPM objects' templates and fixed structures, compiled in templates.c: C because TPM2B and union fields are
 * awkward to fill from Swift; they hold no logic beyond the fixed values each object is made with. */
#include <tss2/tss2_tpm2_types.h>

/* The storage root key: the TCG's ECC P-256 storage template (restricted decryption, AES-128-CFB), so a primary made
 * from it is the same key every time the owner seed is the same. */
void la_tpm_srk_template(TPM2B_PUBLIC *out);

/* A sealed data object: the secret is given (no sensitiveDataOrigin), used only through its authorization value.
 * With `dictionary_attack_protected`, noDA is clear: every wrong authorization counts towards the TPM's lockout
 * (TPM2_DictionaryAttackParameters), so guessing the authorization is rate-limited by the TPM. */
void la_tpm_sealed_template(TPM2B_PUBLIC *out, int dictionary_attack_protected);

/* An enclave P-256 key: made inside the TPM, never duplicable, for signing and for ECDH (TPM2_ECDH_ZGen); the
 * scheme is chosen per use. */
void la_tpm_p256_template(TPM2B_PUBLIC *out);

/* The attestation key: an ECC P-256 restricted signing key (ECDSA-SHA256) made as a primary in the endorsement
 * hierarchy, so the same TPM makes the same key every time; restricted, it signs only what the TPM produced itself
 * (TPM2_Certify's attestation structures), never a digest it is handed. */
void la_tpm_ak_template(TPM2B_PUBLIC *out);

/* The endorsement key as the TCG EK profile's template L-1 makes it: RSA-2048, restricted decryption, AES-128-CFB,
 * usable only through the endorsement hierarchy's policy (PolicySecret(TPM_RH_ENDORSEMENT)), with a 256-byte zero
 * unique field. The TPM's manufacturer certifies this key (its certificate at NV index 0x01C00002), and every TPM
 * makes the same key from this template each time. */
void la_tpm_ek_rsa_template(TPM2B_PUBLIC *out);

/* The NV index of the RSA-2048 endorsement key's certificate (TCG EK profile, low range). */
static const TPM2_HANDLE la_tpm_ek_rsa_certificate_index = 0x01C00002;

/* AES-128-CFB parameter encryption for the salted sessions. */
TPMT_SYM_DEF la_tpm_session_symmetric(void);

/* ECDSA with SHA-256, for signing with an enclave key. */
TPMT_SIG_SCHEME la_tpm_ecdsa_sha256(void);

/* "No ticket": signing a digest the TPM did not hash itself, allowed for unrestricted keys. */
TPMT_TK_HASHCHECK la_tpm_null_ticket(void);

#endif
