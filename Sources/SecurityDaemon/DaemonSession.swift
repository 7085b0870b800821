import Foundation
import NIOPosix
import SecurityProtocol
import SecurityServer
import SocketPeer
import Synchronization

/// One client connection after its hello: the engine of the user the kernel says it runs as, the caller identity
/// its requests carry, the prompt channels of its requests in flight and its subscriptions.
///
/// Requests run concurrently, each in a task of its own (keychain and key requests that may prompt on store
/// threads, brief ones that cannot on the connection's event loop); answers go out as they finish, tagged with the
/// client's number. When the connection closes, every prompt in progress is cancelled (`systemCancel`: the reader
/// is released at once) and the connection's contexts are discarded.
final class DaemonSession: Sendable {
    let engine: KeychainEngine
    /// The caller as identified at the hello.
    private let identified: CallerIdentity
    /// The caller after the user let it use what its hello claimed (``widen(_:)``); kept apart so that the
    /// connections of programs with nothing held back (every app's) read their caller without a lock.
    private let widened = Mutex<CallerIdentity?>(nil)
    /// The connected process, held for the connection.
    let peer: PeerProcess
    private let send: @Sendable (ServerMessage) -> Void
    /// The daemon's threads for store work: a fixed pool of its own, so blocked store requests never take threads
    /// from Dispatch (signal handling) or Swift's cooperative pool.
    private let storeThreads: NIOThreadPool
    /// The users' login sessions (the PAM module's requests).
    private let logins: LoginSessions
    /// Tells the daemon the user is active (each request; the idle lock counts from the last).
    private let requested: @Sendable () -> Void
    /// Identifies the programs an administrative tool asks on behalf of (``actingFor(_:)``).
    private let registry: RegistryWatcher?

    /// Where the connection's prompts go (``PromptAgents``), and whether it may serve as an agent.
    struct PromptRouting: Sendable {
        var agents: PromptAgents
        /// The caller's login session (``SocketPeer/PeerProcess/loginSession``).
        var loginSession: String?
        /// The caller may register as its user's prompt agent: an administrative tool (`lactl`), untainted.
        var mayServeAsAgent = false
        /// The caller's registration lets it draw its own prompts while an agent runs (`own-prompts = yes`).
        var drawsOwnPrompts = false
    }

    private let routing: PromptRouting
    /// This connection's role as a prompt agent, once registered.
    private let agentRole = Mutex<PromptAgents.Agent?>(nil)

    private struct State {
        /// The prompt channels of requests whose prompts the client itself answers.
        var channels: [UInt64: PromptChannel] = [:]
        /// The requests whose prompts an agent draws, with their channels.
        var agentPrompts: [UInt64: (PromptAgents.Agent, PromptChannel)] = [:]
        var subscriptions: [UInt64: Task<Void, Never>] = [:]
        var inFlight: [UInt64: Task<Void, Never>?] = [:]
        var closed = false
        /// The daemon is stopping: requests in flight finish, new ones are refused.
        var draining = false
    }

    private let state = Mutex(State())

    /// Requests in flight at which the connection stops reading (``ConnectionHandler``) until one ends: a client
    /// cannot start more work than this at once, however fast it writes.
    static let inFlightLimit = 64
    /// Subscriptions one connection may hold (each observer of a program holds one); more are not served: their
    /// streams get nothing.
    static let subscriptionLimit = 256
    /// Set while the connection does not read: a request that ends then calls ``relieved``.
    let readingPaused = Atomic<Bool>(false)
    /// Called (on the thread that finished a request) when a request ends while reading is paused.
    var relieved: (@Sendable () -> Void)? {
        get { reliefCall.withLock { $0 } }
        set { reliefCall.withLock { $0 = newValue } }
    }
    private let reliefCall = Mutex<(@Sendable () -> Void)?>(nil)

    init(
        engine: KeychainEngine, caller: CallerIdentity, peer: PeerProcess, storeThreads: NIOThreadPool,
        logins: LoginSessions, routing: PromptRouting, registry: RegistryWatcher? = nil,
        requested: @escaping @Sendable () -> Void = {}, send: @escaping @Sendable (ServerMessage) -> Void
    ) {
        self.routing = routing
        self.registry = registry
        self.logins = logins
        self.requested = requested
        self.engine = engine
        self.identified = caller
        self.peer = peer
        self.storeThreads = storeThreads
        self.send = send
    }

