import CSocket
import Foundation
import SecureCrypto
import SecurityProtocol
import SecurityServer
import SecurityTransport
import SocketPeer
import Synchronization
import WorkThreads

#if canImport(Glibc)
    import Glibc
#endif

/// localauthd's lane: the keychain's hot path on a socket of its own beside the main one (`<socket>.lane`).
///
/// Through the main socket a lookup crosses SwiftNIO's event loop: a wake-up in `epoll_wait`, the pipeline's buffers
/// and handlers, a write queued and flushed. On the lane each connection has a thread of its own, and after the hello
/// requests and answers pass through the connection's mailbox (``LaneMailbox``: memory shared with that one client,
/// made and sealed here, passed with the welcome). The thread copies a request out, answers it in the mailbox, and
/// polls a short while for the next request before it sleeps in `recv` until the client's doorbell (a program
/// looking up several items in a row is answered without a system call; one thread at a time polls on a machine of
/// two processors).
///
/// The lane serves only what involves neither the user nor another connection, and only when it cannot prompt:
/// brief keychain requests (``KeychainRequest/isBrief``) and uses of an existing key that name no context
/// (``KeyRequest/mayTakeLane``). Everything else — prompts, contexts, key generation, events, enrollment — stays on
/// the main connection, and the lane refuses it. Callers are told apart exactly as on the main socket: the kernel's
/// peer credentials and pidfd, the app registry at the hello, the executable checked on every request; a request
/// naming another connection's context is refused by the engine. A program checks that the lane is served by the
/// process it reached through the main socket before it uses it (`SocketClient`).
final class LaneServer: Sendable {
    /// The lane's socket for the main socket at `socketPath`.
    static func path(besides socketPath: String) -> String { socketPath + ".lane" }
    /// The most lane connections served at once; a program whose lane is refused uses the main socket. One user
    /// may hold a quarter of them at most (``connections``), so no user takes the lane from the others.
    static let connectionLimit = 256
    /// How long a lane thread polls for the next request after an answer before it sleeps.
    static let spinBudget: Duration = .microseconds(50)
    /// How many lane threads may poll at once: one processor fewer than the machine has (none on one processor),
    /// so polling never takes every processor from the programs it waits for.
    static let spinnerLimit = max(0, sysconf(Int32(_SC_NPROCESSORS_ONLN)) - 1)
    private let spinners = Atomic<Int>(0)

    let path: String
    private let listener: Int32
    private let engines: UserEngines
    private let registry: RegistryWatcher
    private let frameLimit: Int
    /// Each user's open lane connections, capped.
    private let connections: UserConnections

    private struct State {
        /// Each open connection's descriptor, and whether a request of it is being served.
        var connections: [Int32: Bool] = [:]
        /// The daemon is stopping: requests are answered `errSecNotAvailable`.
        var draining = false
        var closed = false
    }

    private let state = Mutex(State())

    /// Binds the lane beside `socketPath` (replacing a stale socket file), mode 0666 like the main socket.
    ///
    /// - Throws: `KeychainStatus(.notAvailable)` when the socket cannot be bound.
    init(
        besides socketPath: String, engines: UserEngines, registry: RegistryWatcher, frameLimit: Int,
        connections: UserConnections
    ) throws {
        path = Self.path(besides: socketPath)
        self.connections = connections
        self.engines = engines
        self.registry = registry
        self.frameLimit = frameLimit
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard listener >= 0, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            if listener >= 0 { Glibc.close(listener) }
            throw KeychainStatus(.notAvailable, "no lane socket at \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, chmod(path, 0o666) == 0, listen(listener, 256) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(listener)
            throw KeychainStatus(.notAvailable, "the lane socket \(path) cannot be bound: \(reason)")
        }
    }

    /// Starts accepting connections on a thread of the lane's own.
    func start() {
        let thread = Thread { [self] in
            nameCurrentThread("localauthd.lane")
            acceptConnections()
        }
        thread.start()
    }

    /// Stops serving requests (the daemon is stopping): the one being served finishes, later ones are refused.
    func drain() {
        state.withLock { $0.draining = true }
    }

    /// Whether a request is being served.
    var isBusy: Bool { state.withLock { $0.connections.values.contains(true) } }

