import Authenticators
import EmbeddedEngine
import Foundation
import LocalAuthentication
import SSHAgent
import SecurityClient
import SecurityServer

#if canImport(Glibc)
    import Glibc
#endif

/// `lactl ssh-agent`'s sign round trip against OpenSSH's own `ssh-agent` holding a file key, in the same run: one
/// client connection each, the same sign request (`SSH_AGENTC_SIGN_REQUEST` over 64 bytes, ecdsa-sha2-nistp256),
/// answered and read back. Ours runs with the key's approval kept (reuse window open), so no prompt is involved:
/// what is measured is the socket, the agent's dispatch and the enclave key's signature. Target: ratio >= 0.5.
enum AgentBenchmarks {
    static func run() async throws {
        print("== ssh-agent sign round trip vs OpenSSH ssh-agent with a file key (target ratio >= 0.5)")
        let directory = try AuthenticatorBenchmarks.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Ours: a userPresence key (no finger enrolled, so its one approval is the passcode through pam_matrix).
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-agent"),
            let confdir = try Measure.writeBenchPAM(in: directory)
        else {
            print("agent sign: not measured: needs pam_matrix (libpam-wrapper) and openssh-client")
            return
        }
        let client = try EmbeddedClient(
            configuration: EmbeddedConfiguration(
                dataDirectory: URL(fileURLWithPath: directory + "/store"), accessGroups: ["bench"]),
            authentication: AuthenticationConfiguration(
                stateDirectory: directory + "/store", username: "bench",
                passcode: .init(service: "la-bench", configurationDirectory: confdir),
                readerDrivers: ["no_such_driver"]))
        let keyring = AgentKeyring(client: client)
        let key = try await keyring.create("bench", requirement: .userPresence, reuseSeconds: 300)
        let agent = Agent(keyring: keyring, prompts: .fixed(ContextBenchmarks.BenchPresenter()))
        let ourSocket = directory + "/lactl-agent.sock"
        let server = try await AgentServer(path: ourSocket, agent: agent)
        defer { Task { try? await server.close() } }

        // Baseline: OpenSSH's ssh-agent with a P-256 file key.
        let keyFile = directory + "/id_ecdsa"
        guard Measure.run("/usr/bin/ssh-keygen", ["-q", "-t", "ecdsa", "-b", "256", "-N", "", "-f", keyFile]) != nil
        else {
            print("agent sign: not measured: ssh-keygen failed")
            return
        }
        let theirSocket = directory + "/openssh-agent.sock"
        let sshAgent = try spawn("/usr/bin/ssh-agent", ["-D", "-a", theirSocket])
        defer { Measure.stop(sshAgent) }
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: theirSocket) { usleep(10_000) }
        setenv("SSH_AUTH_SOCK", theirSocket, 1)
        guard Measure.run("/usr/bin/ssh-add", ["-q", keyFile]) != nil else {
            print("agent sign: not measured: ssh-add could not load the file key")
            return
        }
        let publicLine = try String(contentsOfFile: keyFile + ".pub", encoding: .utf8).split(separator: " ")
        guard publicLine.count >= 2, let theirBlob = Data(base64Encoded: String(publicLine[1])) else {
            print("agent sign: not measured: unreadable public key")
            return
        }
        let ourBlob = Data(base64Encoded: String(key.authorizedKeysLine.split(separator: " ")[1]))!

        let ours = try AgentConnection(path: ourSocket)
        let theirs = try AgentConnection(path: theirSocket)
        let data = [UInt8](repeating: 0x5A, count: 64)
        // The first request of ours asks for the passcode and keeps the approval; every later one reuses it.
        guard try ours.sign(blob: [UInt8](ourBlob), data: data), try theirs.sign(blob: [UInt8](theirBlob), data: data)
        else {
            print("agent sign: not measured: an agent refused to sign")
            return
        }
        var ourRate = 0.0
        var theirRate = 0.0
        for _ in 0..<5 {
            ourRate = max(ourRate, try rate { try ours.sign(blob: [UInt8](ourBlob), data: data) })
            theirRate = max(theirRate, try rate { try theirs.sign(blob: [UInt8](theirBlob), data: data) })
        }
        print(
            String(
                format:
                    "agent sign round trip (approval kept): ours %.0f ops/s, OpenSSH ssh-agent %.0f ops/s, ratio %.2f (target >= 0.5)",
                ourRate, theirRate, ourRate / theirRate))
    }

    /// Signatures per second over 0.5 s of wall-clock time (the work happens in another thread or process).
    static func rate(_ body: () throws -> Bool) throws -> Double {
        var count = 0
        let start = ContinuousClock.now
        while ContinuousClock.now - start < .milliseconds(500) {
            guard try body() else { throw AuthenticatorBenchmarks.BenchFailure("an agent refused to sign") }
            count += 1
        }
        return Double(count) / AuthenticatorBenchmarks.seconds(ContinuousClock.now - start)
    }

    /// Starts `path arguments` in the background with no output (signals as `Measure.spawn` sets them); its pid.
    static func spawn(_ path: String, _ arguments: [String]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var pid: pid_t = 0
        guard Measure.spawn(&pid, path, arguments, actions: &actions) == 0 else {
            throw AuthenticatorBenchmarks.BenchFailure("cannot start \(path)")
        }
        return pid
    }
}

/// One blocking client connection to an agent socket.
final class AgentConnection {
    let fd: Int32

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
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
        guard connected == 0 else {
            close(fd)
            throw AuthenticatorBenchmarks.BenchFailure("cannot connect to \(path)")
        }
    }

    deinit { close(fd) }

    /// Sends one sign request; whether the answer is a signature (`SSH_AGENT_SIGN_RESPONSE`).
    func sign(blob: [UInt8], data: [UInt8]) throws -> Bool {
        var body: [UInt8] = [13]
        body += Self.string(blob)
        body += Self.string(data)
        body += [0, 0, 0, 0]
        let frame = Self.string(body)
        guard frame.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == frame.count else {
            throw AuthenticatorBenchmarks.BenchFailure("send failed")
        }
        var header = [UInt8](repeating: 0, count: 4)
        guard recv(fd, &header, 4, Int32(MSG_WAITALL)) == 4 else {
            throw AuthenticatorBenchmarks.BenchFailure("no answer")
        }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        var answer = [UInt8](repeating: 0, count: length)
        guard length > 0, recv(fd, &answer, length, Int32(MSG_WAITALL)) == length else {
            throw AuthenticatorBenchmarks.BenchFailure("short answer")
        }
        return answer[0] == 14
    }

    static func string(_ bytes: [UInt8]) -> [UInt8] {
        let n = UInt32(bytes.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + bytes
    }
}
