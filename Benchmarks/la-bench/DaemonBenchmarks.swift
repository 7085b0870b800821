import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer

#if canImport(Glibc)
import Glibc
#endif

/// localauthd against the embedded engine, in one run: a generic-password find and a signature with a key whose
/// access control is satisfied, each a round trip through the daemon's socket (`SocketClient`) and through the
/// embedded engine in this process, both as a synchronous edge (`SecItemCopyMatching`, `SecKeyCreateSignature`)
/// calls them; then the daemon's find against `secret-tool lookup` on gnome-keyring. Medians and p99 of single
/// requests, the two sides timed alternately. Targets: the daemon's find at most 2× the embedded time, at least 20×
/// faster than secret-tool.
enum DaemonBenchmarks {
    static func run() async throws {
        print("== localauthd: round trips through the daemon vs the embedded engine (same run)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("la-bench-daemon-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("localauthd").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            print("daemon: skipped, \(executable) missing (make bench builds it)")
            return
        }
        let socket = directory.path + "/localauthd.sock"
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // LA_BENCH_DAEMON_WRAPPER runs the daemon under a profiler, e.g.
        // "/usr/bin/perf record -F 4000 -o /tmp/localauthd.perf" (BENCHMARKS.md; valgrind 3.19 cannot read Swift 6.3's
        // debug information).
        let wrapper = ProcessInfo.processInfo.environment["LA_BENCH_DAEMON_WRAPPER"].map {
            $0.split(separator: " ").map(String.init)
        } ?? []
        // An empty registry of its own (not the machine's /etc/localauthd): la-bench holds its private group.
        let command =
            wrapper + [
                executable, "--socket", socket, "--state-directory", directory.path + "/state",
                "--config-directory", directory.path + "/config",
            ]
        guard Measure.spawn(&pid, command[0], Array(command.dropFirst()), actions: &actions) == 0 else {
            print("daemon: skipped, localauthd did not start")
            return
        }
        defer { Measure.stop(pid) }
        var daemon: SocketClient?
        for _ in 0..<(wrapper.isEmpty ? 200 : 1_200) where daemon == nil {
            daemon = try? SocketClient(path: socket, accessGroups: ["la-bench"])
            if daemon == nil { usleep(50_000) }
        }
        guard let daemon else {
            print("daemon: skipped, localauthd did not answer")
            return
        }
        let embedded = EmbeddedClient(
            engine: try KeychainEngine(
                directory: directory.appendingPathComponent("embedded"),
                authentication: AuthenticationConfiguration(
                    stateDirectory: directory.path + "/embedded", username: "la-bench", readerDrivers: ["no_such_driver"])),
            caller: CallerIdentity(accessGroups: ["la-bench"]))

        let items = 1_000
        for client in [daemon, embedded] as [any SecurityClient] {
            for index in 0..<items {
                _ = try client.sendBlocking(
                    .add([
                        "class": .string("genp"), "svce": .string("la-bench"), "acct": .string("account-\(index)"),
                        "v_Data": .secret(SecureBytes(Array("correct horse battery staple".utf8))),
                    ]))
            }
        }
        func find(_ client: any SecurityClient, _ index: Int) throws {
            guard
                case .items(let found) = try client.sendBlocking(
                    .copyMatching([
                        "class": .string("genp"), "svce": .string("la-bench"),
                        "acct": .string("account-\(index % items)"), "r_Data": .bool(true),
                    ])), found.items.count == 1
            else { throw KeychainStatus(.itemNotFound, "la-bench: an item is missing") }
        }
        // The transport alone: a request the engine answers from memory.
        let transport = try interleaved(
            daemon: { _ in _ = try daemon.sendBlocking(.lockState) }, embedded: { _ in _ = try embedded.sendBlocking(.lockState) })
        report("lock-state round trip (transport only)", transport, target: nil)
        let finds = try interleaved(daemon: { try find(daemon, $0) }, embedded: { try find(embedded, $0) })
        report("find generic password", finds, target: "<= 2x embedded")

        let policy = AccessControlPolicy(protection: "ak", flags: 1 << 30)
        let digest = Data(repeating: 7, count: 32)
        func signer(_ client: any SecurityClient) throws -> () throws -> Void {
            guard case .generated(let handle, _) = try client.sendBlocking(.generate(accessControl: policy, item: nil, context: nil))
            else { throw KeychainStatus(.internalComponent, "la-bench: no key") }
            return { _ = try client.sendBlocking(.sign(handle: handle, digest: digest, context: nil)) }
        }
        let daemonSign = try signer(daemon)
        let embeddedSign = try signer(embedded)
        report(
            "sign with an authorized enclave key",
            try interleaved(daemon: { _ in try daemonSign() }, embedded: { _ in try embeddedSign() }), target: nil)

        try KeychainBenchmarks.compareWithSecretTool(
            findAt1k: 1 / finds.daemon.median, directory: directory, label: "daemon find vs secret-tool lookup")
    }

    /// Single-request times in seconds, after a warm-up, sorted.
    struct Latencies {
        var sorted: [Double]
        var median: Double { sorted[sorted.count / 2] }
        var p99: Double { sorted[Int(Double(sorted.count) * 0.99)] }
    }

    /// Times `daemon` and `embedded` alternately, one request each in turn after a warm-up, so that both sides
    /// meet the same moments of this shared machine.
    static func interleaved(
        count: Int = 5_000, daemon: (Int) throws -> Void, embedded: (Int) throws -> Void
    ) rethrows -> (daemon: Latencies, embedded: Latencies) {
        for index in 0..<200 {
            try daemon(index)
            try embedded(index)
        }
        var times: ([Double], [Double]) = ([], [])
        times.0.reserveCapacity(count)
        times.1.reserveCapacity(count)
        for index in 0..<count {
            times.0.append(try seconds { try daemon(index) })
            times.1.append(try seconds { try embedded(index) })
        }
        return (Latencies(sorted: times.0.sorted()), Latencies(sorted: times.1.sorted()))
    }

    private static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func report(_ name: String, _ times: (daemon: Latencies, embedded: Latencies), target: String?) {
        let (daemon, embedded) = times
        func us(_ seconds: Double) -> String { String(format: "%.1f µs", seconds * 1e6) }
        print(
            "daemon \(name): median \(us(daemon.median)), p99 \(us(daemon.p99)); embedded median "
                + "\(us(embedded.median)), p99 \(us(embedded.p99)); daemon/embedded "
                + String(format: "%.2fx", daemon.median / embedded.median) + (target.map { " (target \($0))" } ?? ""))
    }
}
