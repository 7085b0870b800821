import Foundation
import SecureCrypto
import SecurityClient
import SecurityProtocol
import SecurityServer

#if canImport(Glibc)
    import Glibc
#endif

/// Many clients at once through localauthd (issue 39): 1, 8, 64 and 256 client processes (copies of la-bench,
/// `la-bench load-client`), each with its own connection, running a mix for a fixed time: 89% finds by primary key,
/// 1% signatures with an enclave P-256 key, 5% adds, 4% updates, 1% deletes. Each count prints throughput,
/// p50/p99/p999 latency, errors and the daemon's resident memory before and after, against the single-client figure
/// of the same run; then the same mix against gnome-keyring through libsecret (`Benchmarks/peer/keyring-load`, the
/// peer); then 8 clients send a million requests in all, and the daemon's resident memory before and after says
/// whether it grows. The figures go to `.build/load.dat` and, through `scripts/plot-load`, `.build/load.png`.
///
/// Targets: 64 clients at least 1.5× one client's throughput on two cores, p99 at most 10× p50, no errors, RSS
/// growth at most 5% over a million requests. `LA_LOAD_SECONDS` changes the time per count (5 s), `LA_LOAD_TOTAL`
/// the requests of the memory run (1,000,000), `LA_LOAD_COUNTS` the client counts.
enum LoadBenchmarks {
    static var seconds: Double {
        ProcessInfo.processInfo.environment["LA_LOAD_SECONDS"].flatMap(Double.init) ?? 5
    }
    static var total: Int {
        ProcessInfo.processInfo.environment["LA_LOAD_TOTAL"].flatMap { Int($0) } ?? 1_000_000
    }
    /// The client counts: `LA_LOAD_COUNTS` (comma-separated; one client always runs first, for the ratios), else
    /// 1, 8, 64 and 256.
    static var counts: [Int] {
        let named = (ProcessInfo.processInfo.environment["LA_LOAD_COUNTS"] ?? "").split(separator: ",").compactMap {
            Int($0)
        }
        return named.isEmpty ? [1, 8, 64, 256] : [1] + named.filter { $0 > 1 }
    }
    /// A user's cap on connections (128 by default) would refuse half of 256 clients: the run raises it the way an
    /// administrator would, in localauthd.conf.
    static let connectionsPerUser = 512

