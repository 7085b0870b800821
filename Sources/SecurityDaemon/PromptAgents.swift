import Foundation
import SecurityProtocol
import SecurityServer
import Synchronization

/// The users' prompt agents (`lactl agent`): at most one per user and login session, and one per user outside any
/// session (a systemd user service), which serves the user's programs that have no agent of their own session.
///
/// A program's prompts go to its agent rather than to the program: the agent draws them (pinentry), the passcode
/// goes from the agent to the daemon, and the program receives only the outcome. The daemon finds both ends' user
/// and session from the kernel (``SocketPeer/PeerProcess/loginSession``), never from a message, so an agent serves
/// only its own user's programs, and only those of its session (or, registered outside any session, those with no
/// agent of their own session).
final class PromptAgents: Sendable {
    /// A user and a login session (nil: outside any).
    struct Key: Hashable, Sendable {
        var uid: UInt32
        var session: String?

        /// How logs and the agent name it.
        var description: String { session.map { "login session \($0)" } ?? "uid \(uid) outside any login session" }
    }

    /// One registered agent: its connection's sender and the prompts it is drawing.
    final class Agent: Sendable {
        let key: Key
        let pid: Int32
        private let send: @Sendable (ServerMessage) -> Void
        private let prompts = Mutex<[UInt64: PromptChannel]?>([:])

        init(key: Key, pid: Int32, send: @escaping @Sendable (ServerMessage) -> Void) {
            self.key = key
            self.pid = pid
            self.send = send
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

    private let agents = Mutex<[Key: Agent]>([:])

    /// Why an agent is not registered.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    /// Registers the agent of `key` (its connection's process `pid`, sending with `send`).
    ///
    /// - Throws: ``Refusal`` when another agent serves that user and session already.
    func register(_ key: Key, pid: Int32, send: @escaping @Sendable (ServerMessage) -> Void) throws(Refusal)
        -> Agent
    {
        let agent = Agent(key: key, pid: pid, send: send)
        let present = agents.withLock { agents -> Agent? in
            if let present = agents[key] { return present }
            agents[key] = agent
            return nil
        }
        if let present {
            throw Refusal(description: "an agent (pid \(present.pid)) serves \(key.description) already")
        }
        DaemonServer.logger.info(
            "prompt agent registered", metadata: ["pid": "\(pid)", "for": "\(key.description)"])
        return agent
    }

    /// The agent's connection closed.
    func remove(_ agent: Agent) {
        agents.withLock { agents in
            if agents[agent.key] === agent { agents[agent.key] = nil }
        }
        agent.close()
        DaemonServer.logger.info(
            "prompt agent gone", metadata: ["pid": "\(agent.pid)", "for": "\(agent.key.description)"])
    }

    /// The agent that draws the prompts of a program of user `uid` in login session `session`: that session's,
    /// else the user's agent outside any session; nil when neither is registered.
    func agent(uid: UInt32, session: String?) -> Agent? {
        agents.withLock { agents in
            guard !agents.isEmpty else { return nil }
            return agents[Key(uid: uid, session: session)] ?? agents[Key(uid: uid, session: nil)]
        }
    }
}
