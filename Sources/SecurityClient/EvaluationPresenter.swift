import Foundation
import SecureCrypto
import SecurityProtocol

/// Draws the prompts of a request on the client's side: the terminal, a program's own UI, or a script in tests.
/// The engine sends ``PromptEvent``s; a ``PromptResponder`` calls these methods and sends the answers back.
///
/// Where callbacks run, and what they may call:
/// - Every method runs on the presenter queue (``PresenterQueue``), one at a time, in the order the engine sent the
///   events: never on the thread that made the request, the engine's threads (PAM's, libfprint's) or Swift's
///   cooperative pool.
/// - A callback may call the public API, synchronous members included: `LAContext.invalidate()` (which ends the
///   prompt in progress), `canEvaluatePolicy`, `SecItem*`, `SecKey*`. None of them waits for the queue the callback
///   runs on, so none can deadlock.
/// - What a callback cannot get is a second prompt: the queue is busy with the first, so an operation started from
///   a callback that would need to ask the user fails at once (`LAError.notInteractive`,
///   `errSecInteractionNotAllowed`) instead of waiting for itself.
/// - ``passcode(_:question:)`` may block while the user types; the others should return promptly.
package protocol EvaluationPresenter: Sendable {
    /// A fingerprint is wanted. The presenter may call `respond` once, from any thread, while the prompt lasts.
    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void)
    /// Progress of the fingerprint prompt.
    func fingerprintPrompt(_ event: FingerprintPromptEvent)
    /// The fingerprint prompt is over (matched, failed, cancelled or fell back).
    func fingerprintPromptDidEnd()
    /// The answer to a passcode (or application-password) question in zeroizing memory, or nil when the user
    /// cancels.
    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes?
    /// A message from the passcode back end ("Authentication failed").
    func show(_ message: PasscodeMessage)
    /// A program not on an item's trusted-application list asks to use it: Deny, Allow once or Always allow; nil
    /// cancels. Either allow is followed by an authentication the engine checks (a finger on the reader, or the
    /// passcode through PAM), so the answer alone grants nothing. May block while the user decides.
    func confirm(_ prompt: TrustPrompt) -> TrustChoice?
}

extension EvaluationPresenter {
    /// Declines: a presenter that cannot ask leaves the item to the programs its list trusts.
    package func confirm(_ prompt: TrustPrompt) -> TrustChoice? { nil }
}
