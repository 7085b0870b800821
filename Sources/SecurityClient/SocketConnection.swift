import Foundation
import SecureCrypto
import SecurityProtocol
import SecurityTransport
import Synchronization
import WorkThreads

#if canImport(Glibc)
    import Glibc
#endif

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
            case .refused(let reason)?:
                throw KeychainStatus(.notAvailable, "localauthd refused the connection: \(reason)")
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
        case .agentPrompt, .agentPromptEnded, .agentNotice:
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
