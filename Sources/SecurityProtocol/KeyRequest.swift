import Foundation
import SecureCrypto

/// A request about an enclave-held P-256 key, as the client sends it. The client names a key by its handle (the
/// sealed form the enclave produced, `EnclaveKey.serialized`), which it can pass around but not open.
package enum KeyRequest: Sendable, Equatable {
    /// Generates a key in the enclave under `accessControl` (nil: a key without a list). With `item`, the key is
    /// also stored as a `kSecClassKey` item with those attributes (a `SecItemAdd` dictionary without its value).
    /// A list with `.applicationPassword` binds the key to the password `context` holds.
    case generate(
        accessControl: AccessControlPolicy?, item: [String: KeychainValue]?, context: AuthenticationContextID?)
    /// Signs a digest (ECDSA, DER signature).
    case sign(handle: Data, digest: Data, context: AuthenticationContextID?)
    /// Opens an Apple ECIES ciphertext made for the key's public key.
    case decrypt(handle: Data, ciphertext: Data, variant: ECIES.Variant, context: AuthenticationContextID?)
    /// ECDH with `peer` (65-byte public key): Z itself, or with `kdf` the X9.63 SHA-256 KDF of Z.
    case keyExchange(handle: Data, peer: Data, kdf: X963KDFParameters?, context: AuthenticationContextID?)
    /// What a verifier needs to challenge the TPM that holds the store's keys (key attestation, our addition).
    case attestationIdentity
    /// Answers a verifier's challenge for the key: the TPM opens the credential (`credentialBlob`,
    /// `encryptedSecret`) and certifies the key with it. `context` holds the application password of a key bound to
    /// one; no other authentication is asked (attesting uses no private-key operation).
    case attest(handle: Data, credentialBlob: Data, encryptedSecret: Data, context: AuthenticationContextID?)
}

/// What the X9.63 KDF applied to a key exchange's shared secret takes: the algorithm's hash,
/// `kSecKeyKeyExchangeParameterSharedInfo` and `kSecKeyKeyExchangeParameterRequestedSize`.
package struct X963KDFParameters: Sendable, Hashable {
    /// The KDF's hash (the algorithm's `…X963SHA…`).
    package var digest: DigestAlgorithm
    /// The KDF's shared info (may be empty).
    package var sharedInfo: Data
    /// How many bytes to derive.
    package var byteCount: Int

    /// Parameters with these values.
    package init(digest: DigestAlgorithm = .sha256, sharedInfo: Data, byteCount: Int) {
        self.digest = digest
        self.sharedInfo = sharedInfo
        self.byteCount = byteCount
    }
}

/// The engine's answer to a `KeyRequest`.
package enum KeyResponse: Sendable, Equatable {
    /// A new key: its handle and its public key (`04 || X || Y`).
    case generated(handle: Data, publicKey: Data)
    /// A DER ECDSA signature.
    case signature(Data)
    /// Decrypted bytes or a derived secret.
    case secret(SecureBytes)
    /// The TPM's endorsement-key certificate (DER, empty when it has none), its endorsement key's and attestation
    /// key's public areas (marshalled `TPMT_PUBLIC`).
    case attestationIdentity(certificate: Data, endorsementKey: Data, attestationKey: Data)
    /// The key's public area, the `TPMS_ATTEST` the attestation key signed, and the signature (`r || s`).
    case attestation(keyPublicArea: Data, statement: Data, signature: Data)
}

extension KeyRequest: ProtocolCodable {
    /// A variant: 1 generate, 2 sign, 3 decrypt, 4 keyExchange, 5 attestationIdentity, 6 attest; associated values
    /// as fields 1, 2, … in order, the optional ones left out when nil.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .generate(let accessControl, let item, let context):
            writer.variant(1) {
                $0.optionalField(1, accessControl)
                $0.optionalField(2, item)
                $0.optionalField(3, context)
            }
        case .sign(let handle, let digest, let context):
            writer.variant(2) {
                $0.field(1, handle)
                $0.field(2, digest)
                $0.optionalField(3, context)
            }
        case .decrypt(let handle, let ciphertext, let variant, let context):
            writer.variant(3) {
                $0.field(1, handle)
                $0.field(2, ciphertext)
                $0.field(3, variant)
                $0.optionalField(4, context)
            }
        case .keyExchange(let handle, let peer, let kdf, let context):
            writer.variant(4) {
                $0.field(1, handle)
                $0.field(2, peer)
                $0.optionalField(3, kdf)
                $0.optionalField(4, context)
            }
        case .attestationIdentity:
            writer.variant(5)
        case .attest(let handle, let credentialBlob, let encryptedSecret, let context):
            writer.variant(6) {
                $0.field(1, handle)
                $0.field(2, credentialBlob)
                $0.field(3, encryptedSecret)
                $0.optionalField(4, context)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1:
                .generate(
                    accessControl: try payload.optionalField(1), item: try payload.optionalField(2),
                    context: try payload.optionalField(3))
            case 2:
                .sign(handle: try payload.field(1), digest: try payload.field(2), context: try payload.optionalField(3))
            case 3:
                .decrypt(
                    handle: try payload.field(1), ciphertext: try payload.field(2), variant: try payload.field(3),
                    context: try payload.optionalField(4))
            case 4:
                .keyExchange(
                    handle: try payload.field(1), peer: try payload.field(2), kdf: try payload.optionalField(3),
                    context: try payload.optionalField(4))
            case 5: .attestationIdentity
            case 6:
                .attest(
                    handle: try payload.field(1), credentialBlob: try payload.field(2),
                    encryptedSecret: try payload.field(3), context: try payload.optionalField(4))
            default: nil
            }
        }
    }
}

