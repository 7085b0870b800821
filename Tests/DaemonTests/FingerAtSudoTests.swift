import Foundation
import SecurityProtocol
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's `sudo`, `su`, `login` and `pkexec`, run for a user made for the test (`LoginWorld`: password `secret`, a
/// localauthd with the virtual reader), in a mount namespace of its own whose `/etc/pam.d` is a copy of the
/// machine's with the test's stacks for `sudo`, `su` and `polkit-1`:
///
///     auth     sufficient  pam_localauth.so finger socket=… lid=…
///     auth     required    pam_unix.so try_first_pass
///
/// and for `login` the same with the module's session line, and whose `/etc/sudoers` is the test's. The machine's
/// own files are never touched. A run prints `SUDO-RAN as 0` when sudo ran its command as root (`SU-RAN`,
/// `PKEXEC-RAN` likewise).
final class SudoWorld {
    let login: LoginWorld
    let directory: String
    /// The lid's stand-in state file (`lid=`), open until a test closes it.
    var lid: String { directory + "/lid" }
    /// polkitd on a system bus of the world's own, for `pkexec`.
    let polkit: PolkitBus?

    /// `fakeServer`: the module's `socket=` names `fake.sock` in the world's sudo directory instead of localauthd;
    /// `polkit`: start polkitd for `pkexec` (the user joins the `sudo` group, Debian's polkit administrators).
    init(fakeServer: Bool = false, polkit withPolkit: Bool = false) throws {
        login = try LoginWorld()
        // su runs the user's shell: a shell, not the test user's nologin.
        var usermod = ["-s", "/bin/sh"]
        if withPolkit { usermod += ["-aG", "sudo"] }
        let user = login.user
        guard UserDatabase.editing({ Self.runCapturingOutputStatus("/usr/sbin/usermod", usermod + [user]) }) == 0 else {
            login.close()
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "usermod failed"])
        }
        directory = login.world.directory + "/sudo"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if withPolkit {
                try FileManager.default.createDirectory(
                    atPath: directory + "/polkit", withIntermediateDirectories: true)
                polkit = try PolkitBus(directory: directory + "/polkit")
            } else {
                polkit = nil
            }
        } catch {
            login.close()
            throw error
        }
        let module = try SessionDriver.built("pam_localauth.so")
        let socket = login.world.daemon.socket
        let finger = """
            auth sufficient \(module) finger socket=\(fakeServer ? directory + "/fake.sock" : socket)             lid=\(directory)/lid
            auth required pam_unix.so try_first_pass
            account required pam_unix.so
            session required pam_permit.so

            """
        // login's stack, as the `localauth` and `localauth-finger` profiles make common-auth and common-session.
        let loginStack = """
            auth sufficient \(module) finger socket=\(socket) lid=\(directory)/lid
            auth required pam_unix.so try_first_pass
            auth optional \(module) socket=\(socket)
            account required pam_unix.so
            session required pam_permit.so
            session optional \(module) socket=\(socket)

            """
        try FileManager.default.copyItem(atPath: "/etc/pam.d", toPath: directory + "/pam.d")
        let services = [
            ("sudo", finger), ("su", finger), ("polkit-1", finger), ("login", loginStack), ("sshd", loginStack),
        ]
        for (service, stack) in services {
            let file = directory + "/pam.d/" + service
            try? FileManager.default.removeItem(atPath: file)
            try stack.write(toFile: file, atomically: true, encoding: .utf8)
        }
        try "Defaults lecture=never, passwd_tries=1\n\(login.user) ALL=(ALL:ALL) ALL\n".write(
            toFile: directory + "/sudoers", atomically: true, encoding: .utf8)
        chmod(directory + "/sudoers", 0o440)
        try "state:      open\n".write(toFile: lid, atomically: true, encoding: .utf8)
        // pkexec through pkttyagent, as a user without a desktop runs it: the agent registers for this shell, then
        // pkexec (its child) asks polkitd, which has the agent authenticate the user (its set-user-ID helper runs
        // the polkit-1 stack). pkexec's own fallback agent cannot answer polkitd in Debian 12's polkit 122 ("No
        // session for cookie", polkit-org/polkit#423).
        try """
        #!/bin/sh
        pkttyagent --process $$ --notify-fd 3 3>"$1" &
        agent=$!
        read _ < "$1"
        pkexec /bin/sh -c 'echo PKEXEC-RAN as $(id -u)'
        status=$?
        kill $agent
        exit $status

        """.write(toFile: directory + "/pkexec.sh", atomically: true, encoding: .utf8)
        // $1: sudo, su, login, pkexec or sshd; `remote` as $2: run as from an SSH session (the variable sshd sets). su runs
        // from the user to the user: it asks the user's password, through util-linux's su and libpam_misc's
        // conversation. login (shadow's) runs as root, as getty starts it, and starts the user's shell. pkexec's
        // set-user-ID programs find the system bus in /run/dbus only. sshd runs in the foreground on the
        // configuration SSHServer writes.
        try """
        #!/bin/sh
        unset SSH_CONNECTION SSH_CLIENT SSH_TTY
        [ "${2:-}" = remote ] && export SSH_CONNECTION="203.0.113.7 50022 127.0.0.1 22"
        exec unshare --mount --propagation private /bin/sh -c '
            mount --bind "$0/pam.d" /etc/pam.d && mount --bind "$0/sudoers" /etc/sudoers || exit 97
            case "$3" in
            login) exec /bin/login "$4" ;;
            sshd) exec /usr/sbin/sshd -D -e -f "$0/sshd_config" ;;
            su) exec setpriv --reuid="$1" --regid="$2" --clear-groups -- \
                    /usr/bin/su -s /bin/sh -c "echo SU-RAN as \\$(id -u)" "$4" ;;
            pkexec)
                mkdir -p /run/dbus && mount --bind "$5" /run/dbus || exit 97
                rm -f "$0/agent-ready" && mkfifo -m 600 "$0/agent-ready" && chown "$1" "$0/agent-ready" || exit 97
                exec setpriv --reuid="$1" --regid="$2" --clear-groups -- /bin/sh "$0/pkexec.sh" "$0/agent-ready" ;;
            esac
            exec setpriv --reuid="$1" --regid="$2" --clear-groups -- \
                /usr/bin/sudo -k /bin/sh -c "echo SUDO-RAN as \\$(id -u)"
        ' "\(directory)" \(login.uid) \(login.gid) "$1" "\(login.user)" "\(polkit?.socketDirectory ?? "")"

        """.write(toFile: directory + "/run.sh", atomically: true, encoding: .utf8)
    }

    /// Starts sudo (or `su`) on a terminal of its own (`remote`: as from an SSH session); the process is killed when
    /// it is released still running.
    func sudo(remote: Bool = false, su: Bool = false) throws -> (PseudoTerminal, SpawnedProcess) {
        try run(su ? "su" : "sudo", remote: remote)
    }

    /// Starts `login` for the user on a terminal of its own, as getty would.
    func loginProgram() throws -> (PseudoTerminal, SpawnedProcess) { try run("login") }

    /// Starts Debian's sshd in the world's namespace (its `/etc/pam.d/sshd` is login's stack above), taking
    /// keyboard-interactive logins only: PAM's prompts go to the client.
    func sshd() throws -> SSHServer {
        try SSHServer(
            directory: directory,
            settings: """
                PubkeyAuthentication no
                PasswordAuthentication no
                KbdInteractiveAuthentication yes
                UsePAM yes
                PermitRootLogin no
                StrictModes no
                """, launcher: ["/bin/sh", directory + "/run.sh", "sshd"])
    }

    /// Starts `pkexec` with `pkttyagent`, as the user, on a terminal of its own (the world must have `polkit`).
    func pkexec() throws -> (PseudoTerminal, SpawnedProcess) { try run("pkexec") }

    private func run(_ program: String, remote: Bool = false) throws -> (PseudoTerminal, SpawnedProcess) {
        let terminal = try PseudoTerminal()
        let process = try terminal.spawn("/bin/sh", [directory + "/run.sh", program] + (remote ? ["remote"] : []))
        return (terminal, process)
    }

    /// Enrolls a finger for the user, through localauthd, as the user does (`lactl biometry enroll` on a terminal,
    /// the password typed, then the reader's five scans of `printID`).
    func enroll(_ printID: String) async throws {
        let terminal = try PseudoTerminal()
        var environment = login.userEnvironment
        environment["LA_PRESENTER"] = nil
        let enroll = try terminal.spawn(
            "/usr/bin/setpriv", try login.arguments(["biometry", "enroll"]), environment: environment)
        defer { _ = enroll.stop(SIGKILL) }
        let asked = await onOwnThread { terminal.waitFor("Password:", timeout: 60) }
        #expect(asked, "lactl biometry enroll asks for the password: \(terminal.transcript)")
        terminal.type("secret\r")
        try await login.world.reader.send(Array(repeating: "SCAN \(printID)", count: 5))
        let ended = await onOwnThread { enroll.wait(timeout: 60) }
        #expect(ended?.status == 0, "lactl biometry enroll: \(terminal.transcript)")
    }

    /// Waits for `process` to end; what the terminal showed.
    func finish(_ process: SpawnedProcess, on terminal: PseudoTerminal) async throws -> String {
        _ = await onOwnThread { process.wait(timeout: 120) }
        return terminal.transcript
    }

    func close() {
        polkit?.stop()
        login.close()
    }

    private static func runCapturingOutputStatus(_ path: String, _ arguments: [String]) -> Int32 {
        (try? runCapturingOutput(URL(fileURLWithPath: path), arguments).status) ?? -1
    }
}