    /// Who the connection's requests come from: the caller identified at the hello, or widened since.
    var caller: CallerIdentity {
        guard identified.heldBackClaim != nil else { return identified }
        return widened.withLock { $0 } ?? identified
    }

    /// Refuses the connection's message with `reason`, logged with the program that sent it.
    private func refuse(_ reason: String) {
        DaemonServer.logger.notice(
            "refused a message",
            metadata: [
                "reason": "\(reason)", "pid": "\(peer.credentials.pid)", "uid": "\(peer.credentials.uid)",
                "executable": "\(peer.executable)",
            ])
        send(.refused(reason))
    }

    /// `caller` asking on behalf of the process `subject` names: the same caller (its groups, its connection) with
    /// the subject as ``SecurityServer/CallerIdentity/actingFor``, identified by the rules every connecting program
    /// meets (registry, integrity, exec record).
    ///
    /// - Throws: `errSecAuthFailed` when the caller is not an administrative tool of the registry (untainted), or
    ///   the subject is not a running process of the caller's user that started when the subject says.
    private func actingFor(_ subject: ProcessReference, caller: CallerIdentity) throws -> CallerIdentity {
        guard routing.mayServeAsAgent, let registry else {
            throw KeychainStatus(
                .authFailed, "only an administrative tool of the app registry asks on behalf of another program")
        }
        let found: CallerIdentity
        do {
            let process = try PeerProcess.named(subject, uid: peer.credentials.uid)
            found = try registry.identity(of: process, claimed: [], allGroups: false)
        } catch {
            throw KeychainStatus(.authFailed, "the program asked for cannot be identified: \(error)")
        }
        guard let info = found.identified else {
            throw KeychainStatus(.authFailed, "the program asked for cannot be identified")
        }
        var acting = caller
        acting.actingFor = CallerIdentity.Represented(info: info, codeDigest: found.codeDigest)
        return acting
    }

    /// Serves one message of the client (after the hello).
    func handle(_ message: ClientMessage) {
        requested()
        let caller = self.caller
        switch message {
        case .hello:
            send(.refused("hello was already said"))
        case .keychain(let id, let request, let options, let interactive):
            guard let subject = options.subject else {
                return runStore(id, options, interactive: interactive, inline: request.isBrief) { [engine, caller] in
                    .keychain(id, try engine.handle(request, caller: caller, prompting: $0))
                }
            }
            // On behalf of another program: identified on a store thread (it reads and hashes an executable).
            runStore(id, options, interactive: interactive, inline: false) { [engine, caller, self] in
                let acting = try self.actingFor(subject, caller: caller)
                return .keychain(id, try engine.handle(request, caller: acting, prompting: $0))
            }
        case .key(_, _, let options, _) where options.subject != nil:
            refuse("a key request is made for the caller itself (no subject)")
        case .authentication(_, let request, _) where request.evaluationOptions?.subject != nil:
            refuse("an authentication request is made for the caller itself (no subject)")
        case .key(let id, let request, let options, let interactive):
            runStore(id, options, interactive: interactive, inline: true) { [engine, caller] in
                .key(id, try engine.handle(request, caller: caller, prompting: $0))
            }
        case .authentication(let id, let request, let interactive):
            run(id, interactive: interactive) { [engine, caller] channel in
                do {
                    return .authentication(id, try await engine.handle(request, caller: caller, prompts: channel))
                } catch {
                    return .authenticationFailure(id, AuthenticationError(error))
                }
            }
        case .administration(let id, .widenAccessGroups(let context)):
            run(id, interactive: false) { [self] _ in
                do {
                    return .administration(id, .caller(try widen(context)))
                } catch let status as KeychainStatus {
                    return .keychainFailure(id, status)
                } catch {
                    return .authenticationFailure(id, AuthenticationError(error))
                }
            }
        case .administration(let id, let request):
            run(id, interactive: false) { [engine, caller, send] _ in
                do {
                    let answer = try await engine.handle(request, caller: caller) { send(.progress(id, $0)) }
                    return .administration(id, answer)
                } catch let status as KeychainStatus {
                    return .keychainFailure(id, status)
                } catch {
                    return .authenticationFailure(id, AuthenticationError(error))
                }
            }
        case .answer(let answer):
            if let channel = state.withLock({ $0.channels[answer.request] }) {
                channel.receive(answer)
            } else {
                agentRole.withLock { $0 }?.receive(answer)
            }
        case .registerAgent(let id):
            registerAgent(id)
        case .subscribeKeychainEvents(let id):
            subscribe(id, engine.events(for: caller)) { .keychainEvent(id, $0) }
        case .subscribeEnvironment(let id):
            let changes = engine.authentication?.environmentChanges(for: caller) ?? AsyncStream { $0.finish() }
            subscribe(id, changes) { .environment(id, $0) }
        case .unsubscribe(let id):
            state.withLock { $0.subscriptions.removeValue(forKey: id) }?.cancel()
        case .login(let id, let request):
            run(id, interactive: false) { [engine, caller, peer, logins] _ in
                do {
                    return .login(id, try await logins.handle(request, engine: engine, caller: caller, peer: peer))
                } catch let status as KeychainStatus {
                    return .keychainFailure(id, status)
                } catch {
                    return .authenticationFailure(id, AuthenticationError(error))
                }
            }
        }
    }

