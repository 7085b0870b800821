import SecureCrypto
import SecurityProtocol

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
