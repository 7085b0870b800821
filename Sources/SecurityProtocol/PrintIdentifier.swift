import Foundation
import SecureCrypto

/// A 16-byte random identifier given to each enrolled print; it is what the enrolled-set state hash covers.
package struct PrintIdentifier: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The identifier's bytes (always 16).
    package let bytes: Data

    /// Wraps 16 bytes. - Throws: `AuthenticationError` otherwise.
    package init(bytes: Data) throws {
        guard bytes.count == 16 else {
            throw AuthenticationError(.invalidContext, "a print identifier is 16 bytes, not \(bytes.count)")
        }
        self.bytes = Data(bytes)
    }

    /// Parses the 32-digit lowercase hexadecimal form. - Throws: `AuthenticationError` on anything else.
    package init(hex: String) throws {
        var bytes = Data()
        var digits = hex.lowercased().makeIterator()
        while let high = digits.next() {
            guard let low = digits.next(), let h = high.hexDigitValue, let l = low.hexDigitValue else {
                throw AuthenticationError(.invalidContext, "'\(hex)' is not a print identifier (32 hex digits)")
            }
            bytes.append(UInt8(h << 4 | l))
        }
        try self.init(bytes: bytes)
    }

    /// A fresh identifier from the system's cryptographically secure generator.
    package static func random() throws -> PrintIdentifier {
        try PrintIdentifier(bytes: SecureRandom.bytes(16))
    }

    /// The 32-digit lowercase hexadecimal form.
    package var hex: String { bytes.map { String(format: "%02x", $0) }.joined() }
    /// The hexadecimal form.
    package var description: String { hex }

    /// Byte-wise lexicographic order, the order the state hash uses.
    package static func < (lhs: PrintIdentifier, rhs: PrintIdentifier) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }
}

extension PrintIdentifier: ProtocolCodable {
    /// The 16 bytes.
    package func encode(into writer: inout MessageWriter) {
        writer.rawBytes(bytes)
    }

    /// - Throws: `invalidValue` for anything but 16 bytes.
    package init(from reader: inout MessageReader) throws {
        try self.init(
            bytes: try reader.remainingBytes(exactly: 16, for: "a print identifier").withUnsafeBytes { Data($0) })
    }
}
