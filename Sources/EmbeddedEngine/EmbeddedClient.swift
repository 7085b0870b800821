import Authenticators
import Foundation
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import WorkThreads

/// A client that runs the engine inside the calling process, on the store its configuration names.
///
/// Protects data at rest and gives Apple's semantics; it cannot keep keys from code running as the same user.
/// Prompts take the same path as over the daemon's socket: the engine's ``PromptChannel`` sends
/// ``PromptEvent``s to a ``PromptResponder`` and gets ``PromptAnswer``s back, through the codec when round-tripping.
package final class EmbeddedClient: SecurityClient {
    /// The engine serving this client.
    package let engine: KeychainEngine
    /// Who this client's requests come from.
    package let caller: CallerIdentity
    /// Whether every message passes through the protocol's codec (``EmbeddedConfiguration/roundTripsMessages``).
    package let roundTripsMessages: Bool
    package let defaultPresenter: (any EvaluationPresenter)?

    /// Opens (creating on first use) the store `configuration` names, with authenticators configured by
    /// `authentication` (by default: state in the store directory, PAM and readers from the environment), prompting
    /// through `defaultPresenter` for requests that bring no presenter of their own.
    ///
    /// - Throws: `KeychainStatus` when the store cannot be opened.
    package init(
        configuration: EmbeddedConfiguration, authentication: AuthenticationConfiguration? = nil,
        defaultPresenter: (any EvaluationPresenter)? = nil
    ) throws {
        let authentication = authentication ?? .fromEnvironment(dataDirectory: configuration.dataDirectory)
        engine = try KeychainEngine(directory: configuration.dataDirectory, authentication: authentication)
        caller = CallerIdentity(
            accessGroups: configuration.accessGroups, mayAccessAllGroups: configuration.mayAccessAllGroups)
        roundTripsMessages = configuration.roundTripsMessages
        self.defaultPresenter = defaultPresenter
    }

    /// The process's default client: the store, PAM service, readers and access groups the environment names
    /// (`EmbeddedConfiguration.fromEnvironment()`, `AuthenticationConfiguration.fromEnvironment`), prompting on
    /// the terminal when there is one.
    ///
    /// - Throws: `KeychainStatus` when the store cannot be opened.
    package static func fromEnvironment(mayAccessAllGroups: Bool = false) throws -> EmbeddedClient {
        var configuration = EmbeddedConfiguration.fromEnvironment()
        configuration.mayAccessAllGroups = mayAccessAllGroups
        return try EmbeddedClient(
            configuration: configuration,
            authentication: .fromEnvironment(dataDirectory: configuration.dataDirectory),
            defaultPresenter: TerminalPresenter.environmentDefault())
    }

    /// A client for another caller of the same engine (same store, same keys, same event stream).
    package init(
        engine: KeychainEngine, caller: CallerIdentity,
        roundTripsMessages: Bool = EmbeddedConfiguration.roundTripsMessagesByDefault,
        defaultPresenter: (any EvaluationPresenter)? = nil
    ) {
        self.engine = engine
        self.caller = caller
        self.roundTripsMessages = roundTripsMessages
        self.defaultPresenter = defaultPresenter
    }

    /// The connection ends with the client: its authentication contexts end too.
    deinit {
        engine.authentication?.discardAll(owner: caller.connection)
    }

    // MARK: Keychain and keys

    package func send(
        _ request: KeychainRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) async throws -> KeychainResponse {
        try await BlockingWork.run { try self.sendBlocking(request, options: options, presenter: presenter) }
    }

    package func sendBlocking(
        _ request: KeychainRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) throws -> KeychainResponse {
        let caller = try options.subject.map(actingFor) ?? self.caller
        return try serveStore(request, options, presenter) { try engine.handle($0, caller: caller, prompting: $1) }
    }

    /// This client asking on behalf of the process `subject` names, as localauthd's sessions do: only a client that
    /// may use every group (an administrative tool), only for a running process of this user that started when
    /// the subject says. Embedded mode keeps no program from another of its user (README, threat model): this
    /// names the program in trusted-application lists and prompts, as the daemon does, and guards nothing more.
    ///
    /// - Throws: `errSecAuthFailed`.
    private func actingFor(_ subject: ProcessReference) throws -> CallerIdentity {
        guard caller.mayAccessAllGroups else {
            throw KeychainStatus(.authFailed, "only an administrative tool asks on behalf of another program")
        }
        // Checked after the program is read: the same start time and file then mean it was that process's.
        guard subject.executable != nil, Self.owner(of: subject.pid) == getuid(),
            let program = Self.program(of: subject.pid), ProcessReference.runningWithExecutable(subject.pid) == subject
        else {
            throw KeychainStatus(.authFailed, "the program asked for is not a running process of this user")
        }
        var acting = caller
        var info = caller.info
        info.pid = subject.pid
        info.executable = program.executable
        info.executableDigest = program.codeDigest
        info.applicationIdentifier = nil
        info.registrationFile = nil
        acting.actingFor = CallerIdentity.Represented(info: info, codeDigest: nil)
        return acting
    }

    /// Programs read for ``actingFor(_:)``, by their file's version: the executable is hashed once, not at each
    /// request (a D-Bus client's every call names it).
    private static let programs = Mutex<[ExecutableVersion: TrustedApplication]>([:])

    private struct ExecutableVersion: Hashable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        /// The inode's change time, which every write moves and no program can set back (unlike the modification
        /// time).
        var changed: Int
        var changedNanoseconds: Int
    }

    /// The program process `pid` runs, its executable hashed once per version of the file.
    private static func program(of pid: Int32) -> TrustedApplication? {
        let exe = "/proc/\(pid)/exe"
        var status = stat()
        guard stat(exe, &status) == 0 else { return nil }
        let version = ExecutableVersion(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
            changed: status.st_ctim.tv_sec, changedNanoseconds: status.st_ctim.tv_nsec)
        if let known = programs.withLock({ $0[version] }) { return known }
        guard let read = TrustedApplication.reading(exe) else { return nil }
        programs.withLock { known in
            if known.count >= 64 { known.removeAll() }
            known[version] = read
        }
        return read
    }

    /// The owner of `/proc/<pid>` (the process's effective user), nil when it is gone.
    private static func owner(of pid: Int32) -> UInt32? {
        var status = stat()
        return stat("/proc/\(pid)", &status) == 0 ? status.st_uid : nil
    }

    package func send(
        _ request: KeyRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) async throws -> KeyResponse {
        try await BlockingWork.run { try self.sendBlocking(request, options: options, presenter: presenter) }
    }

    package func sendBlocking(
        _ request: KeyRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) throws -> KeyResponse {
        try serveStore(request, options, presenter) { try engine.handle($0, caller: caller, prompting: $1()) }
    }

    // MARK: Authentication and administration

    package func send(
        _ request: AuthenticationRequest, presenter: (any EvaluationPresenter)?
    ) async throws -> AuthenticationResponse {
        let responding = Self.respondingChannel(to: presenter, roundTrips: roundTripsMessages)
        let channel = responding?.channel
        defer { channel?.close() }
        return try await PromptResponder.answer(after: responding?.responder) {
            guard roundTripsMessages else { return try await engine.handle(request, caller: caller, prompts: channel) }
            return try await MessageRoundTrip.result {
                try await engine.handle(MessageRoundTrip.value(request), caller: caller, prompts: channel)
            }
        }
    }

    package func send(
        _ request: AdministrationRequest, progress: @escaping @Sendable (AdministrationEvent) -> Void
    ) async throws -> AdministrationEvent {
        guard roundTripsMessages else { return try await engine.handle(request, caller: caller, progress: progress) }
        return try await MessageRoundTrip.result {
            try await engine.handle(MessageRoundTrip.value(request), caller: caller) {
                progress(MessageRoundTrip.value($0))
            }
        }
    }

    // MARK: Events

    package func keychainEvents() -> AsyncStream<EngineEvent> {
        let events = engine.events(for: caller)
        return roundTripsMessages ? MessageRoundTrip.stream(events) : events
    }

    /// The engine's store file and its lock state, read at once (the file's count moves with any program's commit).
    /// When the count cannot be read, a stamp equal to no other: nothing is kept on it.
    package func storeStamp() -> StoreStamp? {
        guard let file = engine.storeChangeStamp else {
            return StoreStamp(
                file: .max, version: Self.unreadableStamps.add(1, ordering: .relaxed).newValue, locked: engine.isLocked)
        }
        return StoreStamp(file: file.file, version: file.version, locked: engine.isLocked)
    }

    /// The versions given to stamps of a store whose count could not be read, never the same twice.
    private static let unreadableStamps = Atomic<Int64>(0)

    package func environmentChanges() -> AsyncStream<EnvironmentSnapshot> {
        guard let contexts = engine.authentication else { return AsyncStream { $0.finish() } }
        let changes = contexts.environmentChanges(for: caller)
        return roundTripsMessages ? MessageRoundTrip.stream(changes) : changes
    }

    // MARK: Prompts

    /// Serves a store request (keychain or key) on the calling thread through `handle`, with a prompt channel to
    /// `presenter` for as long as it runs, the request, options and answer through the codec when round-tripping.
    /// The channel is set up when `handle` first asks for the prompting (a lookup the hot path answers never does).
    private func serveStore<Request: ProtocolCodable, Response: ProtocolCodable>(
        _ request: Request, _ options: EvaluationOptions, _ presenter: (any EvaluationPresenter)?,
        _ handle: (Request, () -> Prompting) throws -> Response
    ) throws -> Response {
        var responding: (channel: PromptChannel, responder: PromptResponder)?
        var asked = false
        defer {
            responding?.channel.close()
            responding?.responder.waitUntilShown()
        }
        // The two closures repeat each other on purpose: passed as literals, their captured state stays on the
        // stack; a local function shared by both boxes it on the heap (two allocations per request).
        let roundTrips = roundTripsMessages
        guard roundTrips else {
            return try handle(request) {
                if !asked { (asked, responding) = (true, Self.respondingChannel(to: presenter, roundTrips: false)) }
                return Prompting(options: options, channel: responding?.channel)
            }
        }
        return try MessageRoundTrip.result {
            try handle(MessageRoundTrip.value(request)) {
                if !asked { (asked, responding) = (true, Self.respondingChannel(to: presenter, roundTrips: true)) }
                return Prompting(options: MessageRoundTrip.value(options), channel: responding?.channel)
            }
        }
    }

    /// A channel for one request to `presenter`, as this client makes them (for engine-level tests too).
    package static func promptChannel(
        to presenter: (any EvaluationPresenter)?,
        roundTrips: Bool = EmbeddedConfiguration.roundTripsMessagesByDefault
    ) -> PromptChannel? {
        respondingChannel(to: presenter, roundTrips: roundTrips)?.channel
    }

    /// A channel whose events reach `presenter` on the presenter queue and whose answers come back from it, both
    /// through the codec when round-tripping, with the responder that shows them (whose ``PromptResponder/shown()``
    /// the request's answer waits for); nil when nobody can be asked (no presenter, or a request made from a
    /// presenter callback, which must not wait for a second prompt).
    private static func respondingChannel(
        to presenter: (any EvaluationPresenter)?, roundTrips: Bool
    ) -> (channel: PromptChannel, responder: PromptResponder)? {
        guard let responder = PromptResponder.forNewRequest(presenter: presenter) else { return nil }
        let answers = AnswerRelay()
        let channel = PromptChannel(request: responder.request) { event in
            responder.handle(roundTrips ? MessageRoundTrip.value(event) : event) { answer in
                answers.deliver(roundTrips ? MessageRoundTrip.value(answer) : answer)
            }
        }
        answers.connect(channel)
        return (channel, responder)
    }
}

/// Carries a responder's answers to the channel it answers (made after the responder, so the link is set later;
/// weak, so the channel and its event sink do not keep each other alive).
private final class AnswerRelay: Sendable {
    private struct Link: @unchecked Sendable {
        weak var channel: PromptChannel?
    }

    private let link = Mutex(Link())

    func connect(_ channel: PromptChannel) {
        link.withLock { $0.channel = channel }
    }

    func deliver(_ answer: PromptAnswer) {
        link.withLock { $0.channel }?.receive(answer)
    }
}
