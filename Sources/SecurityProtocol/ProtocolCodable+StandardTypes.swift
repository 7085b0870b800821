import Foundation
import SecureCrypto

// The scalars and collections messages are built from; layouts in `ProtocolCodable`'s documentation.

extension Bool: ProtocolCodable {
    /// One byte, 1 or 0.
    package func encode(into writer: inout MessageWriter) {
        writer.byte(self ? 1 : 0)
    }

    /// - Throws: `invalidValue` for anything but one byte 0 or 1.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        switch try reader.remainingByte(for: "a Boolean") {
        case 0: self = false
        case 1: self = true
        default: throw MessageDecodingError(.invalidValue, at: start, "a Boolean is 0 or 1")
        }
    }
}

extension UInt64: ProtocolCodable {
    /// Eight bytes, big-endian.
    package func encode(into writer: inout MessageWriter) {
        writer.uint64(self)
    }

    /// - Throws: `invalidValue` unless the value is eight bytes.
    package init(from reader: inout MessageReader) throws {
        self = try reader.remainingInteger(for: "an integer")
    }
}

extension Int64: ProtocolCodable {
    /// Eight bytes, big-endian two's complement.
    package func encode(into writer: inout MessageWriter) {
        writer.uint64(UInt64(bitPattern: self))
    }

    /// - Throws: `invalidValue` unless the value is eight bytes.
    package init(from reader: inout MessageReader) throws {
        self = Int64(bitPattern: try UInt64(from: &reader))
    }
}

extension Int: ProtocolCodable {
    /// As `Int64`.
    package func encode(into writer: inout MessageWriter) {
        Int64(self).encode(into: &writer)
    }

    /// - Throws: `invalidValue` unless the value is eight bytes.
    package init(from reader: inout MessageReader) throws {
        self = Int(try Int64(from: &reader))
    }
}

extension Int32: ProtocolCodable {
    /// Four bytes, big-endian two's complement.
    package func encode(into writer: inout MessageWriter) {
        writer.uint32(UInt32(bitPattern: self))
    }

    /// - Throws: `invalidValue` unless the value is four bytes.
    package init(from reader: inout MessageReader) throws {
        self = try reader.remainingInteger(for: "a 32-bit integer")
    }
}

extension Double: ProtocolCodable {
    /// The IEEE 754 bit pattern, eight bytes big-endian (so every value, NaN payloads and -0 included, survives).
    package func encode(into writer: inout MessageWriter) {
        writer.uint64(bitPattern)
    }

    /// - Throws: `invalidValue` unless the value is eight bytes.
    package init(from reader: inout MessageReader) throws {
        self = Double(bitPattern: try UInt64(from: &reader))
    }
}

extension Date: ProtocolCodable {
    /// Seconds since 2001-01-01 00:00 UTC, as a `Double`.
    package func encode(into writer: inout MessageWriter) {
        timeIntervalSinceReferenceDate.encode(into: &writer)
    }

    /// - Throws: `invalidValue` unless the value is eight bytes.
    package init(from reader: inout MessageReader) throws {
        self = Date(timeIntervalSinceReferenceDate: try Double(from: &reader))
    }
}

extension Duration: ProtocolCodable {
    /// A record: 1 the seconds, 2 the attoseconds, as `Duration.components` gives them.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, components.seconds)
        writer.field(2, components.attoseconds)
    }

    /// - Throws: `nonCanonical` for components `Duration.components` would not give: attoseconds of a second or
    ///   more, or of the other sign than the seconds.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        let seconds: Int64 = try reader.field(1)
        let attoseconds: Int64 = try reader.field(2)
        let sameSign = (seconds >= 0 && attoseconds >= 0) || (seconds <= 0 && attoseconds <= 0)
        guard sameSign, attoseconds.magnitude < 1_000_000_000_000_000_000 else {
            throw MessageDecodingError(.nonCanonical, at: start, "duration components out of range")
        }
        self = Duration(secondsComponent: seconds, attosecondsComponent: attoseconds)
    }
}

extension String: ProtocolCodable {
    /// The UTF-8 bytes.
    package func encode(into writer: inout MessageWriter) {
        writer.rawString(self)
    }

    /// - Throws: `invalidValue` for bytes that are not UTF-8.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        guard let string = MessageReader.string(utf8: reader.remainingBytes()) else {
            throw MessageDecodingError(.invalidValue, at: start, "a string is not UTF-8")
        }
        self = string
    }
}

