import Foundation
import SecureCrypto
import TrustedPlatform

/// A P-256 key inside the TPM, loaded for one use: `Enclave.withPrivateKey` loads the key object under the storage
/// root key with its authorization value, the engine runs `TPM2_Sign` or `TPM2_ECDH_ZGen` on it, and the connection
/// flushes it. The private scalar is never in this process; this value holds a handle to the loaded object only,
/// valid while the connection is open.
struct TPMHeldKey: P256PrivateKeyOperations {
    let connection: TPMConnection
    let handle: TPMHandle

    /// ECDSA in the TPM. The TPM signs a 32-byte value as ECDSA-SHA256; a digest of another length is given as the
    /// integer ECDSA would take from it (cut to its first 32 bytes, or left-padded with zeros), so the signature
    /// is the one `signature(forDigest:)` gives for any digest of 1…64 bytes.
    func signature(forDigest digest: some ContiguousBytes) throws -> ECDSASignature {
        let bytes = digest.withUnsafeBytes { Data($0) }
        guard bytes.count > 0, bytes.count <= 64 else {
            throw CryptoError(.invalidParameter, "an ECDSA digest must be 1...64 bytes, not \(bytes.count)")
        }
        let value = bytes.count >= 32 ? Data(bytes.prefix(32)) : Data(count: 32 - bytes.count) + bytes
        let (r, s) = try connection.sign(value, with: handle)
        return try ECDSASignature(rawRepresentation: r + s)
    }

    /// ECDH in the TPM: the x-coordinate of `d · peer`.
    func sharedSecret(with peer: P256.PublicKey) throws -> SecureBytes {
        try connection.sharedSecret(with: handle, point: peer.x963Representation)
    }

    /// Loads `object` with `authorization` and runs `body` with it. A password-bound key proves its password first
    /// (a signature over zeros), so a wrong one is refused before `body` looks at its input, as in software.
    static func use<Result>(
        _ object: TPMObject, tpm: TPM, authorization: SecureBytes, passwordBound: Bool,
        _ body: (TPMHeldKey) throws -> Result
    ) throws -> Result {
        try call(tpm, passwordBound: passwordBound) { connection in
            let key = TPMHeldKey(
                connection: connection, handle: try connection.load(object, authorization: authorization))
            if passwordBound { _ = try connection.sign(Data(count: 32), with: key.handle) }
            return try body(key)
        }
    }

    /// Runs `body` on a TPM connection, reporting the TPM's refusals as the enclave's errors: a wrong authorization
    /// is a wrong password for a password-bound key and a changed key otherwise; a refused attestation credential is
    /// a bad challenge.
    static func call<Result>(_ tpm: TPM, passwordBound: Bool, _ body: (TPMConnection) throws -> Result) throws -> Result
    {
        do {
            return try tpm.withConnection(body)
        } catch let error as TPMError {
            if error.isCredentialRefusal {
                throw EnclaveError(
                    .invalidChallenge, "the challenge does not open in this TPM (made for another TPM, or changed)")
            }
            if error.isAuthorizationFailure {
                if passwordBound {
                    throw EnclaveError(.wrongPassword, "the application password does not open the key")
                }
                throw EnclaveError(.corrupt, "an enclave key does not open with its access control")
            }
            if error.isForeignObject {
                throw EnclaveError(.corrupt, "an enclave key does not open on this device's TPM")
            }
            throw RootKeyStore.enclaveError(error, tpm: tpm)
        }
    }
}
