import Authenticators
import EmbeddedEngine
import Foundation
import SecurityClient
import SecurityProtocol
import SecurityServer
import Synchronization
import TestSupport
import Testing

/// Issue "An SSH agent whose keys are persisted rights": real OpenSSH (ssh-add, ssh-keygen) against
/// `lactl ssh-agent`, its keys persisted `.biometryCurrentSet` rights, on the virtual reader.
@Suite("lactl ssh-agent with real OpenSSH", .serialized, .virtualReaderLock(timeLimit: .seconds(120)))
struct SSHAgentTests {
    /// Stops `agent` (it holds the reader), enrolls another finger, and starts a new agent on `socket`.
    func changeFingers(_ world: RightsWorld, stopping agent: Process, socket: String) async throws -> Process {
        agent.terminate()
        agent.waitUntilExit()
        try await world.enrollForThisUser("alice-2", finger: .leftIndex)
        return try startAgent(world, socket: socket)
    }

    /// Runs `executable arguments` to its end, on a thread of its own (the test's scans, sent by a task meanwhile,
    /// need the cooperative pool's threads); exit status and standard output.
    @discardableResult
    func run(
        _ executable: URL, _ arguments: [String], environment: [String: String], input: Data? = nil
    ) async throws -> (Int32, String) {
        try await onOwnThread { try Self.runBlocking(executable, arguments, environment: environment, input: input) }
    }

