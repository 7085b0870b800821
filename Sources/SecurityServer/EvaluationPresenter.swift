import Authenticators
import Foundation
import SecureCrypto
import SecurityProtocol

/// Draws the prompts of an evaluation in the engine: the terminal, a program's UI, or a script in tests.
///
/// Every method may be called on a thread the engine owns (libfprint's or PAM's); the passcode method may block
/// while the user types.
package protocol EvaluationPresenter: Sendable {
    /// A fingerprint is wanted. The presenter may call `respond` once, from any thread, while the prompt lasts.
    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void)
    /// Progress of the fingerprint prompt.
    func fingerprintPrompt(_ event: FingerprintPromptEvent)
    /// The fingerprint prompt is over (matched, failed, cancelled or fell back).
    func fingerprintPromptDidEnd()
    /// The answer to a passcode question in zeroizing memory, or nil when the user cancels.
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes?
    /// A message from the passcode back end ("Authentication failed").
    func show(_ message: PasscodeMessage)
}

/// Adapts an ``EvaluationPresenter`` to PAM's conversation for one evaluation, refusing answers once the
/// evaluation's context is invalidated.
struct PasscodeConversation: PasscodePresenter {
    let presenter: any EvaluationPresenter
    let prompt: EvaluationPrompt
    let isCancelled: @Sendable () -> Bool

    func answer(_ question: PasscodePrompt) -> SecureBytes? {
        if isCancelled() { return nil }
        let answer = presenter.passcode(prompt, question: question)
        return isCancelled() ? nil : answer
    }

    func show(_ message: PasscodeMessage) {
        presenter.show(message)
    }
}
