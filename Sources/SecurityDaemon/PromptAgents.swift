import Foundation
import SecurityProtocol
import SecurityServer
import SocketPeer
import Synchronization

/// The users' prompt agents (`lactl agent`): one per user, wherever it runs (a systemd user service outside any
/// login session, or a terminal of a session), drawing the prompts of all of that user's programs.
///
/// A program's prompts go to its agent rather than to the program: the agent draws them (pinentry), the passcode
/// goes from the agent to the daemon, and the program receives only the outcome. The daemon finds both ends' user
/// from the kernel, never from a message, so an agent serves only its own user's programs.
///
/// One agent per user, and no agent is preferred over another: any program of the user can start the registered
/// `lactl`, so an agent started from a login session must not take that session's prompts from the user's own.
/// While an agent is connected, another is refused (the refusal names it, the log says who tried, and the agent
/// that serves is told: ``ServerMessage/agentNotice(_:)``). Once it disconnected, a new one is accepted only after
/// the old one's process has exited, never while it merely lost its connection, and the replacement is logged as a
/// warning naming both and told to the new agent; so an agent that is killed and taken over leaves a trace, and
/// the real one, restarted, is refused with the usurper's pid.
final class PromptAgents: Sendable {
    /// One registered agent: its connection's sender and the prompts it is drawing.
    final class Agent: Sendable {
        let uid: UInt32
        /// The agent's process, held so that its exit can be told apart from a lost connection.
        let peer: PeerProcess
        /// The login session it registered from (nil: outside any), for the log.
        let session: String?
        let since = Date()
        private let send: @Sendable (ServerMessage) -> Void
        private let prompts = Mutex<[UInt64: PromptChannel]?>([:])

        init(uid: UInt32, peer: PeerProcess, session: String?, send: @escaping @Sendable (ServerMessage) -> Void) {
            self.uid = uid
            self.peer = peer
            self.session = session
            self.send = send
        }

        var pid: Int32 { peer.credentials.pid }

        /// How the log and refusals name it.
        var description: String {
            "pid \(pid), \(session.map { "login session \($0)" } ?? "outside any login session"), registered "
                + since.formatted(.iso8601)
        }

        /// A prompt channel whose events go to this agent, naming `caller`; nil once the agent is gone.
        ///
        /// The agent learns of it with its first event (most requests never prompt, and the agent hears nothing of
        /// them); an event after the agent is gone closes the channel, so the question it asked ends unanswered.
        func channel(for caller: CallerInfo) -> PromptChannel? {
            guard prompts.withLock({ $0 != nil }) else { return nil }
            let number = PromptAgents.nextPrompt.add(1, ordering: .relaxed).newValue
            let reference = ChannelReference()
            let channel = PromptChannel(request: number) { [weak self] event in
                let shown =
                    self?.prompts.withLock { prompts -> Bool in
                        guard prompts != nil else { return false }
                        if prompts?[number] == nil, let channel = reference.channel { prompts?[number] = channel }
                        return true
                    } ?? false
                guard shown, let self else {
                    reference.channel?.close()
                    return
                }
                self.send(.agentPrompt(event, caller))
            }
            reference.channel = channel
            return channel
        }

        /// The prompts of `channel` are over: the agent is told, so that it closes what it shows.
        func end(_ channel: PromptChannel) {
            let known = prompts.withLock { $0?.removeValue(forKey: channel.request) != nil }
            if known { send(.agentPromptEnded(channel.request)) }
        }

        /// An answer of the agent, to the prompt it names (ignored for any other).
        func receive(_ answer: PromptAnswer) {
            prompts.withLock { $0?[answer.request] }?.receive(answer)
        }

        /// Tells the agent's user `text` (the agent shows it).
        func notify(_ text: String) {
            send(.agentNotice(text))
        }

        /// The agent's connection closed: every prompt it was drawing ends unanswered (its evaluation fails,
        /// granting nothing), and no more come to it.
        func close() {
            let open = prompts.withLock { prompts in
                defer { prompts = nil }
                return prompts.map { Array($0.values) } ?? []
            }
            for channel in open { channel.close() }
        }
    }

    /// A channel its own sink names without keeping it alive.
    private final class ChannelReference: @unchecked Sendable {
        // Set once, before the channel is handed out; read by the channel's events after.
        weak var channel: PromptChannel?
    }

