import Foundation
import SecurityClient
import SecurityProtocol
import StoreFiles
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The login keychain (issue "The login keychain"): localauthd's idle lock, and the PAM module `pam_localauth.so`
/// in real PAM stacks (below).
@Suite("Login keychain: idle lock and the PAM module", .serialized, .timeLimit(.minutes(3)))
struct LoginKeychainTests {
    func isLocked(_ client: any SecurityClient) async throws -> Bool {
        guard case .locked(let locked) = try await client.send(.lockState) else { return false }
        return locked
    }

    /// idle-lock 10 s (checked every 2.5 s). For 12 s a thread of its own asks every 0.3 s, alternating the lane (a
    /// lookup of one item) and the main socket (the lock state): whenever it finds the keychain locked, at least the
    /// idle time less one check must have passed since its previous request, or the daemon counted a request as idle
    /// time. (A test process stalled for that long, as a loaded machine can do, lets the lock happen legitimately;
    /// the rule still holds.) Then, with nothing asked, the lock comes: its log line is the event waited for.
    @Test func anIdleKeychainLocksAndOneInUseDoesNot() async throws {
        let idle = Duration.seconds(10)
        let check = idle / 4
        let world = try DaemonWorld(extraEnvironment: ["LA_IDLE_LOCK": "10"])
        defer { world.close() }
        let client = try world.daemon.client()
        let lookup = KeychainRequest.copyMatching([
            "class": .string("genp"), "acct": .string("idle"), "r_Data": .bool(true),
        ])
        #expect(lookup.mayTakeLane, "one lookup of one item goes over the lane")
        let polls = try await onOwnThread {
            var polls: [(gap: Duration, locked: Bool)] = []
            var last = ContinuousClock.now
            let end = last + .seconds(12)
            var round = 0
            while ContinuousClock.now < end {
                usleep(300_000)
                round += 1
                if round.isMultiple(of: 2) { _ = try? client.sendBlocking(lookup) }
                guard case .locked(let locked) = try client.sendBlocking(.lockState) else { continue }
                let now = ContinuousClock.now
                polls.append((now - last, locked))
                last = now
            }
            return polls
        }
        #expect(polls.count > 10, "the thread asked \(polls.count) times in 12 s")
        for (index, poll) in polls.enumerated() where poll.locked {
            #expect(
                poll.gap >= idle - check,
                "poll \(index) found the keychain locked only \(poll.gap) after the previous request: \(polls)")
        }
        #expect(
            await waitUntil(within: .seconds(120)) { world.daemon.logText.contains("locked an idle keychain") },
            "no idle lock within 120 s of silence; the daemon's log ends: \(world.daemon.logText.suffix(2000))")
        #expect(try await isLocked(client))
    }
}

/// A daemon and a login stack beside it, as an administrator would write them, for a real user of this machine
/// (made for the test with `useradd`, password `secret`, removed afterwards): `pam_unix` reads and checks the
/// password (pam_matrix cannot stand in here: it wipes `PAM_AUTHTOK` in place once it checked it, so no module after
/// it sees the password, as none would after pam_unix on a real machine if it did), then `pam_localauth.so` in the
/// auth, session and password stacks, pointed at the daemon's socket. The daemon's own PAM service checks the same
/// password through pam_unix. The user's keychain is read with `lactl`, run as the user (`setpriv`).
final class LoginWorld {
    static let marker = "login-marker-31f0"
    static let service = "la-login"

    private(set) var world: DaemonWorld
    /// The user, made for the test.
    let account: TestUser
    let user: String
    let uid: UInt32
    let gid: UInt32
    /// The login stack's directory (`pam_start_confdir`), service `la-login`.
    let stack: String
    /// The same stack without `pam_localauth.so`.
    let plainStack: String
    private let drivers = Mutex<Int>(0)

