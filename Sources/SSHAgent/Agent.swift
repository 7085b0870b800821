import Foundation
import SSHAgentProtocol
import LocalAuthentication
import SecureCrypto
import Synchronization

/// The agent's answers to requests: its own keys listed and used after an authentication for each signature,
/// outside keys refused, lock and unlock with a passphrase, extensions as the protocol says.
public final class Agent: Sendable {
    /// Who draws the prompt of each signature.
    let presenter: (any AuthenticationPresenter)?
    let keyring: AgentKeyring
    /// Writes one line after each use of a key (and why a use was refused); nil = silent.
    let notice: (@Sendable (String) -> Void)?

    private struct State {
        /// SHA-256 of the lock passphrase while locked.
        var lockedWith: Data?
    }

    private let state = Mutex(State())

    /// An agent over `keyring`, prompting through `presenter`.
    public init(
        keyring: AgentKeyring = AgentKeyring(), presenter: (any AuthenticationPresenter)?,
        notice: (@Sendable (String) -> Void)? = nil
    ) {
        self.keyring = keyring
        self.presenter = presenter
        self.notice = notice
    }

    /// What one connection knows: the host key a `session-bind@openssh.com` named, for the prompt.
    final class Session: Sendable {
        let boundHost = Mutex<String?>(nil)
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
            let keys = (try? await keyring.keys()) ?? []
            return AgentResponse.identities(keys.map { ($0.blob, $0.comment) })
        case .sign(let blob, let data, _):
            return await sign(data, with: blob, session: session)
        case .keyManagement, .unknown:
            return AgentResponse.failure
        case .lock(let passphrase):
            let digest = SHA256.hash(Data(passphrase))
            return state.withLock { state in
                guard state.lockedWith == nil else { return AgentResponse.failure }
                state.lockedWith = digest
                return AgentResponse.success
            }
        case .unlock(let passphrase):
            let digest = SHA256.hash(Data(passphrase))
            return state.withLock { state in
                guard let locked = state.lockedWith, constantTimeEqual(locked, digest) else { return AgentResponse.failure }
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

    private func sign(_ data: [UInt8], with blob: [UInt8], session: Session) async -> [UInt8] {
        if state.withLock({ $0.lockedWith != nil }) { return AgentResponse.failure }
        guard let key = (try? await keyring.keys())?.first(where: { $0.blob == blob }) else {
            return AgentResponse.failure
        }
        let reason = Self.describe(data, host: session.boundHost.withLock { $0 }, key: key.name)
        do {
            let signature = try await keyring.sign(Data(data), with: key.name, reason: reason, presenter: presenter)
            notice?("lactl ssh-agent: signed with \(key.name): \(reason)")
            return AgentResponse.signature(signature)
        } catch {
            notice?("lactl ssh-agent: refused to sign with \(key.name): \(error.localizedDescription)")
            return AgentResponse.failure
        }
    }

    /// What a signature is for, for the prompt: the SSH user-authentication request's user and service (RFC 4252
    /// §7) and the host the session is bound to, or an `ssh-keygen -Y sign` namespace (SSHSIG), or "data".
    static func describe(_ data: [UInt8], host: String?, key: String) -> String {
        var reader = SSHReader(data)
        if Array(data.prefix(6)) == Array("SSHSIG".utf8) {
            var sig = SSHReader(Array(data.dropFirst(6)))
            if let namespace = try? sig.string() {
                return "sign for namespace \"\(String(decoding: namespace, as: UTF8.self))\" with SSH key \(key)"
            }
        }
        if (try? reader.string()) != nil, (try? reader.byte()) == 50,  // SSH_MSG_USERAUTH_REQUEST
            let user = try? reader.string(), let service = try? reader.string()
        {
            let target = host.map { " on host key \($0)" } ?? ""
            return "log in as \(String(decoding: user, as: UTF8.self)) (\(String(decoding: service, as: UTF8.self)))"
                + "\(target) with SSH key \(key)"
        }
        return "sign data with SSH key \(key)"
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
