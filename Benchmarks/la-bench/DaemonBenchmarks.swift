import Authenticators
import EmbeddedEngine
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
        guard let started = BenchDaemon.start(in: directory) else { return }
        defer { started.stop() }
        let daemon = started.client
        let embedded = EmbeddedClient(
            engine: try KeychainEngine(
                directory: directory.appendingPathComponent("embedded"),
                authentication: AuthenticationConfiguration(
                    stateDirectory: directory.path + "/embedded", username: "la-bench",
                    readerDrivers: ["no_such_driver"])),
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
            daemon: { _ in _ = try daemon.sendBlocking(.lockState) },
            embedded: { _ in _ = try embedded.sendBlocking(.lockState) })
        report("lock-state round trip (transport only)", transport, target: nil)
        let finds = try interleaved(daemon: { try find(daemon, $0) }, embedded: { try find(embedded, $0) })
        report("find generic password", finds, target: "<= 2x embedded")

        let policy = AccessControlPolicy(protection: "ak", flags: 1 << 30)
        let digest = Data(repeating: 7, count: 32)
        func signer(_ client: any SecurityClient) throws -> () throws -> Void {
            guard
                case .generated(let handle, _) = try client.sendBlocking(
                    .generate(accessControl: policy, item: nil, context: nil))
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

/// A localauthd started for a benchmark: a socket, state and (empty) configuration directory of its own under
/// `directory`, so la-bench is an unregistered program holding its private group.
final class BenchDaemon {
    let pid: pid_t
    let client: SocketClient

    private init(pid: pid_t, client: SocketClient) {
        self.pid = pid
        self.client = client
    }

    /// Starts the daemon built beside la-bench and connects; nil (with the reason printed) when it cannot.
    ///
    /// `LA_BENCH_DAEMON_WRAPPER` runs the daemon under a profiler, e.g. "/usr/bin/perf record -F 4000 -o FILE"
    /// (docs/benchmarks-history.md); `wrapper` does the same for one call.
    static func start(in directory: URL, wrapper: [String]? = nil) -> BenchDaemon? {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("localauthd").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            print("daemon: skipped, \(executable) missing (make bench builds it)")
            return nil
        }
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let socket = directory.path + "/localauthd.sock"
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let wrapper =
            wrapper ?? ProcessInfo.processInfo.environment["LA_BENCH_DAEMON_WRAPPER"].map {
                $0.split(separator: " ").map(String.init)
            } ?? []
        let command =
            wrapper + [
                wrapper.first?.hasSuffix("valgrind") == true ? strippedCopy(of: executable, in: directory) : executable,
                "--socket", socket, "--state-directory", directory.path + "/state",
                "--config-directory", directory.path + "/config",
            ]
        guard Measure.spawn(&pid, command[0], Array(command.dropFirst()), actions: &actions) == 0 else {
            print("daemon: skipped, localauthd did not start")
            return nil
        }
        var client: SocketClient?
        for _ in 0..<(wrapper.isEmpty ? 200 : 1_200) where client == nil {
            client = try? SocketClient(path: socket, accessGroups: ["la-bench"])
            if client == nil { usleep(50_000) }
        }
        guard let client else {
            print("daemon: skipped, localauthd did not answer")
            Measure.stop(pid)
            return nil
        }
        return BenchDaemon(pid: pid, client: client)
    }

    /// SIGTERM, then waits for the daemon to exit.
    func stop() { Measure.stop(pid) }

    /// A copy of `executable` without its debug information, which valgrind 3.19 cannot read (Swift 6.3's
    /// DWARF); symbols stay, so profiles still name functions.
    static func strippedCopy(of executable: String, in directory: URL) -> String {
        let copy = directory.appendingPathComponent(
            URL(fileURLWithPath: executable).lastPathComponent + "-nodebug"
        ).path
        if !FileManager.default.fileExists(atPath: copy) {
            _ = Measure.run("/usr/bin/objcopy", ["--strip-debug", executable, copy])
        }
        return copy
    }
}
