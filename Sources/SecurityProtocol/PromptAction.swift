/// What a user did while a fingerprint prompt was shown.
package enum PromptAction: Sendable, Equatable {
    /// Cancel (Ctrl-C on the terminal): the evaluation ends with `userCancel`.
    case cancel
    /// The fallback button ("Enter Password"): `userFallback`, or the passcode for `.deviceOwnerAuthentication`.
    case fallback
}

extension PromptAction: ProtocolCodable {
    /// One byte: 1 cancel, 2 fallback.
    package func encode(into writer: inout MessageWriter) {
        switch self {
        case .cancel: writer.byte(1)
        case .fallback: writer.byte(2)
        }
    }

    /// - Throws: `invalidValue` for any other byte.
    package init(from reader: inout MessageReader) throws {
        let start = reader.offset
        switch try reader.remainingByte(for: "a prompt action") {
        case 1: self = .cancel
        case 2: self = .fallback
        default: throw MessageDecodingError(.invalidValue, at: start, "unknown prompt action")
        }
    }
}
