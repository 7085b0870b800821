/// A question PAM asks during a passcode authentication.
package struct PasscodePrompt: Sendable, Equatable {
    /// The module's prompt text, e.g. `"Password: "`.
    package var text: String
    /// Whether the answer may be shown while typed (`PAM_PROMPT_ECHO_ON`); passcodes are asked with echo off.
    package var echo: Bool

    /// A prompt with `text`, shown with or without echo.
    package init(text: String, echo: Bool) {
        self.text = text
        self.echo = echo
    }
}

extension PasscodePrompt: ProtocolCodable {
    /// A record: 1 text, 2 echo.
    package func encode(into writer: inout MessageWriter) {
        writer.field(1, text)
        writer.field(2, echo)
    }

    /// - Throws: ``MessageDecodingError``.
    package init(from reader: inout MessageReader) throws {
        self.init(text: try reader.field(1), echo: try reader.field(2))
    }
}
