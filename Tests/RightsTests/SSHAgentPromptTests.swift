import Foundation
import SecurityClient
import SecurityServer
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Where the agent asks and how often: the prompt on the requesting program's terminal (the passcode fallback
/// typed there), and approvals kept per (key, program) for the key's reuse window.
extension SSHAgentTests {
    /// `ssh-key create --reuse 60`: one finger lets ssh-keygen sign again without asking, but not ssh-add (another
    /// program), and not after the agent was locked; windows over Apple's 300 s need `--allow-long-reuse`.
    @Test func anApprovalIsKeptPerProgramForTheKeysReuseWindow() async throws {
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let lactl = try lactlExecutable()
        let env = world.toolEnvironment()
        #expect(try await run(lactl, ["ssh-key", "create", "long", "--reuse", "301"], environment: env).0 != 0)
        #expect(
            try await run(
                lactl, ["ssh-key", "create", "long", "--reuse", "3600", "--allow-long-reuse"], environment: env
            ).0
                == 0)
        let (created, line) = try await run(lactl, ["ssh-key", "create", "quick", "--reuse", "60"], environment: env)
        #expect(created == 0)
        let listed = try await run(lactl, ["ssh-key", "list"], environment: env).1
        #expect(listed.contains("quick\tbiometryCurrentSet\treuse 60 s\t"))
        #expect(listed.contains("long\tbiometryCurrentSet\treuse 3600 s\t"))

        let socket = world.directory + "/agent.sock"
        let agent = try startAgent(world, socket: socket)
        defer { agent.terminate() }
        var ssh = env
        ssh["SSH_AUTH_SOCK"] = socket
        let publicKey = world.directory + "/quick.pub"
        try line.write(toFile: publicKey, atomically: true, encoding: .utf8)
        let message = world.directory + "/message"
        try Data("release 7".utf8).write(to: URL(fileURLWithPath: message))
        let keygen = URL(fileURLWithPath: "/usr/bin/ssh-keygen")
        let sign = ["-Y", "sign", "-n", "file", "-f", publicKey, "-U", message]

