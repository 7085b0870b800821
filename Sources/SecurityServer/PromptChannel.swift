import Authenticators
import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

/// The engine's end of one request's prompts: each step of an evaluation becomes a ``PromptEvent`` sent to the
/// client, and the engine waits for the client's ``PromptAnswer``s. The engine never calls into client objects;
/// the embedded client and the daemon's connection both deliver events and answers as messages.
///
/// Events go out in the order the engine makes them. A question blocks the thread that asks (PAM's) until its
/// answer arrives, the evaluation is cancelled, or the channel closes.
package final class PromptChannel: Sendable {
    /// The request the prompts belong to.
    package let request: UInt64
    private let sink: @Sendable (PromptEvent) -> Void

    /// What answers a question: a secret (nil: cancelled) or a confirmation's choice (nil: cancelled).
    private enum Reply {
        case secret(SecureBytes?)
        case choice(TrustChoice?)
    }

    private struct Waiting {
        let done = DispatchSemaphore(value: 0)
        var reply: Reply?
    }

    private struct State {
        var respond: (@Sendable (PromptAction) -> Void)?
        var nextQuestion: UInt64 = 1
        var questions: [UInt64: Waiting] = [:]
        var closed = false
    }

    private let state = Mutex(State())

    /// How long a question waits for its answer before it counts as cancelled: nil (no limit) in embedded mode,
    /// where the program that asks is the one that answers; localauthd sets it at its start (`prompt-timeout`,
    /// default 300 s), so a client or an agent that never answers holds no thread and no user's turn for ever.
    package static let answerDeadline = Mutex<Duration?>(nil)

    /// A channel for request `request` whose events go to `sink` (the client's presenter, in-process or over the
    /// connection).
    package init(request: UInt64, sink: @escaping @Sendable (PromptEvent) -> Void) {
        self.request = request
        self.sink = sink
    }

    // MARK: Answers from the client

    /// An answer from the client; ignored when it names another request or no prompt in progress.
    package func receive(_ answer: PromptAnswer) {
        guard answer.request == request else { return }
        switch answer.kind {
        case .action(let action):
            let respond = state.withLock { state in
                defer { state.respond = nil }
                return state.respond
            }
            respond?(action)
        case .answer(let number, let secret): reply(.secret(secret), to: number)
        case .choice(let number, let choice): reply(.choice(choice), to: number)
        }
    }

    private func reply(_ reply: Reply, to number: UInt64) {
        let waiting = state.withLock { state -> DispatchSemaphore? in
            guard state.questions[number] != nil, state.questions[number]?.reply == nil else { return nil }
            state.questions[number]?.reply = reply
            return state.questions[number]?.done
        }
        waiting?.signal()
    }

    /// The client is gone: a fingerprint prompt in progress is cancelled and every waiting question is answered
    /// with nothing. Later prompts fail at once.
    package func close() {
        let (respond, waiting) = state.withLock { state in
            state.closed = true
            defer { state.respond = nil }
            return (state.respond, state.questions.values.map(\.done))
        }
        respond?(.cancel)
        for done in waiting { done.signal() }
    }

    /// Whether the client went away.
    package var isClosed: Bool { state.withLock { $0.closed } }

    // MARK: Prompts from the engine

    /// A fingerprint is wanted; `respond` gets the client's button (once) while the prompt lasts.
    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        let closed = state.withLock { state in
            if !state.closed { state.respond = respond }
            return state.closed
        }
        if closed { return respond(.cancel) }
        sink(PromptEvent(request: request, .fingerprintBegan(prompt)))
    }

    /// Progress of the fingerprint prompt.
    func fingerprintPrompt(_ event: FingerprintPromptEvent) {
        sink(PromptEvent(request: request, .fingerprint(event)))
    }

    /// The fingerprint prompt is over: its buttons answer nothing any more.
    func fingerprintPromptDidEnd() {
        state.withLock { $0.respond = nil }
        sink(PromptEvent(request: request, .fingerprintEnded))
    }

    /// Asks `question` and blocks the calling thread until the client answers (nil: cancelled), `isCancelled`
    /// turns true, or the channel closes. Call it from a thread that may block (PAM's), never from the evaluation
    /// executor.
    func ask(
        _ prompt: EvaluationPrompt, question: PasscodePrompt, isApplicationPassword: Bool = false,
        isCancelled: @Sendable () -> Bool
    ) -> SecureBytes? {
        let reply = waitForReply(isCancelled: isCancelled) { number in
            .question(number, prompt, question, isApplicationPassword: isApplicationPassword)
        }
        guard case .secret(let secret)? = reply else { return nil }
        return secret
    }

    /// Asks the client's presenter whether the program may use an item its list does not trust, and blocks the
    /// calling thread until it answers (nil: cancelled or gone). Call it from a thread that may block.
    func confirm(_ prompt: TrustPrompt) -> TrustChoice? {
        guard case .choice(let choice)? = waitForReply(isCancelled: { false }, { .confirmation($0, prompt) }) else {
            return nil
        }
        return choice
    }

    /// Sends the question `event` makes of a new number and waits for its reply.
    private func waitForReply(
        isCancelled: @Sendable () -> Bool, _ event: (UInt64) -> PromptEvent.Kind
    ) -> Reply? {
        let asked = state.withLock { state -> (UInt64, DispatchSemaphore)? in
            guard !state.closed else { return nil }
            let number = state.nextQuestion
            state.nextQuestion += 1
            let waiting = Waiting()
            state.questions[number] = waiting
            return (number, waiting.done)
        }
        guard let (number, done) = asked else { return nil }
        defer { state.withLock { _ = $0.questions.removeValue(forKey: number) } }
        sink(PromptEvent(request: request, event(number)))
        let limit = Self.answerDeadline.withLock { $0 }
        let deadline = limit.map { ContinuousClock.now + $0 }
        // Wake up now and then to notice an invalidation or the deadline: nothing else interrupts a client that
        // does not answer.
        while done.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            if isCancelled() || isClosed { return nil }
            if let deadline, let limit, ContinuousClock.now >= deadline {
                sink(
                    PromptEvent(
                        request: request,
                        .message(PasscodeMessage(isError: true, text: "No answer within \(limit): cancelled."))))
                return nil
            }
        }
        let reply = state.withLock { $0.questions[number]?.reply }
        return isCancelled() ? nil : reply
    }

    /// A message from the passcode back end.
    func show(_ message: PasscodeMessage) {
        sink(PromptEvent(request: request, .message(message)))
    }
}

