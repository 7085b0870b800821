import Foundation

/// Reads SSH wire types (RFC 4251 §5: uint32, string, mpint) from a message, never past its end.
///
/// swift-nio-ssh 0.15 keeps its readers (`ByteBuffer+SSH.swift`) internal, so the agent reads these by hand.
package struct SSHReader {
    private let bytes: [UInt8]
    private var offset = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var isAtEnd: Bool { offset == bytes.count }

    package mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else { throw AgentProtocolError.truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func uint32() throws -> UInt32 {
        guard bytes.count - offset >= 4 else { throw AgentProtocolError.truncated }
        defer { offset += 4 }
        return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// An SSH `string`: a uint32 length, then that many bytes.
    package mutating func string() throws -> [UInt8] {
        let count = Int(try uint32())
        guard bytes.count - offset >= count else { throw AgentProtocolError.truncated }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// The rest of the message.
    package mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }
}

/// Writes SSH wire types.
package struct SSHWriter {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func byte(_ value: UInt8) { bytes.append(value) }

    package mutating func uint32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    package mutating func string(_ value: some Collection<UInt8>) {
        uint32(UInt32(value.count))
        bytes += value
    }

    package mutating func string(_ value: String) { string(Array(value.utf8)) }

    /// An SSH `mpint` of a non-negative big-endian magnitude: leading zeros dropped, a zero byte added when the
    /// top bit is set (so it does not read as negative).
    package mutating func mpint(_ magnitude: some Collection<UInt8>) {
        var value = Array(magnitude.drop { $0 == 0 })
        if let first = value.first, first & 0x80 != 0 { value.insert(0, at: 0) }
        string(value)
    }
}
