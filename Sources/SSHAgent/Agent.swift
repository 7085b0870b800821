import Foundation
import LocalAuthentication
import SSHAgentProtocol
import SecureCrypto
import SecurityProtocol
import SocketPeer
import Synchronization

/// The agent's answers to requests: its own keys listed and used after an authentication for each signature,
/// outside keys refused, lock and unlock with a passphrase, extensions as the protocol says.
///
/// An approval is kept per (key, requesting program, destination host) for the key's reuse window: within it the same
/// program signs again for the same host without a prompt (with a notice); another program, another host, a locked
/// agent or an expired window asks again.
///
/// "The same program" is decided as localauthd decides who asks (``Session/program``): the file the process runs
/// (device, inode, size and times, never its path), and only for a process that is not tainted (another mount or
/// user namespace, loader injection, foreign code mapped, traced: `ProgramIntegrity`) and still runs that file. A
/// tainted program is asked every time and never leaves an approval behind. The destination host is the host key
/// of OpenSSH's `session-bind@openssh.com` (ssh 8.9 and later sends it before its first signature); a program
/// that binds no host gets a window of its own for unbound requests.
public final class Agent: Sendable {
    /// Where each signature's prompt is drawn.
    let prompts: AgentPrompts
    let keyring: AgentKeyring
    /// Writes one line after each use of a key (and why a use was refused); nil = silent.
    let notice: (@Sendable (String) -> Void)?

    /// An approval kept for a reuse window: the authorized right and when it ends.
    struct Approval {
        var right: LAPersistedRight
        var expires: ContinuousClock.Instant
    }

    private struct State {
        /// SHA-256 of the lock passphrase while locked.
        var lockedWith: Data?
        /// Approvals by key name, program and bound host.
        var approvals: [ApprovalKey: Approval] = [:]
        /// The keys as last read, to find a blob's key without reading the keychain on every request.
        var keys: [AgentKeyring.Key]?
    }

    struct ApprovalKey: Hashable {
        var key: String
        var program: PeerProcess.FileIdentity
        var host: String?
    }

    private let state = Mutex(State())

    /// An agent over `keyring`, prompting where `prompts` says.
    public init(
        keyring: AgentKeyring = AgentKeyring(), prompts: AgentPrompts = .automatic,
        notice: (@Sendable (String) -> Void)? = nil
    ) {
        self.keyring = keyring
        self.prompts = prompts
        self.notice = notice
    }

    /// What one connection knows: the program on the other end, and the host key a `session-bind@openssh.com`
    /// named, for the prompt.
    final class Session: Sendable {
        let peer: AgentPeer?
        let boundHost = Mutex<String?>(nil)
        /// The connected process, held by its pidfd.
        let process: PeerProcess?
        /// Why the process may not share a reuse window (tainted), checked when it connected.
        let taint: String?

        init(peer: AgentPeer? = nil, process: PeerProcess? = nil) {
            self.peer = peer
            self.process = process
            taint = process.map { $0.integrity().taint } ?? "the connected process could not be identified"
        }

        /// The file version a reuse window of this connection is keyed by; nil when the program is tainted or no
        /// longer runs what it connected with (a connection handed on by `exec`).
        var program: PeerProcess.FileIdentity? {
            guard taint == nil, let process, process.isCurrent else { return nil }
            return process.fileVersion
        }
    }

    /// Answers one message body (type and contents); a malformed message gets the failure reply.
    func respond(to body: [UInt8], in session: Session) async -> [UInt8] {
        let request: AgentRequest
        do {
            request = try AgentRequest.parse(body)
        } catch {
            return AgentResponse.failure
        }
        switch request {
        case .requestIdentities:
            if state.withLock({ $0.lockedWith != nil }) { return AgentResponse.identities([]) }
            let keys = await currentKeys(refresh: true)
            return AgentResponse.identities(keys.map { ($0.blob, $0.comment) })
        case .sign(let blob, let data, _):
            return await sign(data, with: blob, session: session)
        case .keyManagement, .unknown:
            return AgentResponse.failure
        case .lock(let passphrase):
            let digest = SHA256.hash(Data(passphrase))
            let (answer, dropped) = state.withLock { state -> ([UInt8], [Approval]) in
                guard state.lockedWith == nil else { return (AgentResponse.failure, []) }
                state.lockedWith = digest
                defer { state.approvals = [:] }
                return (AgentResponse.success, Array(state.approvals.values))
            }
            for approval in dropped { await approval.right.deauthorize() }
            return answer
        case .unlock(let passphrase):
            let digest = SHA256.hash(Data(passphrase))
            return state.withLock { state in
                guard let locked = state.lockedWith, constantTimeEqual(locked, digest) else {
                    return AgentResponse.failure
                }
                state.lockedWith = nil
                return AgentResponse.success
            }
        case .sessionBind(let hostKey, _, _):
            session.boundHost.withLock { $0 = Self.fingerprint(hostKey) }
            return AgentResponse.success
        case .otherExtension:
            // draft-miller-ssh-agent §4.8: an unsupported extension is answered with SSH_AGENT_FAILURE.
            return AgentResponse.failure
        }
    }

    /// The keys, read again when `refresh` or never read.
    private func currentKeys(refresh: Bool) async -> [AgentKeyring.Key] {
        if !refresh, let keys = state.withLock({ $0.keys }) { return keys }
        let keys = (try? await keyring.keys()) ?? []
        state.withLock { $0.keys = keys }
        return keys
    }

