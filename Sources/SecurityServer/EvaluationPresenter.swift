import Authenticators
import Foundation
import SecureCrypto

/// What the user is asked to do during one evaluation, for the presenter to show.
package struct EvaluationPrompt: Sendable, Equatable {
    /// Why the app asks (`localizedReason`).
    package var reason: String
    /// The fallback button's title; nil = the default ("Enter Password"), "" = no fallback offered.
    package var fallbackTitle: String?
    /// The cancel button's title; nil or "" = "Cancel".
    package var cancelTitle: String?

    /// A prompt with these texts.
    package init(reason: String, fallbackTitle: String? = nil, cancelTitle: String? = nil) {
        self.reason = reason
        self.fallbackTitle = fallbackTitle
        self.cancelTitle = cancelTitle
    }

    /// Whether a fallback to the passcode is offered (a fallback title other than "").
    package var offersFallback: Bool { fallbackTitle != "" }
}

/// What a user did while a fingerprint prompt was shown.
package enum PromptAction: Sendable, Equatable {
    /// Cancel (Ctrl-C on the terminal): the evaluation ends with `userCancel`.
    case cancel
    /// The fallback button ("Enter Password"): `userFallback`, or the passcode for `.deviceOwnerAuthentication`.
    case fallback
}

/// Progress of a fingerprint prompt, for the presenter to show.
package enum FingerprintPromptEvent: Sendable, Equatable {
    /// The reader waits for a finger.
    case waitingForFinger
    /// The scan was not usable; `reason` says what to do differently.
    case retry(reason: ScanRetryReason)
    /// The finger matched no enrolled print.
    case notRecognized
}

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
