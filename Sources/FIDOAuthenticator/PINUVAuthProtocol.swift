import FIDOProtocol
import Foundation
import SecureCrypto

/// CTAP 2.1's PIN/UV auth protocols one and two (§6.5.6, §6.5.7): how the platform and the authenticator agree on a
/// shared secret (ECDH on P-256 with the authenticator's key agreement key), and how that secret, or a
/// pinUvAuthToken, encrypts and authenticates what they send each other.
enum PINUVAuthProtocol: UInt64, CaseIterable, Sendable {
    case one = 1
    case two = 2

    /// The shared secret from the ECDH value `z` (the x-coordinate): protocol one hashes it (one 32-byte key for
    /// both jobs); protocol two derives an HMAC key and an AES key with HKDF-SHA-256 (64 bytes, in that order).
    func sharedSecret(from z: SecureBytes) throws -> SecureBytes {
        switch self {
        case .one:
            return SecureBytes(count: 32) { key in
                z.withUnsafeBytes { DigestAlgorithm.sha256.hash($0, into: key) }
            }
        case .two:
            let salt = Data(repeating: 0, count: 32)
            let hmacKey = try HKDFSHA256.deriveKey(
                inputKeyMaterial: z, salt: salt, info: Data("CTAP2 HMAC key".utf8), outputByteCount: 32)
            let aesKey = try HKDFSHA256.deriveKey(
                inputKeyMaterial: z, salt: salt, info: Data("CTAP2 AES key".utf8), outputByteCount: 32)
            return hmacKey.appending(aesKey)
        }
    }

    /// `plaintext` (whole AES blocks) encrypted under a shared secret: protocol one with a zero IV, protocol two
    /// with a random IV sent in front.
    func encrypt(_ plaintext: SecureBytes, key: SecureBytes) throws -> [UInt8] {
        switch self {
        case .one:
            return try AES256CBC.encrypt(plaintext, key: key, iv: [UInt8](repeating: 0, count: 16))
        case .two:
            let iv = [UInt8](try SecureRandom.bytes(16))
            return iv + (try AES256CBC.encrypt(plaintext, key: aesKey(key), iv: iv))
        }
    }

    /// What ``encrypt(_:key:)`` made.
    ///
    /// - Throws: `CTAP2.Status.invalidParameter` for a ciphertext that is not whole blocks (after protocol two's
    ///   IV) or is empty.
    func decrypt(_ ciphertext: [UInt8], key: SecureBytes) throws -> SecureBytes {
        switch self {
        case .one:
            guard !ciphertext.isEmpty, ciphertext.count % 16 == 0 else { throw CTAP2.Status.invalidParameter }
            return try AES256CBC.decrypt(ciphertext, key: key, iv: [UInt8](repeating: 0, count: 16))
        case .two:
            guard ciphertext.count > 16, ciphertext.count % 16 == 0 else { throw CTAP2.Status.invalidParameter }
            return try AES256CBC.decrypt(
                Array(ciphertext.dropFirst(16)), key: aesKey(key), iv: Array(ciphertext.prefix(16)))
        }
    }

    /// The authentication code of `message` under `key` (a shared secret or a pinUvAuthToken): HMAC-SHA-256, cut
    /// to 16 bytes by protocol one; protocol two keys it with the secret's HMAC half (a 32-byte token whole).
    func authenticate(_ message: [UInt8], key: SecureBytes) -> [UInt8] {
        switch self {
        case .one:
            return Array(HMACSHA256.authenticationCode(for: message, using: key).prefix(16))
        case .two:
            let hmacKey = key.count > 32 ? key.slice(0..<32) : key
            return Array(HMACSHA256.authenticationCode(for: message, using: hmacKey))
        }
    }

    /// Whether `signature` is `message`'s authentication code under `key`, compared in constant time.
    func verify(_ message: [UInt8], signature: [UInt8], key: SecureBytes) -> Bool {
        let expected = authenticate(message, key: key)
        return signature.count == expected.count && constantTimeEquals(signature, expected)
    }

    /// Protocol two's AES half of a shared secret.
    private func aesKey(_ key: SecureBytes) -> SecureBytes { key.count == 64 ? key.slice(32..<64) : key }
}
