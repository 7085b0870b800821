/// Why bytes did not decode as a message: a code to match on, the offset in the frame where decoding stopped, and
/// a message that names tags, lengths and offsets but never the frame's contents.
package struct MessageDecodingError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What was wrong, matchable with `~=`.
    package struct Code: RawRepresentable, Hashable, Sendable {
        /// The raw value.
        package var rawValue: Int
        /// A code with this raw value.
        package init(rawValue: Int) { self.rawValue = rawValue }

        /// The frame ends before the value does, or a declared length or count exceeds the bytes left.
        package static let truncated = Code(rawValue: 1)
        /// Bytes follow a complete value.
        package static let trailingBytes = Code(rawValue: 2)
        /// A field or enum case the type does not define.
        package static let unknownTag = Code(rawValue: 3)
        /// A required field is absent.
        package static let missingField = Code(rawValue: 4)
        /// Bytes that no value of the type encodes to: not UTF-8, a Boolean other than 0 or 1, a wrong size, an
        /// unknown raw value.
        package static let invalidValue = Code(rawValue: 5)
        /// A value encoded other than the one canonical way: fields repeated or out of order, dictionary keys
        /// unsorted or repeated, more than one enum case.
        package static let nonCanonical = Code(rawValue: 6)
        /// The frame is larger than the limits allow.
        package static let frameTooLarge = Code(rawValue: 7)
        /// An array or dictionary holds more elements than the limits allow.
        package static let tooManyElements = Code(rawValue: 8)
        /// Values nest more deeply than the limits allow.
        package static let tooDeep = Code(rawValue: 9)
        /// The frame's format-version byte is not one this build reads.
        package static let unsupportedVersion = Code(rawValue: 10)

        /// Matches a thrown error against a code.
        package static func ~= (code: Code, error: any Error) -> Bool {
            (error as? MessageDecodingError)?.code == code
        }
    }

    /// What was wrong.
    package var code: Code
    /// The byte offset in the frame where decoding stopped.
    package var offset: Int
    /// A human-readable explanation without any of the frame's contents.
    package var message: String

    /// An error with `code` at `offset`.
    package init(_ code: Code, at offset: Int, _ message: String) {
        self.code = code
        self.offset = offset
        self.message = message
    }

    /// The code, the offset and the message.
    package var description: String { "MessageDecodingError(\(code.rawValue)) at \(offset): \(message)" }
}
