import Authenticators
import CSQLiteSettings
import Enclave
import Foundation
import Logging
import NIOCore
import NIOPosix
import SecurityProtocol
import SecurityServer
import SocketPeer
import StoreFiles
import Synchronization

/// What `localauthd` serves and where.
package struct DaemonConfiguration: Sendable {
    /// The listening socket (`/run/localauthd/socket` by default), made connectable by every user.
    package var socketPath: String
    /// The users' stores, one directory per uid (`/var/lib/localauthd/<uid>`).
    package var stateDirectory: URL
    /// Where the PAM service, readers and timeouts come from: `LA_PAM_SERVICE`, `LA_PAM_CONFDIR`,
    /// `LA_READER_DRIVERS` (as for the embedded client).
    package var environment: [String: String]
    /// The longest frame a client may send.
    package var frameLimit: Int
    /// A listening socket systemd passed (socket activation), used instead of binding `socketPath`.
    package var inheritedSocket: Int32?
    /// The configuration directory (`/etc/localauthd`): the app registry is its `apps.d`. Nil = no registry,
    /// every program unregistered.
    package var configurationDirectory: URL?
    /// The most connections one user may have open on each of the two sockets (main and lane; the lane's never
    /// more than a quarter of its 256): `LA_CONNECTIONS_PER_USER`, else `connections-per-user = N` in
    /// `<configuration directory>/localauthd.conf`, else 128. A user's session holds a few dozen; the cap keeps one
    /// user from taking every connection, and an administrator raises it for a user who runs more clients at once.
    package var connectionsPerUser: Int {
        get {
            if let overridden = connectionsPerUserOverride { return overridden }
            let value = setting("LA_CONNECTIONS_PER_USER", "connections-per-user")
            guard let value, let count = Int(value), count > 0 else { return 128 }
            return count
        }
        set { connectionsPerUserOverride = newValue }
    }
    private var connectionsPerUserOverride: Int?
    /// The most bytes of large frames held while they arrive, in all and for one user's connections.
    package var frameBudget = (total: 256 << 20, perUser: 64 << 20)
    /// How long a new connection may take to send its hello.
    package var helloTimeout: Duration = .seconds(5)

    /// How long a client may read none of the answers waiting for it before its connection closes: `LA_READ_STALL`
    /// seconds (the test suites shorten it), else 30.
    package var readStall: Duration {
        environment["LA_READ_STALL"].flatMap { Int($0) }.map { .seconds(max($0, 1)) } ?? .seconds(30)
    }

    package init(
        socketPath: String, stateDirectory: URL,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        frameLimit: Int = MessageLimits.default.maximumFrameByteCount,
        inheritedSocket: Int32? = nil, configurationDirectory: URL? = nil
    ) {
        self.socketPath = socketPath
        self.stateDirectory = stateDirectory
        self.environment = environment
        self.frameLimit = frameLimit
        self.inheritedSocket = inheritedSocket
        self.configurationDirectory = configurationDirectory
    }

    /// The enclave backend for new stores and the TPM sealed ones need: `LA_ENCLAVE`, `LA_TPM_TCTI`, then
    /// `<configuration directory>/localauthd.conf` (`enclave = software|tpm|auto`, `tpm-tcti = …`); `auto` when
    /// none names one.
    ///
    /// - Throws: `EnclaveError(.configuration)` for an unknown backend name.
    package func enclaveConfiguration() throws -> EnclaveConfiguration {
        let file = configurationDirectory?.appendingPathComponent("localauthd.conf").path
        var configuration = try EnclaveConfiguration.from(environment: environment, files: file.map { [$0] } ?? [])
        // The daemon owns each user's store alone: unlocked class keys stay in its memory.
        configuration.unlockedKeys = .processMemory
        return configuration
    }

    /// How long a user's keychain may go without a request before localauthd locks its `ak` classes, as the
    /// "lock after N minutes of inactivity" of macOS's keychain settings: `LA_IDLE_LOCK`, else
    /// `idle-lock = SECONDS` in `<configuration directory>/localauthd.conf`; nil (never) when neither names a
    /// positive number of seconds.
    package var idleLock: Duration? {
        guard let value = setting("LA_IDLE_LOCK", "idle-lock"), let seconds = Int(value), seconds > 0 else {
            return nil
        }
        return .seconds(seconds)
    }

    /// How long a question put to a client or an agent (a passcode, an application password, a trust question)
    /// waits for its answer before it counts as cancelled: `LA_PROMPT_TIMEOUT`, else `prompt-timeout = SECONDS` in
    /// `localauthd.conf`; 300 s (sudo's own password timeout) when neither names a positive number.
    package var promptTimeout: Duration {
        guard let value = setting("LA_PROMPT_TIMEOUT", "prompt-timeout"), let seconds = Int(value), seconds > 0 else {
            return .seconds(300)
        }
        return .seconds(seconds)
    }

    /// The pinentry every prompt agent runs (`lactl agent`): `LA_AGENT_PINENTRY`, else `agent-pinentry = PATH` in
    /// `<configuration directory>/localauthd.conf`, else `/usr/bin/pinentry` (Debian's alternative). The agent runs
    /// it only when root owns it and nobody else can write it or its directories.
    package var agentPinentry: String {
        setting("LA_AGENT_PINENTRY", "agent-pinentry") ?? "/usr/bin/pinentry"
    }

    /// Whether a prompt agent may run the pinentry its user names (`--pinentry`, `$PINENTRY_PROGRAM`) instead of
    /// ``agentPinentry``: `LA_AGENT_PINENTRY_CHOICE`, else `agent-pinentry-choice = yes|no`, else no. Even then the
    /// agent runs only a program root owns and nobody else can write.
    package var agentPinentryChoice: Bool {
        setting("LA_AGENT_PINENTRY_CHOICE", "agent-pinentry-choice") == "yes"
    }

    /// Whether localauthd records which process exec'd which registered executable (``ExecRecord``): `LA_EXEC_RECORD`,
    /// else `exec-record = yes|no` in `localauthd.conf`, else yes. Off, a program that sets `/proc/<pid>/exe` to a
    /// registered file it never exec'd is judged by the integrity checks alone.
    package var execRecord: Bool {
        setting("LA_EXEC_RECORD", "exec-record") != "no"
    }

    /// The environment the users' authenticators are configured from: the daemon's, with `biometry-backend = …`
    /// of `localauthd.conf` as `LA_BIOMETRY_BACKEND` when the environment does not set it.
    package var authenticationEnvironment: [String: String] {
        var environment = self.environment
        if let backend = setting("LA_BIOMETRY_BACKEND", "biometry-backend") {
            environment["LA_BIOMETRY_BACKEND"] = backend
        }
        return environment
    }

    /// The environment variable `variable` when set, else `key = …` in `<configuration directory>/localauthd.conf`.
    private func setting(_ variable: String, _ key: String) -> String? {
        if let value = environment[variable], !value.isEmpty { return value }
        guard let path = configurationDirectory?.appendingPathComponent("localauthd.conf").path,
            let text = try? String(contentsOfFile: path, encoding: .utf8)
        else { return nil }
        return DataLocations.configurationEntries(text).first { $0.key == key }?.value
    }

    /// Whether administrative tools get the groups they claim at the hello without the user (``AdministrativeGrant``):
    /// `LA_ADMINISTRATIVE_CLAIMS=trusted`, for test harnesses that act for many apps from one registered process.
    /// Anything else (the default, `authenticated`) holds back what such a tool claims beyond its own groups until
    /// the user authenticates on its connection.
    package var trustsAdministrativeClaims: Bool {
        environment["LA_ADMINISTRATIVE_CLAIMS"] == "trusted"
    }

    /// The app registry's directory: `<configuration directory>/apps.d`.
    package var registryDirectory: String? {
        configurationDirectory?.appendingPathComponent("apps.d", isDirectory: true).path
    }

    /// The socket systemd passed this process (`LISTEN_PID` is this process, `LISTEN_FDS` is 1: descriptor 3).
    package static func systemdSocket(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32? {
        guard environment["LISTEN_PID"] == String(getpid()), environment["LISTEN_FDS"] == "1" else { return nil }
        return 3
    }
}

/// The engines of the users who connected, each opened on first use on the user's own store directory, checking
/// that user's passcode. A user's engine is shared by all of that user's connections.
final class UserEngines: Sendable {
    let configuration: DaemonConfiguration
    let enclave: EnclaveConfiguration
    private let engines = Mutex<[UInt32: KeychainEngine]>([:])
    /// When each user's connections last sent a request (for the idle lock).
    private let lastRequest = Mutex<[UInt32: ContinuousClock.Instant]>([:])

    init(configuration: DaemonConfiguration, enclave: EnclaveConfiguration) {
        self.configuration = configuration
        self.enclave = enclave
    }

    /// The engine of user `uid`.
    ///
    /// - Throws: `KeychainStatus` when the user has no passwd entry or the store cannot be opened.
    func engine(for uid: UInt32) throws -> KeychainEngine {
        try engines.withLock { engines in
            if let engine = engines[uid] { return engine }
            guard let name = DataLocations.userName(of: uid) else {
                throw KeychainStatus(.notAvailable, "uid \(uid) has no passwd entry")
            }
            let directory = configuration.stateDirectory.appendingPathComponent(String(uid), isDirectory: true)
            let authentication = AuthenticationConfiguration.fromEnvironment(
                dataDirectory: directory, username: name, environment: configuration.authenticationEnvironment)
            let engine = try KeychainEngine(directory: directory, authentication: authentication, enclave: enclave)
            engines[uid] = engine
            return engine
        }
    }

    /// What a refused hello says when user `uid`'s store does not open: the store's own message, which names the
    /// file (the user's own) and the reason (a read-only filesystem, an unreadable key file).
    static func openingFailure(uid: UInt32, _ error: any Error) -> String {
        let reason = (error as? KeychainStatus)?.message ?? "\(error)"
        return "the store of uid \(uid) cannot be opened: \(reason)"
    }

    /// Every engine opened so far.
    var all: [KeychainEngine] { engines.withLock { Array($0.values) } }

    /// A connection of user `uid` sent a request now.
    func requested(by uid: UInt32) {
        lastRequest.withLock { $0[uid] = .now }
    }

    /// Locks the keychain of every user whose connections sent no request for `idle`.
    func lockIdle(after idle: Duration) {
        let now = ContinuousClock.now
        let idleUsers = lastRequest.withLock { last in last.filter { now - $0.value >= idle }.map(\.key) }
        for uid in idleUsers {
            guard let engine = engines.withLock({ $0[uid] }), !engine.isLocked else { continue }
            do {
                try engine.lockKeychain()
                DaemonServer.logger.info("locked an idle keychain", metadata: ["uid": "\(uid)", "idle": "\(idle)"])
            } catch {
                DaemonServer.logger.error(
                    "cannot lock an idle keychain", metadata: ["uid": "\(uid)", "error": "\(error)"])
            }
        }
    }
}

/// How many connections each user has open on one socket, capped: one user cannot take every connection the daemon
/// serves.
final class UserConnections: Sendable {
    let limit: Int
    private let counts = Mutex<[UInt32: Int]>([:])

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a new connection of `uid`; false (not counted) when the user has `limit` open already.
    func admit(_ uid: UInt32) -> Bool {
        counts.withLock { counts in
            guard counts[uid, default: 0] < limit else { return false }
            counts[uid, default: 0] += 1
            return true
        }
    }

    func leave(_ uid: UInt32) {
        counts.withLock { counts in
            let left = counts[uid, default: 0] - 1
            counts[uid] = left > 0 ? left : nil
        }
    }
}

/// Where callers are identified at their hello: a serial queue per user, on threads that serve no request. Reading
/// and hashing an executable, reading the registry and opening a store can take long; done per user, one user's
/// slow or hostile programs delay only that user's next hellos, never another user's, and never a request.
final class IdentificationQueues: Sendable {
    private let queues = Mutex<[UInt32: DispatchQueue]>([:])

    /// Runs `body` on user `uid`'s queue; its result completes on `eventLoop`.
    func run<Value: Sendable>(
        for uid: UInt32, eventLoop: any EventLoop, _ body: @escaping @Sendable () throws -> Value
    ) -> EventLoopFuture<Value> {
        let queue = queues.withLock { queues in
            if let queue = queues[uid] { return queue }
            let queue = DispatchQueue(label: "localauthd.identify.\(uid)")
            queues[uid] = queue
            return queue
        }
        let promise = eventLoop.makePromise(of: Value.self)
        queue.async { promise.completeWith(Result(catching: body)) }
        return promise.futureResult
    }
}

/// `localauthd`'s server: the listening socket and its connections, the lane beside it, the users' engines and the
/// idle lock.
package final class DaemonServer: Sendable {
    package static let logger = Logger(label: "localauthd")

    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup
    private let storeThreads: NIOThreadPool
    private let sessions: SessionRegistry
    private let engines: UserEngines
    private let registry: RegistryWatcher
    /// The hot path's own socket, when it could be bound.
    private let lane: LaneServer?
    /// Locks idle keychains (``DaemonConfiguration/idleLock``), when configured.
    private let idleLocker: Task<Void, Never>?

    private init(
        channel: any Channel, group: MultiThreadedEventLoopGroup, storeThreads: NIOThreadPool,
        sessions: SessionRegistry, engines: UserEngines, registry: RegistryWatcher, lane: LaneServer?,
        idleLock: Duration?
    ) {
        idleLocker = idleLock.map { idle in
            Task {
                // Checked four times per interval (at most every 5 s): a keychain locks within 1.25 × the setting.
                let period = min(idle / 4, .seconds(5))
                while !Task.isCancelled {
                    try? await Task.sleep(for: period)
                    engines.lockIdle(after: idle)
                }
            }
        }
        self.channel = channel
        self.group = group
        self.storeThreads = storeThreads
        self.sessions = sessions
        self.engines = engines
        self.registry = registry
        self.lane = lane
    }

    /// Reads the app registry again (SIGHUP); connections made from now on are identified by it.
    package func reloadRegistry() {
        registry.reload()
    }

    /// The exec record of this machine when `configuration` asks for one and the kernel gives it; logs which holds.
    private static func startExecRecord(_ configuration: DaemonConfiguration) -> ExecRecord? {
        guard configuration.execRecord else {
            logger.warning(
                """
                exec record off (exec-record = no): a program that makes /proc/<pid>/exe name a registered file it \
                never exec'd is judged by the integrity checks alone
                """)
            return nil
        }
        do {
            let record = try ExecRecord { logger.warning("\($0)") }
            logger.info("exec record", metadata: ["record": "on"])
            return record
        } catch {
            logger.warning(
                "exec record unavailable: registered programs are judged by the integrity checks alone",
                metadata: ["reason": "\(error)"])
            return nil
        }
    }

    /// Starts listening on `configuration.socketPath` (replacing a stale socket file), mode 0666: who connects is
    /// told apart by the kernel's peer credentials, not by the socket's permissions.
    ///
    /// - Throws: when the socket cannot be bound.
    package static func start(_ configuration: DaemonConfiguration) async throws -> DaemonServer {
        // Before the first store opens: SQLite's memory statistics cost a process-wide mutex per allocation.
        let statistics = la_sqlite_disable_memory_statistics() == 0 ? "off" : "on (SQLite was initialized already)"
        logger.debug("SQLite memory statistics", metadata: ["statistics": "\(statistics)"])
        // Subscribed (and tested) before the first connection rather than during it.
        let events = ProcessEvents.shared == nil ? "unavailable: /proc/<pid>/exe is checked on every request" : "on"
        logger.info("kernel process events", metadata: ["events": "\(events)"])
        logger.info("user namespaces", metadata: ["policy": "\(UserNamespacePolicy.current().summary)"])
        if let found = ProgramIntegrity.checkOfItself() {
            logger.warning(
                """
                the checks of a caller's program find this against localauthd itself: programs like it will be served \
                as tainted, without their registration
                """, metadata: ["reason": "\(found)"])
        }
        try PrivateFiles.ensureDirectory(configuration.stateDirectory.path)
        // Brief store requests run on the loops (DaemonSession.runStore): one loop per core, at least two, so one
        // connection's request never waits behind another's.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(2, System.coreCount))
        let storeThreads = NIOThreadPool(numberOfThreads: 8)
        storeThreads.start()
        let enclave = try configuration.enclaveConfiguration()
        logger.info("enclave", metadata: ["enclave": "\(enclave.choice.rawValue)", "tcti": "\(enclave.tcti)"])
        let engines = UserEngines(configuration: configuration, enclave: enclave)
        let sessions = SessionRegistry()
        let logins = LoginSessions()
        let agents = PromptAgents { [configuration] in
            (configuration.agentPinentry, configuration.agentPinentryChoice)
        }
        let registry = RegistryWatcher(
            directory: configuration.registryDirectory,
            trustsAdministrativeClaims: configuration.trustsAdministrativeClaims,
            execRecord: startExecRecord(configuration))
        if configuration.trustsAdministrativeClaims {
            logger.warning(
                "administrative tools get what they claim without asking the user (LA_ADMINISTRATIVE_CLAIMS=trusted): for test harnesses only"
            )
        }
        let limit = configuration.frameLimit
        let budget = FrameBudget(total: configuration.frameBudget.total, perUser: configuration.frameBudget.perUser)
        let connectionsPerUser = configuration.connectionsPerUser
        let connections = UserConnections(limit: connectionsPerUser)
        let identification = IdentificationQueues()
        let helloTimeout = configuration.helloTimeout
        let stallLimit = configuration.readStall
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let allowance = FrameAllowance(budget: budget)
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(FrameDecoder(limit: limit, allowance: allowance)))
                    try channel.pipeline.syncOperations.addHandler(
                        ConnectionHandler(
                            engines: engines, sessions: sessions, logins: logins, agents: agents, registry: registry,
                            storeThreads: storeThreads, identification: identification, connections: connections,
                            allowance: allowance, helloTimeout: helloTimeout, stallLimit: stallLimit))
                }
            }
        let channel: any Channel
        if let inherited = configuration.inheritedSocket {
            channel = try await bootstrap.withBoundSocket(inherited).get()
            logger.info("listening on the socket systemd passed", metadata: ["socket": "\(configuration.socketPath)"])
        } else {
            channel =
                try await bootstrap
                .bind(unixDomainSocketPath: configuration.socketPath, cleanupExistingSocketFile: true).get()
            chmod(configuration.socketPath, 0o666)
            logger.info("listening", metadata: ["socket": "\(configuration.socketPath)"])
        }
        let idleLock = configuration.idleLock
        if let idleLock { logger.info("idle lock", metadata: ["after": "\(idleLock)"]) }
        let promptTimeout = configuration.promptTimeout
        PromptChannel.answerDeadline.withLock { $0 = promptTimeout }
        logger.info("prompt answers", metadata: ["within": "\(promptTimeout)"])
        // The lane (LaneServer) beside the main socket; without it every request takes the main socket.
        let lane: LaneServer?
        do {
            let bound = try LaneServer(
                besides: configuration.socketPath, engines: engines, registry: registry, frameLimit: limit,
                connections: UserConnections(
                    limit: min(connectionsPerUser, LaneServer.connectionLimit / 4)))
            bound.start()
            lane = bound
            logger.info("lane listening", metadata: ["socket": "\(LaneServer.path(besides: configuration.socketPath))"])
        } catch {
            lane = nil
            logger.warning("no lane: every request takes the main socket", metadata: ["error": "\(error)"])
        }
        return DaemonServer(
            channel: channel, group: group, storeThreads: storeThreads, sessions: sessions, engines: engines,
            registry: registry, lane: lane, idleLock: idleLock)
    }

    /// Runs until the listening socket closes.
    package func run() async throws {
        try await channel.closeFuture.get()
    }

    /// A graceful stop (SIGTERM): no new connection is accepted, requests in flight finish (up to `grace`), then
    /// every connection closes. What a client was told succeeded is in the store: each write commits before its
    /// answer is sent.
    package func stop(grace: Duration = .seconds(10)) async {
        idleLocker?.cancel()
        try? await channel.close()
        sessions.drainAll()
        lane?.drain()
        let deadline = ContinuousClock.now + grace
        while sessions.anyBusy || lane?.isBusy == true, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        lane?.close()
        await sessions.closeAll()
        for engine in engines.all { await engine.authentication?.closeReader() }
        try? await storeThreads.shutdownGracefully()
        try? await group.shutdownGracefully()
    }
}