/// Issue 49: `sudo` with `pam_localauth.so finger` before `pam_unix`: one prompt, the finger or the password,
/// whichever comes first.
extension FingerAtLoginTests {
    static var sudoUsable: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/sudo") && getuid() == 0
            && (try? String(contentsOfFile: "/proc/self/sessionid", encoding: .utf8)) == "4294967295"
    }

    /// A finger of the user at sudo's prompt runs the command, no password typed; a typed password does too, and
    /// the finger's verify ends with the prompt (the next sudo's verify takes the reader).
    @Test(.enabled(if: sudoUsable, "needs root, Debian's sudo, and no login session of the test's own"))
    func sudoTakesAFingerOrThePasswordAtOnePrompt() async throws {
        let world = try SudoWorld()
        defer { world.close() }
        try await world.enroll("alice-1")

        let (terminal, byFinger) = try world.sudo()
        let prompted = await onOwnThread { terminal.waitFor("Password or finger: ", timeout: 60) }
        #expect(prompted, "\(terminal.transcript)")
        try await world.login.world.reader.send("SCAN alice-1")
        let shown = try await world.finish(byFinger, on: terminal)
        #expect(shown.contains("SUDO-RAN as 0"), "the finger ran sudo's command: \(shown)")

        let (typing, byPassword) = try world.sudo()
        let asked = await onOwnThread {
            typing.waitFor("Password or finger: ", timeout: 60) && typing.waitForEchoOff(timeout: 60)
        }
        #expect(asked, "\(typing.transcript)")
        typing.type("secret\r")
        let typed = try await world.finish(byPassword, on: typing)
        #expect(typed.contains("SUDO-RAN as 0"), "the password ran sudo's command: \(typed)")
        #expect(!typed.contains("secret"), "the password was not echoed")

        // The abandoned verify freed the reader: a third sudo takes a finger again.
        let (again, third) = try world.sudo()
        #expect(await onOwnThread { again.waitFor("Password or finger: ", timeout: 60) })
        try await world.login.world.reader.send("SCAN alice-1")
        #expect(try await world.finish(third, on: again).contains("SUDO-RAN as 0"))
    }

    /// `su` (util-linux, libpam_misc's conversation, which a child's exit does not interrupt): the finger ends the
    /// prompt itself (the module puts a newline in the terminal's input), and the password works too.
    @Test(.enabled(if: sudoUsable, "needs root, Debian's sudo, and no login session of the test's own"))
    func suTakesAFingerOrThePassword() async throws {
        let world = try SudoWorld()
        defer { world.close() }
        try await world.enroll("alice-1")
        let (terminal, byFinger) = try world.sudo(su: true)
        #expect(
            await onOwnThread { terminal.waitFor("Password or finger: ", timeout: 60) }, "\(terminal.transcript)")
        try await world.login.world.reader.send("SCAN alice-1")
        let shown = try await world.finish(byFinger, on: terminal)
        #expect(shown.contains("SU-RAN as \(world.login.uid)"), "the finger ran su's command: \(shown)")

        let (typing, byPassword) = try world.sudo(su: true)
        #expect(
            await onOwnThread {
                typing.waitFor("Password or finger: ", timeout: 60) && typing.waitForEchoOff(timeout: 60)
            })
        typing.type("secret\r")
        #expect(try await world.finish(byPassword, on: typing).contains("SU-RAN as \(world.login.uid)"))
    }

    static var pkexecUsable: Bool {
        sudoUsable && PolkitBus.isAvailable
            && ["/usr/bin/pkexec", "/usr/bin/pkttyagent"].allSatisfy {
                FileManager.default.isExecutableFile(atPath: $0)
            }
    }

    /// `pkexec` with `pkttyagent` (polkitd's agent helper runs the polkit-1 stack, and pkttyagent reads the
    /// terminal): the finger ends the agent's prompt (the module puts a newline in the terminal's input while the
    /// agent's process group is its foreground), and the password works too.
    @Test(.enabled(if: pkexecUsable, "needs root, Debian's pkexec, pkttyagent and polkitd"))
    func pkexecTakesAFingerOrThePasswordThroughPkttyagent() async throws {
        let world = try SudoWorld(polkit: true)
        defer { world.close() }
        try await world.enroll("alice-1")
        let (terminal, byFinger) = try world.pkexec()
        #expect(
            await onOwnThread { terminal.waitFor("Password or finger: ", timeout: 60) },
            "\(terminal.transcript)\n\(world.polkit?.logs() ?? "")")
        try await world.login.world.reader.send("SCAN alice-1")
        let shown = try await world.finish(byFinger, on: terminal)
        #expect(shown.contains("PKEXEC-RAN as 0"), "the finger ran pkexec's command: \(shown)")

        let (typing, byPassword) = try world.pkexec()
        #expect(
            await onOwnThread {
                typing.waitFor("Password or finger: ", timeout: 60) && typing.waitForEchoOff(timeout: 60)
            })
        typing.type("secret\r")
        let typed = try await world.finish(byPassword, on: typing)
        #expect(typed.contains("PKEXEC-RAN as 0"), "the password ran pkexec's command: \(typed)")
        #expect(!typed.contains("secret"), "the password was not echoed")
    }

    /// Another finger is refused; after five, the finger is locked out and the password still works at the same
    /// prompt. A wrong password is refused.
    @Test(.enabled(if: sudoUsable, "needs root, Debian's sudo, and no login session of the test's own"))
    func aStrangersFingerIsRefusedAndThePasswordStillWorks() async throws {
        let world = try SudoWorld()
        defer { world.close() }
        try await world.enroll("alice-1")
        let (terminal, sudo) = try world.sudo()
        #expect(await onOwnThread { terminal.waitFor("Password or finger: ", timeout: 60) })
        for _ in 0..<5 { try await world.login.world.reader.send("SCAN mallory") }
        #expect(!terminal.transcript.contains("SUDO-RAN"), "a stranger's finger ran nothing")
        #expect(await onOwnThread { terminal.waitForEchoOff(timeout: 60) })
        terminal.type("secret\r")
        let shown = try await world.finish(sudo, on: terminal)
        #expect(shown.contains("SUDO-RAN as 0"), "\(shown)")
        #expect(world.login.world.daemon.logText.contains("locked"), "the five failures locked the finger out")

        let (wrong, refused) = try world.sudo()
        #expect(await onOwnThread { wrong.waitFor("assword", timeout: 60) && wrong.waitForEchoOff(timeout: 60) })
        wrong.type("wrong\r")
        let refusedScreen = try await world.finish(refused, on: wrong)
        #expect(!refusedScreen.contains("SUDO-RAN"), "\(refusedScreen)")
    }

    /// Where nobody can touch the reader, the finger is not offered and sudo's own password prompt comes at once:
    /// over SSH, and with the lid closed.
    @Test(.enabled(if: sudoUsable, "needs root, Debian's sudo, and no login session of the test's own"))
    func noFingerIsOfferedOverSSHOrWithTheLidClosed() async throws {
        let world = try SudoWorld()
        defer { world.close() }
        try await world.enroll("alice-1")
        for remote in [true, false] {
            if !remote { try "state:      closed\n".write(toFile: world.lid, atomically: true, encoding: .utf8) }
            let (terminal, sudo) = try world.sudo(remote: remote)
            #expect(await onOwnThread { terminal.waitFor("[sudo] password for", timeout: 60) })
            #expect(!terminal.transcript.contains("finger"), "\(terminal.transcript)")
            terminal.type("secret\r")
            #expect(try await world.finish(sudo, on: terminal).contains("SUDO-RAN as 0"))
        }
    }

    /// A login through Debian's sshd (keyboard-interactive: PAM's prompts go to the client) never offers the finger:
    /// the client is asked pam_unix's password question at once, and the password logs in. Nor does sudo in that
    /// SSH session, on the terminal sshd gives it: sudo's own password prompt comes at once. localauthd waited for
    /// no finger.
    @Test(.enabled(if: sudoUsable && SSHServer.isAvailable, "needs root, Debian's sshd and ssh"))
    func anSSHLoginNeverOffersTheFinger() async throws {
        let world = try SudoWorld()
        defer { world.close() }
        try await world.enroll("alice-1")
        let sshd = try world.sshd()
        defer { sshd.stop() }
        // ssh asks this program every question (SSH_ASKPASS_REQUIRE=force): it writes each down and answers the password.
        let askpass = world.directory + "/askpass"
        let prompts = world.directory + "/prompts"
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> \(prompts)\necho secret\n".write(
            toFile: askpass, atomically: true, encoding: .utf8)
        chmod(askpass, 0o755)
        var environment = inheritedEnvironment()
        environment["SSH_ASKPASS"] = askpass
        environment["SSH_ASKPASS_REQUIRE"] = "force"
        let login = [
            "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "PreferredAuthentications=keyboard-interactive", "-o", "NumberOfPasswordPrompts=1",
            "-o", "ConnectTimeout=30", "-p", String(sshd.port), "\(world.login.user)@127.0.0.1",
        ]
        let ssh = try await runCapturingOutput(
            URL(fileURLWithPath: "/usr/bin/ssh"), login + ["echo SSH-RAN as $(id -u)"], environment: environment)
        let asked = (try? String(contentsOfFile: prompts, encoding: .utf8)) ?? ""
        #expect(
            ssh.status == 0 && ssh.output.contains("SSH-RAN as \(world.login.uid)"),
            "ssh: \(ssh.output)\nsshd: \(sshd.logText)")
        #expect(asked.contains("assword") && !asked.contains("finger"), "the questions ssh was asked: \(asked)")

        let terminal = try PseudoTerminal()
        let sudo = try terminal.spawn(
            "/usr/bin/ssh", ["-tt"] + login + ["sudo -k /bin/sh -c 'echo SUDO-RAN as $(id -u)'"],
            environment: environment)
        #expect(
            await onOwnThread { terminal.waitFor("[sudo] password for", timeout: 60) },
            "\(terminal.transcript)\nsshd: \(sshd.logText)")
        #expect(!terminal.transcript.contains("finger"), "\(terminal.transcript)")
        terminal.type("secret\r")
        #expect(try await world.finish(sudo, on: terminal).contains("SUDO-RAN as 0"), "\(terminal.transcript)")
        #expect(!world.login.world.daemon.logText.contains("login finger: waiting"), "localauthd waited for a finger")
    }

    /// A program of the user (under the user's shell) that asks localauthd for a finger as the module does gets no
    /// silent verification: localauthd answers at once that no finger is offered and waits for none, so it cannot
    /// catch a touch meant for another prompt.
    @Test(.enabled(if: sudoUsable, "needs root and a user made for the test"))
    func aProgramOfTheUserGetsNoSilentFingerCheck() async throws {
        let world = try SudoWorld()
        defer { world.close() }
        try await world.enroll("alice-1")
        func hex(_ message: ClientMessage) -> String {
            message.encoded().withUnsafeBytes { Array($0) }.map { String(format: "%02x", $0) }.joined()
        }
        let hello = hex(.hello(versions: [1], accessGroups: [], allGroups: false))
        let verify = hex(.login(1, .verifyFinger))
        // The answer's last byte is its finger field (4: not offered); nothing within 60 s is "timeout".
        let asker = """
            import socket
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(60)
            s.connect("\(world.login.world.daemon.socket)")
            s.sendall(bytes.fromhex("\(hello)"))
            s.recv(65536)
            s.sendall(bytes.fromhex("\(verify)"))
            try:
                print("finger", s.recv(65536)[-1])
            except socket.timeout:
                print("timeout")
            """
        // Under a shell of the user's, as programs of the user run (two commands: the shell does not exec python).
        let arguments = [
            "--reuid=\(world.login.uid)", "--regid=\(world.login.gid)", "--clear-groups", "--", "/bin/sh", "-c",
            "/usr/bin/python3 -c \"$0\"; exit $?", asker,
        ]
        let asked = try await onOwnThread {
            try runCapturingOutput(URL(fileURLWithPath: "/usr/bin/setpriv"), arguments)
        }
        #expect(asked.output.contains("finger 4"), "\(asked.output)")
        #expect(!world.login.world.daemon.logText.contains("login finger: waiting"), "localauthd waited for a finger")
    }

    /// The module believes only a server running as root: a program of the user listening at the path the stack
    /// names, answering as localauthd would that the finger is offered and then that it matched, gets no finger
    /// offered (sudo's own password prompt comes at once) and logs nobody in.
    @Test(.enabled(if: sudoUsable, "needs root, Debian's sudo, and no login session of the test's own"))
    func aServerThatIsNotRootIsNotBelieved() async throws {
        let world = try SudoWorld(fakeServer: true)
        defer { world.close() }
        chmod(world.directory, 0o777)
        // The answers' bytes as WireFormatTests pins them: welcome, then login(1, {finger offered (1) / matched (2)}).
        let forger = """
            import socket
            server = socket.socket(socket.AF_UNIX)
            server.bind("\(world.directory)/fake.sock")
            server.listen()
            answer = "01000000370d000000320100000008000000000000000102000000200100000001000200000008" \\
                + "00000000000000000400000008000000000000000"
            for number in range(20):
                connection, _ = server.accept()
                connection.recv(46)
                connection.sendall(bytes.fromhex("01000000050100000000"))
                connection.recv(65536)
                connection.sendall(bytes.fromhex(answer + ("1" if number == 0 else "2")))
                connection.close()
            """
        let listener = try SpawnedProcess(
            "/usr/bin/setpriv",
            [
                "--reuid=\(world.login.uid)", "--regid=\(world.login.gid)", "--clear-groups", "--", "/usr/bin/python3",
                "-c", forger,
            ], log: world.directory + "/fake.log")
        defer { _ = listener.stop(SIGKILL) }
        #expect(
            await waitUntil(within: .seconds(30)) {
                FileManager.default.fileExists(atPath: world.directory + "/fake.sock")
            })
        let (terminal, sudo) = try world.sudo()
        #expect(
            await onOwnThread { terminal.waitFor("[sudo] password for", timeout: 60) }, "\(terminal.transcript)")
        terminal.type("secret\r")
        #expect(try await world.finish(sudo, on: terminal).contains("SUDO-RAN as 0"))
    }

    /// A finger at `login` opens the login keychain only within 48 hours of a passcode unlock in the daemon's
    /// lifetime: after a restart, before any, the session starts with the keychain locked and says so; after a
    /// password login and its logout (which locked it), the finger's login finds it unlocked, counts as a session,
    /// and its logout locks it again. A finger at sudo then leaves it locked.
    @Test(.enabled(if: sudoUsable, "needs root, Debian's login, and no login session of the test's own"))
    func aFingerAtLoginOpensTheKeychainOnlyWithinTheWindow() async throws {
        let world = try SudoWorld()
        defer { world.close() }
        let login = world.login
        try await world.enroll("alice-1")
        try login.addItemAndLock()
        // The enrollment's password opened the window: a new daemon has none.
        try login.restartDaemon()

        let (before, first) = try world.loginProgram()
        #expect(await onOwnThread { before.waitFor("Password or finger: ", timeout: 60) }, "\(before.transcript)")
        try await login.world.reader.send("SCAN alice-1")
        #expect(
            await onOwnThread { before.waitFor("The login keychain is locked", timeout: 60) },
            "no password login yet: \(before.transcript)")
        #expect(try !login.readsItem())
        #expect(await onOwnThread { before.waitFor("$ ", timeout: 60) }, "the shell: \(before.transcript)")
        before.type("exit\r")
        _ = try await world.finish(first, on: before)

        let (driver, authenticated, opened) = try login.login("secret")
        #expect(authenticated == 0 && opened == 0, "\(driver.output)")
        #expect(try login.readsItem())
        #expect(driver.run("close") == 0)
        #expect(driver.end() == 0)
        #expect(try !login.readsItem(), "the password session's logout locked the keychain")

        let (terminal, byFinger) = try world.loginProgram()
        #expect(await onOwnThread { terminal.waitFor("Password or finger: ", timeout: 60) })
        try await login.world.reader.send("SCAN alice-1")
        #expect(await onOwnThread { terminal.waitFor("$ ", timeout: 60) }, "the shell: \(terminal.transcript)")
        terminal.type("echo LOGGED-IN-$((6 * 7))\r")
        #expect(
            await onOwnThread { terminal.waitFor("LOGGED-IN-42", timeout: 60) }, "\(terminal.transcript)")
        #expect(try login.readsItem(), "the finger's login opened the keychain: \(terminal.transcript)")
        #expect(!terminal.transcript.contains("keychain is locked"), "\(terminal.transcript)")
        terminal.type("exit\r")
        _ = try await world.finish(byFinger, on: terminal)
        #expect(
            await waitUntil(within: .seconds(60)) { (try? login.readsItem()) == false },
            "the finger's session counted: its logout locked the keychain")

        // A finger at sudo, within the same window, opens no counted session and leaves the keychain locked.
        let (atSudo, sudo) = try world.sudo()
        #expect(await onOwnThread { atSudo.waitFor("Password or finger: ", timeout: 60) })
        try await login.world.reader.send("SCAN alice-1")
        #expect(try await world.finish(sudo, on: atSudo).contains("SUDO-RAN as 0"))
        #expect(try !login.readsItem(), "a finger at sudo opened the keychain")
    }
}