    static func run() async throws {
        print("== localauthd under many clients: separate processes, a 89/1/5/4/1 find/sign/add/update/delete mix")
        let directory = URL(fileURLWithPath: "/tmp/la-bench-load-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        guard let started = try startDaemon(in: directory) else { return }
        defer { started.stop() }
        let socket = directory.path + "/localauthd.sock"
        print("  (connections-per-user = \(connectionsPerUser) in localauthd.conf; \(Int(seconds)) s per count)")
        var single = 0.0
        var rows: [(clients: Int, ours: Result, peer: PeerResult?)] = []
        for clients in counts {
            let before = residentMegabytes(started.pid)
            let (daemonBefore, clientsBefore) = (processorSeconds(of: started.pid), childrenProcessorSeconds())
            let result = try runClients(clients, socket: socket, in: directory, until: .seconds(seconds))
            let after = residentMegabytes(started.pid)
            let daemonCPU = (processorSeconds(of: started.pid) - daemonBefore) / Double(max(result.operations, 1))
            let clientsCPU = (childrenProcessorSeconds() - clientsBefore) / Double(max(result.operations, 1))
            if clients == 1 { single = result.throughput }
            let ratio = String(format: "%.2fx", result.throughput / max(single, 1))
            var line = "load \(clients) clients: \(grouped(Int(result.throughput))) ops/s, \(ratio) one client"
            line += ", p50 \(ms(result.p50)), p99 \(ms(result.p99)), p999 \(ms(result.p999))"
            line += ", errors \(result.errors), RSS \(before) -> \(after) MB"
            if clients == 64 { line += " (targets: >= 1.5x one client, p99 <= 10x p50, no errors)" }
            print(line)
            print(
                String(
                    format: "  processor time per request: localauthd %.1f us, the clients %.1f us", daemonCPU * 1e6,
                    clientsCPU * 1e6))
            rows.append((clients, result, nil))
        }
        let peers = PeerLoad.run(seconds: seconds, counts: counts)
        for (index, row) in rows.enumerated() {
            guard let peer = peers[row.clients] else { continue }
            rows[index].peer = peer
            var line = "peer \(row.clients) clients (gnome-keyring, libsecret): \(grouped(Int(peer.throughput))) ops/s"
            line += ", p50 \(ms(peer.p50)), p99 \(ms(peer.p99)), p999 \(ms(peer.p999)), errors \(peer.errors)"
            line += ", RSS \(peer.rssBefore) -> \(peer.rssAfter) MB; ours "
            line += String(format: "%.1fx its throughput", row.ours.throughput / max(peer.throughput, 1))
            print(line)
        }
        plot(rows)

        // A million requests from 8 clients, after the runs above warmed everything up.
        let before = residentKilobytes(started.pid)
        let began = ContinuousClock.now
        let result = try runClients(8, socket: socket, in: directory, until: .requests(total / 8))
        let after = residentKilobytes(started.pid)
        let elapsed = ContinuousClock.now - began
        let growth = Double(after - before) / Double(max(before, 1)) * 100
        print(
            "load \(grouped(result.operations)) requests (8 clients, \(elapsed.components.seconds) s): RSS "
                + String(format: "%.1f -> %.1f MB (%+.1f%%)", Double(before) / 1_024, Double(after) / 1_024, growth)
                + ", errors \(result.errors) (target: growth <= 5%)")
    }

    /// `make soak`: the mix from `LA_SOAK_CLIENTS` client processes (16) through one localauthd for
    /// `LA_SOAK_MINUTES` minutes (10), a line per minute, then whether the daemon's memory grew over the run and
    /// how many requests failed. The items and the configuration are those of the load runs.
    static func soak() async throws {
        let environment = ProcessInfo.processInfo.environment
        let minutes = environment["LA_SOAK_MINUTES"].flatMap { Int($0) } ?? 10
        let clients = environment["LA_SOAK_CLIENTS"].flatMap { Int($0) } ?? 16
        print("== soak: \(clients) client processes through one localauthd for \(minutes) minutes, the load mix")
        let directory = URL(fileURLWithPath: "/tmp/la-bench-soak-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        guard let started = try startDaemon(in: directory) else { return }
        defer { started.stop() }
        var requests = 0
        var errors = 0
        var firstMinute = 0
        var throughputs: [Double] = []
        for minute in 1...max(minutes, 1) {
            let result = try runClients(
                clients, socket: directory.path + "/localauthd.sock", in: directory, until: .seconds(60))
            let resident = residentKilobytes(started.pid)
            if minute == 1 { firstMinute = resident }
            requests += result.operations
            errors += result.errors
            throughputs.append(result.throughput)
            print(
                "soak minute \(minute): \(grouped(Int(result.throughput))) ops/s, p50 \(ms(result.p50)), p99 "
                    + "\(ms(result.p99)), p999 \(ms(result.p999)), errors \(result.errors), RSS "
                    + String(format: "%.1f MB", Double(resident) / 1_024))
        }
        let last = residentKilobytes(started.pid)
        let growth = Double(last - firstMinute) / Double(max(firstMinute, 1)) * 100
        print(
            "soak: \(grouped(requests)) requests in \(minutes) min, "
                + String(
                    format:
                        "throughput %.0f to %.0f ops/s per minute, RSS after minute 1 %.1f MB, at the end %.1f MB"
                        + " (%+.1f%%)",
                    throughputs.min() ?? 0, throughputs.max() ?? 0, Double(firstMinute) / 1_024, Double(last) / 1_024,
                    growth)
                + ", errors \(errors) (targets: growth <= 5%, no errors)")
    }

    /// A localauthd in `directory` with `connections-per-user` raised in its localauthd.conf, holding the 1,000
    /// items the finds look up (shared by every client: all run as this user and program, one group); nil (and
    /// said why) when it does not start.
    static func startDaemon(in directory: URL) throws -> BenchDaemon? {
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("config"), withIntermediateDirectories: true)
        try Data("connections-per-user = \(connectionsPerUser)\n".utf8)
            .write(to: directory.appendingPathComponent("config/localauthd.conf"))
        guard let started = BenchDaemon.start(in: directory) else { return nil }
        for index in 0..<1_000 { _ = try started.client.sendBlocking(.add(item(index))) }
        return started
    }

    static func ms(_ value: Double) -> String { String(format: "%.2f ms", value * 1e3) }

    static func grouped(_ value: Int) -> String {
        let digits = Array(String(value))
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { text += "," }
            text.append(digit)
        }
        return text
    }

