import Foundation

/// The ANSI X9.63 key derivation function (SEC 1 §3.6.1), as Apple's ECIES and `ecdhKeyExchange…X963SHA…` use it:
/// `K = H(Z || counter_be32 || sharedInfo)` for counter = 1, 2, …, concatenated and truncated to the requested size,
/// with H one of SHA-1, SHA-224, SHA-256, SHA-384 and SHA-512.
package enum X963KDF {
    /// The largest output derived: 64 KiB, far more than any key needs. (The 32-bit counter would allow up to
    /// 256 GiB, which a request to localauthd must not be able to make it allocate.)
    package static let maximumOutputByteCount = 65_536

    /// `outputByteCount` bytes derived from the shared secret `z` and `sharedInfo` with `digest`.
    ///
    /// - Throws: `CryptoError.invalidParameter` when `outputByteCount` is 0 or too large.
    package static func deriveKey(
        _ digest: DigestAlgorithm = .sha256, sharedSecret z: SecureBytes, sharedInfo: Data = Data(),
        outputByteCount: Int
    ) throws -> SecureBytes {
        guard outputByteCount > 0, outputByteCount <= maximumOutputByteCount else {
            throw CryptoError(
                .invalidParameter,
                "X9.63 KDF output must be 1 to \(maximumOutputByteCount) bytes, not \(outputByteCount)")
        }
        // Each block hashes Z || counter || sharedInfo: the input and the block hold the secret, so both live in
        // zeroizing memory.
        var input = SecureBytes(zeros: z.count + 4 + sharedInfo.count)
        input.withUnsafeMutableBytes { buffer in
            z.withUnsafeBytes { buffer.copyMemory(from: $0) }
            sharedInfo.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: buffer[(z.count + 4)...]).copyMemory(from: $0)
            }
        }
        var block = SecureBytes(zeros: digest.byteCount)
        return SecureBytes(count: outputByteCount) { output in
            var counter: UInt32 = 1
            var offset = 0
            while offset < outputByteCount {
                input.withUnsafeMutableBytes { buffer in
                    buffer.storeBytes(of: counter.bigEndian, toByteOffset: z.count, as: UInt32.self)
                }
                block.withUnsafeMutableBytes { block in
                    input.withUnsafeBytes { digest.hash($0, into: block) }
                    let take = Swift.min(block.count, outputByteCount - offset)
                    UnsafeMutableRawBufferPointer(rebasing: output[offset..<(offset + take)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: block[0..<take]))
                    offset += take
                }
                counter += 1
            }
        }
    }
}
