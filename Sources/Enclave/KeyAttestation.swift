import Foundation
import SecureCrypto
import TrustedPlatform

extension Enclave {
    /// What a verifier needs to challenge this store's TPM (see the `KeyAttestation` module).
    ///
    /// - Throws: `EnclaveError.notAttestable` on the software backend; the backend's errors when the TPM fails.
    package func attestationIdentity() throws -> TPMEndorsement {
        guard case .tpm(let tpm) = backend else {
            throw EnclaveError(
                .notAttestable, "no TPM holds this store's keys (software backend): nothing can attest them")
        }
        return try TPMHeldKey.call(tpm, passwordBound: false) { try $0.endorsement() }
    }

    /// Answers a verifier's challenge for `sealed`: the TPM opens the credential with its attestation key and
    /// certifies the key with it as nonce. A password-bound key needs its `password` (certifying needs the key's
    /// authorization value).
    ///
    /// - Returns: the key's public area (marshalled `TPMT_PUBLIC`) and the certification.
    /// - Throws: `EnclaveError.notAttestable` for a key no TPM holds, `.invalidChallenge` when the TPM does not
    ///   open the challenge, and `withPrivateKey`'s errors for a key that does not open.
    package func attest(
        _ sealed: EnclaveKey, password: SecureBytes?, credentialBlob: Data, encryptedSecret: Data
    ) throws -> (keyPublicArea: Data, certification: TPMCertification) {
        guard sealed.isTPMHeld else {
            throw EnclaveError(.notAttestable, "the key is not held by a TPM (software backend): nothing can attest it")
        }
        // The checks and authorization of any use of the key, then the attestation in one TPM conversation.
        let held = try tpmHeldKey(sealed, password: password)
        let certification = try TPMHeldKey.call(held.tpm, passwordBound: !sealed.passwordKDF.isEmpty) {
            try $0.attest(
                held.object, authorization: held.authorization, credentialBlob: credentialBlob,
                encryptedSecret: encryptedSecret)
        }
        return (held.object.publicArea.dropFirst(2), certification)
    }
}
