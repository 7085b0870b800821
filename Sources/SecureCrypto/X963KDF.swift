import Foundation

/// The ANSI X9.63 key derivation function with SHA-256 (SEC 1 §3.6.1), as Apple's ECIES and
/// `ecdhKeyExchange…X963SHA256` use it: `K = SHA256(Z || counter_be32 || sharedInfo)` for counter = 1, 2, …,
/// concatenated and truncated to the requested size.
package enum X963KDFSHA256 {
    /// The largest output the 32-bit counter allows.
    package static let maximumOutputByteCount = Int(UInt32.max - 1) * SHA256.byteCount

    /// `outputByteCount` bytes derived from the shared secret `z` and `sharedInfo`.
    ///
    /// - Throws: `CryptoError.invalidParameter` when `outputByteCount` is 0 or too large.
    package static func deriveKey(
        sharedSecret z: SecureBytes, sharedInfo: Data = Data(), outputByteCount: Int
    ) throws -> SecureBytes {
        guard outputByteCount > 0, outputByteCount <= maximumOutputByteCount else {
            throw CryptoError(.invalidParameter, "X9.63 KDF output must be at least 1 byte, not \(outputByteCount)")
        }
        return SecureBytes(count: outputByteCount) { output in
            var counter: UInt32 = 1
            var offset = 0
            while offset < outputByteCount {
                var hasher = SHA256()
                hasher.update(z)
                withUnsafeBytes(of: counter.bigEndian) { hasher.update($0) }
                hasher.update(sharedInfo)
                var block = hasher.finalize()
                let take = Swift.min(block.count, outputByteCount - offset)
                block.withUnsafeBytes {
                    UnsafeMutableRawBufferPointer(rebasing: output[offset..<(offset + take)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<take]))
                }
                block.resetBytes(in: 0..<block.count)
                offset += take
                counter += 1
            }
        }
    }
}
