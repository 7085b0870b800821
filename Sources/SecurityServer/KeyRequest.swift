import Enclave
import Foundation
import KeychainStore
import SecureCrypto

/// A request about an enclave-held P-256 key, as the client sends it. The client names a key by its handle (the
/// sealed form the enclave produced, `EnclaveKey.serialized`), which it can pass around but not open.
package enum KeyRequest: Sendable {
    /// Generates a key in the enclave under `accessControl` (nil: a key without a list). With `item`, the key is
    /// also stored as a `kSecClassKey` item with those attributes (a `SecItemAdd` dictionary without its value).
    /// A list with `.applicationPassword` binds the key to the password `context` holds.
    case generate(accessControl: AccessControlPolicy?, item: [String: KeychainValue]?, context: AuthenticationContextID?)
    /// Signs a digest (ECDSA, DER signature).
    case sign(handle: Data, digest: Data, context: AuthenticationContextID?)
    /// Opens an Apple ECIES ciphertext made for the key's public key.
    case decrypt(handle: Data, ciphertext: Data, variant: ECIES.Variant, context: AuthenticationContextID?)
    /// ECDH with `peer` (65-byte public key): Z itself, or with `kdf` the X9.63 SHA-256 KDF of Z.
    case keyExchange(
        handle: Data, peer: Data, kdf: (sharedInfo: Data, byteCount: Int)?, context: AuthenticationContextID?)
}

/// The engine's answer to a `KeyRequest`.
package enum KeyResponse: Sendable {
    /// A new key: its handle and its public key (`04 || X || Y`).
    case generated(handle: Data, publicKey: Data)
    /// A DER ECDSA signature.
    case signature(Data)
    /// Decrypted bytes or a derived secret.
    case secret(SecureBytes)
}

extension KeyRequest {
    /// The public key (`04 || X || Y`) an enclave-key handle names, read without opening the key; nil when
    /// `handle` is not an enclave key.
    package static func publicKey(ofHandle handle: Data) -> Data? {
        try? EnclaveKey(serialized: handle).publicKey
    }
}
