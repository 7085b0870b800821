import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import Synchronization

/// Who draws the prompts of an evaluation: the terminal, a program's own UI, or a script.
///
/// Apple's system draws LocalAuthentication's prompts itself; on Linux a presenter does. Set one on
/// ``LAContext/presenter``; the default is ``TerminalAuthenticationPresenter`` when the process has a terminal,
/// otherwise none, and then an evaluation that needs the user fails with `LAError.Code.notInteractive`.
///
/// Methods are called one at a time on a serial queue of their own, never on the caller's thread, the engine's
/// threads or Swift's cooperative pool. A method may call this API, synchronous members included
/// (``LAContext/invalidate()`` ends the prompt in progress, `SecItemCopyMatching` reads an item); an operation it
/// starts that would need a second prompt fails at once with ``LAError/Code/notInteractive`` (or
/// `errSecInteractionNotAllowed`) instead of waiting for the first. ``passcode(for:question:)`` may block while the
/// user types; the other methods should return promptly.
public protocol AuthenticationPresenter: Sendable {
    /// A fingerprint is wanted: show `prompt` (reason, cancel and fallback titles). Call `respond` once, from any
    /// thread, if the user cancels (`userCancel`) or picks the fallback (`userFallback`, or the passcode for
    /// `.deviceOwnerAuthentication`) before a finger is read.
    func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void)
    /// Progress of the fingerprint prompt: waiting, a scan to repeat and why, a finger not recognised.
    func fingerprintPromptDidChange(_ status: FingerprintPromptStatus)
    /// The fingerprint prompt is over.
    func fingerprintPromptDidEnd()
    /// The passcode (or an application password), read without echo when `question.isSecret`; nil cancels.
    func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret?
    /// A message from the passcode back end (e.g. "Authentication failed").
    func show(_ message: String, isError: Bool)
    /// A program that is not on a keychain item's trusted-application list (`kSecAttrAccess`) wants to use it:
    /// Deny, Allow once or Always allow; nil cancels. Either allow is followed by an authentication that the engine
    /// checks itself (a finger on the reader or the passcode through PAM): a presenter's answer alone grants
    /// nothing, so a program cannot let itself in by answering its own question.
    func confirmItemAccess(_ request: ItemAccessRequest) -> ItemAccessChoice?
}

extension AuthenticationPresenter {
    /// Shows nothing.
    public func fingerprintPromptDidChange(_ status: FingerprintPromptStatus) {}
    /// Does nothing.
    public func fingerprintPromptDidEnd() {}
    /// Shows nothing.
    public func show(_ message: String, isError: Bool) {}
    /// Declines (nil): a presenter that cannot ask leaves items to the programs their lists trust.
    public func confirmItemAccess(_ request: ItemAccessRequest) -> ItemAccessChoice? { nil }
}

/// A program asks to use a keychain item whose trusted-application list does not name it (macOS's "<app> wants to
/// use your confidential information stored in <item> in your keychain").
public struct ItemAccessRequest: Sendable, Equatable {
    /// The asking program: its registered application identifier, or its executable's path.
    public var application: String
    /// The item: its label, service or account.
    public var item: String
    /// Whether the program is on the list with other code: it changed since it was trusted.
    public var isChangedApplication: Bool
    /// The question, ready to show: "<app> wants to use the item <item>." or "<app> has changed…".
    public var message: String
}

/// The answer to an ``ItemAccessRequest``.
public enum ItemAccessChoice: Sendable, Equatable, CaseIterable {
    /// Refuse: the request fails with `errSecAuthFailed`.
    case deny
    /// Allow this request only (after the user authenticates).
    case allowOnce
    /// Allow, and add the program to the item's list (after the user authenticates).
    case alwaysAllow

    init(_ choice: TrustChoice) {
        self =
            switch choice {
            case .deny: .deny
            case .allowOnce: .allowOnce
            case .alwaysAllow: .alwaysAllow
            }
    }