extension X963KDFParameters: ProtocolCodable {
    /// A record: 1 sharedInfo, 2 byteCount, 3 digest (left out for SHA-256, as before it existed: a client or
    /// daemon of the first format reads and writes the SHA-256 requests unchanged).
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, sharedInfo)
        writer.field(2, byteCount)
        if digest != .sha256 { writer.field(3, digest) }
    }

    /// - Throws: ``MessageDecodingError``; `nonCanonical` for SHA-256 written out.
    package init(from reader: inout MessageReader) throws {
        let sharedInfo: Data = try reader.field(1)
        let byteCount: Int = try reader.field(2)
        let start = reader.offset
        let digest: DigestAlgorithm? = try reader.optionalField(3)
        guard digest != .sha256 else {
            throw MessageDecodingError(.nonCanonical, at: start, "SHA-256 is the absent digest, never written")
        }
        self.init(digest: digest ?? .sha256, sharedInfo: sharedInfo, byteCount: byteCount)
    }
}

extension DigestAlgorithm: ProtocolCodable {
    /// One byte: 1 SHA-1, 2 SHA-224, 3 SHA-256, 4 SHA-384, 5 SHA-512.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .sha1: writer.byte(1)
        case .sha224: writer.byte(2)
        case .sha256: writer.byte(3)
        case .sha384: writer.byte(4)
        case .sha512: writer.byte(5)
        }
    }

    /// - Throws: `invalidValue` for any other byte.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        switch try reader.remainingByte(for: "a hash function") {
        case 1: self = .sha1
        case 2: self = .sha224
        case 3: self = .sha256
        case 4: self = .sha384
        case 5: self = .sha512
        default: throw MessageDecodingError(.invalidValue, at: start, "unknown hash function")
        }
    }
}

extension KeyResponse: ProtocolCodable {
    /// A variant: 1 generated (fields 1 handle, 2 publicKey), 2 signature, 3 secret (straight into zeroizing
    /// memory when decoded), 4 attestationIdentity, 5 attestation (associated values as fields 1, 2, 3).
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .generated(let handle, let publicKey):
            writer.variant(1) {
                $0.field(1, handle)
                $0.field(2, publicKey)
            }
        case .signature(let signature): writer.variant(2) { $0.field(1, signature) }
        case .secret(let secret): writer.variant(3) { $0.field(1, secret) }
        case .attestationIdentity(let certificate, let endorsementKey, let attestationKey):
            writer.variant(4) {
                $0.field(1, certificate)
                $0.field(2, endorsementKey)
                $0.field(3, attestationKey)
            }
        case .attestation(let keyPublicArea, let statement, let signature):
            writer.variant(5) {
                $0.field(1, keyPublicArea)
                $0.field(2, statement)
                $0.field(3, signature)
            }
        }
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self = try reader.variant { tag, payload in
            switch tag {
            case 1: .generated(handle: try payload.field(1), publicKey: try payload.field(2))
            case 2: .signature(try payload.field(1))
            case 3: .secret(try payload.field(1))
            case 4:
                .attestationIdentity(
                    certificate: try payload.field(1), endorsementKey: try payload.field(2),
                    attestationKey: try payload.field(3))
            case 5:
                .attestation(
                    keyPublicArea: try payload.field(1), statement: try payload.field(2),
                    signature: try payload.field(3))
            default: nil
            }
        }
    }
}

extension ECIES.Variant: ProtocolCodable {
    /// One byte: 1 variable IV and 2 zero IV with SHA-256 (the first format's two values, unchanged); then 3/4
    /// SHA-224, 5/6 SHA-384, 7/8 SHA-512, 9/10 SHA-1, variable IV first.
    package func encode(into writer: inout MessageWriter) {
        writer.byte(UInt8(2 * Self.digests.firstIndex(of: digest)! + (iv == .fromKDF ? 1 : 2)))
    }

    /// - Throws: `invalidValue` for any other byte.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        let code = Int(try reader.remainingByte(for: "an ECIES variant"))
        guard (1...2 * Self.digests.count).contains(code) else {
            throw MessageDecodingError(.invalidValue, at: start, "unknown ECIES variant")
        }
        self.init(iv: code % 2 == 1 ? .fromKDF : .zero, digest: Self.digests[(code - 1) / 2])
    }

    /// The hashes in the order of their codes.
    private static let digests: [DigestAlgorithm] = [.sha256, .sha224, .sha384, .sha512, .sha1]
}