/// PAM's conversation for one evaluation, over the request's prompt channel; answers nothing once the
/// evaluation's context is invalidated.
final class PasscodeConversation: PasscodePresenter, Sendable {
    let channel: PromptChannel
    let prompt: EvaluationPrompt
    let isCancelled: @Sendable () -> Bool

    init(channel: PromptChannel, prompt: EvaluationPrompt, isCancelled: @escaping @Sendable () -> Bool) {
        self.channel = channel
        self.prompt = prompt
        self.isCancelled = isCancelled
    }

    /// The last answer to a question asked without echo: the passcode, once PAM accepts the conversation (the
    /// keychain's passcode classes are sealed under it). Only in zeroizing memory, only until the step ends.
    let typedPasscode = Mutex<SecureBytes?>(nil)

    func answer(_ question: PasscodePrompt) -> SecureBytes? {
        if isCancelled() { return nil }
        let answer = channel.ask(prompt, question: question, isCancelled: isCancelled)
        if !question.echo, let answer { typedPasscode.withLock { $0 = answer } }
        return answer
    }

    func show(_ message: PasscodeMessage) {
        channel.show(message)
    }
}

/// A passcode PAM has just accepted, as the engine's passcode-success handler gets it.
package struct PasscodeSuccess: Sendable {
    /// The passcode the user typed (the last answer PAM asked for without echo; nil when it asked none).
    package let passcode: SecureBytes?
    /// The context whose evaluation it was.
    package let context: AuthenticationContextID
    /// Whether the evaluation was an explicit unlock of the keychain (`Keychain.unlock()`, `lactl keychain unlock`,
    /// `lactl passcode changed`) rather than an authentication that happened to use the passcode.
    package let unlockRequested: Bool
    let conversation: PasscodeConversation

    /// Asks the user, once, for the passcode the keychain was sealed under (the account's passcode before it was
    /// changed); nil when the user cancels or cannot be asked.
    package func askPreviousPasscode() -> SecureBytes? {
        conversation.channel.ask(
            conversation.prompt,
            question: PasscodePrompt(
                text: "Your passcode changed since the keychain was locked. Previous passcode: ", echo: false),
            isCancelled: conversation.isCancelled)
    }

    /// Tells the user something about the keychain (a PAM-style message on the prompt channel).
    package func show(_ text: String, isError: Bool) {
        conversation.channel.show(PasscodeMessage(isError: isError, text: text))
    }
}