    init(extraEnvironment: [String: String] = [:]) throws {
        account = try TestUser(prefix: "la-login", password: "secret")
        user = account.name
        uid = account.uid
        gid = account.gid
        // As installed: lactl, claiming nothing, holds its own group.
        var environment = DaemonProcess.enforcingAdministrativeClaims
        environment["LA_PAM_SERVICE"] = Self.service
        environment.merge(extraEnvironment) { $1 }
        world = try DaemonWorld(extraEnvironment: environment)
        // The user's programs reach the socket inside the world's directory.
        chmod(world.directory, 0o755)
        stack = world.directory + "/login"
        plainStack = world.directory + "/login-plain"
        try "auth required pam_unix.so\naccount required pam_unix.so\n".write(
            toFile: world.directory + "/" + Self.service, atomically: true, encoding: .utf8)
        let module = try SessionDriver.built("pam_localauth.so")
        let ours = "\(module) socket=\(world.daemon.socket)"
        for (directory, withModule) in [(stack, true), (plainStack, false)] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            chmod(directory, 0o755)
            var lines = ["auth required pam_unix.so"]
            if withModule { lines.append("auth optional \(ours)") }
            lines.append("account required pam_unix.so")
            if withModule { lines.append("session optional \(ours)") }
            lines.append("password required pam_unix.so")
            if withModule { lines.append("password optional \(ours)") }
            let file = directory + "/" + Self.service
            try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            chmod(file, 0o644)
        }
    }

    /// A new login program on the stack (or the plain one); `asUser`: the program runs with the user's real ids and
    /// an effective uid of root, as the set-user-ID `passwd` does for its caller.
    func driver(plain: Bool = false, valgrind: Bool = false, asUser: Bool = false) throws -> SessionDriver {
        let number = drivers.withLock {
            $0 += 1; return $0
        }
        return try SessionDriver(
            confdir: plain ? plainStack : stack, service: Self.service, user: user, name: "driver-\(number)",
            valgrind: valgrind, runAs: asUser ? (uid, gid) : nil)
    }

    /// Logs in on a new program with `password`: authenticate (and the account check), then open the session.
    func login(_ password: String, valgrind: Bool = false) throws -> (SessionDriver, Int32?, Int32?) {
        let driver = try driver(valgrind: valgrind)
        driver.run("password \(password)")
        let authenticated = driver.run("authenticate")
        let opened = authenticated == 0 ? driver.run("open") : nil
        return (driver, authenticated, opened)
    }

    /// Stops the daemon and starts a new one on the same socket and store: what the last one held in memory (the
    /// sessions, a fingerprint unlock's keys) is gone.
    func restartDaemon() throws {
        _ = world.daemon.stop()
        try world.restart()
    }

    /// The environment of the user's programs: the daemon's socket, a scratch home.
    var userEnvironment: [String: String] {
        var environment = inheritedEnvironment()
        environment["LA_DAEMON_SOCKET"] = world.daemon.socket
        environment["HOME"] = "/tmp"
        environment["XDG_CONFIG_HOME"] = "/tmp/\(user)-config"
        return environment
    }

    /// `setpriv`'s arguments that run `lactl ARGUMENTS` as the user.
    func arguments(_ arguments: [String]) throws -> [String] { try account.arguments(arguments) }

    /// `lactl ARGUMENTS` as the user, through the daemon, nobody to prompt: exit status and output.
    func lactl(_ arguments: [String]) throws -> (status: Int32, output: String) {
        var environment = userEnvironment
        environment["LA_PRESENTER"] = "none"
        return try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/setpriv"), try self.arguments(arguments), environment: environment)
    }

    /// A user of this machine made for a test (`useradd`, no home, no shell, `password`), removed with ``remove()``.
    struct TestUser {
        let name: String
        let uid: UInt32
        let gid: UInt32

        /// Tries again (for up to a minute, with another name) when useradd fails: a program other than the suites
        /// (which edit the user database one at a time, ``UserDatabase``) may hold the password files' lock at that
        /// moment (useradd then exits at once), or another run may have drawn the same name.
        init(prefix: String, password: String) throws {
            let deadline = Date().addingTimeInterval(60)
            var statuses: [Int32] = []
            while true {
                let name = "\(prefix)-\(UInt16.random(in: 1000...9999))"
                let added = UserDatabase.editing {
                    LoginWorld.run("/usr/sbin/useradd", ["-M", "-s", "/usr/sbin/nologin", name])
                }
                statuses.append(added)
                if added == 0 {
                    let passwordSet = UserDatabase.editing {
                        LoginWorld.run("/usr/sbin/chpasswd", [], input: "\(name):\(password)\n")
                    }
                    guard passwordSet == 0,
                        let entry = getpwnam(name)
                    else {
                        _ = UserDatabase.editing { LoginWorld.run("/usr/sbin/userdel", [name]) }
                        throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "chpasswd failed"])
                    }
                    self.name = name
                    uid = entry.pointee.pw_uid
                    gid = entry.pointee.pw_gid
                    return
                }
                guard Date() < deadline else {
                    throw CocoaError(
                        .fileWriteUnknown,
                        userInfo: [NSLocalizedDescriptionKey: "useradd failed for a minute (exit statuses \(statuses))"]
                    )
                }
                usleep(UInt32.random(in: 50_000...250_000))
            }
        }

        /// `setpriv`'s arguments that run `lactl ARGUMENTS` as this user.
        func arguments(_ arguments: [String]) throws -> [String] {
            ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", try lactlExecutable().path] + arguments
        }

        func remove() { _ = UserDatabase.editing { LoginWorld.run("/usr/sbin/userdel", [name]) } }
    }

    /// Adds an `ak` item (Apple's default protection, kSecAttrAccessibleWhenUnlocked) and locks the keychain.
    func addItemAndLock() throws {
        let added = try lactl(["keychain", "add-generic-password", "-s", "svc", "-a", "ak", "-w", Self.marker])
        #expect(added.status == 0, "\(added.output)")
        let locked = try lactl(["keychain", "lock"])
        #expect(locked.status == 0, "\(locked.output)")
    }

    /// Whether the `ak` item reads without any prompt.
    func readsItem() throws -> Bool {
        let found = try lactl(["keychain", "find-generic-password", "-s", "svc", "-a", "ak", "-w"])
        return found.status == 0 && found.output.contains(Self.marker)
    }

    func close() {
        world.close()
        account.remove()
    }

    @discardableResult
    fileprivate static func run(_ path: String, _ arguments: [String], input: String? = nil) -> Int32 {
        let process = Process()
        process.environment = inheritedEnvironment()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardInput = pipe
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        if let input { pipe.fileHandleForWriting.write(Data(input.utf8)) }
        try? pipe.fileHandleForWriting.close()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

extension LoginKeychainTests {
    @Test func aLoginUnlocksTheKeychainAndTheLastLogoutLocksIt() throws {
        let login = try LoginWorld()
        defer { login.close() }
        try login.addItemAndLock()
        #expect(try !login.readsItem())

        let (first, authenticated, opened) = try login.login("secret")
        #expect(authenticated == 0 && opened == 0, "\(first.output)")
        #expect(try login.readsItem(), "\(first.output)")
        // The first login sealed the keychain under the login password.
        let status = try login.lactl(["status"]).output
        #expect(status.contains("keychain sealing: under the passcode"), "\(status)")
        let (second, _, secondOpened) = try login.login("secret")
        #expect(secondOpened == 0)
        // A session opened without the password (a program of the user, a login by key) does not hold the keychain
        // open past the last password session.
        let withoutPassword = try login.driver()
        #expect(withoutPassword.run("open") == 0)

        #expect(first.run("close") == 0)
        #expect(try login.readsItem(), "one login session is left")
        #expect(second.run("close") == 0)
        #expect(try !login.readsItem(), "the last session closed")

        _ = withoutPassword.end()
        for driver in [first, second] {
            #expect(driver.end() == 0)
            #expect(driver.output.contains("wiped") && !driver.output.contains("zero=no"), "\(driver.output)")
            #expect(!driver.output.contains("secret"), "a password in the output: \(driver.output)")
        }
    }

    /// A program may authenticate one user and open another's session, as sudo does (it authenticates its caller,
    /// then opens the target user's session): the password goes to nobody's keychain then.
    @Test func thePasswordIsHandedOnlyToTheUserWhoGaveIt() throws {
        let login = try LoginWorld()
        defer { login.close() }
        try login.addItemAndLock()
        let driver = try login.driver()
        driver.run("password secret")
        #expect(driver.run("authenticate") == 0)
        #expect(driver.run("user root") == 0)
        #expect(driver.run("open") == 0)
        #expect(try !login.readsItem())
        let opened = login.world.daemon.logText.split(separator: "\n").filter { $0.contains("login session opened") }
        #expect(opened.count == 1, "\(opened)")
        #expect(opened.allSatisfy { $0.contains("uid=0") && $0.contains("no password") }, "\(opened)")
        #expect(driver.run("close") == 0)
        #expect(driver.end() == 0)
        #expect(!driver.output.contains("secret"), "a password in the output: \(driver.output)")
    }

    /// A session that never counted (opened without the password: a login by key, a program of the user) locks
    /// nothing when it closes: the keychain stays as whoever unlocked it left it.
    @Test func theCloseOfASessionThatNeverCountedLocksNothing() throws {
        let login = try LoginWorld()
        defer { login.close() }
        let added = try login.lactl([
            "keychain", "add-generic-password", "-s", "svc", "-a", "ak", "-w", LoginWorld.marker,
        ])
        #expect(added.status == 0, "\(added.output)")
        let withoutPassword = try login.driver()
        #expect(withoutPassword.run("open") == 0)
        #expect(withoutPassword.run("close") == 0)
        #expect(withoutPassword.end() == 0)
        #expect(try login.readsItem(), "a session that never counted locked the keychain")
    }

    @Test func aWrongPasswordLeavesTheKeychainLockedAndTheLoginResultUnchanged() throws {
        let login = try LoginWorld()
        defer { login.close() }
        try login.addItemAndLock()
        let plain = try login.driver(plain: true)
        plain.run("password wrong")
        let without = plain.run("authenticate")
        let (driver, with, _) = try login.login("wrong")
        #expect(without != nil && without != 0)
        #expect(with == without, "the module changed the login's result")
        // Even a program that opens the session anyway unlocks nothing: localauthd checks the password itself.
        #expect(driver.run("open") == 0)
        #expect(try !login.readsItem())
        #expect(driver.end() == 0)
        #expect(plain.end() == 0)
    }

    @Test func aPasswordChangeThroughTheStackResealsTheKeychain() throws {
        let login = try LoginWorld()
        defer { login.close() }
        try login.addItemAndLock()
        let (first, _, opened) = try login.login("secret")
        #expect(opened == 0)
        #expect(first.run("close") == 0)
        #expect(try !login.readsItem())

        // passwd, run by the user: the current password, then the new one twice.
        let passwd = try login.driver(asUser: true)
        for answer in ["secret", "n3w-Pass-7", "n3w-Pass-7"] { passwd.run("password \(answer)") }
        #expect(passwd.run("chauthtok") == 0, "\(passwd.output)")
        #expect(passwd.end() == 0)
        #expect(passwd.output.contains("password change: keychain of"), "\(passwd.output)")
        _ = try login.lactl(["keychain", "lock"])

        let (old, oldAuthenticated, _) = try login.login("secret")
        #expect(oldAuthenticated != 0)
        let (new, newAuthenticated, newOpened) = try login.login("n3w-Pass-7")
        #expect(newAuthenticated == 0 && newOpened == 0, "\(new.output)")
        #expect(try login.readsItem(), "the new password did not unlock: \(new.output)")
        for driver in [first, old, new] { _ = driver.end() }
        #expect(!passwd.output.contains("n3w-Pass-7") && !passwd.output.contains("secret"))
    }

    @Test func aLoginSucceedsWhenTheDaemonIsNotRunningAndSaysSoInTheLog() throws {
        let login = try LoginWorld()
        defer { login.close() }
        login.world.daemon.stop()
        let (driver, authenticated, opened) = try login.login("secret")
        #expect(authenticated == 0 && opened == 0)
        #expect(driver.run("close") == 0)
        #expect(driver.end() == 0)
        #expect(driver.output.contains("syslog") && driver.output.contains("not reachable"), "\(driver.output)")
    }

    @Test func theModuleUnderMemcheckLeaksNothingTouchesNothingWrongAndWipesThePassword() throws {
        let login = try LoginWorld()
        defer { login.close() }
        try login.addItemAndLock()
        let (driver, authenticated, opened) = try login.login("secret", valgrind: true)
        #expect(authenticated == 0 && opened == 0, "\(driver.output)")
        #expect(try login.readsItem())
        #expect(driver.run("close") == 0)
        #expect(driver.end() == 0, "memcheck found errors: \(driver.output)")
        #expect(driver.output.contains("ERROR SUMMARY: 0 errors"), "\(driver.output)")
        #expect(driver.output.contains("wiped") && !driver.output.contains("zero=no"), "\(driver.output)")
    }
}

/// One program running a PAM stack, as `login` or `sshd` does: `PAM/pam-session-driver` (built by `make pam`) on
/// one PAM handle, fed commands through a FIFO, its output (and the module's syslog lines, which the driver
/// prints) in a log. Optionally under valgrind's memcheck.
final class SessionDriver {
    let log: String
    private let process: SpawnedProcess
    private let input: Int32
    private var answered = 0

    static func built(_ name: String) throws -> String {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/"
            && !FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path)
        {
            directory.deleteLastPathComponent()
        }
        let path = directory.appendingPathComponent(".build/pam/\(name)").path
        guard FileManager.default.isExecutableFile(atPath: path) || FileManager.default.fileExists(atPath: path) else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "\(path) is missing: run make pam"])
        }
        return path
    }

    /// Starts the driver on service `service` from `confdir` for `user`; `name` names its FIFO and log.
    init(
        confdir: String, service: String, user: String, name: String, valgrind: Bool = false,
        runAs: (uid: UInt32, gid: UInt32)? = nil
    ) throws {
        let fifo = confdir + "/\(name).in"
        log = confdir + "/\(name).log"
        unlink(fifo)
        guard mkfifo(fifo, 0o600) == 0 else { throw CocoaError(.fileWriteUnknown) }
        if let runAs {
            _ = chown(fifo, runAs.uid, runAs.gid)
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            _ = chown(log, runAs.uid, runAs.gid)
        }
        // Read-write, so neither end blocks on opening.
        input = open(fifo, O_RDWR)
        var command = [try Self.built("pam-session-driver"), "--confdir", confdir, service, user]
        if valgrind {
            command =
                [
                    "/usr/bin/valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                    "--error-exitcode=99", "--child-silent-after-fork=yes",
                ] + command
        }
        if let runAs {
            command =
                ["/usr/bin/setpriv", "--ruid=\(runAs.uid)", "--rgid=\(runAs.gid)", "--keep-groups", "--"] + command
        }
        process = try SpawnedProcess(command[0], Array(command.dropFirst()), log: log, input: fifo)
    }

    /// Everything the driver wrote so far.
    var output: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Sends `command` and waits (up to 60 s) for its result line; the PAM return code (nil: no answer).
    @discardableResult
    func run(_ command: String) -> Int32? {
        let word = String(command.split(separator: " ").first ?? "")
        let before = resultLines(word).count
        _ = (command + "\n").withCString { write(input, $0, strlen($0)) }
        for _ in 0..<600 {
            let lines = resultLines(word)
            if lines.count > before {
                let fields = lines[before].split(separator: " ")
                return fields.count > 1 ? Int32(fields[1]) : nil
            }
            guard process.isRunning else { return nil }
            usleep(100_000)
        }
        return nil
    }

    private func resultLines(_ word: String) -> [Substring] {
        output.split(separator: "\n").filter { $0.hasPrefix(word + " ") }
    }

    /// Ends the PAM handle and waits for the exit status.
    func end() -> Int32? {
        _ = "end\n".withCString { write(input, $0, strlen($0)) }
        let ended = process.wait(timeout: 120)
        close(input)
        return ended.map { $0.bySignal ? -$0.status : $0.status }
    }

    deinit {
        if process.isRunning { process.stop(SIGKILL) }
    }
}

