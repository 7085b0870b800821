internal import COpenSSL
import Foundation

/// SHA-256 through OpenSSL's EVP digest interface.
package struct SHA256: Sendable {
    /// The digest size in bytes.
    package static let byteCount = 32

    // Safe to send: the context is only used through `mutating` methods, so a value has one owner at a time;
    // copying a `SHA256` copies the context (see `ensureUnique`).
    final class Context: @unchecked Sendable {
        let pointer: OpaquePointer
        init(pointer: OpaquePointer) { self.pointer = pointer }
        deinit { EVP_MD_CTX_free(pointer) }
    }

    private var context: Context

    /// A hasher ready for `update`.
    package init() {
        guard let ctx = EVP_MD_CTX_new(), EVP_DigestInit_ex2(ctx, OpenSSLAlgorithms.sha256, nil) == 1 else {
            fatalError("SHA256: OpenSSL could not start a digest")
        }
        context = Context(pointer: ctx)
    }

    private mutating func ensureUnique() {
        if !isKnownUniquelyReferenced(&context) {
            guard let copy = EVP_MD_CTX_new(), EVP_MD_CTX_copy_ex(copy, context.pointer) == 1 else {
                fatalError("SHA256: OpenSSL could not copy a digest context")
            }
            context = Context(pointer: copy)
        }
    }

    /// Adds `bytes` to the hash.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        ensureUnique()
        guard EVP_DigestUpdate(context.pointer, bytes.baseAddress, bytes.count) == 1 else {
            fatalError("SHA256: EVP_DigestUpdate failed")
        }
    }

    /// Adds `bytes` to the hash.
    package mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Adds a secret's bytes to the hash.
    package mutating func update(_ bytes: SecureBytes) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest of everything added so far.
    package mutating func finalize() -> Data {
        ensureUnique()
        var digest = Data(count: SHA256.byteCount)
        var length: UInt32 = 0
        let ok = digest.withUnsafeMutableBytes {
            EVP_DigestFinal_ex(context.pointer, $0.bindMemory(to: UInt8.self).baseAddress, &length)
        }
        precondition(ok == 1 && length == 32, "SHA256: EVP_DigestFinal_ex failed")
        return digest
    }

    /// The SHA-256 digest of `bytes` in one call.
    package static func hash(_ bytes: UnsafeRawBufferPointer) -> Data {
        DigestAlgorithm.sha256.hash(bytes)
    }

    /// The SHA-256 digest of `bytes` in one call.
    package static func hash(_ bytes: some ContiguousBytes) -> Data {
        bytes.withUnsafeBytes { hash($0) }
    }
}

/// SHA-1, only for the identifiers Apple derives with it (`kSecAttrApplicationLabel` = SHA-1 of the public key).
package enum InsecureSHA1 {
    package static func hash(_ bytes: some ContiguousBytes) -> Data {
        DigestAlgorithm.sha1.hash(bytes)
    }
}
