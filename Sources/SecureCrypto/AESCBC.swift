internal import COpenSSL
import Foundation

/// AES-256-CBC without padding: whole 16-byte blocks in, the same number out. CTAP 2.1's PIN/UV auth protocols
/// encrypt PINs, PIN hashes and tokens this way (§6.5.6, §6.5.7); what they carry is always whole blocks.
package enum AES256CBC {
    package static let blockByteCount = 16
    package static let keyByteCount = 32

    /// `plaintext` encrypted under `key` and `iv`.
    ///
    /// - Throws: `CryptoError.invalidParameter` for a key that is not 32 bytes, an IV that is not 16, or a plaintext
    ///   that is not whole blocks.
    package static func encrypt(_ plaintext: SecureBytes, key: SecureBytes, iv: [UInt8]) throws -> [UInt8] {
        try crypt(plaintext, key: key, iv: iv, encrypting: true).unprotectedData().map { $0 }
    }

    /// `ciphertext` decrypted under `key` and `iv`.
    ///
    /// - Throws: `CryptoError.invalidParameter` as ``encrypt(_:key:iv:)``.
    package static func decrypt(_ ciphertext: [UInt8], key: SecureBytes, iv: [UInt8]) throws -> SecureBytes {
        try crypt(SecureBytes(ciphertext), key: key, iv: iv, encrypting: false)
    }

    private static func crypt(_ input: SecureBytes, key: SecureBytes, iv: [UInt8], encrypting: Bool) throws
        -> SecureBytes
    {
        guard key.count == keyByteCount, iv.count == blockByteCount, input.count % blockByteCount == 0 else {
            throw CryptoError(
                .invalidParameter,
                "AES-256-CBC takes a 32-byte key, a 16-byte IV and whole blocks, not \(key.count), \(iv.count) and "
                    + "\(input.count) bytes")
        }
        guard let context = EVP_CIPHER_CTX_new() else {
            throw CryptoError.drainingQueue(.internalFailure, "EVP_CIPHER_CTX_new failed")
        }
        defer { EVP_CIPHER_CTX_free(context) }
        let started = key.withUnsafeBytes { keyBytes in
            EVP_CipherInit_ex2(
                context, OpenSSLAlgorithms.aes256CBC, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), iv,
                encrypting ? 1 : 0, nil)
        }
        guard started == 1, EVP_CIPHER_CTX_set_padding(context, 0) == 1 else {
            throw CryptoError.drainingQueue(.internalFailure, "AES-256-CBC setup failed")
        }
        var output = SecureBytes(zeros: input.count)
        let finished = output.withUnsafeMutableBytes { out -> Bool in
            input.withUnsafeBytes { inBytes -> Bool in
                guard !inBytes.isEmpty else { return true }
                let target = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                var written: Int32 = 0
                guard
                    EVP_CipherUpdate(
                        context, target, &written, inBytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        Int32(inBytes.count)) == 1, Int(written) == inBytes.count
                else { return false }
                var tail: Int32 = 0
                return EVP_CipherFinal_ex(context, target + Int(written), &tail) == 1 && tail == 0
            }
        }
        guard finished else { throw CryptoError.drainingQueue(.internalFailure, "AES-256-CBC failed") }
        return output
    }
}
