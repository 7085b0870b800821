internal import COpenSSL
import Foundation

/// Cryptographically secure random bytes from OpenSSL's DRBG (seeded by the kernel).
package enum SecureRandom {
    /// Fills `buffer` with random bytes.
    package static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        var offset = 0
        while offset < buffer.count {
            let chunk = Swift.min(buffer.count - offset, Int(Int32.max))
            guard RAND_bytes(base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(chunk)) == 1 else {
                throw CryptoError.drainingQueue(.randomFailure, "RAND_bytes failed")
            }
            offset += chunk
        }
    }

    /// `count` random bytes that are not secret (nonces, salts, identifiers).
    package static func bytes(_ count: Int) throws -> Data {
        var data = Data(count: count)
        try data.withUnsafeMutableBytes { try fill($0) }
        return data
    }
}
