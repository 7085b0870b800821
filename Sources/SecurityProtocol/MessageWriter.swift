import Foundation
import SecureCrypto

/// Builds bytes in the protocol's layout (see ``ProtocolCodable``): fields, variants and length-prefixed values on
/// top of big-endian integers and raw bytes.
///
/// The buffer is wiped when the writer goes away and every time it grows, because what it holds is often a secret;
/// the writer is noncopyable so that buffer has exactly one owner. The primitives (``byte(_:)``, ``uint32(_:)``,
/// ``bytes(_:)``, ``string(_:)``) also serve the store's attribute codec and the engine's index and
/// associated-data inputs.
package struct MessageWriter: ~Copyable {
    /// The version byte that opens a frame.
    package static let formatVersion: UInt8 = 1

    private var storage: UnsafeMutableRawPointer
    private var capacity: Int
    /// How many bytes were written.
    package private(set) var count = 0
    /// The tag of the last field written in the record being written (-1: none yet); tags must ascend.
    private var lastTag = -1

    /// An empty writer with room for `capacity` bytes before it first grows.
    package init(capacity: Int = 256) {
        self.capacity = Swift.max(capacity, 16)
        storage = allocateBytes(self.capacity)
    }

    deinit {
        secureZero(UnsafeMutableRawBufferPointer(start: storage, count: count))
        deallocateBytes(storage)
    }

    /// The bytes written, in a new zeroizing buffer.
    package var secureBytes: SecureBytes {
        SecureBytes(count: count) { $0.copyMemory(from: UnsafeRawBufferPointer(start: storage, count: count)) }
    }

    /// The bytes written, as ordinary `Data`: only for bytes that are not secret (an index or associated data).
    package var data: Data { Data(bytes: storage, count: count) }

    /// What `body` makes of the bytes written, read where they lie (valid only inside `body`).
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: storage, count: count))
    }

    /// Replaces the byte written at `offset` (which must be below ``count``).
    package mutating func replaceByte(at offset: Int, with value: UInt8) {
        precondition(offset >= 0 && offset < count, "MessageWriter: no byte written at \(offset)")
        storage.storeBytes(of: value, toByteOffset: offset, as: UInt8.self)
    }

    // MARK: Primitives

    /// One byte.
    @inline(__always)
    package mutating func byte(_ value: UInt8) {
        reserve(1)
        storage.storeBytes(of: value, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    /// Four bytes, big-endian.
    @inline(__always)
    package mutating func uint32(_ value: UInt32) {
        reserve(4)
        storage.storeBytes(of: value.bigEndian, toByteOffset: count, as: UInt32.self)
        count += 4
    }

    /// Eight bytes, big-endian.
    package mutating func uint64(_ value: UInt64) {
        reserve(8)
        storage.storeBytes(of: value.bigEndian, toByteOffset: count, as: UInt64.self)
        count += 8
    }

    /// The bytes, with no length.
    package mutating func rawBytes(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)
        (storage + count).copyMemory(from: base, byteCount: bytes.count)
        count += bytes.count
    }

    /// The bytes, with no length.
    package mutating func rawBytes(_ bytes: some DataProtocol) {
        for region in bytes.regions {
            region.withUnsafeBytes { rawBytes($0) }
        }
    }

    /// The string's UTF-8 bytes, with no length.
    package mutating func rawString(_ value: String) {
        var value = value
        value.withUTF8 { rawBytes(UnsafeRawBufferPointer($0)) }
    }

    /// A 32-bit length, then the bytes.
    package mutating func bytes(_ value: some DataProtocol) {
        uint32(UInt32(value.count))
        rawBytes(value)
    }

    /// A 32-bit length, then the bytes.
    package mutating func bytes(_ value: RawSpan) {
        uint32(UInt32(value.byteCount))
        value.withUnsafeBytes { rawBytes($0) }
    }

    /// A 32-bit length, then the bytes (`Data` read in place, without going through its regions generically).
    package mutating func bytes(_ value: Data) {
        uint32(UInt32(value.count))
        value.withUnsafeBytes { rawBytes($0) }
    }

    /// A string as a 32-bit length and its UTF-8 bytes.
    package mutating func string(_ value: String) {
        uint32(UInt32(value.utf8.count))
        rawString(value)
    }

    // MARK: Structure

    /// A 32-bit length, then whatever `body` writes (a nested record or value).
    @inline(__always)
    package mutating func lengthPrefixed(_ body: (inout MessageWriter) -> Void) {
        let start = count
        uint32(0)
        let outerTag = lastTag
        lastTag = -1
        body(&self)
        lastTag = outerTag
        let length = count - start - 4
        precondition(length <= Int(UInt32.max), "MessageWriter: a value longer than 4 GiB")
        storage.storeBytes(of: UInt32(length).bigEndian, toByteOffset: start, as: UInt32.self)
    }

    /// A field of the record being written: its tag, its length, its value. Tags must ascend within a record.
    @inline(__always)
    package mutating func field<Value: ProtocolCodable>(_ tag: UInt8, _ value: Value) {
        precondition(Int(tag) > lastTag, "MessageWriter: field \(tag) written after field \(lastTag)")
        byte(tag)
        lengthPrefixed { value.encode(into: &$0) }
        lastTag = Int(tag)
    }

    /// The field when `value` is not nil; nothing otherwise.
    @inline(__always)
    package mutating func optionalField<Value: ProtocolCodable>(_ tag: UInt8, _ value: Value?) {
        if let value { field(tag, value) }
    }

    /// An enum case: the case's tag, then the payload record `payload` writes (nothing for a case without
    /// associated values).
    @inline(__always)
    package mutating func variant(_ tag: UInt8, _ payload: (inout MessageWriter) -> Void = { _ in }) {
        precondition(lastTag < 0, "MessageWriter: a variant holds one case")
        byte(tag)
        lengthPrefixed(payload)
        lastTag = Int(tag)
    }

    @inline(__always)
    private mutating func reserve(_ additional: Int) {
        let needed = count + additional
        if needed > capacity { grow(to: needed) }
    }

    @inline(never)
    private mutating func grow(to needed: Int) {
        var grown = capacity * 2
        while grown < needed { grown *= 2 }
        let larger = allocateBytes(grown)
        larger.copyMemory(from: storage, byteCount: count)
        secureZero(UnsafeMutableRawBufferPointer(start: storage, count: count))
        deallocateBytes(storage)
        storage = larger
        capacity = grown
    }
}