    /// Prompt numbers, unique in the daemon (so an agent cannot name another agent's prompt by accident).
    static let nextPrompt = Atomic<UInt64>(0)

    /// Per user: the agent connected now, and the last one that disconnected (until a new one registers).
    private struct Slot {
        var present: Agent?
        var departed: Agent?
    }

    private let slots = Mutex<[UInt32: Slot]>([:])
    /// The administrator's pinentry settings, read at each registration (``DaemonConfiguration/agentPinentry``,
    /// ``DaemonConfiguration/agentPinentryChoice``).
    private let pinentryPolicy: @Sendable () -> (program: String, mayChoose: Bool)

    init(pinentryPolicy: @escaping @Sendable () -> (program: String, mayChoose: Bool)) {
        self.pinentryPolicy = pinentryPolicy
    }

    /// Why an agent is not registered.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    /// Registers the agent of user `uid` (its connection's process `peer`, registering from login session
    /// `session`, sending with `send`); returns it and what it is told.
    ///
    /// - Throws: ``Refusal`` when an agent serves the user already, or the last one disconnected but its process
    ///   still runs.
    func register(
        uid: UInt32, session: String?, peer: PeerProcess, send: @escaping @Sendable (ServerMessage) -> Void
    ) throws(Refusal) -> (Agent, AgentRegistration) {
        let agent = Agent(uid: uid, peer: peer, session: session, send: send)
        var serving: Agent?
        let outcome = slots.withLock { slots -> Result<Agent?, Refusal> in
            let slot = slots[uid] ?? Slot()
            if let present = slot.present {
                serving = present
                return .failure(
                    Refusal(
                        description: "an agent (\(present.description)) serves uid \(uid) already: one agent per user"))
            }
            if let departed = slot.departed, !departed.peer.hasExited {
                return .failure(
                    Refusal(
                        description: "the previous agent of uid \(uid) (pid \(departed.pid)) lost its connection but "
                            + "still runs: a new agent is accepted once it has exited"))
            }
            let replaced = slot.departed
            slots[uid] = Slot(present: agent, departed: nil)
            return .success(replaced)
        }
        let replaced: Agent?
        switch outcome {
        case .success(let departed):
            replaced = departed
        case .failure(let refusal):
            // The user's agent hears of it (outside the lock): a program of the user tried to take its place.
            serving?.notify(
                "another agent (pid \(peer.credentials.pid), \(peer.executable)) tried to register for uid \(uid) and "
                    + "was refused; if you did not start it, a program of yours wanted to draw your prompts")
            DaemonServer.logger.warning(
                "prompt agent refused",
                metadata: [
                    "pid": "\(peer.credentials.pid)", "uid": "\(uid)", "executable": "\(peer.executable)",
                    "reason": "\(refusal.description)",
                ])
            throw refusal
        }
        if let replaced {
            // The user's agent before this one has exited: whoever ended it, the user reads here who followed.
            DaemonServer.logger.warning(
                "prompt agent replaced: the previous agent exited and a new one registered",
                metadata: ["uid": "\(uid)", "previous": "\(replaced.description)", "new": "\(agent.description)"])
        } else {
            DaemonServer.logger.info(
                "prompt agent registered", metadata: ["uid": "\(uid)", "agent": "\(agent.description)"])
        }
        let policy = pinentryPolicy()
        let registration = AgentRegistration(
            serves: "uid \(uid)", pinentry: policy.program, mayChoosePinentry: policy.mayChoose,
            replaced: replaced?.pid)
        return (agent, registration)
    }

    /// The agent's connection closed: it stays recorded until its process has exited and a new agent registered.
    func remove(_ agent: Agent) {
        slots.withLock { slots in
            guard slots[agent.uid]?.present === agent else { return }
            slots[agent.uid] = Slot(present: nil, departed: agent)
        }
        agent.close()
        DaemonServer.logger.info(
            "prompt agent gone", metadata: ["uid": "\(agent.uid)", "agent": "\(agent.description)"])
    }

    /// The agent that draws the prompts of user `uid`'s programs; nil when none is registered.
    func agent(uid: UInt32) -> Agent? {
        slots.withLock { $0[uid]?.present }
    }
}