    var trustChoice: TrustChoice {
        switch self {
        case .deny: .deny
        case .allowOnce: .allowOnce
        case .alwaysAllow: .alwaysAllow
        }
    }
}

/// The texts of one prompt, from the ``LAContext``.
public struct AuthenticationPrompt: Sendable, Equatable {
    /// Why the app asks (`localizedReason`).
    public var reason: String
    /// The fallback button's title: nil = "Enter Password", "" = no fallback.
    public var fallbackTitle: String?
    /// The cancel button's title: nil or "" = "Cancel".
    public var cancelTitle: String?

    /// A prompt with these texts.
    public init(reason: String, fallbackTitle: String? = nil, cancelTitle: String? = nil) {
        self.reason = reason
        self.fallbackTitle = fallbackTitle
        self.cancelTitle = cancelTitle
    }
}

/// What the user did at a fingerprint prompt.
public enum AuthenticationPromptAction: Sendable, Equatable {
    /// Cancelled.
    case cancel
    /// Chose the fallback button.
    case fallback
}

/// Progress of a fingerprint prompt.
public enum FingerprintPromptStatus: Sendable, Equatable {
    /// The reader waits for a finger.
    case waitingForFinger
    /// The scan was not usable; `advice` says what to do ("swipe too short, try again").
    case retry(advice: String)
    /// The finger matched no enrolled print.
    case notRecognized
}

/// A question the passcode back end asks (PAM's prompt, e.g. "Password: ").
public struct PasscodeQuestion: Sendable, Equatable {
    /// The question's text.
    public var text: String
    /// Whether the answer is secret (read with echo off).
    public var isSecret: Bool

    /// A question with this text.
    public init(text: String, isSecret: Bool) {
        self.text = text
        self.isSecret = isSecret
    }
}

/// A passcode or password the user typed, kept in memory that is wiped when released and never logged.
public struct AuthenticationSecret: Sendable {
    let bytes: SecureBytes

    /// Copies `bytes` (e.g. UTF-8) into wiped-on-release memory. Keep the source's own copy short-lived.
    public init(copying bytes: some Sequence<UInt8>) {
        self.bytes = SecureBytes(bytes)
    }

    /// Fills `capacity` bytes of wiped-on-release memory with `body`, which returns how many it wrote.
    public init(capacity: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows {
        var buffer = SecureBytes(zeros: capacity)
        let count = try buffer.withUnsafeMutableBytes { try body($0) }
        bytes = buffer.slice(0..<max(0, min(count, capacity)))
    }

    init(_ bytes: SecureBytes) {
        self.bytes = bytes
    }

    /// The number of bytes.
    public var count: Int { bytes.count }
}

/// Adapts a public ``AuthenticationPresenter`` to the client's presenter interface.
struct PresenterAdapter: EvaluationPresenter {
    let presenter: any AuthenticationPresenter

    func fingerprintPromptDidBegin(_ prompt: EvaluationPrompt, respond: @escaping @Sendable (PromptAction) -> Void) {
        presenter.fingerprintPromptDidBegin(Self.prompt(prompt)) { action in
            respond(action == .cancel ? .cancel : .fallback)
        }
    }

    func fingerprintPrompt(_ event: FingerprintPromptEvent) {
        switch event {
        case .waitingForFinger: presenter.fingerprintPromptDidChange(.waitingForFinger)
        case .retry(let reason): presenter.fingerprintPromptDidChange(.retry(advice: reason.description))
        case .notRecognized: presenter.fingerprintPromptDidChange(.notRecognized)
        }
    }

    func fingerprintPromptDidEnd() { presenter.fingerprintPromptDidEnd() }

    func passcode(_ prompt: EvaluationPrompt, question: PasscodePrompt) -> SecureBytes? {
        presenter.passcode(
            for: Self.prompt(prompt), question: PasscodeQuestion(text: question.text, isSecret: !question.echo)
        )?.bytes
    }