/// The open connections, for a graceful stop.
final class SessionRegistry: Sendable {
    private let channels = Mutex<[ObjectIdentifier: (any Channel, DaemonSession?)]>([:])

    func add(_ channel: any Channel) {
        channels.withLock { $0[ObjectIdentifier(channel)] = (channel, nil) }
    }

    func attach(_ session: DaemonSession, to channel: any Channel) {
        channels.withLock { $0[ObjectIdentifier(channel)] = (channel, session) }
    }

    func remove(_ channel: any Channel) {
        channels.withLock { _ = $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    func drainAll() {
        for case (_, let session?) in channels.withLock({ Array($0.values) }) { session.drain() }
    }

    var anyBusy: Bool { channels.withLock { $0.values.contains { $0.1?.isBusy ?? false } } }

    func closeAll() async {
        for (channel, _) in channels.withLock({ Array($0.values) }) { try? await channel.close() }
    }
}

/// One connection's handler: the hello (version and the claimed access groups) against the kernel's peer
/// credentials and the app registry (``RegistryWatcher/identity(of:claimed:allGroups:)``), then every frame to the
/// session. A frame that does not decode, a second hello or garbage gets a `refused` message and the connection
/// closes; other connections are not affected.
final class ConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    // Not shared: NIO calls a handler on its channel's event loop only.
    typealias InboundIn = ByteBuffer

    private let engines: UserEngines
    private let sessions: SessionRegistry
    private let logins: LoginSessions
    private let agents: PromptAgents
    private let storeThreads: NIOThreadPool
    private let registry: RegistryWatcher
    private let identification: IdentificationQueues
    private let connections: UserConnections
    private let allowance: FrameAllowance
    private let helloTimeout: Duration
    /// The connected process, or why it could not be identified (refused at the hello).
    private var peer: Result<PeerProcess, PeerProcess.Unidentified>?
    /// The user this connection counts against (``UserConnections``), once admitted.
    private var admitted: UInt32?
    private var session: DaemonSession?
    /// The hello arrived and the caller is being identified (off the loop: its executable may be hashed).
    private var identifying = false
    /// Reading from the client is paused (``regulateReading(_:)``).
    private var readingPaused = false
    /// Messages of the client read while paused (the rest of one read: bounded by what NIO reads at once), served
    /// in order once it is not crowded.
    private var held = CircularBuffer<ClientMessage>()
    /// Answers wait for the client beyond the high-water mark and are watched (``watchStall(_:)``).
    private var stallWatched = false
    /// Answers and events that may wait for a client that does not read them; more, and the connection closes.
    static let outboundLimit = 256 << 20
    /// How long a client may read none of the answers waiting for it (beyond the high-water mark) before its
    /// connection closes (``DaemonConfiguration/readStall``).
    private let stallLimit: TimeAmount

    init(
        engines: UserEngines, sessions: SessionRegistry, logins: LoginSessions, agents: PromptAgents,
        registry: RegistryWatcher,
        storeThreads: NIOThreadPool, identification: IdentificationQueues, connections: UserConnections,
        allowance: FrameAllowance, helloTimeout: Duration, stallLimit: Duration
    ) {
        self.stallLimit = TimeAmount(stallLimit)
        self.engines = engines
        self.sessions = sessions
        self.logins = logins
        self.agents = agents
        self.registry = registry
        self.storeThreads = storeThreads
        self.identification = identification
        self.connections = connections
        self.allowance = allowance
        self.helloTimeout = helloTimeout
    }

    func channelActive(context: ChannelHandlerContext) {
        sessions.add(context.channel)
        // On the event loop the socket options are read at once.
        let channel = context.channel
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        channel.peerCredentials().and(channel.peerPidfd()).whenSuccess { [weak self] credentials, pidfd in
            guard let self else { return }
            guard connections.admit(credentials.uid) else {
                if pidfd >= 0 { close(pidfd) }
                return refuse(
                    bound.value,
                    "uid \(credentials.uid) has \(connections.limit) connections open to localauthd already")
            }
            admitted = credentials.uid
            peer = Result { () throws(PeerProcess.Unidentified) in
                try PeerProcess(credentials: credentials, pidfd: pidfd)
            }
        }
        // A connection that says nothing does not stay: the hello must come within the timeout.
        context.eventLoop.scheduleTask(in: TimeAmount(helloTimeout)) { [weak self] in
            guard let self, session == nil, !identifying, bound.value.channel.isActive else { return }
            refuse(bound.value, "no hello within \(helloTimeout)")
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        session?.close()
        session = nil
        allowance.release()
        if let admitted { connections.leave(admitted) }
        admitted = nil
        sessions.remove(context.channel)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let message: ClientMessage
        do {
            message = try frame.withUnsafeReadableBytes { try ClientMessage(decoding: $0) }
        } catch {
            return refuse(context, "the frame does not decode: \(error)")
        }
        if let session {
            // Read while paused (the rest of the read that paused it): served once the client is no longer crowded.
            guard !readingPaused else { return held.append(message) }
            return serve(context, session, message)
        }
        guard !identifying else { return refuse(context, "a request came before the welcome") }
        guard case .hello(let versions, let groups, let allGroups) = message else {
            return refuse(context, "the first message must be hello")
        }
        guard versions.contains(1) else { return refuse(context, "no common protocol version (this daemon speaks 1)") }
        let peer: PeerProcess
        switch self.peer {
        case .success(let process)?: peer = process
        case .failure(let reason)?: return refuse(context, "the connected process cannot be identified: \(reason)")
        case nil: return refuse(context, "the kernel gave no peer credentials")
        }
        identifying = true
        // Off the loop and off the threads that serve requests (on the user's own queue): the registry may be read
        // again, the executable hashed, the user's store opened.
        let (engines, registry) = (engines, registry)
        let agents = self.agents
        let identified = identification.run(for: peer.credentials.uid, eventLoop: context.eventLoop) {
            () throws -> (KeychainEngine, CallerIdentity, DaemonSession.PromptRouting) in
            let caller: CallerIdentity
            let routing: DaemonSession.PromptRouting
            do {
                let found = try registry.identification(of: peer, claimed: groups, allGroups: allGroups)
                caller = found.caller
                routing = DaemonSession.PromptRouting(
                    agents: agents, loginSession: peer.loginSession,
                    mayServeAsAgent: found.registration?.isAdministrative ?? false,
                    drawsOwnPrompts: found.registration?.drawsOwnPrompts ?? false)
            } catch {
                throw Refusal("the connected process cannot be identified: \(error)")
            }
            do {
                return (try engines.engine(for: peer.credentials.uid), caller, routing)
            } catch {
                DaemonServer.logger.error(
                    "cannot open a store", metadata: ["uid": "\(peer.credentials.uid)", "error": "\(error)"])
                throw Refusal(UserEngines.openingFailure(uid: peer.credentials.uid, error))
            }
        }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        identified.whenComplete { [self] result in
            let context = bound.value
            guard context.channel.isActive else { return }
            switch result {
            case .success(let (engine, caller, routing)):
                welcome(context, engine: engine, caller: caller, routing: routing, peer: peer)
            case .failure(let refusal as Refusal): refuse(context, refusal.reason)
            case .failure(let error): refuse(context, "\(error)")
            }
        }
    }

    /// Why a hello is refused.
    private struct Refusal: Error {
        var reason: String

        init(_ reason: String) {
            self.reason = reason
        }
    }

    /// Starts the session of an identified caller and answers its hello.
    private func welcome(
        _ context: ChannelHandlerContext, engine: KeychainEngine, caller: CallerIdentity,
        routing: DaemonSession.PromptRouting, peer: PeerProcess
    ) {
        let channel = context.channel
        let engines = self.engines
        let uid = peer.credentials.uid
        let session = DaemonSession(
            engine: engine, caller: caller, peer: peer, storeThreads: storeThreads, logins: logins, routing: routing,
            registry: registry, requested: { engines.requested(by: uid) }
        ) { message in
            channel.writeAndFlush(message.frame(channel.allocator), promise: nil)
        }
        // The handler is reached on its event loop only, and weakly: the session must not keep it alive.
        let bound = NIOLoopBound((context: context, handler: Weak(self)), eventLoop: context.eventLoop)
        session.relieved = {
            bound.eventLoop.execute { bound.value.handler.object?.regulateReading(bound.value.context) }
        }
        self.session = session
        identifying = false
        allowance.welcomedUser = uid
        sessions.attach(session, to: channel)
        DaemonServer.logger.debug(
            "connected",
            metadata: [
                "uid": "\(peer.credentials.uid)", "pid": "\(peer.credentials.pid)", "executable": "\(peer.executable)",
                "application": "\(caller.identified?.applicationIdentifier ?? "unregistered")",
                "groups": "\(caller.accessGroups.joined(separator: ","))",
            ])
        context.writeAndFlush(wrapOutbound(ServerMessage.welcome(version: 1)), promise: nil)
    }

    /// Serves a message of the welcomed client, and pauses reading when that made it crowded.
    private func serve(_ context: ChannelHandlerContext, _ session: DaemonSession, _ message: ClientMessage) {
        // Every request is the connected program's: once it exited or executed another file, the connection
        // (which an exec hands on) serves nothing more.
        let peer = session.peer
        guard peer.isCurrent else {
            return refuse(context, "process \(peer.credentials.pid) no longer runs \(peer.executable)")
        }
        session.handle(message)
        if !context.channel.isWritable || session.load >= DaemonSession.inFlightLimit { regulateReading(context) }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        regulateReading(context)
        context.fireChannelWritabilityChanged()
    }

    /// Reads the client's requests only while fewer than ``DaemonSession/inFlightLimit`` are in flight and its
    /// answers do not wait beyond the channel's high-water mark (64 KiB): a client that writes requests faster than
    /// they are served, or does not read its answers, fills its own socket and waits, and holds no more of the
    /// daemon than that. A client that reads none of its waiting answers for ``stallLimit``, or lets more than
    /// ``outboundLimit`` wait (subscribed events keep coming), is disconnected (``watchStall(_:)``).
    private func regulateReading(_ context: ChannelHandlerContext) {
        guard let session, context.channel.isActive else { return }
        var crowded: Bool { !context.channel.isWritable || session.load >= DaemonSession.inFlightLimit }
        // Messages read while paused go first, as long as the client is not crowded again.
        while !held.isEmpty && !crowded && context.channel.isActive {
            serve(context, session, held.removeFirst())
        }
        let paused = crowded || !held.isEmpty
        if paused != readingPaused {
            readingPaused = paused
            session.readingPaused.store(paused, ordering: .releasing)
            try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: !paused)
        }
        if !context.channel.isWritable { watchStall(context) }
    }

    /// Checks every second, while answers wait for the client beyond the high-water mark, that the client reads:
    /// the waiting bytes went down at least once in ``stallLimit``, and never exceed ``outboundLimit``.
    private func watchStall(_ context: ChannelHandlerContext) {
        guard !stallWatched else { return }
        stallWatched = true
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        let channel = context.channel
        // Read and written by the repeated task only, on the event loop.
        let watch = NIOLoopBoundBox((waiting: Int.max, progressed: NIODeadline.now()), eventLoop: context.eventLoop)
        context.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { [weak self] task in
            guard let self, channel.isActive, !channel.isWritable else {
                self?.stallWatched = false
                return task.cancel()
            }
            let bytes = (try? channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
            if bytes < watch.value.waiting { watch.value.progressed = .now() }
            watch.value.waiting = bytes
            let reason: String
            if bytes > Self.outboundLimit {
                reason = "more than \(Self.outboundLimit >> 20) MiB of answers wait for the client"
            } else if NIODeadline.now() - watch.value.progressed > self.stallLimit {
                reason = "the client read none of its answers for \(self.stallLimit.nanoseconds / 1_000_000_000) s"
            } else {
                return
            }
            task.cancel()
            self.stallWatched = false
            DaemonServer.logger.notice(
                "closed a connection whose client does not read",
                metadata: ["reason": "\(reason)", "pid": "\(session?.peer.credentials.pid ?? 0)"])
            bound.value.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        refuse(context, "\(error)")
    }

    private func refuse(_ context: ChannelHandlerContext, _ reason: String) {
        DaemonServer.logger.notice("refused a connection", metadata: ["reason": "\(reason)"])
        let channel = context.channel
        context.writeAndFlush(wrapOutbound(ServerMessage.refused(reason))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }

    private func wrapOutbound(_ message: ServerMessage) -> NIOAny {
        NIOAny(message.frame(ByteBufferAllocator()))
    }
}

/// A weak reference, for a closure that must not keep its object alive.
struct Weak<Object: AnyObject> {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}
