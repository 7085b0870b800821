import AppRegistry
import Foundation
import SecurityClient
import SecurityProtocol
import StoreFiles
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl agent` as a real process with real pinentry programs, against a real localauthd: a program without a
/// terminal authenticates by the agent (pinentry-tty on a pseudo-terminal, typed into as a person would; GTK's
/// pinentry under Xvfb, screenshot kept), never holding the passcode; the fingerprint is taken while pinentry
/// waits; a second agent, another user's agent, an agent killed mid-prompt and a pinentry that hangs each end with
/// a clear error and nothing granted.
@Suite(
    "lactl agent: prompts drawn where the asking program cannot see them", .serialized,
    .daemonReaderTurn(timeLimit: .seconds(300)))
struct PromptAgentTests {
    /// The passcode of the PAM service these tests use: distinctive, so that finding it in a process's memory
    /// means that process held it.
    static let passcode = "Qv7-agent-pinentry-8Kz"
    static let service = "la-agent-test"

    /// A daemon whose PAM service knows ``passcode``, with lactl registered as the administrative tool (as `make
    /// install` does) and the asking probe copied beside it.
    struct World {
        let daemon: DaemonWorld
        let lactl: String
        let probe: String

        init(extraEnvironment: [String: String] = [:]) throws {
            daemon = try DaemonWorld(
                extraEnvironment: ["LA_PAM_SERVICE": PromptAgentTests.service].merging(extraEnvironment) { $1 })
            let user = DataLocations.currentUserName() ?? "root"
            try MatrixPAM.writeService(
                PromptAgentTests.service, in: daemon.directory, users: [(user, PromptAgentTests.passcode)])
            chmod(daemon.directory, 0o755)
            lactl = daemon.directory + "/lactl"
            try copyExecutable(try lactlExecutable().path, to: lactl)
            guard let digest = AppRegistration.digest(hex: try AppIsolationTests.digest(lactl)) else {
                throw CocoaError(.fileReadCorruptFile)
            }
            try DaemonProcess.register(
                AppRegistration(
                    applicationIdentifier: "LOCALAUTH.lactl", executable: lactl,
                    digests: [digest], isAdministrative: true),
                as: "lactl.conf", in: daemon.daemon.registryDirectory)
            probe = daemon.directory + "/asker"
            // The daemon reads the registry again when the next connection finds the directory changed.
            try copyExecutable(try builtExecutable("isolation-probe-a").path, to: probe)
        }

        var socket: String { daemon.daemon.socket }

        /// Writes the daemon's `localauthd.conf` as an administrator would: the agents' pinentry, and whether users
        /// may name their own (read at each agent's registration).
        func configure(pinentry: String, choice: Bool = false) throws {
            let file = daemon.directory + "/config/localauthd.conf"
            try Data("agent-pinentry = \(pinentry)\nagent-pinentry-choice = \(choice ? "yes" : "no")\n".utf8)
                .write(to: URL(fileURLWithPath: file))
        }

        /// `lactl agent` on `terminal` with `pinentry` (the administrator's choice, and named on the command line
        /// too), started and registered.
        func agent(
            on terminal: PseudoTerminal, pinentry: String, timeout: Int = 60, environment: [String: String] = [:]
        ) throws -> SpawnedProcess {
            try configure(pinentry: pinentry)
            let agent = try terminal.spawn(
                lactl, ["agent", "--verbose", "--pinentry", pinentry, "--timeout", String(timeout)],
                environment: ["LA_DAEMON_SOCKET": socket, "TERM": "xterm"].merging(environment) { $1 })
            #expect(terminal.waitFor("drawing the prompts of", timeout: 60), "\(terminal.transcript)")
            return agent
        }

        /// The probe asking for `.deviceOwnerAuthentication` from a session of its own with no terminal (standard
        /// input /dev/null, no presenter), holding on after its answer; its log.
        func asker(reason: String = "open the vault") throws -> (SpawnedProcess, String) {
            let log = daemon.directory + "/asker-\(UUID().uuidString.prefix(6)).log"
            let process = try SpawnedProcess(
                probe, ["authenticate", reason],
                environment: ["LA_DAEMON_SOCKET": socket, "LA_PRESENTER": "none", "PROBE_HOLD": "1"], log: log,
                input: "/dev/null", newSession: true)
            return (process, log)
        }

        func close() { daemon.close() }
    }

    /// This process's environment with `extra`.
    static func environment(_ extra: [String: String]) -> [String: String] {
        inheritedEnvironment(merging: extra)
    }

    /// The asker's answer (`status=` and `error=`), once it printed one; nil after `timeout` seconds.
    static func answer(_ log: String, timeout: Double = 30) -> [String: String]? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if text.contains("holding") { return AppIsolationTests.values((0, text)) }
            usleep(50_000)
        }
        return nil
    }

    @Test func aProgramWithoutATerminalAuthenticatesByTheAgentAndNeverHoldsThePasscode() throws {
        let world = try World()
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let (asker, log) = try world.asker()
        defer { asker.stop(SIGKILL) }
        // pinentry-tty on the agent's terminal names the program as localauthd identified it, and the reason.
        #expect(terminal.waitFor("Password:", timeout: 60), "\(terminal.transcript)")
        let transcript = terminal.transcript
        #expect(transcript.contains(world.probe), "the dialog names the asking program's executable")
        #expect(transcript.contains("open the vault"), "and its reason")
        _ = terminal.waitForEchoOff(timeout: 60)
        terminal.type(Self.passcode + "\n")
        let answer = try #require(Self.answer(log), "the asker answered")
        #expect(answer["status"] == "success", "\(answer)")
        // Nothing the asker received or holds contains the passcode; the scan finds it where it is.
        #expect(try !ProcessMemory.contains(asker.pid, Self.passcode), "the asking program's memory holds the passcode")
        let holder = try SpawnedProcess("/bin/sleep", ["600"], environment: ["HELD": Self.passcode])
        defer { holder.stop(SIGKILL) }
        // Scanned once the process runs sleep (before its exec, its memory is the test's copy of the parent).
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline,
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(holder.pid)/exe")) != "/usr/bin/sleep"
        {
            usleep(10_000)
        }
        #expect(try ProcessMemory.contains(holder.pid, Self.passcode), "the scan finds a passcode a process holds")
        // What a person saw, for the record.
        try? Data(terminal.transcript.utf8).write(to: TestArtifacts.file("agent-pinentry-tty.txt"))
    }

    /// pinentry-curses draws a dialog on the agent's terminal with cursor movements; the person types the passcode
    /// and Enter.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/pinentry-curses")))
    func cursesPinentryOnTheTerminalIsAnswered() throws {
        let world = try World()
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-curses")
        defer { agent.stop(SIGKILL) }
        let (asker, log) = try world.asker(reason: "unlock the deploy key")
        defer { asker.stop(SIGKILL) }
        #expect(terminal.waitFor("unlock the deploy key", timeout: 60), "\(terminal.transcript)")
        #expect(terminal.waitForEchoOff(timeout: 60), "pinentry-curses reads the passcode")
        terminal.type(Self.passcode + "\r")
        let answer = try #require(Self.answer(log), "the asker answered")
        #expect(answer["status"] == "success", "\(answer)")
    }

    @Test func aWrongPasscodeFailsAndACancelledDialogCancels() throws {
        let world = try World()
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let (wrong, wrongLog) = try world.asker()
        defer { wrong.stop(SIGKILL) }
        #expect(terminal.waitFor("Password:", timeout: 60), "\(terminal.transcript)")
        terminal.type("not-the-passcode\n")
        let failed = try #require(Self.answer(wrongLog), "the asker answered")
        #expect(failed["status"] == String(LAErrorCodes.authenticationFailed), "\(failed)")
        // pinentry-tty takes Ctrl-D on an empty line as Cancel.
        let (cancelled, cancelledLog) = try world.asker()
        defer { cancelled.stop(SIGKILL) }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline && terminal.transcript.components(separatedBy: "Password:").count < 3 {
            usleep(50_000)
        }
        #expect(terminal.transcript.components(separatedBy: "Password:").count >= 3, "\(terminal.transcript)")
        terminal.type("\u{04}")
        let answer = try #require(Self.answer(cancelledLog), "the asker answered")
        #expect(answer["status"] == String(LAErrorCodes.userCancel), "\(answer)")
    }

    /// A program not on an item's list of trusted applications is asked by the agent, not by itself: the program's
    /// own presenter (which would answer Always allow with a guessed passcode) is never called; the user's choice
    /// in pinentry and passcode let it read once.
    @Test func aTrustedApplicationQuestionIsTheAgentsNotTheProgramsOwn() throws {
        let world = try World()
        defer { world.close() }
        let (a, b, _) = try TrustedApplicationTests.apps(world.daemon)
        let group = TrustedApplicationTests.group
        #expect(try a.run(["add-trusted", "svc", "acct", "a-secret", group])["status"] == "0")
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let log = world.daemon.directory + "/b.log"
        let reader = try SpawnedProcess(
            b.executable, ["read", "svc", "acct", group],
            environment: [
                "LA_DAEMON_SOCKET": world.socket, "PROBE_CHOICE": "always", "PROBE_PASSCODE": "guess",
            ], log: log, input: "/dev/null")
        defer { reader.stop(SIGKILL) }
        #expect(terminal.waitFor("[odw]?", timeout: 60), "\(terminal.transcript)")
        #expect(terminal.transcript.contains("TEAMT.probe-b wants to use the item svc"), "\(terminal.transcript)")
        terminal.type("o")
        #expect(terminal.waitFor("Password:", timeout: 60), "\(terminal.transcript)")
        _ = terminal.waitForEchoOff(timeout: 60)
        terminal.type(Self.passcode + "\n")
        #expect(reader.wait(timeout: 30) != nil, "B finished")
        let values = AppIsolationTests.values((0, (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""))
        #expect(values["status"] == "0", "\(values)")
        #expect(values["value"] == "a-secret", "\(values)")
        #expect(values["asked"] == nil, "B's own presenter was not asked: \(values)")
        // Allow once: B is not on the list now either.
        #expect(try a.run(["trusted", "svc", "acct", group])["trusted"] == "TEAMT.probe-a \(a.executable)")
    }

    /// Runs `body` with a world as installed (lactl, claiming nothing, holds its own group, where the Secret
    /// Service provider's items go), its prompt agent on a terminal of its own (pinentry-tty), and a directory for
    /// the provider's script; ends all three afterwards.
    static func withSecretServiceAgent(
        _ body: (World, PseudoTerminal, String) async throws -> Void
    ) async throws {
        let world = try World(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let directory = try SecretServiceTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(world, terminal, directory)
    }

    /// Answers the agent's question with Allow once, then its passcode question with the test user's passcode;
    /// whether the passcode was asked for (with echo off).
    static func allowOnce(on terminal: PseudoTerminal) async throws -> Bool {
        terminal.type("o")
        let asked = await onOwnThread {
            terminal.waitFor("Password:", timeout: 60) && terminal.waitForEchoOff(timeout: 60)
        }
        terminal.type(passcode + "\n")
        return asked
    }

    /// Issue 48, per-program access: `secret-tool` stores a password through `lactl secret-service` (the item
    /// trusts secret-tool); Python's `secretstorage` reading it is another program, and the agent asks the user in
    /// pinentry, naming that program as localauthd identified it (not the provider); Allow once and the passcode
    /// let it read once. The provider is the registered lactl (an unregistered copy is refused: it may not ask on
    /// behalf of anyone).
    @Test(.enabled(if: SecretServiceTests.available && FileManager.default.fileExists(atPath: "/usr/bin/python3")))
    func anotherProgramsSecretServiceReadIsAskedByTheAgent() async throws {
        try await Self.withSecretServiceAgent { world, terminal, directory in
            async let run = SecretServiceTests.run(
                """
                printf mail-pass | secret-tool store --label="Mail account" service imap.example.org user alice || exit 1
                echo "secret-tool reads: $(secret-tool lookup service imap.example.org user alice)"
                /usr/bin/python3 - <<'PY'
                import secretstorage
                connection = secretstorage.dbus_init()
                item = next(secretstorage.get_default_collection(connection).search_items({"user": "alice"}))
                print("python reads:", item.get_secret().decode())
                PY
                """, mode: .daemon, in: directory, daemon: world.daemon.daemon, lactl: world.lactl)
            let asked = await onOwnThread { terminal.waitFor("[odw]?", timeout: 120) }
            #expect(asked, "the agent asks: \(terminal.transcript)")
            #expect(
                terminal.transcript.contains("wants to use the item Mail account"), "\(terminal.transcript)")
            #expect(terminal.transcript.contains("python3"), "the program named is the reader: \(terminal.transcript)")
            #expect(!terminal.transcript.contains("secret-tool wants"), "secret-tool was never asked")
            #expect(try await Self.allowOnce(on: terminal), "\(terminal.transcript)")
            let (status, output) = try await run
            #expect(status == 0, "\(output)")
            #expect(output.contains("secret-tool reads: mail-pass"), "\(output)")
            #expect(output.contains("python reads: mail-pass"), "\(output)")
        }
    }

    /// While the agent asks about one program's read, the provider answers every other program: `secret-tool` reads
    /// its own item while Python's read of it waits for the user (a provider that answered one call at a time made
    /// every client wait, and give up after 25 s); then the user allows Python's read, which gets its secret.
    @Test(.enabled(if: SecretServiceTests.available && FileManager.default.fileExists(atPath: "/usr/bin/python3")))
    func aReadWaitingForTheUserHoldsUpNoOtherProgram() async throws {
        try await Self.withSecretServiceAgent { world, terminal, directory in
            async let run = SecretServiceTests.run(
                """
                printf mail-pass | secret-tool store --label="Mail account" service imap.example.org user alice || exit 1
                /usr/bin/python3 - <<'PY' &
                import secretstorage
                connection = secretstorage.dbus_init()
                item = next(secretstorage.get_default_collection(connection).search_items({"user": "alice"}))
                print("python reads:", item.get_secret().decode(), flush=True)
                PY
                python=$!
                for _ in $(seq 2400); do [ -e "$WORK/asked" ] && break; sleep 0.05; done
                echo "while python waits: $(timeout 20 secret-tool lookup service imap.example.org user alice)"
                touch "$WORK/looked-up"
                wait $python
                """, mode: .daemon, in: directory, daemon: world.daemon.daemon, lactl: world.lactl)
            let asked = await onOwnThread { terminal.waitFor("[odw]?", timeout: 120) }
            #expect(asked, "the agent asks about python's read: \(terminal.transcript)")
            _ = FileManager.default.createFile(atPath: directory + "/asked", contents: nil)
            let lookedUp = await onOwnThread {
                for _ in 0..<1200 where !FileManager.default.fileExists(atPath: directory + "/looked-up") {
                    usleep(50_000)
                }
                return FileManager.default.fileExists(atPath: directory + "/looked-up")
            }
            #expect(lookedUp, "secret-tool's lookup ended within 60 s")
            #expect(try await Self.allowOnce(on: terminal), "\(terminal.transcript)")
            let (status, output) = try await run
            #expect(status == 0, "\(output)")
            #expect(output.contains("while python waits: mail-pass"), "\(output)")
            #expect(output.contains("python reads: mail-pass"), "\(output)")
        }
    }

    /// The login collection locks with the keychain, by whichever program (`lactl keychain lock` here; the
    /// provider's `Lock`), with `Locked` and `PropertiesChanged` telling so; while locked, a search finds nothing and
    /// a read is `IsLocked`. `Unlock` hands out a prompt that the agent answers with the passcode; then the secret
    /// reads again.
    @Test(.enabled(if: SecretServiceTests.available && FileManager.default.fileExists(atPath: "/usr/bin/python3")))
    func theLoginCollectionLocksWithTheKeychainAndItsPromptUnlocksThroughTheAgent() async throws {
        try await Self.withSecretServiceAgent { world, terminal, directory in
            async let run = SecretServiceTests.run(
                """
                gdbus monitor --session --dest org.freedesktop.secrets >"$WORK/signals.txt" 2>&1 &
                monitor=$!
                /usr/bin/python3 - <<'PY' || exit 1
                import subprocess, os, time, secretstorage
                from secretstorage.exceptions import LockedException
                login = secretstorage.get_default_collection(secretstorage.dbus_init())
                item = login.create_item("Mail", {"user": "alice"}, b"mail-pass")
                print("locked at first:", login.is_locked())
                subprocess.run([os.environ["LACTL"], "keychain", "lock"], check=True)
                for _ in range(1200):
                    if login.is_locked():
                        break
                    time.sleep(0.05)
                print("locked after lactl keychain lock:", login.is_locked(), item.is_locked())
                print("found while locked:", len(list(login.search_items({"user": "alice"}))))
                try:
                    item.get_secret()
                    print("read while locked")
                except LockedException:
                    print("read while locked: IsLocked")
                print("unlock dismissed:", login.unlock())
                print("locked after the prompt:", login.is_locked())
                print("reads:", next(login.search_items({"user": "alice"})).get_secret().decode())
                login.lock()
                print("locked by Lock:", login.is_locked())
                PY
                sleep 1
                kill $monitor
                grep -c "PropertiesChanged ('org.freedesktop.Secret.Collection', {'Locked': <true>}" "$WORK/signals.txt" \
                    | sed 's/^/locked signals: /'
                grep -c "PropertiesChanged ('org.freedesktop.Secret.Collection', {'Locked': <false>}" "$WORK/signals.txt" \
                    | sed 's/^/unlocked signals: /'
                """, mode: .daemon, in: directory, daemon: world.daemon.daemon, lactl: world.lactl)
            let asked = await onOwnThread {
                terminal.waitFor("Unlock the keychain (asked through the Secret Service)", timeout: 120)
                    && terminal.waitForEchoOff(timeout: 60)
            }
            #expect(asked, "the agent asks for the passcode: \(terminal.transcript)")
            terminal.type(Self.passcode + "\n")
            let (status, output) = try await run
            #expect(status == 0, "\(output)")
            let lines = output.split(separator: "\n").map(String.init)
            for expected in [
                "locked at first: False", "locked after lactl keychain lock: True True", "found while locked: 0",
                "read while locked: IsLocked", "unlock dismissed: False", "locked after the prompt: False",
                "reads: mail-pass", "locked by Lock: True", "locked signals: 2", "unlocked signals: 1",
            ] {
                #expect(lines.contains(expected), "\(expected): \(output)")
            }
        }
    }

    /// A program registered with `own-prompts = yes` keeps drawing its own prompts while the agent runs (and so
    /// answers them itself, passcode included); the agent shows nothing.
    @Test func aProgramRegisteredToDrawItsOwnPromptsStillDoes() throws {
        let world = try World()
        defer { world.close() }
        let (a, b, _) = try TrustedApplicationTests.apps(world.daemon)
        let group = TrustedApplicationTests.group
        try DaemonProcess.register(
            AppRegistration(
                applicationIdentifier: "TEAMT.probe-b", executable: b.executable, keychainAccessGroups: [group],
                drawsOwnPrompts: true),
            as: "probe-b.conf", in: world.daemon.daemon.registryDirectory)
        #expect(try a.run(["add-trusted", "svc", "acct", "a-secret", group])["status"] == "0")
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let shown = terminal.transcript
        let read = try b.run(
            ["read", "svc", "acct", group],
            environment: TrustedApplicationTests.answering("once", passcode: Self.passcode))
        #expect(read["value"] == "a-secret", "\(read)")
        #expect(read["asked"] == "TEAMT.probe-b wants to use the item svc.", "B's presenter was asked: \(read)")
        #expect(terminal.transcript == shown, "the agent showed nothing: \(terminal.transcript)")
    }

    @Test func theFingerIsTakenWhilePinentryWaits() async throws {
        let world = try World()
        defer { world.close() }
        // Enrolled before the agent runs (the enrollment's own passcode prompt is this test's).
        try MatrixPAM.writeService(
            PromptAgentTests.service, in: world.daemon.directory,
            users: [(DataLocations.currentUserName() ?? "root", "secret")])
        let client = try world.daemon.daemon.client()
        _ = try await enrollThroughRequests(
            client, socket: world.daemon.reader, printID: "alice-1", finger: .rightIndex)
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let (asker, log) = try world.asker()
        defer { asker.stop(SIGKILL) }
        #expect(
            terminal.waitFor("Touch the fingerprint reader, or type your passcode", timeout: 60),
            "\(terminal.transcript)")
        try await world.daemon.reader.send("SCAN alice-1")
        let answer = try #require(Self.answer(log), "the asker answered")
        #expect(answer["status"] == "success", "\(answer)")
        // The other way round: the passcode typed while the reader waits ends the scan and answers.
        let dialogs = terminal.transcript.components(separatedBy: "or type your passcode").count
        let (typing, typingLog) = try world.asker()
        defer { typing.stop(SIGKILL) }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline && terminal.transcript.components(separatedBy: "or type your passcode").count <= dialogs
        {
            usleep(50_000)
        }
        #expect(terminal.waitForEchoOff(timeout: 60), "the second dialog reads the passcode")
        terminal.type("secret\n")
        let typed = try #require(Self.answer(typingLog), "the second asker answered")
        #expect(typed["status"] == "success", "\(typed)")
    }

    /// lactl's own question before it reaches another app's items is the agent's too: lactl run with no terminal
    /// reads the victim's item once the user typed the passcode into the agent's pinentry.
    @Test func lactlsConsentIsAskedByTheAgent() throws {
        let world = try World(extraEnvironment: DaemonProcess.enforcingAdministrativeClaims)
        defer { world.close() }
        _ = try IdentityAttackTests.registeredApp(world.daemon)
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { agent.stop(SIGKILL) }
        let log = world.daemon.directory + "/lactl-find.log"
        let find = try SpawnedProcess(
            world.lactl, ["keychain", "find-generic-password", "-s", "svc", "-a", "acct", "-G", "TEAMV.vault", "-w"],
            environment: ["LA_DAEMON_SOCKET": world.socket], log: log, input: "/dev/null", newSession: true)
        defer { find.stop(SIGKILL) }
        #expect(terminal.waitFor("lactl wants to use the items of TEAMV.vault", timeout: 60), "\(terminal.transcript)")
        #expect(terminal.waitFor("Password:", timeout: 60), "\(terminal.transcript)")
        _ = terminal.waitForEchoOff(timeout: 60)
        terminal.type(Self.passcode + "\n")
        let ended = find.wait(timeout: 30)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(ended?.status == 0, "\(output)")
        #expect(output.contains("victim-secret"), "\(output)")
    }

    @Test func aSecondAgentForTheSessionIsRefused() throws {
        let world = try World()
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let first = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        defer { first.stop(SIGKILL) }
        let second = try runCapturingOutput(
            URL(fileURLWithPath: world.lactl), ["agent", "--pinentry", "/usr/bin/pinentry-tty"],
            environment: Self.environment(["LA_DAEMON_SOCKET": world.socket]))
        #expect(second.status != 0)
        #expect(second.output.contains("serves") && second.output.contains("already"), "\(second.output)")
        #expect(first.isRunning, "the first agent still serves")
    }

    @Test func onlyTheRegisteredToolMayBeAnAgent() throws {
        let world = try World()
        defer { world.close() }
        // The same lactl at a path nobody registered: an unregistered program.
        let copy = world.daemon.directory + "/lactl-copy"
        try copyExecutable(try lactlExecutable().path, to: copy)
        let refused = try runCapturingOutput(
            URL(fileURLWithPath: copy), ["agent", "--pinentry", "/usr/bin/pinentry-tty"],
            environment: Self.environment(["LA_DAEMON_SOCKET": world.socket]))
        #expect(refused.status != 0)
        #expect(refused.output.contains("only an administrative tool"), "\(refused.output)")
    }

    @Test(.enabled(if: IdentityAttackTests.canMakeUsers))
    func anotherUsersAgentGetsNothingOfThisUsersPrograms() throws {
        let world = try World()
        defer { world.close() }
        let user = try IdentityAttackTests.OtherUser()
        defer { user.remove() }
        try world.configure(pinentry: "/usr/bin/pinentry-tty")
        let terminal = try PseudoTerminal()
        let other = try terminal.spawn(
            "/usr/bin/setpriv",
            Array(user.asUser.dropFirst()) + [world.lactl, "agent", "--pinentry", "/usr/bin/pinentry-tty"],
            environment: ["LA_DAEMON_SOCKET": world.socket, "HOME": "/"])
        defer { other.stop(SIGKILL) }
        #expect(terminal.waitFor("drawing the prompts of", timeout: 60), "\(terminal.transcript)")
        let (asker, log) = try world.asker()
        defer { asker.stop(SIGKILL) }
        let answer = try #require(Self.answer(log), "the asker answered")
        // No agent of this user, no terminal: nobody to ask.
        #expect(answer["status"] == String(LAErrorCodes.notInteractive), "\(answer)")
        #expect(!terminal.transcript.contains("open the vault"), "the other user's agent saw nothing")
    }

    @Test func anAgentKilledMidPromptGrantsNothing() throws {
        let world = try World()
        defer { world.close() }
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: "/usr/bin/pinentry-tty")
        let (asker, log) = try world.asker()
        defer { asker.stop(SIGKILL) }
        #expect(terminal.waitFor("Password:", timeout: 60), "\(terminal.transcript)")
        agent.stop(SIGKILL)
        let answer = try #require(Self.answer(log, timeout: 15), "the asker answered once the agent was gone")
        #expect(answer["status"] != "success", "\(answer)")
    }

    @Test func aPinentryThatHangsEndsInACancel() throws {
        let world = try World()
        defer { world.close() }
        // Greets, acknowledges every setting, and never answers GETPIN.
        let hanging = world.daemon.directory + "/pinentry-hangs"
        try Data(
            """
            #!/bin/sh
            echo "OK hanging pinentry"
            while read line; do
              case "$line" in GETPIN*) sleep 600;; *) echo OK;; esac
            done

            """.utf8
        ).write(to: URL(fileURLWithPath: hanging))
        chmod(hanging, 0o755)
        let terminal = try PseudoTerminal()
        let agent = try world.agent(on: terminal, pinentry: hanging, timeout: 2)
        defer { agent.stop(SIGKILL) }
        let started = Date()
        let (asker, log) = try world.asker()
        defer { asker.stop(SIGKILL) }
        let answer = try #require(Self.answer(log, timeout: 30), "the asker answered")
        #expect(
            answer["status"] == String(LAErrorCodes.userCancel)
                || answer["status"] == String(LAErrorCodes.authenticationFailed), "\(answer)")
        #expect(Date().timeIntervalSince(started) < 25, "the agent's timeout ended the dialog")
    }

    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/pinentry-gtk-2")))
    func gtkPinentryUnderXvfbIsAnsweredAndKeptAsAScreenshot() throws {
        let world = try World()
        defer { world.close() }
        let display = ":\(90 + Int(getpid() % 9))"
        let xvfb = try SpawnedProcess("/usr/bin/Xvfb", [display, "-screen", "0", "900x600x24", "-nolisten", "tcp"])
        defer { xvfb.stop(SIGKILL) }
        var ready = false
        for _ in 0..<100 where !ready {
            usleep(100_000)
            ready =
                (try? runCapturingOutput(
                    URL(fileURLWithPath: "/usr/bin/xdotool"), ["getdisplaygeometry"],
                    environment: Self.environment(["DISPLAY": display])))?.status == 0
        }
        #expect(ready, "Xvfb runs")
        let terminal = try PseudoTerminal()
        let agent = try world.agent(
            on: terminal, pinentry: "/usr/bin/pinentry-gtk-2", environment: ["DISPLAY": display])
        defer { agent.stop(SIGKILL) }
        let (asker, log) = try world.asker(reason: "sign in to the build server")
        defer { asker.stop(SIGKILL) }
        var window = ""
        for _ in 0..<200 where window.isEmpty {
            usleep(100_000)
            window =
                (try? runCapturingOutput(
                    URL(fileURLWithPath: "/usr/bin/xdotool"), ["search", "--onlyvisible", "--class", "pinentry"],
                    environment: Self.environment(["DISPLAY": display])))?.output.split(separator: "\n").first.map(
                    String.init) ?? ""
        }
        #expect(!window.isEmpty, "pinentry-gtk-2 shows a window")
        usleep(700_000)
        let dump = world.daemon.directory + "/screen.xwd"
        let shot = TestArtifacts.file("agent-pinentry-gtk2.png")
        let dumped = try runCapturingOutput(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "xwd -root -silent -display \(display) > \(dump)"])
        #expect(dumped.status == 0, "\(dumped.output)")
        let converted = try runCapturingOutput(
            URL(fileURLWithPath: TestArtifacts.repository + "/scripts/xwd-to-png"), [dump, shot.path])
        #expect(converted.status == 0, "\(converted.output)")
        let typed = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/xdotool"),
            ["type", "--delay", "30", Self.passcode], environment: Self.environment(["DISPLAY": display]))
        #expect(typed.status == 0)
        _ = try runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/xdotool"), ["key", "Return"],
            environment: Self.environment(["DISPLAY": display]))
        let answer = try #require(Self.answer(log), "the asker answered")
        #expect(answer["status"] == "success", "\(answer)")
    }
}

