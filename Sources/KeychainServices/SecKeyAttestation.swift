import Foundation
import SecurityClient
import SecurityProtocol

// Key attestation for enclave keys held by a TPM: the requests behind the public calls of SwiftKeychain
// (`SecKey.tpmIdentity()`, `SecKey.tpmAttestation(answering:)`) and LocalAuthentication (`LAPrivateKey`'s). Package
// level, so importers of KeychainServices see Apple's names only.

extension SecKey {
    /// The engine's answer to `.attestationIdentity` for this key's store; the certificate is nil when the TPM has
    /// none.
    ///
    /// - Throws: `KeychainStatus`: `errSecUnimplemented` for a key the engine does not hold in a TPM.
    package func attestationIdentity() throws -> (certificate: Data?, endorsementKey: Data, attestationKey: Data) {
        let (_, client, context) = try enclaveParts()
        guard
            case .attestationIdentity(let certificate, let endorsementKey, let attestationKey) =
                try client.sendBlocking(.attestationIdentity, context: context?.handle)
        else { throw KeychainStatus(.internalComponent, "the engine answered another request") }
        return (certificate.isEmpty ? nil : certificate, endorsementKey, attestationKey)
    }

    /// The engine's answer to `.attest` for this key: the TPM certifies it with the credential it opens from the
    /// challenge.
    ///
    /// - Throws: `KeychainStatus`: `errSecUnimplemented` for a key no TPM holds, `errSecParam` for a challenge the
    ///   TPM does not open, `errSecAuthFailed` for a password-bound key without its password in the key's context.
    package func attestation(
        credentialBlob: Data, encryptedSecret: Data
    ) throws -> (keyPublicArea: Data, statement: Data, signature: Data) {
        let (handle, client, context) = try enclaveParts()
        guard
            case .attestation(let keyPublicArea, let statement, let signature) = try client.sendBlocking(
                .attest(
                    handle: handle, credentialBlob: credentialBlob, encryptedSecret: encryptedSecret,
                    context: context?.id),
                context: context?.handle)
        else { throw KeychainStatus(.internalComponent, "the engine answered another request") }
        return (keyPublicArea, statement, signature)
    }

    /// An enclave key's handle, engine client and context. - Throws: `errSecUnimplemented` for any other key.
    private func enclaveParts() throws -> (handle: Data, client: any SecurityClient, context: KeyContext?) {
        guard case .enclave(let handle, _, let client, let context) = material else {
            throw KeychainStatus(.unimplemented, "only an enclave key can be held by a TPM; this key is in the process")
        }
        return (handle, client, context)
    }
}
