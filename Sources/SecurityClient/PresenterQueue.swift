import Dispatch
import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

/// Where every presenter callback runs: one serial queue of the client's own (see ``EvaluationPresenter`` for what
/// a callback may call).
package enum PresenterQueue {
    private static let key = DispatchSpecificKey<Bool>()
    private static let queue: DispatchQueue = {
        let queue = DispatchQueue(label: "local-authentication.presenter")
        queue.setSpecific(key: key, value: true)
        return queue
    }()

    /// Whether the calling code runs inside a presenter callback: a request made here is sent with nobody to ask,
    /// so it fails instead of prompting.
    package static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }

    /// Runs `body` on the presenter queue, after every callback queued before it.
    static func async(_ body: @escaping @Sendable () -> Void) {
        queue.async(execute: body)
    }
}

/// The client's end of one request's prompts: each ``PromptEvent`` becomes a presenter call on the presenter
/// queue, and the presenter's buttons and answers go back as ``PromptAnswer``s naming the same request.
package struct PromptResponder: Sendable {
    /// The request whose events this responder takes.
    package let request: UInt64
    /// Who draws the prompts.
    package let presenter: any EvaluationPresenter
    /// This request's events handed to the presenter queue and not shown yet.
    private let unshown = Unshown()
    /// The question being asked, withdrawn when the request ends first.
    private let questions = RequestQuestions()

    private static let lastRequest = Atomic<UInt64>(0)

    /// A number for a new request that may prompt, unique in this process.
    package static func nextRequest() -> UInt64 {
        lastRequest.add(1, ordering: .relaxed).newValue
    }

    /// A responder for request `request` drawing through `presenter`.
    package init(request: UInt64, presenter: any EvaluationPresenter) {
        self.request = request
        self.presenter = presenter
    }

    /// A responder for a new request drawing through `presenter`; nil when nobody can be asked: no presenter, or a
    /// request made from a presenter callback, which must not wait for a second prompt.
    package static func forNewRequest(presenter: (any EvaluationPresenter)?) -> PromptResponder? {
        guard let presenter, !PresenterQueue.isCurrent else { return nil }
        return PromptResponder(request: nextRequest(), presenter: presenter)
    }

    /// Shows `event` (of this request; others are ignored) and sends what the user answers to `reply`.
    package func handle(_ event: PromptEvent, reply: @escaping @Sendable (PromptAnswer) -> Void) {
        guard event.request == request else { return }
        let presenter = self.presenter
        let request = self.request
        let unshown = self.unshown
        let questions = self.questions
        // A question may wait for the user as long as it takes (and the request may end meanwhile, invalidated):
        // it counts as shown once it is asked. The other events count once the presenter returns.
        let waitsForUser = event.kind.waitsForUser
        unshown.add()
        PresenterQueue.async {
            if waitsForUser { unshown.remove() }
            defer { if !waitsForUser { unshown.remove() } }
            switch event.kind {
            case .fingerprintBegan(let prompt):
                presenter.fingerprintPromptDidBegin(prompt) { reply(PromptAnswer(request: request, .action($0))) }
            case .fingerprint(let progress):
                presenter.fingerprintPrompt(progress)
            case .fingerprintEnded:
                presenter.fingerprintPromptDidEnd()
            case .question(let number, let prompt, let question, _):
                let secret = questions.ask { presenter.passcode(prompt, question: question) }
                reply(PromptAnswer(request: request, .answer(question: number, secret)))
            case .message(let message):
                presenter.show(message)
            case .confirmation(let number, let prompt):
                let choice = questions.ask { presenter.confirm(prompt) }
                reply(PromptAnswer(request: request, .choice(question: number, choice)))
            }
        }
    }
}

extension PromptEvent.Kind {
    /// Whether the presenter's callback for this event may block until the user answers.
    var waitsForUser: Bool {
        switch self {
        case .question, .confirmation: true
        case .fingerprintBegan, .fingerprint, .fingerprintEnded, .message: false
        }
    }
}

extension PromptResponder {
    /// Runs `body` once every event of this request handed to ``handle(_:reply:)`` so far has been shown (a
    /// question: asked): at once when none waits, else on the presenter queue right after the last. The request's
    /// answer goes through here, so a caller never sees the answer before its presenter saw the prompts that led to
    /// it ("not recognised" before `authenticationFailed`). Only this request's events are waited for, never
    /// another request's prompt.
    ///
    /// Called once the request's answer is in, so the request is over: a question its presenter is still asking is
    /// withdrawn (the terminal stops reading and is put back as it was), and one not asked yet is not asked.
    package func afterShown(_ body: @escaping @Sendable () -> Void) {
        questions.end()
        unshown.whenEmpty(body)
    }

    /// ``afterShown(_:)`` for a task: returns once this request's events have been shown.
    package func shown() async {
        await withCheckedContinuation { continuation in afterShown { continuation.resume() } }
    }

    /// What `request` answers or throws, once the prompts of `responder`'s request have been shown.
    package static func answer<T>(
        after responder: PromptResponder?, _ request: () async throws -> T
    ) async throws -> T {
        let result: Result<T, any Error>
        do { result = .success(try await request()) } catch { result = .failure(error) }
        await responder?.shown()
        return try result.get()
    }

    /// ``afterShown(_:)`` for a thread that may block: returns once this request's events have been shown.
    package func waitUntilShown() {
        let shown = DispatchSemaphore(value: 0)
        afterShown { shown.signal() }
        shown.wait()
    }
}

/// A count of one request's events waiting on the presenter queue, and what is to run once there are none.
private final class Unshown: Sendable {
    private struct State {
        var count = 0
        var waiting: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    func add() {
        state.withLock { $0.count += 1 }
    }

    func remove() {
        let ready = state.withLock { state -> [@Sendable () -> Void] in
            state.count -= 1
            guard state.count == 0 else { return [] }
            defer { state.waiting = [] }
            return state.waiting
        }
        for body in ready { body() }
    }

    func whenEmpty(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.count == 0 { return true }
            state.waiting.append(body)
            return false
        }
        if now { body() }
    }
}