    /// Writes the figures to `.build/load.dat` and draws `.build/load.png` with `scripts/plot-load` (gnuplot).
    static func plot(_ rows: [(clients: Int, ours: Result, peer: PeerResult?)]) {
        var data = "# clients ours_ops_per_s ours_p99_ms peer_ops_per_s peer_p99_ms\n"
        for row in rows {
            data += "\(row.clients) \(Int(row.ours.throughput)) \(row.ours.p99 * 1e3) "
            data += row.peer.map { "\(Int($0.throughput)) \($0.p99 * 1e3)" } ?? "- -"
            data += "\n"
        }
        let file = ".build/load.dat"
        guard (try? Data(data.utf8).write(to: URL(fileURLWithPath: file))) != nil,
            FileManager.default.isExecutableFile(atPath: "scripts/plot-load")
        else { return }
        let plotted = Measure.run("scripts/plot-load", [file, ".build/load.png"]) != nil
        print(plotted ? "  plotted: .build/load.png (from \(file))" : "  scripts/plot-load failed")
    }

    /// One find item's attributes.
    static func item(_ index: Int) -> [String: KeychainValue] {
        [
            "class": .string("genp"), "svce": .string("la-bench-load"), "acct": .string("account-\(index)"),
            "v_Data": .secret(SecureBytes(Array("correct horse battery staple".utf8))),
        ]
    }

    struct Result {
        var operations: Int
        var throughput: Double
        var p50: Double
        var p99: Double
        var p999: Double
        var errors: Int
    }

    /// How long each client runs: a time, or a number of requests.
    enum Until {
        case seconds(Double)
        case requests(Int)

        var argument: String {
            switch self {
            case .seconds(let seconds): String(seconds)
            case .requests(let count): "requests:\(count)"
            }
        }
    }

