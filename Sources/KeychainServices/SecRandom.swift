import Foundation
import SecureCrypto

/// A random number generator (`SecRandomRef`); only the default exists, as on Apple platforms.
public final class SecRandom: Sendable {
    private init() {}
}

/// A reference to a random number generator (`SecRandomRef`).
public typealias SecRandomRef = SecRandom

/// The default generator (`kSecRandomDefault`): `nil`, as Apple defines it. Here it is OpenSSL's `RAND_bytes`,
/// seeded by the kernel.
public let kSecRandomDefault: SecRandomRef? = nil

/// Fills `bytes` with `count` cryptographically secure random bytes (`SecRandomCopyBytes`, Apple's SecRandom.h).
///
/// - Parameters:
///   - rnd: the generator; pass `kSecRandomDefault`.
///   - count: how many bytes to write.
///   - bytes: where to write them (at least `count` bytes).
/// - Returns: `errSecSuccess`, or `errSecParam` for a negative count, or `errSecInternalComponent` when the random
///   source fails (then nothing usable was written).
@discardableResult
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return errSecParam }
    if count == 0 { return errSecSuccess }
    do {
        try SecureRandom.fill(UnsafeMutableRawBufferPointer(start: bytes, count: count))
        return errSecSuccess
    } catch {
        return errSecInternalComponent
    }
}
