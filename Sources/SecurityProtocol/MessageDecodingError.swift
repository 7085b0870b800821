import SecureCrypto

/// Why bytes did not decode as a message: a code to match on, the offset in the frame where decoding stopped, and
/// a message that names tags, lengths and offsets but never the frame's contents.
package struct MessageDecodingError: CodedError, CustomStringConvertible, Sendable, Equatable {
    /// What was wrong, matchable with `~=`.
    package typealias Code = ErrorCode<MessageDecodingError>

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

extension ErrorCode where Failure == MessageDecodingError {
    /// The frame ends before the value does, or a declared length or count exceeds the bytes left.
    package static var truncated: Self { Self(rawValue: 1) }
    /// Bytes follow a complete value.
    package static var trailingBytes: Self { Self(rawValue: 2) }
    /// A field or enum case the type does not define.
    package static var unknownTag: Self { Self(rawValue: 3) }
    /// A required field is absent.
    package static var missingField: Self { Self(rawValue: 4) }
    /// Bytes that no value of the type encodes to: not UTF-8, a Boolean other than 0 or 1, a wrong size, an
    /// unknown raw value.
    package static var invalidValue: Self { Self(rawValue: 5) }
    /// A value encoded other than the one canonical way: fields repeated or out of order, dictionary keys
    /// unsorted or repeated, more than one enum case.
    package static var nonCanonical: Self { Self(rawValue: 6) }
    /// The frame is larger than the limits allow.
    package static var frameTooLarge: Self { Self(rawValue: 7) }
    /// An array or dictionary holds more elements than the limits allow.
    package static var tooManyElements: Self { Self(rawValue: 8) }
    /// Values nest more deeply than the limits allow.
    package static var tooDeep: Self { Self(rawValue: 9) }
    /// The frame's format-version byte is not one this build reads.
    package static var unsupportedVersion: Self { Self(rawValue: 10) }
}