        let scan = Task { try await world.socket.send("SCAN alice-1") }
        #expect(
            try await run(keygen, sign, environment: ssh).0 == 0,
            """
            the first signature needs the finger; ssh-keygen said: \(Self.lastErrors.withLock { $0 }); the agent's log: \
            \((try? String(contentsOfFile: world.directory + "/agent.log", encoding: .utf8)) ?? "")
            """)
        _ = try await scan.value
        try FileManager.default.removeItem(atPath: message + ".sig")
        #expect(
            try await run(keygen, sign, environment: ssh).0 == 0, "ssh-keygen signs again within the window, no scan")

        // ssh-add -T signs a test message: another program, so it is asked, and a stranger's finger refuses it.
        let stranger = Task { try await world.socket.send("SCAN mallory") }
        #expect(try await run(URL(fileURLWithPath: "/usr/bin/ssh-add"), ["-T", publicKey], environment: ssh).0 != 0)
        _ = try await stranger.value

        // Locking the agent drops every kept approval: after unlocking, ssh-keygen is asked again.
        let passphrase = Array("pass".utf8)
        let lockFrame = Self.frame([22] + Self.frame(passphrase))
        let unlockFrame = Self.frame([23] + Self.frame(passphrase))
        #expect(try Self.exchange(socket, [lockFrame, unlockFrame]) == [[6], [6]])
        try FileManager.default.removeItem(atPath: message + ".sig")
        let afterLock = Task { try await world.socket.send("SCAN mallory") }
        #expect(
            try await run(keygen, sign, environment: ssh).0 != 0,
            "asked again after a lock; a stranger's finger refuses")
        _ = try await afterLock.value
        let log = (try? String(contentsOfFile: world.directory + "/agent.log", encoding: .utf8)) ?? ""
        #expect(log.contains("approval kept 60 s for ssh-keygen"))
        #expect(log.contains("(approval kept, "))
        await world.close()
    }

    /// Issue "Caller identity", attack 7: a window approved for ssh-keygen is not inherited by another program
    /// started as `/usr/bin/ssh-keygen` — with the loader told to load code from a folder the user writes, or in a
    /// mount and user namespace of its own (where a bind mount could put any program at that path). Each is asked,
    /// and a stranger's finger refuses it; the honest ssh-keygen still signs within its window.
    @Test func aReuseWindowIsNotInheritedByAnInjectedOrNamespacedProgram() async throws {
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let lactl = try lactlExecutable()
        let env = world.toolEnvironment()
        let (created, line) = try await run(lactl, ["ssh-key", "create", "quick", "--reuse", "60"], environment: env)
        #expect(created == 0)
        let socket = world.directory + "/agent.sock"
        let agent = try startAgent(world, socket: socket)
        defer { agent.terminate() }
        var ssh = env
        ssh["SSH_AUTH_SOCK"] = socket
        let publicKey = world.directory + "/quick.pub"
        try line.write(toFile: publicKey, atomically: true, encoding: .utf8)
        let message = world.directory + "/message"
        try Data("release 8".utf8).write(to: URL(fileURLWithPath: message))
        let keygen = "/usr/bin/ssh-keygen"
        let sign = ["-Y", "sign", "-n", "file", "-f", publicKey, "-U", message]
        let scan = Task { try await world.socket.send("SCAN alice-1") }
        #expect(
            try await run(URL(fileURLWithPath: keygen), sign, environment: ssh).0 == 0, "the first one needs the finger"
        )
        _ = try await scan.value
        try FileManager.default.removeItem(atPath: message + ".sig")

        var injected = ssh
        injected["LD_LIBRARY_PATH"] = world.directory
        let stranger = Task { try await world.socket.send("SCAN mallory") }
        #expect(
            try await run(URL(fileURLWithPath: keygen), sign, environment: injected).0 != 0, "asked: loader steered")
        _ = try await stranger.value
        #expect(!FileManager.default.fileExists(atPath: message + ".sig"))

        if MachineCapability.userNamespaces {
            let another = Task { try await world.socket.send("SCAN mallory") }
            #expect(
                try await run(URL(fileURLWithPath: "/usr/bin/unshare"), ["-Urm", keygen] + sign, environment: ssh).0
                    != 0,
                "asked: another mount namespace")
            _ = try await another.value
            #expect(!FileManager.default.fileExists(atPath: message + ".sig"))
        } else {
            skipPart("ssh-keygen in another mount namespace", because: MachineCapability.userNamespacesRefused)
        }

        // Issue 47, attack 2: a program of the user that swapped its executable for /usr/bin/ssh-keygen
        // (PR_SET_MM_MAP, Tests/Fixtures/ExeSwap) asks for data of its own choosing to be signed: it is asked.
        if MachineCapability.userNamespaces && exeSwapBuildable {
            let swapper = try builtExeSwap(in: world.directory)
            let blob = try #require(Data(base64Encoded: String(line.split(separator: " ")[1])))
            let request = Self.frame(
                [13] + Self.frame(Array(blob)) + Self.frame(Array("chosen by the swapper".utf8)) + [0, 0, 0, 0])
            var swapped = ssh
            swapped["EXE_SWAP_SSH"] = "1"
            let swapStranger = Task { try await world.socket.send("SCAN mallory") }
            let answer = try await runCapturingOutput(
                URL(fileURLWithPath: swapper),
                [keygen, socket, request.map { String(format: "%02x", $0) }.joined()], environment: swapped)
            if answer.status == 0 {
                _ = try await swapStranger.value
            } else {
                swapStranger.cancel()
                Issue.record("the swapped program did not run: \(answer.output)")
            }
            #expect(
                answer.output.hasPrefix("0000000105"), "asked, and refused by a stranger's finger: \(answer.output)")
        } else if !exeSwapBuildable {
            skipPart(
                "a program swapped to ssh-keygen", because: "the attack program is x86-64 code built with /usr/bin/cc")
        } else {
            skipPart("a program swapped to ssh-keygen", because: MachineCapability.userNamespacesRefused)
        }

        #expect(
            try await run(URL(fileURLWithPath: keygen), sign, environment: ssh).0 == 0, "the honest one still signs")
        let log = (try? String(contentsOfFile: world.directory + "/agent.log", encoding: .utf8)) ?? ""
        #expect(log.contains("refused to sign with quick"), "\(log)")
        await world.close()
    }

    /// ssh-keygen on a terminal of its own: the agent (no terminal, `LA_PRESENTER=none`) draws the prompt there,
    /// naming what is signed and who asks; Enter picks the passcode, which is typed on that terminal.
    @Test func thePromptAppearsOnTheRequestingProgramsTerminal() async throws {
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let lactl = try lactlExecutable()
        let env = world.toolEnvironment()
        let (created, line) = try await run(
            lactl, ["ssh-key", "create", "desk", "--requirement", "devicePasscode"], environment: env)
        #expect(created == 0)
        let socket = world.directory + "/agent.sock"
        let agent = try startAgent(world, socket: socket)
        defer { agent.terminate() }
        let publicKey = world.directory + "/desk.pub"
        try line.write(toFile: publicKey, atomically: true, encoding: .utf8)
        let message = world.directory + "/message"
        try Data("tag v1".utf8).write(to: URL(fileURLWithPath: message))

        var ssh = env
        ssh["SSH_AUTH_SOCK"] = socket
        let command = "/usr/bin/ssh-keygen -Y sign -n git -f \(publicKey) -U \(message)"
        let (status, screen) = try runOnTerminal(
            command, environment: ssh,
            answering: [
                ("Place your finger", "\r"),
                ("Password:", "secret\r"),
            ])
        let log = (try? String(contentsOfFile: world.directory + "/agent.log", encoding: .utf8)) ?? ""
        #expect(
            status == 0, "signed with the passcode typed on ssh-keygen's terminal; it showed: \(screen); agent: \(log)")
        #expect(screen.contains("asked by ssh-keygen: sign for namespace \u{201C}git\u{201D} with SSH key desk"))
        #expect(!screen.contains("secret"), "the passcode is not echoed")
        #expect(FileManager.default.fileExists(atPath: message + ".sig"))
        await world.close()
    }

    /// The agent asks the kernel who connected (`SO_PEERCRED`): a program of another user gets nothing, even when
    /// the socket's permissions were opened to everyone.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func anotherUserGetsNothingEvenThroughAnOpenSocket() async throws {
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let env = world.toolEnvironment()
        #expect(try await run(try lactlExecutable(), ["ssh-key", "create", "mine"], environment: env).0 == 0)
        let socket = world.directory + "/agent.sock"
        let agent = try startAgent(world, socket: socket)
        defer { agent.terminate() }
        chmod(world.directory, 0o755)
        chmod(socket, 0o777)
        var ssh = env
        ssh["SSH_AUTH_SOCK"] = socket
        let setpriv = URL(fileURLWithPath: "/usr/bin/setpriv")
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/ssh-add", "-L"]
        let (status, listed) = try await run(setpriv, asNobody, environment: ssh)
        #expect(status != 0)
        #expect(!listed.contains("ecdsa-sha2-nistp256"))
        #expect(
            try await run(URL(fileURLWithPath: "/usr/bin/ssh-add"), ["-L"], environment: ssh).1.contains("lactl:mine"))
        await world.close()
    }

    /// An agent-protocol frame, or an SSH `string`: uint32 length and the bytes.
    static func frame(_ body: [UInt8]) -> [UInt8] {
        let length = UInt32(body.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
    }
}
