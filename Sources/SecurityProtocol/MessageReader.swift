import Foundation

/// Reads bytes in the protocol's layout (see ``ProtocolCodable``) straight from memory, checking every read.
///
/// A reader exists only inside ``read(_:limits:_:)``. It is noncopyable and nonescapable, and the views of the frame
/// it hands out (``bytes()``, ``remainingBytes()``) are `RawSpan`s that depend on the frame it reads, so the compiler
/// proves that none outlives the call (the frame stays valid during it: the caller's promise). Each value is read inside a *scope* limited to its own length; a scope must be consumed
/// exactly. Declared lengths and counts are checked against the bytes actually present before anything is
/// allocated, so decoding allocates at most a small multiple of the frame.
package struct MessageReader: ~Copyable, ~Escapable {
    private let buffer: RawSpan
    private let limits: MessageLimits
    /// Where the next read starts, from the start of the frame.
    package private(set) var offset = 0
    /// The end of the current scope.
    private var end: Int
    /// How many scopes enclose the current one.
    private var depth = 0
    /// The tag of the last field read in the current scope (-1: none yet).
    private var lastTag = -1
    /// Whether the current scope is a record (fields were asked for), for naming what is left over in it.
    private var readsFields = false

    @_lifetime(copy buffer)
    private init(_ buffer: RawSpan, limits: MessageLimits) {
        self.buffer = buffer
        self.limits = limits
        self.end = buffer.byteCount
    }

    /// Runs `body` with a reader over `buffer`, then requires every byte to have been read.
    ///
    /// - Throws: ``MessageDecodingError``: `frameTooLarge` beyond `limits`, `trailingBytes` or `unknownTag` for
    ///   what `body` left, and whatever `body` throws.
    package static func read<Result>(
        _ buffer: UnsafeRawBufferPointer, limits: MessageLimits = .default,
        _ body: (inout MessageReader) throws -> Result
    ) throws -> Result {
        guard buffer.count <= limits.maximumFrameByteCount else {
            throw MessageDecodingError(
                .frameTooLarge, at: 0, "\(buffer.count) bytes, more than \(limits.maximumFrameByteCount)")
        }
        var reader = MessageReader(RawSpan(_unsafeBytes: buffer), limits: limits)
        let result = try body(&reader)
        try reader.finishScope()
        return result
    }

    /// Whether the current scope has been read to its end.
    package var isAtEnd: Bool { offset == end }

    /// How many bytes of the current scope are left.
    package var remainingCount: Int { end - offset }

    // MARK: Primitives

    /// One byte.
    @inline(__always)
    package mutating func byte() throws -> UInt8 {
        try require(1)
        defer { offset += 1 }
        return buffer.unsafeLoad(fromUncheckedByteOffset: offset, as: UInt8.self)
    }

    /// Four bytes, big-endian.
    @inline(__always)
    package mutating func uint32() throws -> UInt32 {
        try require(4)
        defer { offset += 4 }
        return UInt32(bigEndian: buffer.unsafeLoadUnaligned(fromUncheckedByteOffset: offset, as: UInt32.self))
    }

    /// Eight bytes, big-endian.
    package mutating func uint64() throws -> UInt64 {
        try require(8)
        defer { offset += 8 }
        return UInt64(bigEndian: buffer.unsafeLoadUnaligned(fromUncheckedByteOffset: offset, as: UInt64.self))
    }

    /// `count` bytes (checked against the scope; `count` is a length already read, never negative).
    @inline(__always)
    @_lifetime(copy self)
    private mutating func rawBytes(count: Int) throws -> RawSpan {
        try require(count)
        defer { offset += count }
        return buffer.extracting(unchecked: offset..<offset + count)
    }

    /// A 32-bit length, then that many bytes: a view of the frame (copy what must outlive the reader).
    @_lifetime(copy self)
    package mutating func bytes() throws -> RawSpan {
        try rawBytes(count: try length())
    }

    /// A 32-bit length, then that many bytes, copied into ordinary memory (not for secrets).
    package mutating func data() throws -> Data {
        try bytes().withUnsafeBytes { Data($0) }
    }

    /// A 32-bit length, then that many bytes of UTF-8.
    package mutating func string() throws -> String {
        let start = offset
        guard let string = Self.string(utf8: try bytes()) else {
            throw MessageDecodingError(.invalidValue, at: start, "a string is not UTF-8")
        }
        return string
    }

    /// `bytes` as a string, nil when they are not UTF-8. ASCII, what protocol strings nearly always are, is taken
    /// as it is; anything else is validated by the standard library (whose validating initializer is generic over
    /// the encoding and looks up type metadata on every call: a third of a short message's decoding).
    package static func string(utf8 bytes: RawSpan) -> String? {
        bytes.withUnsafeBytes { bytes in
            var ascii = true
            var index = 0
            let count = bytes.count
            while index + 8 <= count {
                if bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 {
                    ascii = false
                    break
                }
                index += 8
            }
            while ascii && index < count {
                if bytes[index] & 0x80 != 0 { ascii = false }
                index += 1
            }
            return ascii ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
        }
    }

    /// The rest of the current scope (a view of the frame, as ``bytes()``): a scalar's whole value.
    @_lifetime(copy self)
    package mutating func remainingBytes() -> RawSpan {
        defer { offset = end }
        return buffer.extracting(unchecked: offset..<end)
    }

    /// The rest of the current scope, which must be exactly `count` bytes (a fixed-size scalar).
    ///
    /// - Throws: `invalidValue` naming `what` when the size differs.
    @_lifetime(copy self)
    package mutating func remainingBytes(exactly count: Int, for what: String) throws -> RawSpan {
        guard remainingCount == count else {
            throw MessageDecodingError(.invalidValue, at: offset, "\(what) is \(count) bytes, not \(remainingCount)")
        }
        return remainingBytes()
    }

    /// The rest of the current scope, which must be exactly one byte (a flag or an enum's raw value).
    ///
    /// - Throws: `invalidValue` naming `what` when the size differs.
    package mutating func remainingByte(for what: String) throws -> UInt8 {
        try remainingBytes(exactly: 1, for: what).unsafeLoad(as: UInt8.self)
    }

    /// The rest of the current scope, which must be exactly `count` bytes, as a big-endian integer.
    ///
    /// - Throws: `invalidValue` naming `what` when the size differs.
    package mutating func remainingInteger<Value: FixedWidthInteger & BitwiseCopyable>(
        _ type: Value.Type = Value.self, for what: String
    ) throws -> Value {
        Value(
            bigEndian: try remainingBytes(exactly: MemoryLayout<Value>.size, for: what).unsafeLoadUnaligned(
                as: Value.self))
    }

    // MARK: Structure

    /// A 32-bit length, then a value read by `body` within exactly that many bytes.
    @inline(__always)
    package mutating func lengthPrefixed<Value>(_ body: (inout MessageReader) throws -> Value) throws -> Value {
        let scope = try enterScope(length: try length())
        let value = try body(&self)
        try leave(scope)
        return value
    }

    /// A 32-bit element count for a collection whose elements take at least `minimumElementSize` bytes each.
    ///
    /// - Throws: `tooManyElements` beyond the limits; `truncated` when the scope cannot hold that many.
    package mutating func elementCount(minimumElementSize: Int) throws -> Int {
        let start = offset
        let count = Int(try uint32())
        guard count <= limits.maximumElementCount else {
            throw MessageDecodingError(
                .tooManyElements, at: start, "\(count) elements, more than \(limits.maximumElementCount)")
        }
        guard count <= remainingCount / minimumElementSize else {
            throw MessageDecodingError(
                .truncated, at: start, "\(count) elements cannot fit in the \(remainingCount) bytes left")
        }
        return count
    }

    /// The required field `tag` of the record being read. Fields must be asked for in ascending tag order.
    ///
    /// - Throws: `missingField` when it is absent; `unknownTag` or `nonCanonical` for a field in its place that
    ///   the record does not define or that is out of order; whatever decoding the value throws.
    @inline(__always)
    package mutating func field<Value: ProtocolCodable>(
        _ tag: UInt8, as type: Value.Type = Value.self
    ) throws -> Value {
        guard let value = try optionalField(tag, as: type) else {
            throw MessageDecodingError(.missingField, at: offset, "field \(tag) is missing")
        }
        return value
    }

    /// The optional field `tag` of the record being read (nil when absent). Fields must be asked for in ascending
    /// tag order.
    ///
    /// - Throws: as ``field(_:as:)``, except that an absent field is nil.
    @inline(__always)
    package mutating func optionalField<Value: ProtocolCodable>(
        _ tag: UInt8, as type: Value.Type = Value.self
    ) throws -> Value? {
        readsFields = true
        guard offset < end else { return nil }
        let found = buffer.unsafeLoad(fromUncheckedByteOffset: offset, as: UInt8.self)
        if found > tag { return nil }
        if found < tag { throw unexpectedField(found) }
        offset += 1
        let value = try lengthPrefixed { try Value(from: &$0) }
        lastTag = Int(tag)
        return value
    }

    /// An enum case: `body` receives the case's tag and a reader limited to its payload record, and returns the
    /// value, or nil for a tag the enum does not define.
    ///
    /// - Throws: `unknownTag` when `body` returns nil; `nonCanonical` when more than one case follows.
    @inline(__always)
    package mutating func variant<Value>(_ body: (UInt8, inout MessageReader) throws -> Value?) throws -> Value {
        readsFields = true
        let start = offset
        let tag = try byte()
        let scope = try enterScope(length: try length())
        guard let value = try body(tag, &self) else {
            throw MessageDecodingError(.unknownTag, at: start, "unknown case \(tag)")
        }
        try leave(scope)
        lastTag = Int(tag)
        guard isAtEnd else { throw MessageDecodingError(.nonCanonical, at: offset, "a variant holds one case") }
        return value
    }

    // MARK: Scopes

    private struct Scope {
        var end: Int
        var lastTag: Int
        var readsFields: Bool
    }

    @inline(__always)
    private mutating func length() throws -> Int {
        let length = Int(try uint32())
        guard length <= remainingCount else { throw lengthBeyondScope(length) }
        return length
    }

    @inline(never)
    private func lengthBeyondScope(_ length: Int) -> MessageDecodingError {
        MessageDecodingError(.truncated, at: offset - 4, "a length of \(length) with \(remainingCount) bytes left")
    }

    @inline(__always)
    private mutating func enterScope(length: Int) throws -> Scope {
        guard depth < limits.maximumDepth else { throw tooDeep() }
        let outer = Scope(end: end, lastTag: lastTag, readsFields: readsFields)
        depth += 1
        end = offset + length
        lastTag = -1
        readsFields = false
        return outer
    }

    @inline(never)
    private func tooDeep() -> MessageDecodingError {
        MessageDecodingError(.tooDeep, at: offset, "values nested more than \(limits.maximumDepth) deep")
    }

    @inline(__always)
    private mutating func leave(_ outer: Scope) throws {
        try finishScope()
        depth -= 1
        end = outer.end
        lastTag = outer.lastTag
        readsFields = outer.readsFields
    }

    /// Requires the current scope to be read to its end, naming what is left when it is not.
    @inline(__always)
    private func finishScope() throws {
        guard offset == end else { throw leftOver() }
    }

    @inline(never)
    private func leftOver() -> MessageDecodingError {
        if readsFields { return unexpectedField(buffer.unsafeLoad(fromUncheckedByteOffset: offset, as: UInt8.self)) }
        return MessageDecodingError(.trailingBytes, at: offset, "\(end - offset) bytes after the value")
    }

    private func unexpectedField(_ tag: UInt8) -> MessageDecodingError {
        Int(tag) <= lastTag
            ? MessageDecodingError(.nonCanonical, at: offset, "field \(tag) repeated or out of order")
            : MessageDecodingError(.unknownTag, at: offset, "unknown field \(tag)")
    }

    @inline(__always)
    private func require(_ count: Int) throws {
        guard count <= end - offset else { throw shortOf(count) }
    }

    @inline(never)
    private func shortOf(_ count: Int) -> MessageDecodingError {
        MessageDecodingError(.truncated, at: offset, "\(count) bytes needed, \(end - offset) left")
    }
}
