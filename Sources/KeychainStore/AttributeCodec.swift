import Foundation

/// A compact, canonical binary encoding of an attribute dictionary.
///
/// Keys are sorted, so equal dictionaries encode to equal bytes. Layout: a version byte, the entry count, then per
/// entry the key, a type tag and the value, every variable-length field preceded by its 32-bit big-endian length.
package enum AttributeCodec {
    private static let version: UInt8 = 1

    private enum Tag: UInt8 {
        case string = 1, data = 2, integer = 3, bool = 4, date = 5, accessControl = 6
        /// An access-control list with a bound enrolled-set hash; lists without one keep tag 6, so older rows and
        /// unbound lists encode exactly as before.
        case boundAccessControl = 7
    }

    /// Encodes `attributes` canonically.
    package static func encode(_ attributes: [String: KeychainValue]) -> Data {
        var out = ByteWriter()
        out.byte(version)
        out.uint32(UInt32(attributes.count))
        for key in attributes.keys.sorted() {
            out.bytes(Data(key.utf8))
            encode(attributes[key]!, into: &out)
        }
        return out.data
    }

    /// Encodes one value with its type tag (also used for blind-index input).
    package static func encode(_ value: KeychainValue, into out: inout ByteWriter) {
        switch value {
        case .string(let s):
            out.byte(Tag.string.rawValue)
            out.bytes(Data(s.utf8))
        case .data(let d):
            out.byte(Tag.data.rawValue)
            out.bytes(d)
        case .integer(let i):
            out.byte(Tag.integer.rawValue)
            out.uint64(UInt64(bitPattern: i))
        case .bool(let b):
            out.byte(Tag.bool.rawValue)
            out.byte(b ? 1 : 0)
        case .date(let date):
            out.byte(Tag.date.rawValue)
            out.uint64(date.timeIntervalSinceReferenceDate.bitPattern)
        case .accessControl(let policy):
            out.byte((policy.boundStateHash == nil ? Tag.accessControl : Tag.boundAccessControl).rawValue)
            out.bytes(Data(policy.protection.utf8))
            out.uint64(policy.flags)
            if let hash = policy.boundStateHash { out.bytes(hash) }
        }
    }

    /// Decodes what `encode` produced. - Throws: `StoreError.corrupt` for anything malformed.
    package static func decode(_ data: some DataProtocol) throws -> [String: KeychainValue] {
        if let contiguous = data as? Data {
            return try contiguous.withUnsafeBytes { try decode($0) }
        }
        return try Data(data).withUnsafeBytes { try decode($0) }
    }

    /// Decodes what `encode` produced, straight from memory (for example a decrypted `SecureBytes`).
    package static func decode(_ buffer: UnsafeRawBufferPointer) throws -> [String: KeychainValue] {
        var reader = BufferReader(buffer)
        guard try reader.byte() == version else { throw StoreError(.corrupt, "unknown attribute encoding") }
        let count = try reader.uint32()
        var result: [String: KeychainValue] = [:]
        result.reserveCapacity(Int(min(count, 1024)))
        for _ in 0..<count {
            let key = try reader.string()
            result[key] = try decodeValue(&reader)
        }
        guard reader.isAtEnd else { throw StoreError(.corrupt, "trailing bytes after attributes") }
        return result
    }

    private static func decodeValue(_ reader: inout BufferReader) throws -> KeychainValue {
        guard let tag = Tag(rawValue: try reader.byte()) else { throw StoreError(.corrupt, "unknown value tag") }
        switch tag {
        case .string: return .string(try reader.string())
        case .data: return .data(Data(try reader.bytes()))
        case .integer: return .integer(Int64(bitPattern: try reader.uint64()))
        case .bool: return .bool(try reader.byte() != 0)
        case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.uint64())))
        case .accessControl:
            let protection = try reader.string()
            return .accessControl(AccessControlPolicy(protection: protection, flags: try reader.uint64()))
        case .boundAccessControl:
            let protection = try reader.string()
            let flags = try reader.uint64()
            return .accessControl(
                AccessControlPolicy(protection: protection, flags: flags, boundStateHash: Data(try reader.bytes())))
        }
    }
}