    private func sign(_ data: [UInt8], with blob: [UInt8], session: Session) async -> [UInt8] {
        if state.withLock({ $0.lockedWith != nil }) { return AgentResponse.failure }
        var key = await currentKeys(refresh: false).first(where: { $0.blob == blob })
        if key == nil { key = await currentKeys(refresh: true).first(where: { $0.blob == blob }) }
        guard let key else { return AgentResponse.failure }
        let approvalKey = session.program.map {
            ApprovalKey(key: key.name, program: $0, host: session.boundHost.withLock { $0 })
        }
        let programName = PromptText.displayed(
            session.peer?.programName ?? "an unknown program", limit: 200, verified: true)
        // The verified part first: the signed data's texts are the client's, and a long one must not push it out of
        // the prompt's length cap.
        let reason =
            "asked by \(programName): " + Self.describe(data, host: session.boundHost.withLock { $0 }, key: key.name)

        let now = ContinuousClock.now
        let kept = state.withLock { state -> Approval? in
            guard let approvalKey, let approval = state.approvals[approvalKey] else { return nil }
            if approval.expires > now { return approval }
            state.approvals[approvalKey] = nil
            return nil
        }
        if let kept {
            do {
                let signature = try await keyring.sign(Data(data), with: kept.right)
                let left = Int((kept.expires - ContinuousClock.now).components.seconds)
                notice?("lactl ssh-agent: signed with \(key.name) (approval kept, \(left) s left): \(reason)")
                return AgentResponse.signature(signature)
            } catch {
                // The right stopped working (deauthorized, enrollment changed): forget it and ask again.
                state.withLock { if let approvalKey { $0.approvals[approvalKey] = nil } }
                await kept.right.deauthorize()
            }
        }

        do {
            let right = try await keyring.authorize(
                key.name, reason: reason, presenter: prompts.presenter(for: session.peer))
            let signature: [UInt8]
            do {
                signature = try await keyring.sign(Data(data), with: right)
            } catch {
                await right.deauthorize()
                throw error
            }
            if key.reuseSeconds > 0, let approvalKey, state.withLock({ $0.lockedWith == nil }) {
                keep(right, for: approvalKey, seconds: key.reuseSeconds)
                notice?(
                    "lactl ssh-agent: signed with \(key.name), approval kept \(key.reuseSeconds) s for \(programName): \(reason)"
                )
            } else {
                await right.deauthorize()
                let unkept =
                    key.reuseSeconds > 0 && approvalKey == nil
                    ? " (approval not kept: \(session.taint ?? "the program changed"))" : ""
                notice?("lactl ssh-agent: signed with \(key.name)\(unkept): \(reason)")
            }
            return AgentResponse.signature(signature)
        } catch {
            notice?("lactl ssh-agent: refused to sign with \(key.name): \(error.localizedDescription)")
            return AgentResponse.failure
        }
    }

    /// Keeps `right` authorized for `seconds` for `approvalKey`, then deauthorizes it (unless it was replaced).
    private func keep(_ right: LAPersistedRight, for approvalKey: ApprovalKey, seconds: Int) {
        let expires = ContinuousClock.now + .seconds(seconds)
        let replaced = state.withLock { state -> LAPersistedRight? in
            defer { state.approvals[approvalKey] = Approval(right: right, expires: expires) }
            return state.approvals[approvalKey]?.right
        }
        Task { [weak self] in
            if let replaced { await replaced.deauthorize() }
            try? await Task.sleep(until: expires, clock: .continuous)
            let ended = self?.state.withLock { state -> Bool in
                guard let current = state.approvals[approvalKey], current.right === right else { return false }
                state.approvals[approvalKey] = nil
                return true
            }
            // Removed by a lock or replaced meanwhile: whoever removed it deauthorized it.
            if ended ?? true { await right.deauthorize() }
        }
    }

    /// What a signature is for, for the prompt: the SSH user-authentication request's user and service (RFC 4252
    /// §7) and the host the session is bound to, or an `ssh-keygen -Y sign` namespace (SSHSIG), or "data".
    static func describe(_ data: [UInt8], host: String?, key: String) -> String {
        var reader = SSHReader(data)
        if Array(data.prefix(6)) == Array("SSHSIG".utf8) {
            var sig = SSHReader(Array(data.dropFirst(6)))
            if let namespace = try? sig.string() {
                return "sign for namespace \u{201C}\(shown(namespace))\u{201D} with SSH key \(key)"
            }
        }
        if (try? reader.string()) != nil, (try? reader.byte()) == 50,  // SSH_MSG_USERAUTH_REQUEST
            let user = try? reader.string(), let service = try? reader.string()
        {
            let target = host.map { " on host key \($0)" } ?? ""
            return "log in as \(shown(user)) (\(shown(service)))\(target) with SSH key \(key)"
        }
        return "sign data with SSH key \(key)"
    }

    /// A text of the signed data (the client's) as a prompt and the agent's log show it: escaped where it could
    /// draw or hide text (``PromptText``), at most 64 characters.
    static func shown(_ bytes: [UInt8]) -> String {
        PromptText.displayed(String(decoding: bytes, as: UTF8.self), limit: 64)
    }

    /// OpenSSH's fingerprint of a key blob: `SHA256:` and unpadded base64 of SHA-256.
    static func fingerprint(_ blob: [UInt8]) -> String {
        "SHA256:" + SHA256.hash(Data(blob)).base64EncodedString().replacingOccurrences(of: "=", with: "")
    }
}

private func constantTimeEqual(_ a: Data, _ b: Data) -> Bool {
    guard a.count == b.count else { return false }
    return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
}
