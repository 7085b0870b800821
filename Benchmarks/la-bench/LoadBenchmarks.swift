import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer

#if canImport(Glibc)
    import Glibc
#endif

/// Many clients at once through localauthd (issue 39, first part): 1, 8, 64 and 256 client processes (copies of
/// la-bench, `la-bench load-client`), each with its own connection, running a mix for a fixed time: 90% finds by
/// primary key, 5% adds, 4% updates, 1% deletes. Each count prints throughput, p50/p99/p999 latency, errors and the
/// daemon's resident memory before and after, against the single-client figure of the same run.
/// Targets: 64 clients at least 1.5× one client's throughput on two cores, p99 at most 10× p50, no errors.
enum LoadBenchmarks {
    static let seconds = 5.0

    static func run() async throws {
        print("== localauthd under many clients: separate processes, a 90/5/4/1 find/add/update/delete mix")
        let directory = URL(fileURLWithPath: "/tmp/la-bench-load-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        guard let started = BenchDaemon.start(in: directory) else { return }
        defer { started.stop() }
        let socket = directory.path + "/localauthd.sock"
        // The items the finds look up, shared by every client (all run as this user and program: one group).
        for index in 0..<1_000 {
            _ = try started.client.sendBlocking(.add(item(index)))
        }
        var single = 0.0
        for clients in [1, 8, 64, 256] {
            let before = residentMegabytes(started.pid)
            let result = try runClients(clients, socket: socket, in: directory)
            let after = residentMegabytes(started.pid)
            if clients == 1 { single = result.throughput }
            func ms(_ value: Double) -> String { String(format: "%.2f ms", value * 1e3) }
            let ratio = String(format: "%.2fx", result.throughput / max(single, 1))
            var line = "load \(clients) clients: \(Int(result.throughput)) ops/s, \(ratio) one client"
            line += ", p50 \(ms(result.p50)), p99 \(ms(result.p99)), p999 \(ms(result.p999))"
            line += ", errors \(result.errors), RSS \(before) -> \(after) MB"
            if clients == 64 { line += " (targets: >= 1.5x one client, p99 <= 10x p50, no errors)" }
            print(line)
        }
    }

    /// One find item's attributes.
    static func item(_ index: Int) -> [String: KeychainValue] {
        [
            "class": .string("genp"), "svce": .string("la-bench-load"), "acct": .string("account-\(index)"),
            "v_Data": .secret(SecureBytes(Array("correct horse battery staple".utf8))),
        ]
    }

    struct Result {
        var throughput: Double
        var p50: Double
        var p99: Double
        var p999: Double
        var errors: Int
    }

    /// Starts `count` client processes, waits for them, and merges what they report.
    static func runClients(_ count: Int, socket: String, in directory: URL) throws -> Result {
        var pids: [pid_t] = []
        var logs: [String] = []
        let start = Date().addingTimeInterval(1).timeIntervalSince1970
        for index in 0..<count {
            let log = directory.path + "/client-\(count)-\(index).log"
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            var pid: pid_t = 0
            let spawned = Measure.spawn(
                &pid, CommandLine.arguments[0],
                ["load-client", socket, String(index), String(start), String(seconds)], actions: &actions)
            posix_spawn_file_actions_destroy(&actions)
            guard spawned == 0 else { throw CocoaError(.executableLoad) }
            pids.append(pid)
            logs.append(log)
        }
        for pid in pids {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        var latencies: [Double] = []
        var kinds: [String: Int] = [:]
        var operations = 0
        var errors = 0
        for log in logs {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("done ") }) else {
                errors += 1
                continue
            }
            for failure in text.split(separator: "\n") where failure.hasPrefix("error ") {
                kinds[String(failure.split(separator: " ", maxSplits: 2).last ?? ""), default: 0] += 1
            }
            let fields = line.split(separator: " ")
            operations += Int(fields[1]) ?? 0
            errors += Int(fields[2]) ?? 0
            latencies += fields.dropFirst(3).compactMap { Double($0) }
        }
        latencies.sort()
        for (kind, clients) in kinds.sorted(by: { $0.value > $1.value }).prefix(3) {
            print("  errors in \(clients) clients: \(kind)")
        }
        func percentile(_ fraction: Double) -> Double {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * fraction))]
        }
        return Result(
            throughput: Double(operations) / seconds, p50: percentile(0.5), p99: percentile(0.99),
            p999: percentile(0.999), errors: errors)
    }

    /// A client process (`la-bench load-client SOCKET INDEX START SECONDS`): connects, waits for the common start,
    /// runs the mix for SECONDS and prints `done OPERATIONS ERRORS` and a sample of its latencies (every tenth, in
    /// seconds, so that 256 clients' reports stay small).
    static func client(_ arguments: [String]) -> Never {
        guard arguments.count >= 4, let index = Int(arguments[1]), let start = Double(arguments[2]),
            let duration = Double(arguments[3])
        else {
            print("done 0 1")
            exit(1)
        }
        let client: SocketClient
        do {
            client = try SocketClient(path: arguments[0], accessGroups: ["la-bench"])
        } catch {
            print("error 1x cannot connect: \(error)")
            print("done 0 1")
            exit(1)
        }
        // The run's start names its items, so that no run adds a name an earlier run left.
        let run = Int(start)
        var failures: [String: Int] = [:]
        while Date().timeIntervalSince1970 < start { usleep(1_000) }
        let end = start + duration
        var operations = 0
        var errors = 0
        var sample: [Double] = []
        var generator = SystemRandomNumberGenerator()
        var own = 0
        while Date().timeIntervalSince1970 < end {
            let choice = Int.random(in: 0..<100, using: &generator)
            let began = ContinuousClock.now
            do {
                switch choice {
                case 0..<90:
                    var query = item(Int.random(in: 0..<1_000, using: &generator))
                    query["v_Data"] = nil
                    query["r_Data"] = .bool(true)
                    _ = try client.sendBlocking(.copyMatching(query))
                case 90..<95:
                    own += 1
                    var attributes = item(0)
                    attributes["acct"] = .string("client-\(run)-\(index)-\(own)")
                    _ = try client.sendBlocking(.add(attributes))
                case 95..<99:
                    let name = "client-\(run)-\(index)-\(max(own, 1))"
                    do {
                        _ = try client.sendBlocking(
                            .update(
                                query: [
                                    "class": .string("genp"), "svce": .string("la-bench-load"), "acct": .string(name),
                                ],
                                attributes: ["labl": .string("updated")]))
                    } catch let status as KeychainStatus where status.code == .itemNotFound {}
                default:
                    let name = "client-\(run)-\(index)-\(own)"
                    do {
                        _ = try client.sendBlocking(
                            .delete(["class": .string("genp"), "svce": .string("la-bench-load"), "acct": .string(name)])
                        )
                    } catch let status as KeychainStatus where status.code == .itemNotFound {}
                }
            } catch {
                errors += 1
                failures["\(error)", default: 0] += 1
            }
            let elapsed = ContinuousClock.now - began
            if operations % 10 == 0 {
                sample.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            }
            operations += 1
        }
        for (failure, count) in failures { print("error \(count)x \(failure)") }
        print("done \(operations) \(errors) " + sample.map { String(format: "%.7f", $0) }.joined(separator: " "))
        exit(0)
    }

    /// VmRSS of process `pid`, in MB.
    static func residentMegabytes(_ pid: pid_t) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        return kilobytes / 1_024
    }
}
