internal import COpenSSL
import Foundation

/// The hash functions Apple's `SecKeyAlgorithm`s name (`…SHA1`, `…SHA224`, `…SHA256`, `…SHA384`, `…SHA512`), through
/// OpenSSL's EVP digests: what an ECDSA message variant hashes with, and what an X9.63 KDF is built on.
package enum DigestAlgorithm: Sendable, Hashable, CaseIterable {
    case sha1, sha224, sha256, sha384, sha512

    /// The digest's size in bytes.
    package var byteCount: Int {
        switch self {
        case .sha1: 20
        case .sha224: 28
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// OpenSSL's implementation, fetched once.
    var implementation: OpaquePointer {
        switch self {
        case .sha1: OpenSSLAlgorithms.sha1
        case .sha224: OpenSSLAlgorithms.sha224
        case .sha256: OpenSSLAlgorithms.sha256
        case .sha384: OpenSSLAlgorithms.sha384
        case .sha512: OpenSSLAlgorithms.sha512
        }
    }

    /// The digest of `bytes`.
    package func hash(_ bytes: some ContiguousBytes) -> Data {
        bytes.withUnsafeBytes { hash($0) }
    }

    /// The digest of `bytes`.
    package func hash(_ bytes: UnsafeRawBufferPointer) -> Data {
        var digest = Data(count: byteCount)
        digest.withUnsafeMutableBytes { hash(bytes, into: $0) }
        return digest
    }

    /// Writes the digest of `bytes` into the first ``byteCount`` bytes of `output` (which must hold them): for a
    /// digest that is itself secret, such as a KDF's block, so it lands only where the caller wipes it.
    package func hash(_ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= byteCount, "DigestAlgorithm: the output holds fewer bytes than the digest")
        var length: UInt32 = 0
        let ok = EVP_Digest(
            bytes.baseAddress, bytes.count, output.bindMemory(to: UInt8.self).baseAddress, &length, implementation,
            nil)
        precondition(ok == 1 && Int(length) == byteCount, "DigestAlgorithm: EVP_Digest failed")
    }
}