    /// Starts `count` client processes, waits for them, and merges what they report.
    static func runClients(_ count: Int, socket: String, in directory: URL, until: Until) throws -> Result {
        var pids: [pid_t] = []
        var logs: [String] = []
        // Time for every client to start, connect and make its key before the common start.
        let start = Date().addingTimeInterval(1 + Double(count) / 64).timeIntervalSince1970
        for index in 0..<count {
            let log = directory.path + "/client-\(count)-\(index).log"
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            var pid: pid_t = 0
            let spawned = Measure.spawn(
                &pid, CommandLine.arguments[0],
                ["load-client", socket, String(index), String(start), until.argument], actions: &actions)
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
        var busiest = 0.0
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
            busiest = max(busiest, Double(fields[3]) ?? 0)
            latencies += fields.dropFirst(4).compactMap { Double($0) }
        }
        latencies.sort()
        for (kind, clients) in kinds.sorted(by: { $0.value > $1.value }).prefix(3) {
            print("  errors in \(clients) clients: \(kind)")
        }
        func percentile(_ fraction: Double) -> Double {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * fraction))]
        }
        let elapsed: Double =
            switch until {
            case .seconds(let seconds): seconds
            case .requests: max(busiest, 1e-9)
            }
        return Result(
            operations: operations, throughput: Double(operations) / elapsed, p50: percentile(0.5),
            p99: percentile(0.99), p999: percentile(0.999), errors: errors)
    }

    /// A client process (`la-bench load-client SOCKET INDEX START UNTIL`, UNTIL seconds or `requests:N`): connects,
    /// makes its enclave key, waits for the common start, runs the mix, and prints `done OPERATIONS ERRORS
    /// SECONDS` and a sample of its latencies (every tenth, in seconds, so that 256 clients' reports stay small).
    static func client(_ arguments: [String]) -> Never {
        guard arguments.count >= 4, let index = Int(arguments[1]), let start = Double(arguments[2]) else {
            print("done 0 1 0")
            exit(1)
        }
        let duration = Double(arguments[3])
        let requests = arguments[3].hasPrefix("requests:") ? Int(arguments[3].dropFirst("requests:".count)) : nil
        let client: SocketClient
        let key: Data
        do {
            client = try SocketClient(path: arguments[0], accessGroups: ["la-bench"])
            guard
                case .generated(let handle, _) = try client.sendBlocking(
                    KeyRequest.generate(accessControl: nil, item: nil, context: nil))
            else { throw KeychainStatus(.internalComponent, "no key") }
            key = handle
        } catch {
            print("error 1x cannot connect: \(error)")
            print("done 0 1 0")
            exit(1)
        }
        // The run's start names its items, so that no run adds a name an earlier run left.
        let run = Int(start)
        var failures: [String: Int] = [:]
        while Date().timeIntervalSince1970 < start { usleep(1_000) }
        let end = start + (duration ?? .infinity)
        let began = ContinuousClock.now
        var operations = 0
        var errors = 0
        var sample: [Double] = []
        var generator = SystemRandomNumberGenerator()
        var own = 0
        let digest = Data(repeating: 0xA5, count: 32)
        while requests.map({ operations < $0 }) ?? (Date().timeIntervalSince1970 < end) {
            let choice = Int.random(in: 0..<100, using: &generator)
            let requestBegan = ContinuousClock.now
            do {
                switch choice {
                case 0..<89:
                    var query = item(Int.random(in: 0..<1_000, using: &generator))
                    query["v_Data"] = nil
                    query["r_Data"] = .bool(true)
                    _ = try client.sendBlocking(.copyMatching(query))
                case 89:
                    _ = try client.sendBlocking(KeyRequest.sign(handle: key, digest: digest, context: nil))
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
            let elapsed = ContinuousClock.now - requestBegan
            if operations % 10 == 0 { sample.append(AuthenticatorBenchmarks.seconds(elapsed)) }
            operations += 1
        }
        for (failure, count) in failures { print("error \(count)x \(failure)") }
        let ran = String(format: "%.3f", AuthenticatorBenchmarks.seconds(ContinuousClock.now - began))
        print("done \(operations) \(errors) \(ran) " + sample.map { String(format: "%.7f", $0) }.joined(separator: " "))
        exit(0)
    }

    /// The processor time (user and system) process `pid` has used, in seconds (`/proc/PID/stat`).
    static func processorSeconds(of pid: pid_t) -> Double {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
        guard let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The processor time of every child this process has reaped, in seconds.
    static func childrenProcessorSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// VmRSS of process `pid`, in kB.
    static func residentKilobytes(_ pid: pid_t) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// VmRSS of process `pid`, in MB.
    static func residentMegabytes(_ pid: pid_t) -> Int { residentKilobytes(pid) / 1_024 }
}

/// The peer: the same mix against gnome-keyring through libsecret, by `Benchmarks/peer/keyring-load` (a
/// gnome-keyring-daemon of its own on a private session bus, unlocked, headless; C clients, one process each).
struct PeerResult {
    var throughput: Double
    var p50: Double
    var p99: Double
    var p999: Double
    var errors: Int
    var rssBefore: Int
    var rssAfter: Int
}

enum PeerLoad {
    static let script = "Benchmarks/peer/keyring-load"

    /// The peer's figures per client count; empty (and says why) when it cannot run here.
    static func run(seconds: Double, counts: [Int]) -> [Int: PeerResult] {
        guard FileManager.default.isExecutableFile(atPath: script),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/gnome-keyring-daemon")
        else {
            print("peer: skipped, gnome-keyring or \(script) missing (scripts/bootstrap installs them)")
            return [:]
        }
        guard let output = Measure.run(script, [String(Int(seconds))] + counts.map(String.init)) else {
            print("peer: skipped, \(script) failed")
            return [:]
        }
        // `peer N clients: ops X seconds S p50_ns A p99_ns B p999_ns C errors E rss_kb BEFORE AFTER`
        var results: [Int: PeerResult] = [:]
        for line in output.split(separator: "\n") where line.hasPrefix("peer ") {
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count >= 17, let clients = Int(fields[1]), let ops = Double(fields[4]),
                let elapsed = Double(fields[6]), let p50 = Double(fields[8]), let p99 = Double(fields[10]),
                let p999 = Double(fields[12]), let errors = Int(fields[14]), let before = Int(fields[16]),
                let after = Int(fields.last ?? "")
            else { continue }
            results[clients] = PeerResult(
                throughput: ops / max(elapsed, 1e-9), p50: p50 / 1e9, p99: p99 / 1e9, p999: p999 / 1e9,
                errors: errors, rssBefore: before / 1_024, rssAfter: after / 1_024)
        }
        return results
    }
}