    /// Grants what the hello claimed beyond the caller's own groups, once `context` (of this connection) holds
    /// the user's finger or passcode from just now (``KeychainEngine/widening(_:context:)``); requests read after
    /// this use the widened caller, requests in flight keep theirs. The lane's connection of the same program is
    /// not widened: it holds what its own hello was granted.
    ///
    /// - Returns: who the caller is now (`lactl whoami`'s fields).
    /// - Throws: what ``KeychainEngine/widening(_:context:)`` throws.
    private func widen(_ context: AuthenticationContextID) throws -> CallerInfo {
        let widened = try engine.widening(caller, context: context)
        self.widened.withLock { $0 = widened }
        DaemonServer.logger.notice(
            "access widened after the user authenticated",
            metadata: [
                "pid": "\(peer.credentials.pid)", "executable": "\(peer.executable)",
                "groups": "\(widened.accessGroups.joined(separator: ","))",
                "allGroups": "\(widened.mayAccessAllGroups)",
            ])
        return widened.info
    }

    /// The agent that draws this caller's prompts (its user's), nil when none is registered or
    /// the caller draws its own (`interactive`, and its registration says `own-prompts = yes`).
    private func agent(interactive: Bool) -> PromptAgents.Agent? {
        if interactive && routing.drawsOwnPrompts { return nil }
        return routing.agents.agent(uid: peer.credentials.uid)
    }

    /// A prompt channel for request `id`: to the caller's agent when one draws its prompts (``agent(interactive:)``;
    /// not when `mayUseAgent` is false), else to the client when it can answer prompts (`interactive`), else nil.
    private func promptChannel(_ id: UInt64, interactive: Bool, mayUseAgent: Bool = true) -> (
        PromptChannel?, PromptAgents.Agent?
    ) {
        if mayUseAgent, let agent = agent(interactive: interactive), let channel = agent.channel(for: caller.info) {
            return (channel, agent)
        }
        let send = self.send
        return (interactive ? PromptChannel(request: id) { send(.prompt($0)) } : nil, nil)
    }

    /// Records request `id` as in flight; `.some` of its prompt channel
    /// (``promptChannel(_:interactive:mayUseAgent:)``), or `.none` after answering the request with the reason it
    /// cannot run.
    private func admit(_ id: UInt64, interactive: Bool, mayUseAgent: Bool = true) -> PromptChannel?? {
        let (channel, agent) = promptChannel(id, interactive: interactive, mayUseAgent: mayUseAgent)
        let refusal = state.withLock { state -> KeychainStatus? in
            if state.draining || state.closed { return KeychainStatus(.notAvailable, "localauthd is stopping") }
            guard state.inFlight[id] == nil else { return KeychainStatus(.param, "request \(id) is already in flight") }
            state.inFlight[id] = .some(nil)
            if let channel { attach(channel, agent, to: id, in: &state) }
            return nil
        }
        guard let refusal else { return .some(channel) }
        if let channel, let agent { agent.end(channel) }
        send(.keychainFailure(id, refusal))
        return nil
    }

    /// Records where the answers to `channel` come from: the client, or `agent`.
    private func attach(_ channel: PromptChannel, _ agent: PromptAgents.Agent?, to id: UInt64, in state: inout State) {
        if let agent {
            state.agentPrompts[id] = (agent, channel)
        } else {
            state.channels[id] = channel
        }
    }

