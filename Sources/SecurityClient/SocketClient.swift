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
            throughLane(request.mayTakeLane, presenter, { .keychain($0, request, options, interactive: false) })
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
            connection.subscribe(id, deliver: { message in
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

/// One connection to the daemon: the socket, the requests in flight and the subscriptions.
///
/// Reading follows a leader/follower scheme, so that a synchronous edge's round trip wakes no thread but the
/// caller's: at most one thread reads the socket at a time (the reader), and it hands every frame it reads to
/// whom it belongs. A thread blocked on a request reads itself when nobody else does, until its own answer came;
/// then it hands the reading on to another blocked thread, or to the connection's background thread while tasks
/// or subscriptions wait. Nobody reads while nothing is in flight; the end of an idle connection is noticed when
/// the next request asks for the connection (``isOpen``).
final class SocketConnection: Sendable {
    /// The longest frame the daemon may send (the protocol's limit).
    static let frameLimit = MessageLimits.default.maximumFrameByteCount

    /// Who waits for a request's answer: a task, or a thread blocked at a synchronous edge.
    private enum Waiter {
        case task(CheckedContinuation<ServerMessage, any Error>)
        case thread(BlockedWaiter)

        func resume(with result: Result<ServerMessage, any Error>) {
            switch self {
            case .task(let continuation): continuation.resume(with: result)
            case .thread(let waiter): waiter.resume(with: result)
            }
        }
    }

    /// A thread waiting for its answer: woken when the answer came, or when it may take over the reading.
    final class BlockedWaiter: Sendable {
        fileprivate let wake = DispatchSemaphore(value: 0)
        fileprivate let result = Mutex<Result<ServerMessage, any Error>?>(nil)

        func resume(with result: Result<ServerMessage, any Error>) {
            self.result.withLock { $0 = result }
            wake.signal()
        }
    }

    private struct Pending {
        var waiter: Waiter
        var responder: PromptResponder?
        var progress: (@Sendable (AdministrationEvent) -> Void)?
    }

    private struct Subscription {
        var deliver: @Sendable (ServerMessage) -> Void
        var end: @Sendable () -> Void
    }

    private struct State {
        var pending: [UInt64: Pending] = [:]
        var subscriptions: [UInt64: Subscription] = [:]
        var closed = false
        /// A thread is reading the socket.
        var reading = false

        /// Whether someone must read although no blocked thread does: a task or a subscription waits.
        var needsBackground: Bool {
            !subscriptions.isEmpty || pending.values.contains { if case .task = $0.waiter { true } else { false } }
        }

        /// A blocked thread whose answer has not come, to take over the reading.
        var blockedFollower: BlockedWaiter? {
            for request in pending.values {
                if case .thread(let waiter) = request.waiter { return waiter }
            }
            return nil
        }
    }

    let fd: Int32
    /// The process serving this connection (the kernel's `SO_PEERCRED`), which must serve the lane too.
    let daemonProcess: Int32?
    private let path: String
    private let state = Mutex(State())
    private let writeLock = Mutex(())
    /// Wakes the background thread: a task or a subscription now needs a reader, or the connection closed.
    private let backgroundWake = DispatchSemaphore(value: 0)

    /// Connects to `path`, says hello and waits for the welcome.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when nothing listens there or the daemon refuses.
    init(path: String, accessGroups: [String], allGroups: Bool) throws {
        self.path = path
        fd = try Self.connect(path)
        daemonProcess = Self.peerProcess(fd)
        do {
            try write(.hello(versions: [1], accessGroups: accessGroups, allGroups: allGroups))
            switch try readMessage() {
            case .welcome(1)?: break
            case .refused(let reason)?: throw KeychainStatus(.notAvailable, "localauthd refused the connection: \(reason)")
            default: throw KeychainStatus(.notAvailable, "localauthd at \(path) did not answer the hello")
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        let thread = Thread { [self] in
            nameCurrentThread("la.socket")
            backgroundLoop()
        }
        thread.start()
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Whether the connection can carry a request: not closed, and, when nobody reads it, the daemon has not
    /// hung up meanwhile (a restarted daemon's old connection is noticed here, and the next one is made).
    var isOpen: Bool {
        guard !isClosed else { return false }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        // Something to read while idle is the daemon's end of the connection (or its refusal). Asked again once
        // this thread is the reader: another reader may have taken what the first poll saw, and a read with
        // nothing coming would wait for ever.
        if poll(&descriptor, 1, 0) > 0, takeReading() {
            if poll(&descriptor, 1, 0) > 0 {
                read(until: { _ in true })
            } else {
                handOnReading()
            }
        }
        return !isClosed
    }

    /// Shuts the socket down: what is in flight fails, the descriptor closes. Once the descriptor closed this does
    /// nothing: the number may already name another file of the process.
    func close() {
        shutDown()
        // Whoever reads now sees the end; when nobody does, this thread finishes the connection.
        if takeReading() { read(until: { _ in true }) }
    }

    /// Sends `message` (request number `id`) and waits for its final answer, and for its presenter to have shown
    /// the prompts that came before it (``PromptResponder/afterShown(_:)``).
    func request(
        _ message: ClientMessage, id: UInt64, responder: PromptResponder?,
        progress: (@Sendable (AdministrationEvent) -> Void)?
    ) async throws -> ServerMessage {
        try await PromptResponder.answer(after: responder) {
            try await withCheckedThrowingContinuation { continuation in
                start(message, id: id, Pending(waiter: .task(continuation), responder: responder, progress: progress))
            }
        }
    }

    /// Sends `message` and blocks the calling thread until its final answer: a synchronous edge's round trip. The
    /// thread reads the answer itself when no other thread is reading.
    func requestBlocking(_ message: ClientMessage, id: UInt64, responder: PromptResponder?) throws -> ServerMessage {
        let waiter = BlockedWaiter()
        start(message, id: id, Pending(waiter: .thread(waiter), responder: responder, progress: nil))
        defer { responder?.waitUntilShown() }
        while true {
            if let result = waiter.result.withLock({ $0 }) { return try result.get() }
            if takeReading() {
                read(spinning: true, until: { _ in waiter.result.withLock { $0 != nil } })
            } else {
                waiter.wake.wait()
            }
        }
    }

    private func start(_ message: ClientMessage, id: UInt64, _ pending: Pending) {
        let registered = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.pending[id] = pending
            return true
        }
        guard registered else { return pending.waiter.resume(with: .failure(unreachable())) }
        do {
            try write(message)
        } catch {
            state.withLock { $0.pending.removeValue(forKey: id) }?.waiter.resume(with: .failure(error))
        }
        if case .task = pending.waiter { wakeBackgroundIfUnread() }
    }

    func subscribe(
        _ id: UInt64, deliver: @escaping @Sendable (ServerMessage) -> Void, end: @escaping @Sendable () -> Void
    ) {
        let closed = state.withLock { state -> Bool in
            if !state.closed { state.subscriptions[id] = Subscription(deliver: deliver, end: end) }
            return state.closed
        }
        if closed { return end() }
        wakeBackgroundIfUnread()
    }

    func unsubscribe(_ id: UInt64) {
        guard state.withLock({ $0.subscriptions.removeValue(forKey: id) }) != nil else { return }
        try? write(.unsubscribe(id))
    }

    /// Writes one frame, whole, or throws `errSecNotAvailable` (also once the connection closed: its descriptor
    /// number may by then name another file of the process).
    func write(_ message: ClientMessage) throws {
        let frame = message.encoded()
        try writeLock.withLock { _ in
            guard !isClosed else { throw unreachable() }
            try frame.withUnsafeBytes { bytes in
                var sent = 0
                while sent < bytes.count {
                    let n = Glibc.send(fd, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { throw unreachable() }
                    sent += n
                }
            }
        }
    }

    // MARK: Reading

    /// Makes the calling thread the reader, if nobody reads and the connection is open.
    private func takeReading() -> Bool {
        state.withLock { state in
            guard !state.reading, !state.closed else { return false }
            state.reading = true
            return true
        }
    }

    /// As the reader: reads and hands out frames until `done` says so after a frame (or the connection ends), then
    /// hands the reading on. A thread that waits for its own answer (`spinning`) first polls for it a short while.
    private func read(spinning: Bool = false, until done: (State) -> Bool) {
        while true {
            if spinning { awaitReadable() }
            guard let message = try? readMessage() else { return finish() }
            dispatch(message)
            if handOnReading(when: done) { return }
        }
    }

    /// As the reader, when `done` says so: stops reading and wakes who reads next, a blocked thread whose answer
    /// has not come or the background thread while tasks or subscriptions wait. Whether it stopped.
    @discardableResult
    private func handOnReading(when done: (State) -> Bool = { _ in true }) -> Bool {
        let successor = state.withLock { state -> BlockedWaiter?? in
            guard done(state) else { return nil }
            state.reading = false
            return .some(state.blockedFollower)
        }
        guard case .some(let follower) = successor else { return false }
        if let follower {
            follower.wake.signal()
        } else {
            wakeBackgroundIfUnread()
        }
        return true
    }

    /// Wakes the background thread when a task or a subscription waits and nobody reads.
    private func wakeBackgroundIfUnread() {
        if state.withLock({ !$0.reading && $0.needsBackground }) { backgroundWake.signal() }
    }

    /// The background thread: reads while tasks or subscriptions wait and no blocked thread reads; ends with the
    /// connection.
    private func backgroundLoop() {
        while !isClosed {
            if state.withLock({ $0.needsBackground }), takeReading() {
                read(until: { !$0.needsBackground || $0.blockedFollower != nil })
            } else {
                backgroundWake.wait()
            }
        }
    }

    /// The connection ended (as the reader): it is closed under the write lock, after `closed` is set, so no write
    /// or shutdown can reach the descriptor's number afterwards, when it may name another file; then everything in
    /// flight fails and the subscriptions end.
    private func finish() {
        let (pending, subscriptions) = writeLock.withLock { _ in
            defer { Glibc.close(fd) }
            return state.withLock { state in
                state.closed = true
                state.reading = false
                defer {
                    state.pending = [:]
                    state.subscriptions = [:]
                }
                return (Array(state.pending.values), Array(state.subscriptions.values))
            }
        }
        for request in pending { request.waiter.resume(with: .failure(unreachable())) }
        for subscription in subscriptions { subscription.end() }
        backgroundWake.signal()
    }

    private func dispatch(_ message: ServerMessage) {
        switch message {
        case .prompt(let event):
            guard let responder = state.withLock({ $0.pending[event.request]?.responder }) else { return }
            responder.handle(event) { [weak self] answer in try? self?.write(.answer(answer)) }
        case .progress(let id, let event):
            state.withLock { $0.pending[id]?.progress }?(event)
        case .keychainEvent(let id, _), .environment(let id, _):
            state.withLock { $0.subscriptions[id]?.deliver }?(message)
        case .keychain(let id, _), .key(let id, _), .authentication(let id, _), .administration(let id, _),
            .keychainFailure(let id, _), .authenticationFailure(let id, _), .login(let id, _),
            .agentRegistered(let id, _):
            state.withLock { $0.pending.removeValue(forKey: id) }?.waiter.resume(with: .success(message))
        case .agentPrompt, .agentPromptEnded:
            // Only an agent's connection gets these (lactl agent reads its own); never a SocketClient's.
            break
        case .welcome, .refused:
            shutDown()
        }
    }

    /// Shuts the socket down, unless the descriptor closed already (its number may name another file by then): the
    /// reader then sees the end.
    private func shutDown() {
        writeLock.withLock { _ in
            if !isClosed { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// How long a thread waiting for its answer polls the socket before it sleeps in `recv`, when the machine has
    /// more than one processor (on one, polling would only delay the daemon).
    ///
    /// An answer that comes while the thread still runs costs no wake-up; on virtual machines a sleeping thread's
    /// wake-up takes 40–50 µs, more than the daemon takes to answer a lookup. An answer that takes longer (a prompt,
    /// a large result) costs this much processor time once, then the thread sleeps.
    static let spinBudget: Duration = sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1 ? .microseconds(250) : .zero

    /// Returns when the socket has something to read or ``spinBudget`` passed.
    private func awaitReadable() {
        // Yielding between polls: the scheduler often wakes the daemon's thread on this very processor (the
        // request's write woke it from here), and a thread that spun without yielding kept it from answering until
        // the budget ran out.
        FrameReader.awaitReadable(fd, for: Self.spinBudget)
    }

    /// The next whole frame, decoded; nil at the end of the stream.
    private func readMessage() throws -> ServerMessage? {
        var header = [UInt8](repeating: 0, count: 5)
        guard try readFully(&header) else { return nil }
        let length = Int(UInt32(header[1]) << 24 | UInt32(header[2]) << 16 | UInt32(header[3]) << 8 | UInt32(header[4]))
        guard header[0] == 1, length <= Self.frameLimit else {
            throw KeychainStatus(.notAvailable, "localauthd sent a frame this client cannot read")
        }
        var frame = SecureBytes(zeros: 5 + length)
        let complete = try frame.withUnsafeMutableBytes { bytes -> Bool in
            bytes.copyBytes(from: header)
            return try readFully(UnsafeMutableRawBufferPointer(rebasing: bytes[5...]))
        }
        guard complete else { return nil }
        return try ServerMessage(decoding: frame)
    }

    private func readFully(_ buffer: inout [UInt8]) throws -> Bool {
        try buffer.withUnsafeMutableBytes { try readFully($0) }
    }

    private func readFully(_ buffer: UnsafeMutableRawBufferPointer) throws -> Bool {
        var done = 0
        while done < buffer.count {
            let n = recv(fd, buffer.baseAddress! + done, buffer.count - done, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            done += n
        }
        return true
    }

    // MARK: Helpers

    /// The pid of the process on the other end of `fd` (`SO_PEERCRED`: pid, uid, gid as 32-bit fields).
    static func peerProcess(_ fd: Int32) -> Int32? {
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.0 > 0 else { return nil }
        return credentials.0
    }

    static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw KeychainStatus(.notAvailable, "no socket for localauthd") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            Glibc.close(fd)
            throw KeychainStatus(.notAvailable, "the localauthd socket path is too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw KeychainStatus(.notAvailable, "localauthd cannot be reached at \(path): \(reason)")
        }
        return fd
    }

    private func unreachable() -> KeychainStatus {
        KeychainStatus(.notAvailable, "the connection to localauthd at \(path) was lost")
    }

    static func unexpected(_ message: ServerMessage) -> KeychainStatus {
        KeychainStatus(.internalComponent, "localauthd answered with another kind of message")
    }
}

/// The client's end of localauthd's lane (`LaneServer`): a connection of its own for brief requests that cannot
/// prompt, one at a time, passed through the connection's mailbox (``LaneMailbox``) and answered there — no reader
/// thread, no hand-over, and while the calling thread polls for the answer, no system call.
package final class LaneConnection: @unchecked Sendable {
    // @unchecked: used by one thread at a time (`SocketClient` hands it out and takes it back under its lock).
    private let fd: Int32
    private let path: String
    private let mailbox: LaneMailbox
    /// The last request's number in the mailbox.
    private var sequence: UInt32 = 0
    /// When to poll for an answer before sleeping.
    private var polling = PollingBackOff()
    /// False once the connection failed or was closed; it is then dropped.
    private(set) var isOpen = true

    /// Connects to the lane at `path`, checks that process `daemon` serves it (the one behind the main socket:
    /// anything else at the lane's name is not used), says hello and waits for the welcome and its mailbox.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when it cannot be used.
    package init(path: String, daemon: Int32, accessGroups: [String], allGroups: Bool) throws {
        self.path = path
        fd = try SocketConnection.connect(path)
        do {
            guard SocketConnection.peerProcess(fd) == daemon else {
                throw KeychainStatus(.notAvailable, "the lane at \(path) is not served by localauthd's process")
            }
            guard FrameReader.write(ClientMessage.hello(versions: [1], accessGroups: accessGroups, allGroups: allGroups).encoded(), to: fd)
            else { throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) did not welcome this program") }
            mailbox = try Self.receiveWelcome(fd, path)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    deinit {
        Glibc.close(fd)
    }

    /// Reads the welcome frame, which carries the mailbox's descriptor, and maps the mailbox.
    private static func receiveWelcome(_ fd: Int32, _ path: String) throws -> LaneMailbox {
        var bytes = [UInt8](repeating: 0, count: 256)
        var count = 0
        var passed: Int32 = -1
        defer { if passed >= 0 { Glibc.close(passed) } }
        // The welcome is a few bytes, sent at once: read until its frame is whole (the header says how long).
        while count < 5 || count < 5 + (Int(bytes[1]) << 24 | Int(bytes[2]) << 16 | Int(bytes[3]) << 8 | Int(bytes[4])) {
            let (read, received) = bytes.withUnsafeMutableBytes {
                LaneMailbox.receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: $0[count...]))
            }
            if received >= 0 {
                if passed >= 0 { Glibc.close(passed) }
                passed = received
            }
            if read < 0 && errno == EINTR { continue }
            guard read > 0, count + read < bytes.count else {
                throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) did not welcome this program")
            }
            count += read
        }
        switch try? ServerMessage(decoding: bytes[0..<count]) {
        case .welcome(1)?:
            guard passed >= 0 else { throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) passed no mailbox") }
            do {
                return try LaneMailbox(mapping: passed)
            } catch {
                throw KeychainStatus(.notAvailable, "localauthd's lane at \(path): \(error)")
            }
        case .refused(let reason)?:
            throw KeychainStatus(.notAvailable, "localauthd's lane refused: \(reason)")
        default:
            throw KeychainStatus(.notAvailable, "localauthd's lane at \(path) did not welcome this program")
        }
    }

    /// Sends `message` (request number `id`) and returns its answer, polling for it a short while before sleeping;
    /// nil when it goes over the main socket instead: it is too large for the mailbox, it was not delivered (the
    /// daemon's end was gone before it took the request: it stopped or restarted while this connection was idle),
    /// or it is a lookup whose answer is too large for the mailbox.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the connection fails or is refused after the daemon took the
    ///   request (which may have been carried out, as when the main connection drops).
    func request(_ message: ClientMessage, id: UInt64) throws -> ServerMessage? {
        guard isOpen else { return nil }
        guard let answer = try exchange(message.encoded()) else { return nil }
        switch answer {
        case .keychain(id, _), .key(id, _), .keychainFailure(id, _): return answer
        case .refused(let reason):
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane refused: \(reason)")
        default:
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane answered another request")
        }
    }

    /// Posts `frame` (any bytes: tests send malformed ones) as the next request and returns the answer's message;
    /// nil as ``request(_:id:)`` describes.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the connection ended after the daemon took the request, or
    ///   the answer does not decode.
    package func exchange(_ frame: SecureBytes) throws -> ServerMessage? {
        guard frame.count <= LaneMailbox.requestCapacity else { return nil }
        let next = sequence &+ 1
        sequence = next
        defer { secureZero(UnsafeMutableRawBufferPointer(rebasing: mailbox.requestArea[0..<frame.count])) }
        let rang = frame.withUnsafeBytes { mailbox.post($0, as: .request, sequence: next, doorbell: fd) }
        // Polled for ``SocketConnection/spinBudget`` unless answers have been slower than that (``PollingBackOff``).
        let budget = polling.budget(SocketConnection.spinBudget)
        let answeredWhilePolling = rang && mailbox.poll(until: .answer, false, next, for: budget)
        if budget > .zero { polling.polled(found: answeredWhilePolling) }
        let answered =
            answeredWhilePolling
            || (rang && mailbox.sleep(until: .answer, false, next, sleeps: .clientSleeps, socket: fd))
        guard answered else {
            // The daemon's end is gone. A request it never copied out was not carried out and may go another way.
            let taken = mailbox.load(.taken) == next
            close()
            guard taken else { return nil }
            throw KeychainStatus(.notAvailable, "the connection to localauthd's lane at \(path) was lost")
        }
        let length = Int(mailbox.load(.answerLength))
        guard length > 0 else { return nil }
        guard length <= LaneMailbox.answerCapacity else {
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane answered \(length) bytes")
        }
        let answer = UnsafeMutableRawBufferPointer(rebasing: mailbox.answerArea[0..<length])
        defer { secureZero(answer) }
        do {
            return try ServerMessage(decoding: UnsafeRawBufferPointer(answer))
        } catch {
            close()
            throw KeychainStatus(.notAvailable, "localauthd's lane answered a frame that does not decode")
        }
    }

    /// Ends the connection (the descriptor closes with the object).
    package func close() {
        isOpen = false
        shutdown(fd, Int32(SHUT_RDWR))
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