    private static func runBlocking(
        _ executable: URL, _ arguments: [String], environment: [String: String], input: Data?
    ) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        // Kept for a failure's message (``lastErrors``), not shown otherwise.
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("la-ssh-run-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errors) }
        process.standardError = try FileHandle(forWritingTo: errors)
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(input) }
        try? stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        lastErrors.withLock { $0 = (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// The standard error of the latest ``run(_:_:environment:input:)`` of the suite's tests, for a failure's
    /// message.
    static let lastErrors = Mutex("")

    /// Starts `lactl ssh-agent --socket path`; returns once it printed SSH_AUTH_SOCK.
    func startAgent(_ world: RightsWorld, socket: String) throws -> Process {
        let process = Process()
        process.executableURL = try lactlExecutable()
        process.arguments = ["ssh-agent", "--socket", socket]
        process.environment = world.toolEnvironment()
        let output = Pipe()
        process.standardOutput = output
        _ = FileManager.default.createFile(atPath: world.directory + "/agent.log", contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: world.directory + "/agent.log"))
        try process.run()
        let first = output.fileHandleForReading.availableData
        #expect(String(decoding: first, as: UTF8.self).hasPrefix("SSH_AUTH_SOCK=\(socket);"))
        return process
    }

    @Test func opensshListsSignsAndVerifiesOnlyWithTheEnrolledFinger() async throws {
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let lactl = try lactlExecutable()
        let env = world.toolEnvironment()
        let (created, line) = try await run(lactl, ["ssh-key", "create", "work"], environment: env)
        #expect(created == 0)
        #expect(line.hasPrefix("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY"))
        #expect(line.trimmingCharacters(in: .whitespacesAndNewlines).hasSuffix(" lactl:work"))
        #expect(try await run(lactl, ["ssh-key", "public", "work"], environment: env).1 == line)
        #expect(try await run(lactl, ["ssh-key", "public", "nothing"], environment: env).0 == 44)

        let socket = world.directory + "/agent.sock"
        let agent = try startAgent(world, socket: socket)
        defer { agent.terminate() }
        var ssh = env
        ssh["SSH_AUTH_SOCK"] = socket
        let (listed, identities) = try await run(URL(fileURLWithPath: "/usr/bin/ssh-add"), ["-L"], environment: ssh)
        #expect(listed == 0)
        #expect(identities == line)

        // ssh-keygen -Y sign with the agent's key, approved by the enrolled finger, then verified by OpenSSH.
        let publicKey = world.directory + "/work.pub"
        try line.write(toFile: publicKey, atomically: true, encoding: .utf8)
        let message = world.directory + "/message"
        try Data("deploy build 42".utf8).write(to: URL(fileURLWithPath: message))
        let keygen = URL(fileURLWithPath: "/usr/bin/ssh-keygen")
        let scan = Task { try await world.socket.send("SCAN alice-1") }
        let (signed, _) = try await run(
            keygen, ["-Y", "sign", "-n", "file", "-f", publicKey, "-U", message], environment: ssh)
        _ = try await scan.value
        #expect(signed == 0)
        let allowed = world.directory + "/allowed_signers"
        try "alice \(line)".write(toFile: allowed, atomically: true, encoding: .utf8)
        let (verified, _) = try await run(
            keygen, ["-Y", "verify", "-f", allowed, "-I", "alice", "-n", "file", "-s", message + ".sig"],
            environment: ssh, input: try Data(contentsOf: URL(fileURLWithPath: message)))
        #expect(verified == 0)

        // Another finger: no signature.
        try? FileManager.default.removeItem(atPath: message + ".sig")
        let stranger = Task { try await world.socket.send("SCAN mallory") }
        let (refused, _) = try await run(
            keygen, ["-Y", "sign", "-n", "file", "-f", publicKey, "-U", message], environment: ssh)
        _ = try await stranger.value
        #expect(refused != 0)
        #expect(!FileManager.default.fileExists(atPath: message + ".sig"))

        // Outside keys cannot be added; a malformed message gets a failure and the connection stays usable.
        let (added, _) = try await run(URL(fileURLWithPath: "/usr/bin/ssh-add"), ["-D"], environment: ssh)
        #expect(added != 0)
        let replies = try Self.exchange(socket, [[0, 0, 0, 3, 13, 0, 0], [0, 0, 0, 1, 11]])
        #expect(replies.first == [5])
        #expect(replies.last?.first == 12)

        // The fingers change: the key, a .biometryCurrentSet right, never signs again, even for alice-1.
        let restarted = try await changeFingers(world, stopping: agent, socket: socket)
        defer { restarted.terminate() }
        let again = Task { try? await world.socket.send("SCAN alice-1", timeout: .seconds(3)) }
        let (afterChange, _) = try await run(
            keygen, ["-Y", "sign", "-n", "file", "-f", publicKey, "-U", message], environment: ssh)
        _ = await again.value
        #expect(afterChange != 0)
        await world.close()
    }

    /// A real sshd on 127.0.0.1 (its own host key, configuration and authorized_keys in the world's directory)
    /// accepts the agent's key after a matching finger, and refuses it after the fingers change.
    @Test(.enabled(if: SSHServer.isAvailable))
    func sshdAcceptsTheKeyAfterTheFingerAndNotAfterAnEnrollmentChange() async throws {
        let world = try RightsWorld()
        try await world.enrollForThisUser("alice-1", finger: .rightIndex)
        let lactl = try lactlExecutable()
        let env = world.toolEnvironment()
        let line = try await run(lactl, ["ssh-key", "create", "login"], environment: env).1
        let directory = world.directory
        try line.write(toFile: directory + "/authorized_keys", atomically: true, encoding: .utf8)
        let sshd = try SSHServer(
            directory: directory,
            settings: """
                AuthorizedKeysFile \(directory)/authorized_keys
                PubkeyAuthentication yes
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                PermitRootLogin prohibit-password
                StrictModes no
                UsePAM no
                """)
        defer { sshd.stop() }
        let port = sshd.port

        let socket = directory + "/agent.sock"
        let agent = try startAgent(world, socket: socket)
        var ssh = env
        ssh["SSH_AUTH_SOCK"] = socket
        let user = AuthenticationConfiguration.currentUsername()
        let login = [
            "-F", "/dev/null", "-o", "IdentityAgent=\(socket)", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=30",
            "-p", String(port), "\(user)@127.0.0.1", "true",
        ]
        let client = URL(fileURLWithPath: "/usr/bin/ssh")
        let scan = Task { try await world.socket.send("SCAN alice-1") }
        let (loggedIn, _) = try await run(client, login, environment: ssh)
        #expect(
            loggedIn == 0,
            "logged in after the finger; sshd said: \(sshd.logText)")
        _ = try await scan.value

        let restarted = try await changeFingers(world, stopping: agent, socket: socket)
        defer { restarted.terminate() }
        let again = Task { try? await world.socket.send("SCAN alice-1", timeout: .seconds(3)) }
        #expect(try await run(client, login, environment: ssh).0 != 0, "refused after the enrollment change")
        _ = await again.value
        await world.close()
    }

    /// Sends raw frames over the agent socket on one connection; the reply bodies.
    static func exchange(_ path: String, _ frames: [[UInt8]]) throws -> [[UInt8]] {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { throw CocoaError(.fileReadUnknown) }
        var replies: [[UInt8]] = []
        for frame in frames {
            _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            var header = [UInt8](repeating: 0, count: 4)
            guard recv(fd, &header, 4, Int32(MSG_WAITALL)) == 4 else { break }
            let length = header.reduce(0) { $0 << 8 | Int($1) }
            var body = [UInt8](repeating: 0, count: length)
            guard recv(fd, &body, length, Int32(MSG_WAITALL)) == length else { break }
            replies.append(body)
        }
        return replies
    }
}

#if canImport(Glibc)
    import Glibc
#endif
