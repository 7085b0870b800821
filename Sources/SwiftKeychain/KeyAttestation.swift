import Foundation
public import KeyAttestation
public import KeychainServices
import SecurityProtocol

/// Key attestation (our addition; Apple's platforms have no Linux counterpart): a server learns that an enclave key
/// is a P-256 key made inside this machine's TPM, which no one can export. The exchange is described in the
/// `KeyAttestation` module, whose `TPMAttestationVerifier` is the server's side.
extension SecKey {
    /// The identity of the TPM that holds this enclave key: what a verifier's `challenge(for:)` takes.
    ///
    /// - Throws: `KeychainError` with `errSecUnimplemented` (-4) when no TPM holds the key (a software key, or the
    ///   software enclave backend).
    public func tpmIdentity() throws -> TPMIdentity {
        do {
            let identity = try attestationIdentity()
            return TPMIdentity(
                endorsementCertificate: identity.certificate, endorsementKey: identity.endorsementKey,
                attestationKey: identity.attestationKey)
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
    }

    /// The TPM's answer to a verifier's challenge for this key: what the verifier's `verify(_:expecting:)` takes.
    /// No authentication is asked (attesting runs no private-key operation); a key bound to an application
    /// password needs it in the key's `LAContext`.
    ///
    /// - Throws: `KeychainError`: `errSecUnimplemented` when no TPM holds the key, `errSecParam` when the TPM does
    ///   not open the challenge (made for another TPM, or changed).
    public func tpmAttestation(answering challenge: TPMAttestationChallenge) throws -> TPMKeyAttestation {
        do {
            let answer = try attestation(
                credentialBlob: challenge.credentialBlob, encryptedSecret: challenge.encryptedSecret)
            return TPMKeyAttestation(
                keyPublicArea: answer.keyPublicArea, statement: answer.statement, signature: answer.signature)
        } catch let status as KeychainStatus {
            throw KeychainError(status)
        }
    }
}
