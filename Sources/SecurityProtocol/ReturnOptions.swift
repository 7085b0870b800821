/// Which `kSecReturn…` keys a request set.
package struct ReturnOptions: OptionSet, Sendable, Hashable {
    package var rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }

    package static let data = ReturnOptions(rawValue: 1)
    package static let attributes = ReturnOptions(rawValue: 2)
    package static let reference = ReturnOptions(rawValue: 4)
    package static let persistentReference = ReturnOptions(rawValue: 8)
}

extension ReturnOptions: ProtocolCodable {
    /// One byte: the option bits.
    package func encode(into writer: inout MessageWriter) {
        writer.byte(rawValue)
    }

    /// - Throws: `invalidValue` for bits no option has.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        let bits = try reader.remainingByte(for: "return options")
        guard bits & ~0x0F == 0 else {
            throw MessageDecodingError(.invalidValue, at: start, "unknown return options")
        }
        self.init(rawValue: bits)
    }
}