    func show(_ message: PasscodeMessage) { presenter.show(message.text, isError: message.isError) }

    func confirm(_ prompt: TrustPrompt) -> TrustChoice? {
        let request = ItemAccessRequest(
            application: prompt.application, item: prompt.item, isChangedApplication: prompt.changed,
            message: prompt.text)
        return presenter.confirmItemAccess(request).map(\.trustChoice)
    }

    static func prompt(_ prompt: EvaluationPrompt) -> AuthenticationPrompt {
        AuthenticationPrompt(
            reason: prompt.reason, fallbackTitle: prompt.fallbackTitle, cancelTitle: prompt.cancelTitle)
    }

    /// The client's presenter for `presenter`: the client's own terminal presenter for the terminal one.
    static func wrapping(_ presenter: (any AuthenticationPresenter)?) -> (any EvaluationPresenter)? {
        guard let presenter else { return nil }
        if let terminal = presenter as? TerminalAuthenticationPresenter { return terminal.terminal }
        return PresenterAdapter(presenter: presenter)
    }
}

/// Draws prompts on the controlling terminal (`/dev/tty`): the reason and titles, "place your finger" and retry
/// reasons, the passcode read with echo off into wiped memory. Ctrl-C cancels (`userCancel`); during a fingerprint
/// prompt, Enter picks the fallback when one is offered.
public struct TerminalAuthenticationPresenter: AuthenticationPresenter {
    let terminal: TerminalPresenter

    /// A presenter on this process's terminal.
    public init() { terminal = TerminalPresenter() }

    /// A presenter on the terminal `device` (e.g. another program's `/dev/pts/N`, not in Apple's API), read only
    /// when `acceptsInput`: without it prompts are written there, no key cancels, and passcodes are declined.
    public init(device: String, acceptsInput: Bool) {
        terminal = TerminalPresenter(device: device, acceptsInput: acceptsInput)
    }

    /// Whether this process has a terminal to prompt on.
    public static var isAvailable: Bool { TerminalPresenter.isAvailable }

    /// Shows the reason and how to cancel or fall back, and watches the keyboard for Ctrl-C and Enter.
    public func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {
        terminal.fingerprintPromptDidBegin(
            EvaluationPrompt(
                reason: prompt.reason, fallbackTitle: prompt.fallbackTitle, cancelTitle: prompt.cancelTitle)
        ) { respond($0 == .cancel ? .cancel : .fallback) }
    }

    /// Shows retry advice and "not recognised".
    public func fingerprintPromptDidChange(_ status: FingerprintPromptStatus) {
        switch status {
        case .waitingForFinger: break
        case .retry(let advice): terminal.writeLine("Fingerprint: \(advice)")
        case .notRecognized: terminal.writeLine("Fingerprint not recognised")
        }
    }

    /// Stops watching the keyboard.
    public func fingerprintPromptDidEnd() { terminal.fingerprintPromptDidEnd() }

    /// Reads the answer from `/dev/tty`, echo off for secrets; nil on Ctrl-C.
    public func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? {
        terminal.passcode(
            EvaluationPrompt(
                reason: prompt.reason, fallbackTitle: prompt.fallbackTitle, cancelTitle: prompt.cancelTitle),
            question: PasscodePrompt(text: question.text, echo: !question.isSecret)
        ).map(AuthenticationSecret.init)
    }

    /// Writes the message to the terminal.
    public func show(_ message: String, isError: Bool) { terminal.writeLine(message) }

