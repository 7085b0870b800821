import SecureCrypto
import SecurityProtocol

/// Answers PAM's prompts and shows its messages: in the engine `PasscodeConversation`, which relays them to the
/// client's presenter as prompt events; a script in tests.
///
/// Called on the PAM thread while PAM waits; a presenter may block (reading `/dev/tty`, say).
package protocol PasscodePresenter: Sendable {
    /// The answer to `prompt`, in zeroizing memory; nil when the user cancels (the authentication then ends with
    /// ``AuthenticationError/Code/userCancel``).
    func answer(_ prompt: PasscodePrompt) -> SecureBytes?

    /// Shows an informational or error message from a PAM module.
    func show(_ message: PasscodeMessage)
}
