import Dispatch
import Foundation
import SecureCrypto
import SecurityProtocol

/// Where every presenter callback runs: one serial queue of its own, never the engine's evaluation executor, the
/// PAM thread or the libfprint thread. A presenter may therefore call the public API from its callbacks —
/// `LAContext.invalidate()`, `canEvaluatePolicy`, `SecItem*` — without waiting on the thread it runs on.
///
/// One thing a callback cannot get is a second prompt: it runs while a prompt is being answered, so an operation
/// it starts that would need to ask the user (an evaluation, a protected item without a credential) fails with
/// `LAError.notInteractive` / `errSecInteractionNotAllowed` at once instead of waiting for itself.
package enum PresenterQueue {
    private static let key = DispatchSpecificKey<Bool>()
    private static let queue: DispatchQueue = {
        let queue = DispatchQueue(label: "local-authentication.presenter")
        queue.setSpecific(key: key, value: true)
        return queue
    }()

    /// Whether the calling code runs inside a presenter callback.
    package static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }

    /// Runs `body` on the presenter queue and waits for its value (for callbacks that answer).
    static func sync<T>(_ body: () -> T) -> T {
        isCurrent ? body() : queue.sync(execute: body)
    }

    /// Runs `body` on the presenter queue, after every callback queued before it.
    static func async(_ body: @escaping @Sendable () -> Void) {
        queue.async(execute: body)
    }
}

/// A presenter whose callbacks all run on ``PresenterQueue``, in the order the engine makes them.
struct QueuedPresenter: EvaluationPresenter {
    let presenter: any EvaluationPresenter

    /// `presenter`, its callbacks moved to the presenter queue (once: a queued presenter is not wrapped again).
    static func wrapping(_ presenter: any EvaluationPresenter) -> any EvaluationPresenter {
        presenter is QueuedPresenter ? presenter : QueuedPresenter(presenter: presenter)
    }

    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        let presenter = self.presenter
        PresenterQueue.async { presenter.fingerprintPromptDidBegin(prompt, respond: respond) }
    }

    func fingerprintPrompt(_ event: FingerprintPromptEvent) {
        let presenter = self.presenter
        PresenterQueue.async { presenter.fingerprintPrompt(event) }
    }

    func fingerprintPromptDidEnd() {
        let presenter = self.presenter
        PresenterQueue.async { presenter.fingerprintPromptDidEnd() }
    }

    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        PresenterQueue.sync { presenter.passcode(prompt, question: question) }
    }

    func show(_ message: PasscodeMessage) {
        let presenter = self.presenter
        PresenterQueue.async { presenter.show(message) }
    }
}
