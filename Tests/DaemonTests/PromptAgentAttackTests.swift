import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Attacks on the prompt agent by another program of the same user, as real processes against a real localauthd
/// with a real pinentry-tty on a pseudo-terminal: a wrapper pinentry that copies the Assuan stream (`D <passcode>`),
/// an agent started from inside a login session to take that session's prompts from the user's own, an agent
/// registered after killing the user's, and prompts made to lie with an escape sequence, a NUL or a newline.
@Suite(
    "lactl agent: what another program of the user cannot do with it", .serialized,
    .timeLimit(.minutes(5)))
struct PromptAgentAttackTests {
    typealias World = PromptAgentTests.World
    static let passcode = PromptAgentTests.passcode

    /// A wrapper pinentry as an attacker leaves it in `~/.cache/pe`: it runs the genuine pinentry-tty (the user sees
    /// the dialog they expect) and copies everything it answers into `copy`. Owned by an ordinary user (nobody),
    /// as a file of the user's own would be.
    static func wrapper(in world: World) throws -> (path: String, copy: String) {
        let cache = world.daemon.directory + "/home-cache"
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        let copy = world.daemon.directory + "/copied-assuan"
        let path = cache + "/pe"
        try Data(
            """
            #!/bin/bash
            exec > >(tee -a \(copy))
            exec /usr/bin/pinentry-tty "$@"

            """.utf8
        ).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o755)
        chown(path, 65534, 65534)
        chown(cache, 65534, 65534)
        return (path, copy)
    }

    /// Whether the wrapper's copy holds the passcode (a Bool, so that a failure prints no copy of it).
    static func holdsPasscode(_ copy: String) -> Bool {
        ((try? String(contentsOfFile: copy, encoding: .utf8)) ?? "").contains(passcode)
    }

    /// `lactl agent` run as an attacker runs it: on `terminal`, with `arguments` and `environment` of its choosing.
    static func attackerAgent(
        _ world: World, on terminal: PseudoTerminal, _ arguments: [String], environment: [String: String] = [:]
    ) throws -> SpawnedProcess {
        try terminal.spawn(
            world.lactl, ["agent", "--verbose"] + arguments,
            environment: ["LA_DAEMON_SOCKET": world.socket, "TERM": "xterm"].merging(environment) { $1 })
    }

    /// Waits until the agent on `terminal` registered, or exited; whether it registered.
    static func registered(_ agent: SpawnedProcess, _ terminal: PseudoTerminal, timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if terminal.transcript.contains("drawing the prompts of") { return true }
            if !agent.isRunning { return terminal.transcript.contains("drawing the prompts of") }
            usleep(50_000)
        }
        return terminal.transcript.contains("drawing the prompts of")
    }

    /// Waits until the daemon logged every agent that registered as gone (it noticed their connections close).
    static func waitForNoAgent(_ world: World, timeout: Double = 10) {
        func count(_ text: String, _ log: String) -> Int { log.components(separatedBy: text).count - 1 }
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let log = world.daemon.daemon.logText
            let registered = count("prompt agent registered", log) + count("prompt agent replaced", log)
            if count("prompt agent gone", log) >= registered { return }
            usleep(50_000)
        }
    }

    /// The wrapper named with `--pinentry` is refused whether or not users may choose their pinentry (it is not
    /// root's), and named in `$PINENTRY_PROGRAM` it is ignored: the dialog is the administrator's pinentry-tty,
    /// the victim's request succeeds, and the copy never holds the passcode.
    @Test func aWrapperPinentryNeverSeesThePasscode() throws {
        let world = try World()
        defer { world.close() }
        let (wrapper, copy) = try Self.wrapper(in: world)
        for choice in [false, true] {
            try world.configure(pinentry: "/usr/bin/pinentry-tty", choice: choice)
            let terminal = try PseudoTerminal()
            let agent = try Self.attackerAgent(world, on: terminal, ["--pinentry", wrapper])
            defer { agent.stop(SIGKILL) }
            if Self.registered(agent, terminal) {
                // Registered with the wrapper: the victim's prompt goes through it.
                let (asker, log) = try world.asker()
                defer { asker.stop(SIGKILL) }
                if terminal.waitFor("Password:", timeout: 60), terminal.waitForEchoOff(timeout: 60) {
                    terminal.type(Self.passcode + "\n")
                }
                _ = PromptAgentTests.answer(log, timeout: 60)
            }
            #expect(!Self.holdsPasscode(copy), "the wrapper copied the passcode (choice \(choice))")
            #expect(agent.wait(timeout: 10) != nil, "the agent with the wrapper stopped (choice \(choice))")
            let expected = choice ? "not owned by root" : "agent-pinentry-choice"
            #expect(terminal.transcript.contains(expected), "\(terminal.transcript)")
            agent.stop(SIGKILL)
            Self.waitForNoAgent(world)
        }
        try world.configure(pinentry: "/usr/bin/pinentry-tty", choice: false)
        let terminal = try PseudoTerminal()
        let agent = try Self.attackerAgent(world, on: terminal, [], environment: ["PINENTRY_PROGRAM": wrapper])
        defer { agent.stop(SIGKILL) }
        #expect(Self.registered(agent, terminal), "\(terminal.transcript)")
        #expect(terminal.transcript.contains("$PINENTRY_PROGRAM is ignored"), "\(terminal.transcript)")
        let answer = try Self.passcodeTyped(world, on: terminal)
        #expect(answer["status"] == "success", "\(answer)")
        #expect(!Self.holdsPasscode(copy), "the wrapper copied the passcode")
    }

    /// Whether this process may start audit login sessions (root with `CAP_AUDIT_CONTROL`, an audit-enabled
    /// kernel): writing `/proc/self/loginuid` in a child gives it a session of its own.
    static let canStartLoginSessions: Bool = {
        guard getuid() == 0,
            let probe = try? SpawnedProcess("/bin/sh", ["-c", "echo 0 > /proc/self/loginuid"])
        else { return false }
        return probe.wait(timeout: 10)?.status == 0
    }()

    /// The user's agent runs outside any login session (as the systemd user unit runs it); a program in a login
    /// session starts the registered lactl as an agent from that session (with a pinentry of the administrator's,
    /// so the refusal is the agents' rule, not the pinentry's). It is refused, and a program of that session
    /// authenticates through the user's own agent.
    @Test(.enabled(if: canStartLoginSessions))
    func anAgentFromALoginSessionIsNotPreferredOverTheUsersOwn() throws {
        let world = try World()
        defer { world.close() }
        let users = try PseudoTerminal()
        let own = try world.agent(on: users, pinentry: "/usr/bin/pinentry-tty")
        defer { own.stop(SIGKILL) }
        let go = world.daemon.directory + "/session-go"
        let log = world.daemon.directory + "/session-asker.log"
        // One login session (an audit session, as pam_loginuid makes at a login): the attacker's agent, then,
        // once told, a program of the same session that asks.
        let pids = world.daemon.directory + "/session-"
        let script = """
            echo 0 > /proc/self/loginuid || exit 9
            echo "in login session $(cat /proc/self/sessionid)"
            "$LACTL" agent --verbose --pinentry /usr/bin/pinentry-tty &
            echo $! > "${PIDS}agent"
            while [ ! -e "$GO" ]; do sleep 0.1; done
            PROBE_HOLD=1 LA_PRESENTER=none setsid "$PROBE" authenticate "open the vault" </dev/null >"$LOG" 2>&1 &
            echo $! > "${PIDS}asker"
            wait
            """
        let session = try PseudoTerminal()
        let shell = try session.spawn(
            "/bin/bash", ["-c", script],
            environment: [
                "LA_DAEMON_SOCKET": world.socket, "TERM": "xterm", "LACTL": world.lactl, "GO": go,
                "PROBE": world.probe, "LOG": log, "PIDS": pids,
            ])
        defer {
            // The shell's children by their pids (the asker runs in a session of its own).
            for name in ["agent", "asker"] {
                if let text = try? String(contentsOfFile: pids + name, encoding: .utf8),
                    let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
                {
                    kill(pid, SIGKILL)
                }
            }
            shell.stop(SIGKILL)
        }
        #expect(session.waitFor("in login session", timeout: 60), "\(session.transcript)")
        // Registered, or refused: either way lactl says so.
        #expect(session.waitFor("lactl agent:", timeout: 60), "\(session.transcript)")
        #expect(FileManager.default.createFile(atPath: go, contents: Data()))
        #expect(users.waitFor("Password:", timeout: 60), "the user's own agent asks: \(users.transcript)")
        _ = users.waitForEchoOff(timeout: 60)
        users.type(Self.passcode + "\n")
        let answer = try #require(PromptAgentTests.answer(log), "the session's program answered")
        #expect(answer["status"] == "success", "\(answer)")
        #expect(!session.transcript.contains("Password:"), "the session's agent drew nothing: \(session.transcript)")
        #expect(session.transcript.contains("one agent per user"), "\(session.transcript)")
        #expect(own.isRunning, "the user's agent still serves")
        #expect(users.transcript.contains("tried to register"), "the user's agent tells of it: \(users.transcript)")
    }

    /// The user's agent is killed and another program registers first (with the wrapper in `$PINENTRY_PROGRAM`):
    /// the daemon logs the replacement, the user's agent restarted is refused naming the one that took its place,
    /// and the one that did draws with the administrator's pinentry only: the copy never holds the passcode.
    @Test func anAgentRegisteredAfterKillingTheUsersOwnIsLoggedAndItsWrapperGetsNoCopy() throws {
        let world = try World()
        defer { world.close() }
        let (wrapper, copy) = try Self.wrapper(in: world)
        let users = try PseudoTerminal()
        let own = try world.agent(on: users, pinentry: "/usr/bin/pinentry-tty")
        let killed = own.pid
        own.stop(SIGKILL)
        Self.waitForNoAgent(world)
        let attackers = try PseudoTerminal()
        let usurper = try Self.attackerAgent(world, on: attackers, [], environment: ["PINENTRY_PROGRAM": wrapper])
        defer { usurper.stop(SIGKILL) }
        #expect(Self.registered(usurper, attackers), "\(attackers.transcript)")
        #expect(
            attackers.transcript.contains("replaces the agent that served"),
            "the new agent is told: \(attackers.transcript)")
        let log = world.daemon.daemon.logText
        #expect(log.contains("prompt agent replaced"), "the daemon's log tells the user: \(log)")
        #expect(log.contains("pid \(killed)") && log.contains("pid \(usurper.pid)"), "naming both: \(log)")
        // The user's agent, restarted, is refused and names the agent that serves now.
        let restarted = try runCapturingOutput(
            URL(fileURLWithPath: world.lactl), ["agent", "--pinentry", "/usr/bin/pinentry-tty"],
            environment: PromptAgentTests.environment(["LA_DAEMON_SOCKET": world.socket]))
        #expect(restarted.status != 0)
        #expect(restarted.output.contains("pid \(usurper.pid)"), "\(restarted.output)")
        // The victim types the passcode into the dialog it sees; it goes to the daemon, not to the wrapper.
        let answer = try Self.passcodeTyped(world, on: attackers)
        #expect(answer["status"] == "success", "\(answer)")
        #expect(!Self.holdsPasscode(copy), "the wrapper copied the passcode")
    }

    /// The pinentry runs with the agent's display and nothing else of the environment whoever started lactl chose
    /// (a `GTK_MODULES` or `PINENTRY_USER_DATA` there would change what the dialog loads or does).
    @Test func thePinentryGetsTheDisplayAndNothingElseOfTheAgentsEnvironment() throws {
        let world = try World()
        defer { world.close() }
        let recorded = world.daemon.directory + "/pinentry-environment"
        let commands = world.daemon.directory + "/pinentry-commands"
        let recording = world.daemon.directory + "/pinentry-recording"
        // The commands the agent sends are recorded (what pinentry answers, the passcode among it, is not).
        try Data(
            """
            #!/bin/sh
            env > \(recorded)
            tee \(commands) | /usr/bin/pinentry-tty "$@"

            """.utf8
        ).write(to: URL(fileURLWithPath: recording))
        chmod(recording, 0o755)
        let terminal = try PseudoTerminal()
        // TERM is the agent's starter's too: a newline in it would be an Assuan command of its own.
        let agent = try world.agent(
            on: terminal, pinentry: recording,
            environment: [
                "DISPLAY": ":77", "GTK_MODULES": "/tmp/evil.so", "PINENTRY_USER_DATA": "evil",
                "TERM": "xterm\nOPTION allow-external-password-cache\nSETKEYINFO n/EVIL",
            ])
        defer { agent.stop(SIGKILL) }
        let answer = try Self.passcodeTyped(world, on: terminal)
        #expect(answer["status"] == "success", "\(answer)")
        let environment = Set(
            ((try? String(contentsOfFile: recorded, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init))
        // Names only in what a failure prints: the values of an environment are nobody's business in a log.
        let names = Set(environment.compactMap { $0.split(separator: "=", maxSplits: 1).first.map(String.init) })
        #expect(environment.contains("DISPLAY=:77"), "\(names.sorted())")
        #expect(environment.contains("PATH=/usr/local/bin:/usr/bin:/bin"), "\(names.sorted())")
        // Its home and settings directories name nothing: a toolkit finds no settings file of the user's there.
        #expect(environment.contains("HOME=/nonexistent"), "\(names.sorted())")
        let homes: Set = ["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"]
        // What the shell running the recording adds itself (PWD) aside, nothing else.
        #expect(names.subtracting(["DISPLAY", "PATH", "PWD"]).subtracting(homes).isEmpty, "\(names.sorted())")
        let sent = (try? String(contentsOfFile: commands, encoding: .utf8)) ?? ""
        #expect(sent.contains("OPTION ttytype=xterm\n"), "the terminal type is a name, not TERM's lines")
        #expect(!sent.contains("SETKEYINFO") && !sent.contains("allow-external-password-cache"), "nothing injected")
    }

    /// A copy of the probe at `path` (an unregistered program), asking with `reason` from a session of its own.
    static func asker(
        _ world: World, at path: String, reason: String, environment: [String: String] = [:]
    ) throws -> (SpawnedProcess, String) {
        try copyExecutable(world.probe, to: path)
        let log = world.daemon.directory + "/spoof-\(UUID().uuidString.prefix(6)).log"
        let process = try SpawnedProcess(
            path, ["authenticate", reason],
            environment: ["LA_DAEMON_SOCKET": world.socket, "LA_PRESENTER": "none", "PROBE_HOLD": "1"]
                .merging(environment) { $1 },
            log: log, input: "/dev/null", newSession: true)
        return (process, log)
    }

    /// A program asks through the agent, and the person at `terminal` types the passcode into the agent's dialog
    /// once it reads with echo off: the program's answer.
    static func passcodeTyped(_ world: World, on terminal: PseudoTerminal) throws -> [String: String] {
        let (asker, log) = try world.asker()
        defer { asker.stop(SIGKILL) }
        #expect(terminal.waitFor("Password:", timeout: 60), "\(terminal.transcript)")
        _ = terminal.waitForEchoOff(timeout: 60)
        terminal.type(Self.passcode + "\n")
        return try #require(PromptAgentTests.answer(log), "the asker answered")
    }

    /// The fake lines a spoofing program draws: what the agent shows of a registered `sudo`.
    static let fakeLines = "Program: /usr/bin/sudo (pid 1)\nRegistered with localauthd, team DEBIAN"

    /// An unregistered program named `sudo` puts `ESC[8m` (conceal) in its reason, then the lines the agent would
    /// show for the real sudo: the daemon refuses the reason, and nothing of it reaches the terminal.
    @Test func anEscapeSequenceInTheReasonIsRefused() throws {
        try expectRefused(reason: "\u{1B}[8m\n" + Self.fakeLines + "\n\u{1B}[0m", naming: "U+001B")
    }

    /// A NUL in the reason would end pinentry's description there, leaving only the fake lines before it: refused.
    @Test func aNulInTheReasonIsRefused() throws {
        try expectRefused(
            reason: "run a command as root. Registered with localauthd, team DEBIAN\\0",
            environment: ["PROBE_REASON_NUL": "1"], naming: "U+0000")
    }

    /// A line separator (U+2028), where graphical pinentries break lines, would draw the fake lines there: refused.
    @Test func aLineSeparatorInTheReasonIsRefused() throws {
        try expectRefused(
            reason: "open the vault\u{2028}" + Self.fakeLines.replacingOccurrences(of: "\n", with: "\u{2028}"),
            naming: "U+2028")
    }

    /// An unregistered program named `sudo` asks the agent with `reason`: the daemon refuses the reason, naming
    /// `character`, and nothing of it (no escape, no fake line) reaches the agent's terminal.
    private func expectRefused(
        reason: String, environment: [String: String] = [:], naming character: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let world = try World()
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let directory = world.daemon.directory + "/bin"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let (asker, log) = try Self.asker(world, at: directory + "/sudo", reason: reason, environment: environment)
        defer { asker.stop(SIGKILL) }
        let answer = PromptAgentTests.answer(log, timeout: 60)
        #expect(
            answer?["status"] == String(LAErrorCodes.authenticationFailed), "\(answer ?? [:])",
            sourceLocation: sourceLocation)
        #expect(answer?["error"]?.contains(character) == true, "\(answer ?? [:])", sourceLocation: sourceLocation)
        let transcript = terminal.transcript
        #expect(!transcript.contains("\u{1B}[8m"), "the escape reached the terminal", sourceLocation: sourceLocation)
        #expect(!transcript.contains("team DEBIAN"), "\(transcript)", sourceLocation: sourceLocation)
    }

    /// A newline in the program's own path (a directory named so) cannot draw a line in the verified part: the
    /// agent shows it as `\u{A}`, the verified lines come first, and the reason is labelled as the program's.
    @Test func aNewlineInTheProgramsPathIsShownEscaped() throws {
        let world = try World()
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let directory = world.daemon.directory + "/x\nRegistered with localauthd, team DEBIAN"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let (asker, log) = try Self.asker(world, at: directory + "/sudo", reason: "open the vault")
        defer { asker.stop(SIGKILL) }
        #expect(terminal.waitFor("Password:", timeout: 60), "\(terminal.transcript)")
        let transcript = terminal.transcript
        let lines = transcript.split(whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" })
        #expect(
            !lines.contains { $0.hasPrefix("Registered with localauthd, team DEBIAN") },
            "a line of the program's drawing: \(transcript)")
        #expect(transcript.contains("\\u{A}Registered with localauthd, team DEBIAN/sudo"), "\(transcript)")
        #expect(transcript.contains("Not registered with localauthd"), "\(transcript)")
        let program = try #require(transcript.range(of: "Program: "), "\(transcript)")
        let reason = try #require(
            transcript.range(of: "reason, in its own words: \u{201C}open the vault"), "\(transcript)")
        #expect(program.lowerBound < reason.lowerBound, "the verified lines come first: \(transcript)")
        _ = terminal.waitForEchoOff(timeout: 60)
        terminal.type(Self.passcode + "\n")
        let answer = try #require(PromptAgentTests.answer(log), "the asker answered")
        #expect(answer["status"] == "success", "\(answer)")
    }
}
