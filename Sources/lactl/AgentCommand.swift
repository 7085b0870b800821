import ArgumentParser
import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl agent`: the user's prompt agent for a login session.
struct PromptAgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Draw the keychain's prompts of your programs (fingerprint, passcode, access), with pinentry.",
        discussion: """
            Registers with localauthd as the user's prompt agent (best as the systemd user service \
            localauthd-agent, started before anything else can register). From then on the daemon sends this agent \
            the questions of the user's programs instead of asking them to draw prompts themselves: the agent shows \
            each with pinentry, naming the program as localauthd identified it, and answers the daemon directly. \
            The passcode goes from pinentry to the agent to localauthd and PAM; the asking program only learns the \
            outcome. A fingerprint and the passcode are offered at once: the scan runs while pinentry asks, and \
            whichever comes first ends the other.

            One agent per user: a second is refused while the first runs, and after the first disconnected a new \
            one is accepted only once the first has exited (localauthd logs the replacement). Only lactl as \
            registered with localauthd (administrative) may be an agent. Embedded mode has no agent: programs draw \
            their own prompts there.

            The pinentry program is the administrator's: `agent-pinentry` in localauthd.conf (default \
            /usr/bin/pinentry, Debian's alternative, which picks GNOME's, GTK, Qt or curses as installed). \
            --pinentry and $PINENTRY_PROGRAM name another only where localauthd.conf says \
            `agent-pinentry-choice = yes`; either way the program must be owned by root and writable by nobody \
            else, nor its directories. It runs with the display and terminal of the agent and nothing else of its \
            environment. Text-mode pinentries (tty, curses) use the agent's terminal; graphical ones $DISPLAY or \
            $WAYLAND_DISPLAY.
            """)

    @Option(help: "The pinentry program, where localauthd.conf lets users choose (agent-pinentry-choice = yes).")
    var pinentry: String?

    @Option(help: "Seconds a question waits for the user before it counts as cancelled.")
    var timeout: Int = 120

    @Flag(help: "Print each prompt's program and reason, and how it was answered (never what was typed).")
    var verbose = false

    func validate() throws {
        guard timeout > 0 && timeout <= 3_600 else { throw ValidationError("--timeout must be 1 to 3600 seconds") }
    }

    func run() throws {
        guard case .daemon(let socket) = ClientSelection.mode() else {
            throw AgentFailure(
                "no localauthd is configured (LA_DAEMON_SOCKET, client.conf): in embedded mode programs draw their "
                    + "own prompts")
        }
        let environment = ProcessInfo.processInfo.environment
        let agent = try PromptAgent(socket: socket, verbose: verbose)
        let registration = try agent.register()
        // The daemon's word decides which pinentry runs; the arguments and environment are whoever started lactl's.
        let program = try Self.pinentryProgram(
            registration, requested: pinentry, fromEnvironment: environment["PINENTRY_PROGRAM"])
        let tty = Self.terminalName()
        let place = Pinentry.Place(
            program: program, ttyName: tty, ttyType: tty == nil ? nil : Pinentry.terminalType(environment["TERM"]),
            timeout: timeout, environment: Pinentry.environment(from: environment, uid: getuid()))
        if let replaced = registration.replaced {
            print("lactl agent: replaces the agent that served \(registration.serves) before (pid \(replaced), exited)")
        }
        print("lactl agent: drawing the prompts of \(registration.serves) with \(program)")
        fflush(nil)
        try agent.serve(place)
    }

    /// The pinentry to run: the administrator's (`registration.pinentry`), or the one the user names (`requested`,
    /// `--pinentry`; else `fromEnvironment`, `$PINENTRY_PROGRAM`) where the daemon says the user may choose; in
    /// either case only a program root owns and nobody else can write (``Pinentry/verifiedProgram(_:)``), as the
    /// path it resolves to.
    ///
    /// - Throws: ``AgentFailure`` for `--pinentry` naming another program where the user may not choose, and for a
    ///   program that fails the check. A `$PINENTRY_PROGRAM` the user may not choose is ignored, with a note.
    static func pinentryProgram(_ registration: AgentRegistration, requested: String?, fromEnvironment: String?)
        throws -> String
    {
        let configured: String
        do {
            configured = try Pinentry.verifiedProgram(registration.pinentry)
        } catch {
            throw AgentFailure("the pinentry localauthd.conf names (agent-pinentry) cannot be used: \(error)")
        }
        if let requested {
            // Naming the administrator's own program is no choice; anything else needs the daemon's leave.
            if (try? Pinentry.verifiedProgram(requested)) == configured { return configured }
            guard registration.mayChoosePinentry else {
                throw AgentFailure(
                    "localauthd.conf does not let users choose the agent's pinentry (agent-pinentry-choice): it is "
                        + "\(registration.pinentry); run lactl agent without --pinentry")
            }
            return try verified(requested)
        }
        guard let fromEnvironment, !fromEnvironment.isEmpty else { return configured }
        guard registration.mayChoosePinentry else {
            if (try? Pinentry.verifiedProgram(fromEnvironment)) != configured {
                FileHandle.standardError.write(
                    Data(
                        ("lactl agent: $PINENTRY_PROGRAM is ignored: localauthd.conf does not let users choose the "
                            + "agent's pinentry (agent-pinentry-choice)\n").utf8))
            }
            return configured
        }
        return try verified(fromEnvironment)
    }

    /// ``Pinentry/verifiedProgram(_:)`` of a program the user named.
    private static func verified(_ chosen: String) throws -> String {
        do {
            return try Pinentry.verifiedProgram(chosen)
        } catch {
            throw AgentFailure("the pinentry \(PromptText.displayed(chosen, limit: 256)) cannot be used: \(error)")
        }
    }

    /// The terminal on standard input, output or error, for text-mode pinentries.
    static func terminalName() -> String? {
        for descriptor: Int32 in [0, 1, 2] where isatty(descriptor) == 1 {
            if let name = ttyname(descriptor) { return String(cString: name) }
        }
        return nil
    }
}

/// Why the agent stopped.
struct AgentFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = "lactl agent: " + description
    }
}

/// The agent's connection to localauthd and the dialogs it shows.
final class PromptAgent: Sendable {
    private let descriptor: Int32
    private let reader: Mutex<FrameReader>
    private let writing = Mutex(())
    /// Where dialogs appear and which pinentry draws them, once registered (``serve(_:)``).
    private let place = Mutex<Pinentry.Place?>(nil)
    private let verbose: Bool
    private let conversations = Mutex<[UInt64: Conversation]>([:])

    /// Connects to localauthd at `socket` (served by root, as installed: a socket anyone else serves could collect
    /// the passcodes typed into the agent) and says hello.
    init(socket: String, verbose: Bool) throws {
        let (descriptor, server) = try SocketClient.connectBare(socket)
        guard server == 0 else {
            close(descriptor)
            throw AgentFailure(
                "\(socket) is served by uid \(server.map(String.init) ?? "unknown"), not by root: it is not localauthd")
        }
        self.descriptor = descriptor
        reader = Mutex(
            FrameReader(
                descriptor: descriptor, limit: MessageLimits.default.maximumFrameByteCount,
                version: MessageWriter.formatVersion))
        self.verbose = verbose
        guard write(.hello(versions: [1], accessGroups: [], allGroups: false)), case .welcome? = next() else {
            throw AgentFailure("localauthd at \(socket) did not welcome the agent")
        }
    }

    deinit {
        close(descriptor)
    }

    /// Registers as the prompt agent; returns what the daemon said (whom it serves, which pinentry it runs).
    func register() throws -> AgentRegistration {
        guard write(.registerAgent(1)) else { throw AgentFailure("the connection to localauthd failed") }
        switch next() {
        case .agentRegistered(1, let registration)?: return registration
        case .keychainFailure(1, let status)?: throw AgentFailure(status.message)
        case .refused(let reason)?: throw AgentFailure("localauthd refused the agent: \(reason)")
        default: throw AgentFailure("localauthd did not answer the registration")
        }
    }

    /// Serves prompts, drawn with `place`, until the daemon closes the connection.
    func serve(_ place: Pinentry.Place) throws {
        self.place.withLock { $0 = place }
        while let message = next() {
            switch message {
            case .agentPrompt(let event, let caller):
                let conversation = conversations.withLock { conversations in
                    if let known = conversations[event.request] { return known }
                    let started = Conversation(number: event.request, caller: caller, agent: self)
                    conversations[event.request] = started
                    return started
                }
                if verbose, case .fingerprintBegan(let prompt) = event.kind {
                    let program = PromptText.displayed(
                        caller.executable, limit: Conversation.pathLimit, verified: true)
                    let reason = PromptText.displayed(prompt.reason, limit: Conversation.reasonLimit)
                    print("prompt \(event.request): \(program) (pid \(caller.pid)): \(reason)")
                    fflush(nil)
                }
                conversation.receive(event.kind)
            case .agentPromptEnded(let number):
                conversations.withLock { $0.removeValue(forKey: number) }?.end()
            case .agentNotice(let text):
                FileHandle.standardError.write(
                    Data("lactl agent: localauthd says: \(PromptText.displayed(text, limit: 600))\n".utf8))
            case .refused(let reason):
                throw AgentFailure("localauthd closed the connection: \(reason)")
            default:
                continue
            }
        }
        conversations.withLock { conversations in
            defer { conversations = [:] }
            return Array(conversations.values)
        }.forEach { $0.end() }
        throw AgentFailure("localauthd closed the connection")
    }

    /// Sends an answer to prompt `number`.
    func answer(_ number: UInt64, _ kind: PromptAnswer.Kind) {
        _ = write(.answer(PromptAnswer(request: number, kind)))
        guard verbose else { return }
        // What was answered, never the secret itself.
        let what: String
        switch kind {
        case .action(let action): what = "\(action)"
        case .answer(_, let secret): what = secret == nil ? "cancelled the question" : "answered the question"
        case .choice(_, let choice): what = choice.map { "\($0)" } ?? "cancelled the question"
        }
        print("prompt \(number): \(what)")
        fflush(nil)
    }

    /// One dialog at a time: the next pinentry starts once the last one ended and was reaped (two text-mode
    /// pinentries on one terminal would take each other's keystrokes; one killed may take a moment to go).
    private let dialogSlot = DispatchSemaphore(value: 1)

    /// A pinentry for one dialog, once no other one runs; nil when `abandoned` turned true while waiting, or (with
    /// the reason on standard error) when it cannot start.
    func startPinentry(unless abandoned: () -> Bool) -> Pinentry? {
        while dialogSlot.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            if abandoned() { return nil }
        }
        guard !abandoned() else {
            dialogSlot.signal()
            return nil
        }
        let slot = dialogSlot
        guard let place = place.withLock({ $0 }) else {
            slot.signal()
            return nil
        }
        do {
            return try Pinentry(place) { slot.signal() }
        } catch {
            FileHandle.standardError.write(Data("lactl agent: \(error)\n".utf8))
            return nil
        }
    }

    private func write(_ message: ClientMessage) -> Bool {
        writing.withLock { _ in FrameReader.write(message.encoded(), to: descriptor) }
    }

    private func next() -> ServerMessage? {
        reader.withLock { reader in
            (try? reader.next { try ServerMessage(decoding: $0) }) ?? nil
        }
    }
}

/// The prompts of one request of one program: its events are handled in order on a thread of their own (a dialog
/// blocks it), except the end of a fingerprint prompt and the end of the request, which close the dialog at once.
final class Conversation: Sendable {
    let number: UInt64
    let caller: CallerInfo
    private unowned let agent: PromptAgent
    private let queue: DispatchQueue

    private struct State {
        /// The dialog on screen.
        var dialog: Pinentry?
        /// The fingerprint prompt is running (its dialog offers the passcode meanwhile).
        var scanning = false
        /// The passcode typed while the fingerprint prompt ran, for the passcode question that follows.
        var typed: SecureBytes?
        /// The last error message (a passcode not accepted), shown with the next question.
        var error: String?
        var ended = false
    }

    private let state = Mutex(State())

    init(number: UInt64, caller: CallerInfo, agent: PromptAgent) {
        self.number = number
        self.caller = caller
        self.agent = agent
        queue = DispatchQueue(label: "lactl.agent.prompt.\(number)")
    }

    /// An event of the daemon for this request.
    func receive(_ event: PromptEvent.Kind) {
        if case .fingerprintEnded = event {
            // The finger matched, failed or was cancelled: the dialog offering the passcode meanwhile goes.
            let dialog = state.withLock { state in
                state.scanning = false
                return state.dialog
            }
            dialog?.kill()
            return
        }
        // Marked here, in the daemon's order, so that an end that comes before the dialog opens is not missed.
        if case .fingerprintBegan = event { state.withLock { $0.scanning = true } }
        queue.async { self.handle(event) }
    }

    /// The request ended: whatever shows goes, and nothing more is answered.
    func end() {
        let dialog = state.withLock { state in
            state.ended = true
            state.typed = nil
            return state.dialog
        }
        dialog?.kill()
    }

    private func handle(_ event: PromptEvent.Kind) {
        guard !state.withLock({ $0.ended }) else { return }
        switch event {
        case .fingerprintBegan(let prompt):
            fingerprint(prompt)
        case .question(let question, let prompt, let passcode, let isApplicationPassword):
            ask(question, prompt, passcode, isApplicationPassword: isApplicationPassword)
        case .message(let message):
            if message.isError { state.withLock { $0.error = message.text } }
        case .confirmation(let question, let trust):
            confirm(question, trust)
        case .fingerprint, .fingerprintEnded:
            break
        }
    }

    /// The longest reason, path, button title and question a dialog shows (longer ones are cut, marked with `…`):
    /// a program cannot push the verified lines off the dialog or the terminal with a long text.
    static let reasonLimit = 300
    static let pathLimit = 400
    static let titleLimit = 40
    static let questionLimit = 600

    /// What the dialog says: first the program, as localauthd identified it (its path, pid and registration: these
    /// lines are the daemon's), then `what` it wants, labelled as the program's own words when `byProgram`.
    ///
    /// Every text is shown through ``PromptText/displayed(_:limit:verified:)``: control, line-breaking and
    /// bidirectional formatting characters appear escaped (`\u{1B}`), never interpreted, so neither the reason
    /// (refused by the daemon anyway) nor a path with a newline or an escape in it can draw a line of its own; in the
    /// verified lines (path, team) invisible characters are escaped too.
    private func description(_ what: String, byProgram: Bool = true) -> String {
        let path = PromptText.displayed(caller.executable, limit: Self.pathLimit, verified: true)
        var lines = ["Program: \(path) (pid \(caller.pid))"]
        if let identifier = caller.applicationIdentifier, let team = identifier.split(separator: ".").first {
            lines.append(
                "Registered with localauthd, team "
                    + PromptText.displayed(String(team), limit: Self.titleLimit, verified: true))
        } else {
            lines.append("Not registered with localauthd")
        }
        let text = PromptText.displayed(what, limit: Self.reasonLimit)
        lines.append("")
        lines.append(
            byProgram ? "The program's reason, in its own words: \u{201C}\(text)\u{201D}" : "It wants to \(text).")
        return lines.joined(separator: "\n")
    }

    /// A button title the program chose, shown safely; `fallback` when it chose none.
    private static func buttonTitle(_ title: String?, fallback: String) -> String {
        guard let title, !title.isEmpty else { return fallback }
        return PromptText.displayed(title, limit: titleLimit)
    }

    /// The fingerprint prompt: a dialog that says to touch the reader and, when the evaluation offers the passcode,
    /// takes it meanwhile (typing it chooses the fallback, and the passcode answers the question that follows).
    private func fingerprint(_ prompt: EvaluationPrompt) {
        guard state.withLock({ $0.scanning }) else { return }
        guard let dialog = open(whileScanning: true) else {
            // Over already, or pinentry cannot start (then nobody can be asked here).
            if state.withLock({ $0.scanning && !$0.ended }) { agent.answer(number, .action(.cancel)) }
            return
        }
        defer { close(dialog) }
        let description = description(prompt.reason)
        let outcome: Pinentry.Outcome
        if prompt.offersFallback {
            outcome = dialog.getPin(
                title: "Authentication",
                description: description + "\n\nTouch the fingerprint reader, or type your passcode.",
                prompt: "Passcode:",
                ok: "OK", cancel: Self.buttonTitle(prompt.cancelTitle, fallback: "Cancel"), error: nil)
        } else {
            outcome = dialog.message(
                title: "Authentication", description: description + "\n\nTouch the fingerprint reader.",
                ok: Self.buttonTitle(prompt.cancelTitle, fallback: "Cancel"))
        }
        let scanning = state.withLock { $0.scanning && !$0.ended }
        guard scanning else { return }
        switch outcome {
        case .secret(let passcode) where prompt.offersFallback:
            state.withLock { $0.typed = passcode }
            agent.answer(number, .action(.fallback))
        case .secret, .confirmed, .notConfirmed, .cancelled:
            agent.answer(number, .action(.cancel))
        case .ended:
            // pinentry failed or timed out: nobody can be asked here.
            agent.answer(number, .action(.cancel))
        }
    }

    /// A question (PAM's passcode, an application password): the passcode typed during the fingerprint prompt
    /// answers it at once; otherwise a dialog asks.
    private func ask(
        _ question: UInt64, _ prompt: EvaluationPrompt, _ passcode: PasscodePrompt, isApplicationPassword: Bool
    ) {
        if !passcode.echo, !isApplicationPassword,
            let typed = state.withLock({ state -> SecureBytes? in
                defer { state.typed = nil }
                return state.typed
            })
        {
            return agent.answer(number, .answer(question: question, typed))
        }
        guard let dialog = open() else { return agent.answer(number, .answer(question: question, nil)) }
        defer { close(dialog) }
        let error = state.withLock { state in
            defer { state.error = nil }
            return state.error
        }
        let text = PromptText.displayed(passcode.text.trimmingCharacters(in: .whitespaces), limit: Self.titleLimit)
        let outcome = dialog.getPin(
            title: "Authentication", description: description(prompt.reason),
            prompt: text.isEmpty ? (isApplicationPassword ? "Password:" : "Passcode:") : text, ok: "OK",
            cancel: Self.buttonTitle(prompt.cancelTitle, fallback: "Cancel"),
            error: error.map { PromptText.displayed($0, limit: Self.questionLimit) })
        guard !state.withLock({ $0.ended }) else { return }
        if case .secret(let secret) = outcome {
            agent.answer(number, .answer(question: question, secret))
        } else {
            agent.answer(number, .answer(question: question, nil))
        }
    }

    /// A program not on an item's list of trusted applications wants it.
    private func confirm(_ question: UInt64, _ trust: TrustPrompt) {
        guard let dialog = open() else { return agent.answer(number, .choice(question: question, nil)) }
        defer { close(dialog) }
        let outcome = dialog.confirm(
            title: "Keychain access",
            description: description("use an item of the keychain", byProgram: false) + "\n\n"
                + PromptText.displayed(trust.text, limit: Self.questionLimit),
            ok: "Allow _once", notOK: "Al_ways allow", cancel: "_Deny")
        guard !state.withLock({ $0.ended }) else { return }
        let choice: TrustChoice?
        switch outcome {
        case .confirmed: choice = .allowOnce
        case .notConfirmed: choice = .alwaysAllow
        case .cancelled: choice = .deny
        case .secret, .ended: choice = nil
        }
        agent.answer(number, .choice(question: question, choice))
    }

    /// A new dialog, held so that ``end()`` and the end of the fingerprint prompt can close it; nil when the
    /// request ended meanwhile (or, `whileScanning`, the fingerprint prompt did) or pinentry cannot start.
    private func open(whileScanning: Bool = false) -> Pinentry? {
        let abandoned = { self.state.withLock { $0.ended || (whileScanning && !$0.scanning) } }
        guard let dialog = agent.startPinentry(unless: abandoned) else { return nil }
        let kept = state.withLock { state -> Bool in
            guard !state.ended, !whileScanning || state.scanning else { return false }
            state.dialog = dialog
            return true
        }
        if !kept { dialog.kill() }
        return kept ? dialog : nil
    }

    private func close(_ dialog: Pinentry) {
        state.withLock { state in
            if state.dialog === dialog { state.dialog = nil }
        }
        dialog.kill()
    }
}
