import Foundation
import Logging
import SecurityProtocol
import SecurityServer
import SocketPeer
import Synchronization

/// The users' login sessions, as the PAM module reports them: the keychain unlocks when a session opens with the
/// login password and its `ak` classes lock when the last of the user's sessions that counted closes. Only sessions
/// whose password unlocked the keychain count, and those whose program's `pam_localauth.so finger` prompt took a
/// finger of the user moments before, when the keychain is unlocked at their open (the match opens it then with the
/// keys a lock kept, within 48 hours of a passcode unlock); a login by key leaves it as it is, cannot hold it open,
/// and its close locks nothing.
///
/// A session is the program that runs the PAM stack (`login`, `sshd`'s session process, a display manager): the
/// parent of the process the module forks to connect as the user, named by its pid and its start time (so a reused
/// pid is another session). A session whose program exited without closing it (killed, crashed) no longer counts:
/// each open and close prunes those. Nothing of this is written: after a restart, localauthd counts no session, and
/// the keychain is locked anyway.
final class LoginSessions: Sendable {
    /// One login session: its program's pid and start time (clock ticks after boot, `/proc/<pid>/stat` field 22).
    struct Session: Hashable, Sendable {
        var pid: Int32
        var startTime: UInt64
    }

    private let sessions = Mutex<[UInt32: Set<Session>]>([:])
    /// The sessions a finger matched for at the module's prompt, by user, until when their open may count them.
    private let fingerLogins = Mutex<[UInt32: [Session: ContinuousClock.Instant]]>([:])
    /// How long after the finger matched a session's open counts it (`login` opens at once; a display manager
    /// may first ask which desktop to start).
    static let fingerLoginLifetime = Duration.seconds(300)

    /// Serves one login step of user `uid`'s connection from `peer`, on `engine`.
    func handle(
        _ request: LoginRequest, engine: KeychainEngine, caller: CallerIdentity, peer: PeerProcess
    ) async throws -> LoginOutcome {
        let uid = peer.credentials.uid
        let user = ["uid": Logger.MetadataValue.string("\(uid)")]
        switch request {
        case .sessionOpened(let password):
            guard let session = Self.session(ofParentOf: peer.credentials.pid) else {
                throw AuthenticationError(.invalidContext, "the login session's program cannot be named")
            }
            // Only a login whose password unlocked the keychain counts as a session: any program of the user may
            // send this message, and one without the password must not keep the keychain open past the last
            // logout.
            var note: String? = "no password: the keychain is left as it is"
            if let password {
                note = await engine.unlock(withPassword: password, caller: caller)
            } else if tookFingerLogin(session, uid: uid) {
                // The finger this program's module took moments ago opens the keychain now, at the session's open
                // (so a finger at sudo or pkexec, which open no counted session, leaves it as it is).
                let unlockedByFinger = engine.isLocked ? ((try? engine.unlockWithKeptKeys()) ?? false) : false
                note =
                    engine.isLocked
                    ? "a finger opens it only within 48 hours of a passcode unlock since localauthd started (and before 5 failed scans); `lactl keychain unlock` opens it with the password"
                    : nil
                if unlockedByFinger {
                    DaemonServer.logger.info("login finger: the kept keys opened the keychain", metadata: user)
                }
            }
            let count = note == nil ? opened(session, uid: uid) : count(uid: uid)
            let outcome = LoginOutcome(unlocked: !engine.isLocked, sessions: count, note: note)
            DaemonServer.logger.info(
                "login session opened",
                metadata: user.merging(
                    ["sessions": "\(count)", "unlocked": "\(outcome.unlocked)", "note": "\(note ?? "")"]) { $1 })
            return outcome
        case .sessionClosed:
            guard let session = Self.session(ofParentOf: peer.credentials.pid) else {
                throw AuthenticationError(.invalidContext, "the login session's program cannot be named")
            }
            let (counted, count) = closed(session, uid: uid)
            var note: String?
            // Only the close of the last session that counted locks: a session opened without the password (a
            // login by key, a program of the user) never held the keychain open, so its close leaves it as it is.
            if counted && count == 0 {
                try engine.lockKeychain()
                note = "the last login session closed: the keychain is locked"
            }
            DaemonServer.logger.info("login session closed", metadata: user.merging(["sessions": "\(count)"]) { $1 })
            return LoginOutcome(unlocked: !engine.isLocked, sessions: count, note: note)
        case .fingerOffered:
            guard let contexts = engine.authentication else {
                return LoginOutcome(
                    unlocked: !engine.isLocked, sessions: count(uid: uid), note: "no authenticators",
                    finger: .notOffered)
            }
            let availability = await contexts.canEvaluate(.biometrics, context: nil)
            return LoginOutcome(
                unlocked: !engine.isLocked, sessions: count(uid: uid), note: availability.error?.message,
                finger: availability.error == nil ? .offered : .notOffered)
        case .verifyFinger:
            // The module's process connecting is the child of its watcher, whose parent runs the PAM stack; both
            // run as root. A program of the user could send this too, and catch a touch meant for another prompt:
            // it gets no silent verification.
            guard let watcher = Self.parent(of: peer.credentials.pid), Self.runsAsRoot(watcher),
                let session = Self.session(ofParentOf: watcher), Self.runsAsRoot(session.pid)
            else {
                return LoginOutcome(
                    unlocked: !engine.isLocked, sessions: count(uid: uid),
                    note: "only pam_localauth, in a program that runs as root, asks for a finger here",
                    finger: .notOffered)
            }
            DaemonServer.logger.info("login finger: waiting for a finger", metadata: user)
            let answer = try await verifyFinger(engine: engine, caller: caller)
            if answer.finger == .matched { fingerMatched(session, uid: uid) }
            DaemonServer.logger.info(
                "login finger",
                metadata: user.merging(["answer": "\(answer.finger)", "note": "\(answer.note ?? "")"]) {
                    $1
                })
            return LoginOutcome(
                unlocked: !engine.isLocked, sessions: count(uid: uid), note: answer.note, finger: answer.finger)
        case .passwordChanged(let old, let new):
            let note = await engine.unlock(withPassword: new, previous: old, caller: caller)
            DaemonServer.logger.info(
                "login password changed", metadata: user.merging(["resealed": "\(note == nil)"]) { $1 })
            return LoginOutcome(unlocked: !engine.isLocked, sessions: count(uid: uid), note: note)
        }
    }