/// Reads the encoding from memory; every read checks bounds.
private struct BufferReader {
    private let buffer: UnsafeRawBufferPointer
    private var offset = 0

    init(_ buffer: UnsafeRawBufferPointer) {
        self.buffer = buffer
    }

    var isAtEnd: Bool { offset == buffer.count }

    mutating func byte() throws -> UInt8 {
        guard offset < buffer.count else { throw StoreError(.corrupt, "truncated record") }
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func uint32() throws -> UInt32 {
        guard buffer.count - offset >= 4 else { throw StoreError(.corrupt, "truncated record") }
        var value: UInt32 = 0
        for index in offset..<offset + 4 { value = value << 8 | UInt32(buffer[index]) }
        offset += 4
        return value
    }

    mutating func uint64() throws -> UInt64 {
        guard buffer.count - offset >= 8 else { throw StoreError(.corrupt, "truncated record") }
        var value: UInt64 = 0
        for index in offset..<offset + 8 { value = value << 8 | UInt64(buffer[index]) }
        offset += 8
        return value
    }

    mutating func bytes() throws -> UnsafeRawBufferPointer {
        let count = Int(try uint32())
        guard buffer.count - offset >= count else { throw StoreError(.corrupt, "truncated record") }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])
    }

    mutating func string() throws -> String {
        guard let string = String(validating: try bytes().assumingMemoryBound(to: UInt8.self), as: UTF8.self) else {
            throw StoreError(.corrupt, "not UTF-8")
        }
        return string
    }
}

/// Appends big-endian integers and length-prefixed byte strings.
package struct ByteWriter {
    private var buffer: [UInt8] = []

    package init() {
        buffer.reserveCapacity(256)
    }

    /// What was written.
    package var data: Data { Data(buffer) }

    package mutating func byte(_ value: UInt8) { buffer.append(value) }

    package mutating func uint32(_ value: UInt32) {
        for shift in stride(from: 24, through: 0, by: -8) { buffer.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    package mutating func uint64(_ value: UInt64) {
        for shift in stride(from: 56, through: 0, by: -8) { buffer.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    /// A 32-bit length, then the bytes.
    package mutating func bytes(_ value: some DataProtocol) {
        uint32(UInt32(value.count))
        buffer.append(contentsOf: value)
    }

    /// A string as length-prefixed UTF-8.
    package mutating func string(_ value: String) {
        let utf8 = value.utf8
        uint32(UInt32(utf8.count))
        buffer.append(contentsOf: utf8)
    }
}

/// Reads what `ByteWriter` wrote; every read checks bounds.
package struct ByteReader {
    private let data: Data
    private var offset: Int

    package init(_ data: Data) {
        self.data = data
        self.offset = data.startIndex
    }

    package var isAtEnd: Bool { offset == data.endIndex }

    package mutating func byte() throws -> UInt8 {
        guard offset < data.endIndex else { throw StoreError(.corrupt, "truncated record") }
        defer { offset += 1 }
        return data[offset]
    }

    package mutating func uint32() throws -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 { value = value << 8 | UInt32(try byte()) }
        return value
    }

    package mutating func uint64() throws -> UInt64 {
        var value: UInt64 = 0
        for _ in 0..<8 { value = value << 8 | UInt64(try byte()) }
        return value
    }

    package mutating func bytes() throws -> Data {
        let count = Int(try uint32())
        guard data.endIndex - offset >= count else { throw StoreError(.corrupt, "truncated record") }
        defer { offset += count }
        return data.subdata(in: offset..<offset + count)
    }

    package mutating func string() throws -> String {
        guard let s = String(data: try bytes(), encoding: .utf8) else { throw StoreError(.corrupt, "not UTF-8") }
        return s
    }
}
