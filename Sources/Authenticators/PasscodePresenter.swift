import SecureCrypto

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

/// Shows PAM's prompts and messages to the user and returns the answers: the terminal, a UI, or a script in tests.
///
/// Called on the PAM thread while PAM waits; a presenter may block (reading `/dev/tty`, say).
package protocol PasscodePresenter: Sendable {
    /// The answer to `prompt`, in zeroizing memory; nil when the user cancels (the authentication then ends with
    /// ``AuthenticationError/Code/userCancel``).
    func answer(_ prompt: PasscodePrompt) -> SecureBytes?

    /// Shows an informational or error message from a PAM module.
    func show(_ message: PasscodeMessage)
}