    /// One evaluation of a finger on the reader against the caller's user's prints, with nobody to show its prompt
    /// to (the PAM module shows its own): matched, not matched (the failures count toward the lockout), or not
    /// offered (no reader, none enrolled, locked out, the evaluation cancelled), with why.
    private func verifyFinger(engine: KeychainEngine, caller: CallerIdentity) async throws -> (
        finger: FingerAnswer, note: String?
    ) {
        guard let contexts = engine.authentication else { return (.notOffered, "no authenticators") }
        let id = try contexts.createContext(owner: caller.connection)
        defer { contexts.discard(id) }
        let silent = PromptChannel(request: 0) { _ in }
        do {
            try await contexts.evaluate(
                .biometrics, context: id, options: EvaluationOptions(prompt: EvaluationPrompt(reason: "log in")),
                prompts: silent)
            return (.matched, nil)
        } catch let error as AuthenticationError where error.code == .authenticationFailed {
            return (.notMatched, error.message)
        } catch let error as AuthenticationError where error.code == .systemCancel {
            // No finger within the reader's attempt time: the prompt still offers it, so the module asks again
            // (nothing was counted).
            return (.notMatched, error.message)
        } catch let error as AuthenticationError {
            return (.notOffered, error.message)
        }
    }

    /// Records `session` of `uid`; the user's sessions now.
    private func opened(_ session: Session, uid: UInt32) -> Int {
        sessions.withLock { sessions in
            sessions[uid, default: []].insert(session)
            sessions[uid] = sessions[uid]!.filter(Self.isRunning)
            return sessions[uid]!.count
        }
    }

    /// A finger of `uid` matched at the prompt of `session`'s program: its open may count it for a while.
    private func fingerMatched(_ session: Session, uid: UInt32) {
        let now = ContinuousClock.now
        fingerLogins.withLock { logins in
            logins[uid] = (logins[uid] ?? [:]).filter { $0.value > now }
            logins[uid]![session] = now + Self.fingerLoginLifetime
        }
    }

    /// Whether a finger of `uid` matched at `session`'s prompt lately; forgets it (one open per match).
    private func tookFingerLogin(_ session: Session, uid: UInt32) -> Bool {
        let now = ContinuousClock.now
        return fingerLogins.withLock { logins in
            guard let until = logins[uid]?.removeValue(forKey: session) else { return false }
            if logins[uid]?.isEmpty == true { logins[uid] = nil }
            return until > now
        }
    }

    /// Forgets `session` of `uid` (and those whose program is gone): whether it counted, and the user's sessions
    /// left.
    private func closed(_ session: Session, uid: UInt32) -> (counted: Bool, left: Int) {
        sessions.withLock { sessions in
            let counted = sessions[uid]?.contains(session) ?? false
            let left = (sessions[uid] ?? []).filter { $0 != session && Self.isRunning($0) }
            sessions[uid] = left.isEmpty ? nil : left
            return (counted, left.count)
        }
    }

    private func count(uid: UInt32) -> Int {
        sessions.withLock { sessions in
            let left = (sessions[uid] ?? []).filter(Self.isRunning)
            sessions[uid] = left.isEmpty ? nil : left
            return left.count
        }
    }

    /// The session of the program whose child `pid` is (the PAM module's connecting process); nil when its parent
    /// is init (the program is gone) or `/proc` cannot say.
    static func session(ofParentOf pid: Int32) -> Session? {
        guard let parent = parent(of: pid), parent > 1, let start = startTime(parent) else { return nil }
        return Session(pid: parent, startTime: start)
    }

    /// Whether `pid` runs with an effective uid of root (`/proc/<pid>/status`, `Uid:`'s second field): login,
    /// sshd, a display manager, and the set-user-ID sudo, su and polkit-agent-helper-1 do.
    static func runsAsRoot(_ pid: Int32) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") })
        else { return false }
        let ids = line.split(whereSeparator: { $0 == "\t" || $0 == " " })
        return ids.count > 2 && ids[2] == "0"
    }

    /// The pid of `pid`'s parent (`/proc/<pid>/stat` field 4), if `/proc` says.
    static func parent(of pid: Int32) -> Int32? {
        guard let fields = ProcessReference.statFields(pid), fields.count > 1 else { return nil }
        return Int32(fields[1])
    }

    /// Whether the session's program still runs (the same process: same pid, same start time).
    static func isRunning(_ session: Session) -> Bool {
        startTime(session.pid) == session.startTime
    }

    private static func startTime(_ pid: Int32) -> UInt64? {
        ProcessReference.running(pid)?.startTime
    }
}