    /// Shows the question and reads d (deny), o (allow once) or a (always allow); Ctrl-C cancels.
    public func confirmItemAccess(_ request: ItemAccessRequest) -> ItemAccessChoice? {
        let prompt = TrustPrompt(
            application: request.application, item: request.item, changed: request.isChangedApplication)
        return terminal.confirm(prompt).map(ItemAccessChoice.init)
    }
}

/// A presenter that follows a script: for programs that collect answers their own way, and for tests.
///
/// Each fingerprint prompt takes the next ``FingerprintStep`` (default: wait for the reader), each passcode question
/// the next answer (nil = cancel; none left = cancel), each item-access request the next choice (none left =
/// cancel). It records what it was shown.
public final class ScriptedAuthenticationPresenter: AuthenticationPresenter {
    /// What to do when a fingerprint prompt begins.
    public enum FingerprintStep: Sendable, Equatable {
        /// Leave it to the reader.
        case waitForReader
        /// Cancel at once.
        case cancel
        /// Pick the fallback at once.
        case fallback
    }

    private struct Script {
        var fingerprintSteps: [FingerprintStep]
        var answers: [AuthenticationSecret?]
        var accessChoices: [ItemAccessChoice?]
        var accessRequests: [ItemAccessRequest] = []
        var prompts: [AuthenticationPrompt] = []
        var questions: [PasscodeQuestion] = []
        var statuses: [FingerprintPromptStatus] = []
        var messages: [String] = []
    }

    private let script: Mutex<Script>

    /// A presenter with these fingerprint steps, passcode answers (UTF-8 strings; nil = cancel) and answers to
    /// item-access requests.
    public init(
        fingerprintSteps: [FingerprintStep] = [], passcodes: [String?] = [], accessChoices: [ItemAccessChoice?] = []
    ) {
        script = Mutex(
            Script(
                fingerprintSteps: fingerprintSteps,
                answers: passcodes.map { $0.map { AuthenticationSecret(copying: Array($0.utf8)) } },
                accessChoices: accessChoices))
    }

    /// Follows the next fingerprint step.
    public func fingerprintPromptDidBegin(
        _ prompt: AuthenticationPrompt, respond: @escaping @Sendable (AuthenticationPromptAction) -> Void
    ) {
        let step = script.withLock { script -> FingerprintStep in
            script.prompts.append(prompt)
            return script.fingerprintSteps.isEmpty ? .waitForReader : script.fingerprintSteps.removeFirst()
        }
        switch step {
        case .waitForReader: break
        case .cancel: respond(.cancel)
        case .fallback: respond(.fallback)
        }
    }

    /// Records the status.
    public func fingerprintPromptDidChange(_ status: FingerprintPromptStatus) {
        script.withLock { $0.statuses.append(status) }
    }

    /// Gives the next scripted answer.
    public func passcode(for prompt: AuthenticationPrompt, question: PasscodeQuestion) -> AuthenticationSecret? {
        script.withLock { script in
            script.prompts.append(prompt)
            script.questions.append(question)
            return script.answers.isEmpty ? nil : script.answers.removeFirst()
        }
    }

    /// Records the message.
    public func show(_ message: String, isError: Bool) {
        script.withLock { $0.messages.append(message) }
    }

    /// Gives the next scripted choice.
    public func confirmItemAccess(_ request: ItemAccessRequest) -> ItemAccessChoice? {
        script.withLock { script in
            script.accessRequests.append(request)
            return script.accessChoices.isEmpty ? nil : script.accessChoices.removeFirst()
        }
    }

    /// Every prompt shown so far (fingerprint prompts and passcode questions), in order.
    public var shownPrompts: [AuthenticationPrompt] { script.withLock { $0.prompts } }
    /// Every passcode question asked so far.
    public var askedQuestions: [PasscodeQuestion] { script.withLock { $0.questions } }
    /// Every fingerprint status shown so far.
    public var fingerprintStatuses: [FingerprintPromptStatus] { script.withLock { $0.statuses } }
    /// Every item-access request shown so far.
    public var shownAccessRequests: [ItemAccessRequest] { script.withLock { $0.accessRequests } }
    /// Every back-end message shown so far.
    public var shownMessages: [String] { script.withLock { $0.messages } }
}