extension Data: ProtocolCodable {
    /// The bytes.
    package func encode(into writer: inout MessageWriter) {
        writer.rawBytes(self)
    }

    /// The bytes, copied into ordinary memory: for values that are not secret (use `SecureBytes` for those).
    package init(from reader: inout MessageReader) throws {
        self = reader.remainingBytes().withUnsafeBytes { Data($0) }
    }
}

extension SecureBytes: ProtocolCodable {
    /// The bytes.
    package func encode(into writer: inout MessageWriter) {
        withUnsafeBytes { writer.rawBytes($0) }
    }

    /// The bytes, copied from the frame straight into zeroizing memory (no intermediate `Data` or array).
    package init(from reader: inout MessageReader) throws {
        self = reader.remainingBytes().withUnsafeBytes { bytes in
            SecureBytes(count: bytes.count) { $0.copyMemory(from: bytes) }
        }
    }
}

extension Array: ProtocolCodable where Element: ProtocolCodable {
    /// A 32-bit count, then each element with a 32-bit length.
    package func encode(into writer: inout MessageWriter) {
        writer.uint32(UInt32(count))
        for element in self {
            writer.lengthPrefixed { element.encode(into: &$0) }
        }
    }

    /// - Throws: `tooManyElements` or `truncated` for a count beyond the limits or the bytes present.
    package init(from reader: inout MessageReader) throws {
        let count = try reader.elementCount(minimumElementSize: 4)
        self.init()
        reserveCapacity(count)
        for _ in 0..<count {
            append(try reader.lengthPrefixed { try Element(from: &$0) })
        }
    }
}

extension Dictionary: ProtocolCodable where Key == String, Value: ProtocolCodable {
    /// A 32-bit count, then each entry, keys ascending by their UTF-8 bytes: the key with a 32-bit length, the
    /// value with a 32-bit length.
    package func encode(into writer: inout MessageWriter) {
        writer.uint32(UInt32(count))
        // The positions are sorted, not the entries (no value is copied); a few by insertion, as most are.
        var ordered = Array(indices)
        if ordered.count <= 16 {
            for next in ordered.indices.dropFirst() {
                let moving = ordered[next]
                var slot = next
                while slot > 0, Self.precedes(self[moving].key, self[ordered[slot - 1]].key) {
                    ordered[slot] = ordered[slot - 1]
                    slot -= 1
                }
                ordered[slot] = moving
            }
        } else {
            ordered.sort { Self.precedes(self[$0].key, self[$1].key) }
        }
        for index in ordered {
            let (key, value) = self[index]
            writer.string(key)
            writer.lengthPrefixed { value.encode(into: &$0) }
        }
    }

    /// Whether `first`'s UTF-8 bytes sort before `second`'s (bytewise, as the wire orders keys).
    private static func precedes(_ first: String, _ second: String) -> Bool {
        var first = first
        var second = second
        return first.withUTF8 { left in second.withUTF8 { right in precedes(.init(left), .init(right)) } }
    }

    /// Whether the key bytes `first` sort before `second` (bytewise).
    private static func precedes(_ first: RawSpan, _ second: RawSpan) -> Bool {
        first.withUnsafeBytes { left in second.withUnsafeBytes { right in precedes(left, right) } }
    }

    private static func precedes(_ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer) -> Bool {
        let common = Swift.min(left.count, right.count)
        let order = common == 0 ? 0 : memcmp(left.baseAddress!, right.baseAddress!, common)
        return order != 0 ? order < 0 : left.count < right.count
    }

    /// - Throws: `nonCanonical` for keys out of order or repeated; as `Array` for the count.
    package init(from reader: inout MessageReader) throws {
        let count = try reader.elementCount(minimumElementSize: 8)
        self.init(minimumCapacity: count)
        var previous: RawSpan?
        for _ in 0..<count {
            let start = reader.offset
            let keyBytes = try reader.bytes()
            if let previous, !Self.precedes(previous, keyBytes) {
                throw MessageDecodingError(.nonCanonical, at: start, "dictionary keys out of order or repeated")
            }
            previous = keyBytes
            guard let key = MessageReader.string(utf8: keyBytes) else {
                throw MessageDecodingError(.invalidValue, at: start, "a dictionary key is not UTF-8")
            }
            let value = try reader.lengthPrefixed { try Value(from: &$0) }
            // Canonically equivalent keys (é precomposed and decomposed) are one key to Swift.
            guard updateValue(value, forKey: key) == nil else {
                throw MessageDecodingError(.nonCanonical, at: start, "dictionary keys Swift considers equal")
            }
        }
    }
}
