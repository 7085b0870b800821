import Foundation
import SecureCrypto
import SecurityProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A client of `localauthd` over its main Unix socket and, for brief requests that cannot prompt, its lane
/// (``LaneConnection``). On the main socket every request is a ``ClientMessage`` frame tagged with a number, every
/// answer, progress report, prompt event and subscribed event a ``ServerMessage`` frame naming it. Several requests
/// are in flight at once on one connection; whichever thread reads the socket (a caller blocked at a synchronous
/// edge, else the connection's background thread; see ``SocketConnection``) hands each answer to whoever waits for
/// it and each prompt event to that request's presenter, whose answers go back as frames.
///
/// The daemon keeps the contexts, keys, database and reader: this process holds only context handles bound to the
/// connection. A connection that drops fails the requests in flight (`errSecNotAvailable`,
/// `LAError.notInteractive`); the next request connects again, and the contexts of the old connection are gone.
package final class SocketClient: SecurityClient {
    /// The daemon's socket.
    package let path: String
    package let defaultPresenter: (any EvaluationPresenter)?
    /// The keychain access groups this program claims, and whether it asks for all of them (`lactl`).
    package let accessGroups: [String]
    package let allGroups: Bool

    private let current = Mutex<SocketConnection?>(nil)
    private let lane = Mutex(LaneState())
    /// How many subscriptions were written on the main connection, and how many of them localauthd has certainly
    /// registered: as many as were written before a request that has since been answered there. The daemon reads
    /// one connection's messages in order and registers a subscription as it reads it, but the lane is another
    /// connection: a request sent there right after a subscription could be served before the subscription is
    /// read, and its event lost. So requests take the main connection until every subscription is registered.
    private let subscriptions = Mutex<(written: UInt64, registered: UInt64)>((0, 0))

    /// The lane's connection: free (`idle`), held by a request (`held`), or none yet (tried again after a pause
    /// when it could not be made).
    private struct LaneState {
        var idle: LaneConnection?
        var held = false
        /// `disconnect()` came while a request held it: it closes when given back.
        var closeWhenGivenBack = false
        var retryAfter = ContinuousClock.now
        /// The main connection asked to hold more than its hello was granted (`widenAccessGroups`): the lane, whose
        /// own hello is never widened, is not used any more.
        var widening = false
    }

    /// A client of the daemon at `path`, connected at once.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the daemon cannot be reached or refuses the connection.
    package init(
        path: String, accessGroups: [String], allGroups: Bool = false,
        defaultPresenter: (any EvaluationPresenter)? = nil
    ) throws {
        self.path = path
        self.accessGroups = accessGroups
        self.allGroups = allGroups
        self.defaultPresenter = defaultPresenter
        _ = try connection()
    }

    deinit {
        disconnect()
    }

    /// The open connection's descriptor, nil when there is none (never connected, or the connection ended, which
    /// an idle connection notices here): for diagnostics and tests.
    package var descriptor: Int32? {
        current.withLock { $0 }.flatMap { $0.isOpen ? $0.fd : nil }
    }

    /// Closes the connection, as if this process went away: the daemon cancels this connection's prompts and
    /// requests and forgets its contexts. The next request connects again.
    package func disconnect() {
        current.withLock { $0 }?.close()
        lane.withLock { state in
            state.idle?.close()
            state.idle = nil
            state.closeWhenGivenBack = state.held
        }
    }

    /// The open connection, or a new one when there is none or it dropped.
    private func connection() throws -> SocketConnection {
        try current.withLock { current in
            if let open = current, open.isOpen { return open }
            let made = try SocketConnection(path: path, accessGroups: accessGroups, allGroups: allGroups)
            current = made
            return made
        }
    }

    /// Sends the request `message` builds (with a new number, and whether a presenter will answer prompts) and
    /// returns the final answer, showing its prompts through `presenter` and its progress through `progress`.
    private func exchange(
        presenter: (any EvaluationPresenter)?, progress: (@Sendable (AdministrationEvent) -> Void)? = nil,
        _ message: (UInt64, Bool) -> ClientMessage
    ) async throws -> ServerMessage {
        let connection = try connection()
        let (id, responder) = Self.number(presenter)
        let written = subscriptions.withLock { $0.written }
        let answer = try await connection.request(
            message(id, responder != nil), id: id, responder: responder, progress: progress)
        registered(written)
        return answer
    }

    /// ``exchange(presenter:progress:_:)`` for a synchronous edge: the calling thread waits for the answer itself.
    private func exchangeBlocking(
        presenter: (any EvaluationPresenter)?, _ message: (UInt64, Bool) -> ClientMessage
    ) throws -> ServerMessage {
        let connection = try connection()
        let (id, responder) = Self.number(presenter)
        let written = subscriptions.withLock { $0.written }
        let answer = try connection.requestBlocking(message(id, responder != nil), id: id, responder: responder)
        registered(written)
        return answer
    }

    /// A request written after the first `written` subscriptions was answered on the main connection: localauthd
    /// has read and registered those subscriptions.
    private func registered(_ written: UInt64) {
        subscriptions.withLock { $0.registered = max($0.registered, written) }
    }

    /// A new request's number, and the responder that answers its prompts through `presenter` when one can.
    private static func number(_ presenter: (any EvaluationPresenter)?) -> (UInt64, PromptResponder?) {
        guard let responder = PromptResponder.forNewRequest(presenter: presenter) else {
            return (PromptResponder.nextRequest(), nil)
        }
        return (responder.request, responder)
    }

    /// The answer of a keychain or key request: what `response` finds in `message`, or the status it failed with.
    private static func storeAnswer<Response>(
        _ message: ServerMessage, _ response: (ServerMessage) -> Response?
    ) throws -> Response {
        if let answer = response(message) { return answer }
        if case .keychainFailure(_, let status) = message { throw status }
        throw SocketConnection.unexpected(message)
    }

    // MARK: The lane

    /// The answer to the request `message` builds (with a new number) over localauthd's lane (its `LaneServer`), or
    /// nil when the request takes the main connection: it may not take the lane (`mayTakeLane`), a presenter would
    /// answer its prompts, a subscription may not be registered yet (``subscriptions``), the lane is busy with
    /// another request of this process, cannot be made or is not served by the process behind the main socket, or
    /// the request could not be sent on it (an idle lane whose daemon restarted: the main connection connects
    /// again, and the next request makes a new lane), or the main connection's access groups were widened; and when
    /// the lane's answer is `errSecInteractionNotAllowed` (the main connection then asks it again: there the user's
    /// prompt agent can ask).
    private func throughLane(
        _ mayTakeLane: Bool, _ presenter: (any EvaluationPresenter)?, _ message: (UInt64) -> ClientMessage
    ) throws -> ServerMessage? {
        guard mayTakeLane, presenter == nil || PresenterQueue.isCurrent,
            subscriptions.withLock({ $0.written == $0.registered }), let connection = try takeLane()
        else {
            return nil
        }
        defer { giveBackLane(connection) }
        let id = PromptResponder.nextRequest()
        let answer = try connection.request(message(id), id: id)
        // Stopped where it needed the user: the main connection, where the user's prompt agent may ask (the lane
        // never prompts). Not for a request made from a presenter's callback, which may not prompt again.
        if case .keychainFailure(_, let status) = answer, status.code == .interactionNotAllowed,
            !PresenterQueue.isCurrent
        {
            return nil
        }
        return answer
    }

    /// The free lane connection, made first when there is none (checked against the main connection's daemon).
    private func takeLane() throws -> LaneConnection? {
        // A free lane is used as it is: asking the main connection whether it is open costs a system call.
        let free = lane.withLock { state -> LaneConnection? in
            guard !state.widening, let free = state.idle else { return nil }
            state.idle = nil
            state.held = true
            return free
        }
        if let free { return free }
        let daemon = try connection().daemonProcess
        return lane.withLock { state -> LaneConnection? in
            if !state.widening, let free = state.idle {
                state.idle = nil
                state.held = true
                return free
            }
            guard !state.held, !state.widening, ContinuousClock.now >= state.retryAfter, let daemon else { return nil }
            do {
                let made = try LaneConnection(
                    path: path + ".lane", daemon: daemon, accessGroups: accessGroups, allGroups: allGroups)
                state.held = true
                return made
            } catch {
                // An older daemon without a lane, or one not bound yet: the main connection for a while.
                state.retryAfter = ContinuousClock.now + .seconds(1)
                return nil
            }
        }
    }

    private func giveBackLane(_ connection: LaneConnection) {
        lane.withLock { state in
            state.held = false
            if state.closeWhenGivenBack { connection.close() }
            state.closeWhenGivenBack = false
            if connection.isOpen { state.idle = connection }
        }
    }

    // MARK: SecurityClient

    package func send(
        _ request: KeychainRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) async throws -> KeychainResponse {
        try Self.storeAnswer(
            await exchange(presenter: presenter, { .keychain($0, request, options, interactive: $1) }),
            { if case .keychain(_, let response) = $0 { response } else { nil } })
    }

    package func sendBlocking(
        _ request: KeychainRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) throws -> KeychainResponse {
        try Self.storeAnswer(
            throughLane(
                request.mayTakeLane && options.subject == nil, presenter,
                { .keychain($0, request, options, interactive: false) })
                ?? exchangeBlocking(presenter: presenter, { .keychain($0, request, options, interactive: $1) }),
            { if case .keychain(_, let response) = $0 { response } else { nil } })
    }

    package func send(
        _ request: KeyRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) async throws -> KeyResponse {
        try Self.storeAnswer(
            await exchange(presenter: presenter, { .key($0, request, options, interactive: $1) }),
            { if case .key(_, let response) = $0 { response } else { nil } })
    }

    package func sendBlocking(
        _ request: KeyRequest, options: EvaluationOptions, presenter: (any EvaluationPresenter)?
    ) throws -> KeyResponse {
        try Self.storeAnswer(
            throughLane(request.mayTakeLane, presenter, { .key($0, request, options, interactive: false) })
                ?? exchangeBlocking(presenter: presenter, { .key($0, request, options, interactive: $1) }),
            { if case .key(_, let response) = $0 { response } else { nil } })
    }

    package func send(
        _ request: AuthenticationRequest, presenter: (any EvaluationPresenter)?
    ) async throws -> AuthenticationResponse {
        do {
            switch try await exchange(presenter: presenter, { .authentication($0, request, interactive: $1) }) {
            case .authentication(_, let response): return response
            case .authenticationFailure(_, let error): throw error
            case let other: throw SocketConnection.unexpected(other)
            }
        } catch let status as KeychainStatus {
            throw AuthenticationError(.notInteractive, status.message)
        }
    }

    package func send(
        _ request: AdministrationRequest, progress: @escaping @Sendable (AdministrationEvent) -> Void
    ) async throws -> AdministrationEvent {
        if case .widenAccessGroups = request {
            // From now on every request takes the main connection, the one whose groups are widened.
            lane.withLock { $0.widening = true }
        }
        do {
            switch try await exchange(presenter: nil, progress: progress, { id, _ in .administration(id, request) }) {
            case .administration(_, let event): return event
            case .authenticationFailure(_, let error): throw error
            case .keychainFailure(_, let status): throw status
            case let other: throw SocketConnection.unexpected(other)
            }
        } catch let status as KeychainStatus where status.code == .notAvailable {
            throw AuthenticationError(.notInteractive, status.message)
        }
    }

    /// Sends a login step, as `pam_localauth.so` does (its C code writes the same frames by hand); for tests and
    /// tools.
    ///
    /// - Throws: the daemon's refusal (`KeychainStatus`, `AuthenticationError`), or the connection's failure.
    package func send(_ request: LoginRequest) async throws -> LoginOutcome {
        switch try await exchange(presenter: nil, { id, _ in .login(id, request) }) {
        case .login(_, let outcome): return outcome
        case .authenticationFailure(_, let error): throw error
        case .keychainFailure(_, let status): throw status
        case let other: throw SocketConnection.unexpected(other)
        }
    }

    /// Nil: localauthd owns the store, and tells of its changes by ``keychainEvents()`` only.
    package func storeStamp() -> StoreStamp? { nil }

    package func keychainEvents() -> AsyncStream<EngineEvent> {
        subscription({ .subscribeKeychainEvents($0) }) { message in
            if case .keychainEvent(_, let event) = message { return event }
            return nil
        }
    }

    package func environmentChanges() -> AsyncStream<EnvironmentSnapshot> {
        subscription({ .subscribeEnvironment($0) }) { message in
            if case .environment(_, let snapshot) = message { return snapshot }
            return nil
        }
    }

    /// A stream of the events a subscription made by `subscribe` delivers, ended when the connection drops or the
    /// stream is dropped (then the daemon is told to stop).
    private func subscription<Element: Sendable>(
        _ subscribe: @escaping @Sendable (UInt64) -> ClientMessage,
        _ element: @escaping @Sendable (ServerMessage) -> Element?
    ) -> AsyncStream<Element> {
        AsyncStream { continuation in
            guard let connection = try? connection() else { return continuation.finish() }
            let id = PromptResponder.nextRequest()
            connection.subscribe(
                id,
                deliver: { message in
                    if let value = element(message) { continuation.yield(value) }
                }, end: { continuation.finish() })
            do {
                try connection.write(subscribe(id))
                // Counted once written, so that only a request written after it can count it as registered.
                subscriptions.withLock { $0.written += 1 }
            } catch {
                continuation.finish()
            }
            continuation.onTermination = { _ in connection.unsubscribe(id) }
        }
    }
}

extension SocketClient {
    /// A bare connection to localauthd's socket at `path`, for a client that speaks the protocol itself (`lactl
    /// agent`), with the uid of the process that serves it (`SO_PEERCRED`; nil when the kernel gives none).
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the socket cannot be reached.
    package static func connectBare(_ path: String) throws -> (descriptor: Int32, serverUID: UInt32?) {
        let fd = try SocketConnection.connect(path)
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        let known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 && credentials.0 > 0
        return (fd, known ? credentials.1 : nil)
    }
}
