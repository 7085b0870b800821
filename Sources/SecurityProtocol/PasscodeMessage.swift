/// A message PAM shows during a passcode authentication, e.g. "Authentication failed".
package struct PasscodeMessage: Sendable, Equatable {
    /// Whether the module reported it as an error (`PAM_ERROR_MSG`) rather than information (`PAM_TEXT_INFO`).
    package var isError: Bool
    /// The module's text.
    package var text: String

    /// A message with `text`.
    package init(isError: Bool, text: String) {
        self.isError = isError
        self.text = text
    }
}

extension PasscodeMessage: ProtocolCodable {
    /// A record: 1 isError, 2 text.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, isError)
        writer.field(2, text)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(isError: try reader.field(1), text: try reader.field(2))
    }
}
