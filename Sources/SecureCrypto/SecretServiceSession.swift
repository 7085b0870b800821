internal import COpenSSL
import Foundation

/// The Secret Service's encrypted session, `dh-ietf1024-sha256-aes128-cbc-pkcs7` (freedesktop Secret Service API
/// 0.2, "Transfer of Secrets"): Diffie-Hellman in the 1024-bit MODP group of RFC 2409 (the Second Oakley Group,
/// generator 2), the shared value as 128 big-endian bytes through HKDF-SHA256 (no salt, no info) to a 16-byte key,
/// and each secret in AES-128-CBC with PKCS #7 padding under a fresh 16-byte IV. As libsecret, gnome-keyring and
/// Python's secretstorage do it.
package struct SecretServiceSession: Sendable {
    /// The group's prime, big-endian.
    static let prime: [UInt8] = Array(
        hex: "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"
            + "020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"
            + "4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
            + "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF")

    /// This side's public value (big-endian, 128 bytes) to send back to the client.
    package let publicKey: Data
    private let key: SecureBytes

    /// Agrees on a key with a client whose public value is `peerPublicKey` (big-endian, as sent).
    ///
    /// - Throws: `CryptoError.invalidParameter` for a public value outside 2…p−2 (0, 1 and p−1 would fix the
    ///   shared value) or longer than the prime.
    package init(peerPublicKey: Data) throws {
        guard peerPublicKey.count <= Self.prime.count, let context = BN_CTX_new() else {
            throw CryptoError(.invalidParameter, "a Secret Service public key is at most 128 bytes")
        }
        defer { BN_CTX_free(context) }
        let p = Self.prime.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let peer = peerPublicKey.withUnsafeBytes {
            BN_bin2bn($0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count), nil)
        }
        let privateValue = BN_secure_new()
        let generator = BN_new()
        let ownPublic = BN_new()
        let shared = BN_secure_new()
        let pMinusOne = BN_new()
        defer {
            BN_free(p)
            BN_free(peer)
            BN_clear_free(privateValue)
            BN_free(generator)
            BN_free(ownPublic)
            BN_clear_free(shared)
            BN_free(pMinusOne)
        }
        guard let p, let peer, let privateValue, let generator, let ownPublic, let shared, let pMinusOne,
            BN_set_word(generator, 2) == 1, BN_copy(pMinusOne, p) != nil, BN_sub_word(pMinusOne, 1) == 1
        else { throw CryptoError.drainingQueue(.internalFailure, "BIGNUM allocation failed") }
        guard BN_cmp(peer, BN_value_one()) > 0, BN_cmp(peer, pMinusOne) < 0 else {
            throw CryptoError(.invalidParameter, "the client's Diffie-Hellman public value is out of range")
        }
        // A private exponent of 1023 bits, top bit set.
        guard BN_priv_rand_ex(privateValue, 1023, 0, 0, 0, nil) == 1,
            BN_mod_exp(ownPublic, generator, privateValue, p, context) == 1,
            BN_mod_exp(shared, peer, privateValue, p, context) == 1
        else { throw CryptoError.drainingQueue(.internalFailure, "Diffie-Hellman failed") }
        var ownBytes = [UInt8](repeating: 0, count: Self.prime.count)
        guard BN_bn2binpad(ownPublic, &ownBytes, Int32(ownBytes.count)) == Int32(ownBytes.count) else {
            throw CryptoError.drainingQueue(.internalFailure, "Diffie-Hellman output failed")
        }
        let sharedBytes = try SecureBytes(count: Self.prime.count) { bytes in
            let written = BN_bn2binpad(
                shared, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(bytes.count))
            guard written == Int32(bytes.count) else {
                throw CryptoError.drainingQueue(.internalFailure, "Diffie-Hellman output failed")
            }
        }
        publicKey = Data(ownBytes)
        key = try HKDFSHA256.deriveKey(inputKeyMaterial: sharedBytes, outputByteCount: 16)
    }

    /// `secret` encrypted for the client: (IV, ciphertext).
    package func encrypt(_ secret: SecureBytes) throws -> (parameters: Data, value: Data) {
        let iv = try SecureRandom.bytes(16)
        return (iv, try crypt(secret, iv: iv, encrypting: true).withUnsafeBytes { Data($0) })
    }

    /// The secret the client sent as `value` under IV `parameters`.
    ///
    /// - Throws: `CryptoError.invalidParameter` for an IV that is not 16 bytes; `.invalidCiphertext` for a value that
    ///   does not decrypt (wrong length or padding).
    package func decrypt(_ value: Data, parameters: Data) throws -> SecureBytes {
        guard parameters.count == 16 else {
            throw CryptoError(.invalidParameter, "a Secret Service IV is 16 bytes, not \(parameters.count)")
        }
        return try crypt(SecureBytes(value), iv: parameters, encrypting: false)
    }

    private func crypt(_ input: SecureBytes, iv: Data, encrypting: Bool) throws -> SecureBytes {
        guard let context = EVP_CIPHER_CTX_new() else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_CIPHER_CTX_new failed")
        }
        defer { EVP_CIPHER_CTX_free(context) }
        let started = key.withUnsafeBytes { keyBytes in
            iv.withUnsafeBytes { ivBytes in
                EVP_CipherInit_ex2(
                    context, OpenSSLAlgorithms.aes128CBC, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    ivBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), encrypting ? 1 : 0, nil)
            }
        }
        guard started == 1 else { throw CryptoError.drainingQueue(.internalFailure, "AES-128-CBC setup failed") }
        var output = SecureBytes(zeros: input.count + 16)
        var total: Int32 = 0
        let finished = output.withUnsafeMutableBytes { out -> Bool in
            input.withUnsafeBytes { inBytes -> Bool in
                let target = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                var written: Int32 = 0
                guard
                    EVP_CipherUpdate(
                        context, target, &written, inBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        Int32(inBytes.count)) == 1
                else { return false }
                total = written
                guard EVP_CipherFinal_ex(context, target + Int(written), &written) == 1 else { return false }
                total += written
                return true
            }
        }
        guard finished else {
            ERR_clear_error()
            throw CryptoError(.invalidCiphertext, "the secret does not decrypt under the session's key")
        }
        return SecureBytes(output.withUnsafeBytes { Array($0.prefix(Int(total))) })
    }
}

extension Array where Element == UInt8 {
    fileprivate init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self = bytes
    }
}