/// LAError's codes, as the probe prints them.
enum LAErrorCodes {
    static let authenticationFailed = -1
    static let userCancel = -2
    static let notInteractive = -1004
}

/// Reads another process's memory (as root, through `/proc/<pid>/mem`).
enum ProcessMemory {
    /// Whether any readable mapping of process `pid` holds the bytes of `text`.
    static func contains(_ pid: pid_t, _ text: String) throws -> Bool {
        let needle = Array(text.utf8)
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let memory = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
        guard memory >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(memory) }
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("r") else { continue }
            let range = fields[0].split(separator: "-")
            guard range.count == 2, let start = UInt64(range[0], radix: 16), let end = UInt64(range[1], radix: 16)
            else { continue }
            // vsyscall and the like cannot be read; skip what fails.
            var offset = start
            var previous: [UInt8] = []
            while offset < end {
                let count = Int(min(end - offset, 1 << 20))
                var chunk = [UInt8](repeating: 0, count: count)
                let read = pread(memory, &chunk, count, off_t(Int64(bitPattern: offset)))
                guard read > 0 else { break }
                // Carry the tail over, so that a match across two chunks is found.
                let window = previous + chunk[0..<read]
                if Self.find(needle, in: window) { return true }
                previous = Array(window.suffix(needle.count - 1))
                offset += UInt64(read)
            }
        }
        return false
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
        guard needle.count <= haystack.count, let first = needle.first else { return false }
        var index = 0
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == first && haystack[index..<index + needle.count].elementsEqual(needle) { return true }
            index += 1
        }
        return false
    }
}

/// Files a test keeps for people to look at: `.build/test-artifacts/` in the repository.
enum TestArtifacts {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path

    static func file(_ name: String) -> URL {
        let directory = URL(fileURLWithPath: repository + "/.build/test-artifacts")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.appendingPathComponent(name)
    }
}