    /// Closes the lane: no connection is accepted any more, and every open one is shut down (its thread then ends).
    func close() {
        state.withLock { state in
            guard !state.closed else { return }
            state.closed = true
            // Wakes the thread blocked in accept (Linux ends accept on a shut-down listening socket).
            shutdown(listener, Int32(SHUT_RDWR))
            for descriptor in state.connections.keys { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
        unlink(path)
    }

    private func acceptConnections() {
        defer { Glibc.close(listener) }
        while true {
            let descriptor = la_accept_cloexec(listener)
            if descriptor < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            guard let credentials = PeerCredentials.of(descriptor: descriptor), connections.admit(credentials.uid)
            else {
                Glibc.close(descriptor)
                continue
            }
            let admitted = state.withLock { state -> Bool in
                guard !state.closed, !state.draining, state.connections.count < Self.connectionLimit else {
                    return false
                }
                state.connections[descriptor] = false
                return true
            }
            guard admitted else {
                connections.leave(credentials.uid)
                Glibc.close(descriptor)
                continue
            }
            let thread = Thread { [self] in
                nameCurrentThread("lane.connection")
                serve(descriptor)
                connections.leave(credentials.uid)
            }
            thread.start()
        }
    }

    /// One connection: the hello on the socket, then brief requests through its mailbox until the program hangs up
    /// or sends anything else.
    private func serve(_ descriptor: Int32) {
        defer {
            // Forgotten and closed under the lock, so `close()` never shuts down a number reused meanwhile.
            state.withLock { state in
                state.connections[descriptor] = nil
                Glibc.close(descriptor)
            }
        }
        // Only the hello is read as a frame here (requests come through the mailbox): small, as on the main socket.
        let frames = FrameReader(
            descriptor: descriptor, limit: FrameAllowance.helloLimit, version: MessageWriter.formatVersion)
        // The hello must come within a few seconds: a connection that says nothing does not keep its thread.
        Self.setReceiveTimeout(descriptor, seconds: Self.helloTimeout)
        guard let (engine, caller, peer, mailbox) = welcome(descriptor, frames) else { return }
        Self.setReceiveTimeout(descriptor, seconds: 0)
        defer { engine.authentication?.discardAll(owner: caller.connection) }
        let uid = peer.credentials.uid
        // What the mailbox holds is the client's to change at any moment: its request word, length and frame are
        // each read once, and only a copy of the frame in the daemon's own memory is decoded.
        // A new mailbox is all zeros: the client's first request is number 1 (it may be posted before this line).
        var last: UInt32 = 0
        var polling = PollingBackOff()
        while true {
            guard awaitNextRequest(mailbox, after: last, descriptor, &polling) else { return }
            let sequence = mailbox.load(.request)
            last = sequence
            let length = Int(mailbox.load(.requestLength))
            guard length <= LaneMailbox.requestCapacity, length <= frameLimit + 5 else {
                return refuse(mailbox, sequence, descriptor, "a request of \(length) bytes is over the lane's limit")
            }
            let frame = SecureBytes(count: length) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: mailbox.requestArea[0..<length]))
            }
            // Copied: from here on the request is served or answered, never lost without a word.
            mailbox.store(.taken, sequence)
            let message: ClientMessage
            do {
                message = try ClientMessage(decoding: frame)
            } catch {
                return refuse(mailbox, sequence, descriptor, "the frame does not decode: \(error)")
            }
            let id: UInt64
            let lookup: Bool
            let serve: () throws -> ServerMessage
            switch message {
            case .keychain(let number, let request, let options, interactive: false)
            where request.isBrief && options.subject == nil:
                id = number
                if case .copyMatching = request { lookup = true } else { lookup = false }
                serve = {
                    .keychain(
                        number,
                        try engine.handle(request, caller: caller, prompting: Prompting(options: options, channel: nil))
                    )
                }
            case .key(let number, let request, let options, interactive: false)
            where request.mayTakeLane && options.subject == nil:
                id = number
                lookup = false
                serve = {
                    .key(
                        number,
                        try engine.handle(request, caller: caller, prompting: Prompting(options: options, channel: nil))
                    )
                }
            default:
                return refuse(
                    mailbox, sequence, descriptor,
                    "the lane serves brief keychain and key requests that cannot prompt, made for the caller itself")
            }
            guard peer.isCurrent else {
                return refuse(
                    mailbox, sequence, descriptor, "process \(peer.credentials.pid) no longer runs \(peer.executable)")
            }
            engines.requested(by: uid)
            var answer: ServerMessage
            if setServing(descriptor, true) {
                do {
                    answer = try serve()
                } catch {
                    answer = .keychainFailure(id, KeychainStatus(error))
                }
                _ = setServing(descriptor, false)
            } else {
                answer = .keychainFailure(id, KeychainStatus(.notAvailable, "localauthd is stopping"))
            }
            var encoded = answer.encoded()
            if encoded.count > LaneMailbox.answerCapacity {
                // A lookup changes nothing: an empty answer tells the client to ask again on the main socket.
                // Nothing else the lane serves answers with more than it was sent.
                encoded =
                    lookup
                    ? SecureBytes(zeros: 0)
                    : ServerMessage.keychainFailure(
                        id, KeychainStatus(.allocate, "the answer is too large for the lane")
                    ).encoded()
            }
            guard encoded.withUnsafeBytes({ mailbox.post($0, as: .answer, sequence: sequence, doorbell: descriptor) })
            else { return }
        }
    }

    /// Waits for the next request in `mailbox` (its number no longer `last`): polls for ``spinBudget`` when no other
    /// lane thread takes the last free processor (``spinnerLimit``) and the connection's requests have been coming
    /// within it, so a program sending requests in a row is answered without a wake-up, then sleeps until the
    /// client's doorbell. False when the connection ended.
    private func awaitNextRequest(
        _ mailbox: LaneMailbox, after last: UInt32, _ descriptor: Int32, _ polling: inout PollingBackOff
    ) -> Bool {
        // A connection whose requests came slower than the budget sleeps at once for a while (``PollingBackOff``):
        // with many clients, a thread polling for a client still busy elsewhere held a processor for nothing.
        let budget = polling.budget(Self.spinBudget)
        guard budget > .zero else {
            return mailbox.sleep(until: .request, true, last, sleeps: .daemonSleeps, socket: descriptor)
        }
        // The processor is held only while polling: a thread that goes to sleep gives its turn to another.
        let mayPoll = spinners.wrappingAdd(1, ordering: .acquiring).newValue <= Self.spinnerLimit
        let arrived = mayPoll && mailbox.poll(until: .request, true, last, for: budget)
        spinners.wrappingSubtract(1, ordering: .releasing)
        if mayPoll { polling.polled(found: arrived) }
        return arrived || mailbox.sleep(until: .request, true, last, sleeps: .daemonSleeps, socket: descriptor)
    }

    /// How long a new lane connection may take to say hello.
    static let helloTimeout = 5

    /// Receives on `descriptor` time out after `seconds` (0: never).
    private static func setReceiveTimeout(_ descriptor: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Marks a request of `descriptor` as served (or done); false when the daemon is stopping and it may not start.
    private func setServing(_ descriptor: Int32, _ serving: Bool) -> Bool {
        state.withLock { state in
            if serving && state.draining { return false }
            state.connections[descriptor] = serving
            return true
        }
    }

    /// The hello: the caller identified by the kernel's credentials and the app registry, as on the main socket, and
    /// welcomed with the connection's mailbox attached; nil after refusing it.
    private func welcome(
        _ descriptor: Int32, _ frames: FrameReader
    ) -> (KeychainEngine, CallerIdentity, PeerProcess, LaneMailbox)? {
        let hello: ClientMessage?
        do {
            hello = try frames.next { try ClientMessage(decoding: $0) }
        } catch {
            refuse(descriptor, "the frame does not decode: \(error)")
            return nil
        }
        guard case .hello(let versions, let groups, let allGroups)? = hello else {
            refuse(descriptor, "the first message must be hello")
            return nil
        }
        guard versions.contains(1) else {
            refuse(descriptor, "no common protocol version (this daemon speaks 1)")
            return nil
        }
        guard let credentials = PeerCredentials.of(descriptor: descriptor) else {
            refuse(descriptor, "the kernel gave no peer credentials")
            return nil
        }
        let peer: PeerProcess
        let caller: CallerIdentity
        do {
            peer = try PeerProcess(credentials: credentials, pidfd: PeerCredentials.pidfd(of: descriptor))
            caller = try registry.identity(of: peer, claimed: groups, allGroups: allGroups)
        } catch {
            refuse(descriptor, "the connected process cannot be identified: \(error)")
            return nil
        }
        let engine: KeychainEngine
        do {
            engine = try engines.engine(for: credentials.uid)
        } catch {
            refuse(descriptor, UserEngines.openingFailure(uid: credentials.uid, error))
            return nil
        }
        let mailbox: LaneMailbox
        let passed: Int32
        do {
            (mailbox, passed) = try LaneMailbox.make()
        } catch {
            refuse(descriptor, "\(error)")
            return nil
        }
        defer { Glibc.close(passed) }
        let welcomed = ServerMessage.welcome(version: 1).encoded().withUnsafeBytes { frame in
            la_send_with_descriptor(descriptor, frame.baseAddress, frame.count, passed) == frame.count
        }
        return welcomed ? (engine, caller, peer, mailbox) : nil
    }

    /// Refuses the connection before its welcome: a frame on the socket.
    private func refuse(_ descriptor: Int32, _ reason: String) {
        DaemonServer.logger.notice("refused a lane connection", metadata: ["reason": "\(reason)"])
        _ = FrameReader.write(ServerMessage.refused(reason).encoded(), to: descriptor)
    }

    /// Refuses the connection after its welcome: the answer to request `sequence` in its mailbox.
    private func refuse(_ mailbox: LaneMailbox, _ sequence: UInt32, _ descriptor: Int32, _ reason: String) {
        DaemonServer.logger.notice("refused a lane connection", metadata: ["reason": "\(reason)"])
        _ = ServerMessage.refused(reason).encoded().withUnsafeBytes {
            mailbox.post($0, as: .answer, sequence: sequence, doorbell: descriptor)
        }
    }
}