    /// Request `id` is done: its prompts end (its agent is told), and `answer` goes to the client.
    private func finish(_ id: UInt64, _ channel: PromptChannel?, _ answer: ServerMessage) {
        channel?.close()
        let drawn = state.withLock { state in
            state.channels[id] = nil
            state.inFlight[id] = nil
            return state.agentPrompts.removeValue(forKey: id)
        }
        if let (agent, channel) = drawn { agent.end(channel) }
        send(answer)
        if readingPaused.load(ordering: .acquiring) { relieved?() }
    }

    /// Requests in flight (compared with ``inFlightLimit``).
    var load: Int { state.withLock { $0.inFlight.count } }

    /// Stops taking requests (the daemon is stopping); those in flight finish.
    func drain() {
        state.withLock { $0.draining = true }
    }

    /// Runs request `id` in a task of its own and sends what `body` answers.
    private func run(
        _ id: UInt64, interactive: Bool, _ body: @escaping @Sendable (PromptChannel?) async -> ServerMessage
    ) {
        guard case .some(let channel) = admit(id, interactive: interactive) else { return }
        let task = Task { self.finish(id, channel, await body(channel)) }
        // Kept for cancellation when the connection closes, unless it already finished.
        state.withLock { state in
            if state.inFlight[id] != nil { state.inFlight[id] = .some(task) }
        }
    }

    /// Runs store request `id` (keychain or key) and sends what `body` answers or the status it throws.
    ///
    /// A request that cannot prompt (no presenter on the client's side) and is `inline` (brief: no key derivation,
    /// no whole-store work) runs at once on the connection's event loop, and its answer is written from there: the
    /// keychain's round trip is the hot path, and each hop to another thread costs a wake-up. It never waits on the
    /// client, only on a short store transaction. Every other store request runs on a store thread, as its prompts
    /// wait on the client's answers. Store requests are not cancelled when the connection closes (each is one short
    /// transaction); their prompts are.
    private func runStore(
        _ id: UInt64, _ options: EvaluationOptions, interactive: Bool, inline: Bool,
        _ body: @escaping @Sendable (Prompting) throws -> ServerMessage
    ) {
        if inline && !interactive {
            // On the loop with nobody to ask; when it needed someone and an agent can ask, again on a store thread
            // with the agent (the request changed nothing: it stopped where it needed the user).
            guard case .some = admit(id, interactive: false, mayUseAgent: false) else { return }
            do {
                return finish(id, nil, try body(Prompting(options: options, channel: nil)))
            } catch let status as KeychainStatus
                where status.code == .interactionNotAllowed && !options.interactionNotAllowed
            {
                guard let agent = agent(interactive: false), let channel = agent.channel(for: caller.info) else {
                    return finish(id, nil, .keychainFailure(id, status))
                }
                state.withLock { attach(channel, agent, to: id, in: &$0) }
                return serveOnStoreThread(id, options, channel, body)
            } catch {
                return finish(id, nil, .keychainFailure(id, KeychainStatus(error)))
            }
        }
        guard case .some(let channel) = admit(id, interactive: interactive) else { return }
        if inline && channel == nil {
            do {
                return finish(id, nil, try body(Prompting(options: options, channel: nil)))
            } catch {
                return finish(id, nil, .keychainFailure(id, KeychainStatus(error)))
            }
        }
        serveOnStoreThread(id, options, channel, body)
    }

    /// Runs admitted store request `id` on a store thread, prompting through `channel`.
    private func serveOnStoreThread(
        _ id: UInt64, _ options: EvaluationOptions, _ channel: PromptChannel?,
        _ body: @escaping @Sendable (Prompting) throws -> ServerMessage
    ) {
        let serve = { @Sendable in
            do {
                self.finish(id, channel, try body(Prompting(options: options, channel: channel)))
            } catch {
                self.finish(id, channel, .keychainFailure(id, KeychainStatus(error)))
            }
        }
        storeThreads.submit { poolState in
            guard case .active = poolState else {
                return self.finish(
                    id, channel, .keychainFailure(id, KeychainStatus(.notAvailable, "localauthd is stopping")))
            }
            serve()
        }
    }

