internal import COpenSSL
import Foundation

/// Bytes that hold a secret: wiped with `OPENSSL_cleanse` when the last copy goes away, compared in constant time,
/// and reachable only through scoped access.
///
/// Copy-on-write: copies share one buffer until one of them is mutated.
package struct SecureBytes: Sendable {
    // Safe to share: the buffer is written only through `withUnsafeMutableBytes`, which first makes this storage
    // uniquely referenced (copying if needed), so no two threads ever see a buffer that one of them is writing.
    final class Storage: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
        let count: Int

        init(count: Int) {
            self.count = count
            self.pointer = allocateBytes(count)
            self.pointer.initializeMemory(as: UInt8.self, repeating: 0, count: Swift.max(count, 1))
        }

        deinit {
            OPENSSL_cleanse(pointer, count)
            deallocateBytes(pointer)
        }
    }

    var storage: Storage

    /// `count` zero bytes.
    package init(zeros count: Int) {
        precondition(count >= 0, "SecureBytes: negative count")
        storage = Storage(count: count)
    }

    /// `count` bytes from the system's cryptographically secure generator.
    package init(randomCount count: Int) throws {
        self.init(zeros: count)
        try withUnsafeMutableBytes { try SecureRandom.fill($0) }
    }

    /// A copy of `bytes`. The source is not wiped; prefer producing secrets directly into `SecureBytes`.
    package init<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        let array = Array(bytes)
        self.init(zeros: array.count)
        array.withUnsafeBytes { source in
            withUnsafeMutableBytes { $0.copyMemory(from: source) }
        }
    }

    /// Takes ownership of a buffer filled by `body`, which receives `count` zeroed bytes to write.
    package init(count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        self.init(zeros: count)
        try withUnsafeMutableBytes(body)
    }

    package var count: Int { storage.count }
    package var isEmpty: Bool { storage.count == 0 }

    /// Calls `body` with the bytes; the pointer must not escape.
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: storage.pointer, count: storage.count))
    }

    /// Calls `body` with writable bytes, copying first if this buffer is shared.
    package mutating func withUnsafeMutableBytes<Result>(
        _ body: (UnsafeMutableRawBufferPointer) throws -> Result
    ) rethrows -> Result {
        if !isKnownUniquelyReferenced(&storage) {
            let copy = Storage(count: storage.count)
            copy.pointer.copyMemory(from: storage.pointer, byteCount: storage.count)
            storage = copy
        }
        return try body(UnsafeMutableRawBufferPointer(start: storage.pointer, count: storage.count))
    }

    /// These bytes followed by `other`'s, in a new secure buffer.
    package func appending(_ other: SecureBytes) -> SecureBytes {
        SecureBytes(count: count + other.count) { destination in
            withUnsafeBytes { destination.copyMemory(from: $0) }
            other.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: destination[count...]).copyMemory(from: $0)
            }
        }
    }

    /// The bytes in `range`, in a new secure buffer.
    package func slice(_ range: Range<Int>) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "SecureBytes: slice out of bounds")
        return SecureBytes(count: range.count) { destination in
            withUnsafeBytes { destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[range])) }
        }
    }

    /// An ordinary, unprotected copy. Use only where the bytes leave the secure domain on purpose (returning an
    /// item's value to its owner); the copy is not wiped.
    package func unprotectedData() -> Data {
        withUnsafeBytes { Data($0) }
    }
}

extension SecureBytes: Equatable {
    /// Constant-time comparison of the contents (the lengths are not secret and are compared first).
    package static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return lhs.withUnsafeBytes { l in
            rhs.withUnsafeBytes { r in CRYPTO_memcmp(l.baseAddress, r.baseAddress, l.count) == 0 }
        }
    }
}

extension SecureBytes: Hashable {
    /// Hashes the length only: a hash of the contents would be a fingerprint of the secret kept in ordinary memory.
    package func hash(into hasher: inout Hasher) {
        hasher.combine(count)
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible {
    /// Never shows the contents.
    package var description: String { "SecureBytes(\(count) bytes)" }
    package var debugDescription: String { description }
}

extension String {
    /// Whether `bytes` are this string's UTF-8 form, compared at once (not in constant time: for names that are no
    /// secret, such as a row's clear columns on the keychain's hot path, where a generic comparison of the two
    /// sequences cost about 250 instructions).
    package func utf8Equals(_ bytes: RawSpan) -> Bool {
        var string = self
        return string.withUTF8 { utf8 in
            bytes.withUnsafeBytes { bytes in
                guard utf8.count == bytes.count else { return false }
                return utf8.isEmpty || memcmp(utf8.baseAddress!, bytes.baseAddress!, utf8.count) == 0
            }
        }
    }
}

/// Constant-time comparison of two byte buffers of any kind (MACs, tags).
package func constantTimeEquals(_ lhs: some ContiguousBytes, _ rhs: some ContiguousBytes) -> Bool {
    lhs.withUnsafeBytes { l in
        rhs.withUnsafeBytes { r in
            l.count == r.count && (l.count == 0 || CRYPTO_memcmp(l.baseAddress, r.baseAddress, l.count) == 0)
        }
    }
}

/// Overwrites `buffer` with zeros in a way the optimizer may not remove (`OPENSSL_cleanse`): for memory that held a
/// secret outside `SecureBytes`, such as the old storage of a growing message buffer.
package func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
    OPENSSL_cleanse(base, buffer.count)
}

/// `count` bytes (at least one) from `malloc`, for a byte buffer; given back with ``deallocateBytes(_:)``.
///
/// Not `UnsafeMutableRawPointer.allocate`: Swift sends every allocation of its own through `posix_memalign` (any
/// alignment up to 16 included), which skips glibc's per-thread cache and takes the arena's lock. Four such
/// allocations were among a keychain lookup's costliest steps in a threaded process. `malloc` aligns to 16 bytes.
package func allocateBytes(_ count: Int) -> UnsafeMutableRawPointer {
    guard let pointer = malloc(Swift.max(count, 1)) else { fatalError("out of memory allocating \(count) bytes") }
    return pointer
}

/// Gives back a buffer from ``allocateBytes(_:)``.
package func deallocateBytes(_ pointer: UnsafeMutableRawPointer) {
    free(pointer)
}