extension LoginKeychainTests {
    /// Issue 47, attack 5: user M starts a passcode check and never types. Before, every PAM transaction of the
    /// daemon ran on one thread, so user V's check waited behind M's prompt for as long as M held it. Now each runs
    /// on a thread of its own: V's check is accepted while M's prompt is still open, and M's unanswered question
    /// ends at the daemon's deadline (`LA_PROMPT_TIMEOUT`, here 60 s) as a cancel, which lets M's next check ask.
    @Test func oneUsersUnansweredPromptDoesNotHoldAnotherUsersPasscodeCheck() throws {
        let login = try LoginWorld(extraEnvironment: ["LA_PROMPT_TIMEOUT": "60"])
        defer { login.close() }
        let idler = try LoginWorld.TestUser(prefix: "la-other", password: "other")
        defer { idler.remove() }
        let held = try PseudoTerminal()
        let holder = try held.spawn(
            "/usr/bin/setpriv", idler.arguments(["passcode", "verify"]), environment: login.userEnvironment)
        defer { _ = holder.stop(SIGKILL) }
        try #require(held.waitFor("Password:", timeout: 60), "M's prompt is shown: \(held.transcript)")

        let checked = try PseudoTerminal()
        let checker = try checked.spawn(
            "/usr/bin/setpriv", login.arguments(["passcode", "verify"]), environment: login.userEnvironment)
        defer { _ = checker.stop(SIGKILL) }
        #expect(
            checked.waitFor("Password:", timeout: 60), "V's prompt is shown while M's is open: \(checked.transcript)")
        checked.type("secret\r")
        #expect(
            checked.waitFor("passcode accepted", timeout: 60),
            "V's check ends while M's prompt is still open: \(checked.transcript)")
        #expect(holder.isRunning, "M still holds its prompt")
        // M's question ends at the daemon's deadline, as a cancel: M's own next check, which waits for M's first
        // (one authentication of a user at a time), then gets its prompt.
        let again = try PseudoTerminal()
        let second = try again.spawn(
            "/usr/bin/setpriv", idler.arguments(["passcode", "verify"]), environment: login.userEnvironment)
        defer { _ = second.stop(SIGKILL) }
        #expect(
            again.waitFor("Password:", timeout: 180), "M's first question ended at the deadline: \(again.transcript)")
        #expect(login.world.daemon.logText.contains("prompt answers"), "the deadline is logged at start")
    }
}