    private func subscribe<Element: Sendable>(
        _ id: UInt64, _ stream: AsyncStream<Element>, _ message: @escaping @Sendable (Element) -> ServerMessage
    ) {
        let send = self.send
        let task = Task {
            for await element in stream { send(message(element)) }
        }
        // nil: over the limit.
        let kept = state.withLock { state -> Bool? in
            guard !state.closed else { return false }
            guard state.subscriptions[id] != nil || state.subscriptions.count < Self.subscriptionLimit else {
                return nil
            }
            state.subscriptions[id]?.cancel()
            state.subscriptions[id] = task
            return true
        }
        if kept != true { task.cancel() }
        if kept == nil {
            DaemonServer.logger.notice(
                "a subscription over the connection's limit is not served",
                metadata: [
                    "pid": "\(peer.credentials.pid)", "executable": "\(peer.executable)",
                    "limit": "\(Self.subscriptionLimit)",
                ])
        }
    }

    /// The connection closed: prompts in progress end (`systemCancel`), requests still running are cancelled (a
    /// scan in progress releases the reader), subscriptions stop, and the connection's contexts are discarded.
    func close() {
        let (channels, drawn, tasks) = state.withLock { state in
            state.closed = true
            defer {
                state.channels = [:]
                state.agentPrompts = [:]
                state.subscriptions = [:]
            }
            return (
                Array(state.channels.values), Array(state.agentPrompts.values),
                Array(state.subscriptions.values) + state.inFlight.values.compactMap { $0 }
            )
        }
        for channel in channels { channel.close() }
        for (agent, channel) in drawn {
            channel.close()
            agent.end(channel)
        }
        for task in tasks { task.cancel() }
        DaemonServer.logger.debug(
            "disconnected",
            metadata: [
                "pid": "\(peer.credentials.pid)", "cancelled": "\(tasks.count)",
                "prompts": "\(channels.count + drawn.count)",
            ])
        if let agent = agentRole.withLock({ $0 }) { routing.agents.remove(agent) }
        engine.authentication?.discardAll(owner: caller.connection)
    }

    /// Makes this connection its user's prompt agent (``PromptAgents``: one per user). Only an administrative tool
    /// that is not tainted (`lactl agent`) may: any other program of the user would otherwise receive the
    /// questions other programs ask, with the names the daemon verified, and could collect what the user types.
    /// The answer names the pinentry the administrator chose (``SecurityProtocol/AgentRegistration``).
    private func registerAgent(_ id: UInt64) {
        guard routing.mayServeAsAgent else {
            return send(
                .keychainFailure(
                    id,
                    KeychainStatus(
                        .authFailed,
                        "only an administrative tool registered with localauthd (lactl agent) may draw the user's "
                            + "prompts; \(peer.executable) is not one")))
        }
        typealias Registered = (agent: PromptAgents.Agent, registration: AgentRegistration)
        let registered = state.withLock { state -> Result<Registered, PromptAgents.Refusal> in
            guard !state.closed else { return .failure(PromptAgents.Refusal(description: "the connection closed")) }
            guard agentRole.withLock({ $0 }) == nil else {
                return .failure(PromptAgents.Refusal(description: "this connection is an agent already"))
            }
            let registered = Result { () throws(PromptAgents.Refusal) -> Registered in
                try routing.agents.register(
                    uid: peer.credentials.uid, session: routing.loginSession, peer: peer, send: send)
            }
            // Inside the lock: a close() after it finds the role and removes the agent.
            if case .success(let made) = registered { agentRole.withLock { $0 = made.agent } }
            return registered
        }
        switch registered {
        case .success(let made):
            send(.agentRegistered(id, made.registration))
        case .failure(let refusal):
            send(.keychainFailure(id, KeychainStatus(.duplicateItem, refusal.description)))
        }
    }

    /// Whether a request of this connection is in flight.
    var isBusy: Bool { state.withLock { !$0.inFlight.isEmpty } }
}

extension KeychainStatus {
    /// `error` as the `OSStatus`-coded failure a client gets (the engine throws `KeychainStatus` already).
    init(_ error: any Error) {
        self = error as? KeychainStatus ?? KeychainStatus(.internalComponent, "the keychain service failed")
    }
}

extension AuthenticationError {
    /// `error` as the `LAError`-coded failure a client gets.
    init(_ error: any Error) {
        if let failure = error as? AuthenticationError {
            self = failure
        } else if let status = error as? KeychainStatus {
            self = AuthenticationError(.notInteractive, status.message)
        } else {
            self = AuthenticationError(.invalidContext, "the authentication service failed")
        }
    }
}