extension LoginKeychainTests {
    /// A question the daemon gives up on (its deadline, `LA_PROMPT_TIMEOUT`, here 3 s) is withdrawn from the
    /// program's terminal too: `lactl passcode verify` stops reading at "Password:", puts the terminal back as it was
    /// (echo on) and exits with the cancel. Before, the program's reading thread stayed in `read` with echo off: the
    /// program ended on the request's answer and left the terminal not echoing.
    @Test func aQuestionTheDaemonGaveUpOnLeavesTheTerminalAsItWas() throws {
        let login = try LoginWorld(extraEnvironment: ["LA_PROMPT_TIMEOUT": "3"])
        defer { login.close() }
        let terminal = try PseudoTerminal()
        #expect(terminal.echoes, "a new terminal echoes")
        let program = try terminal.spawn(
            "/usr/bin/setpriv", login.arguments(["passcode", "verify"]), environment: login.userEnvironment)
        defer { _ = program.stop(SIGKILL) }
        try #require(terminal.waitFor("Password:", timeout: 60), "the prompt is shown: \(terminal.transcript)")
        try #require(terminal.waitForEchoOff(timeout: 60), "echo is off while the passcode is read")
        // Nobody types: the daemon's deadline ends the question, and the program with it.
        let ended = program.wait(timeout: 120)
        #expect(ended != nil && ended?.status != 0, "lactl ends with the cancel: \(terminal.transcript)")
        #expect(terminal.echoes, "the terminal echoes again: \(terminal.transcript)")
        #expect(terminal.transcript.contains("cancelled"), "the program says why: \(terminal.transcript)")
    }
}
